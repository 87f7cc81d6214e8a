// The API methods and the HTTP route the dashboard adds to `shardwise serve`: runs.plan (the
// launch form's preview and inline validation), peers.list/add/pair, and the report download
// route, which answers nothing without the serve token.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WsApiClient } from '../../src-renderer/src/api/ws-client.js';
import { writePipelineRun } from '../e2e/run-fixtures.js';
import { connect, type Serve, startServe, stopServe } from './helpers/serve.js';

describe("serve: the dashboard's API methods and report route", () => {
  let dir: string;
  let serve: Serve;
  let c: WsApiClient;
  const get = (p: string, token?: string) =>
    fetch(`http://127.0.0.1:${serve.port}${p}`, token ? { headers: { Authorization: `Bearer ${token}` } } : {});

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'shardwise-dash-api-'));
    writePipelineRun(path.join(dir, 'runs', 'pp-fixture'));
    process.env.SHARDWISE_HOME = path.join(dir, 'home');
    process.env.SHARDWISE_NO_MDNS = '1';
    serve = await startServe(path.join(dir, 'runs'));
    c = await connect(serve);
  });
  afterAll(async () => {
    c?.close();
    if (serve) await stopServe(serve);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('runs.plan resolves a config like train does (ddp defaults to world 2, tiny sizes) and names the field of a bad one', async () => {
    const plan = await c.call('runs.plan', { config: { preset: 'tiny', strategy: 'ddp' } });
    expect(plan).toMatchObject({
      strategy: 'ddp',
      world: 2,
      micro_batches: 1,
      model: { n_layer: 2, d_model: 64 },
      steps: 200,
      batch_size: 8,
    });
    expect(plan.strategies).toContain('zero3');
    await expect(c.call('runs.plan', { config: { strategy: 'ddp', world: 2, micro_batches: 3 } })).rejects.toThrow(
      /batch size 8 is not divisible by world 2 x micro-batches 3; pick batch_size as a multiple of 6/,
    );
    await expect(c.call('runs.plan', { config: { strategy: 'zero2', offload_optimizer: 'cpu', prefetch: true } })).rejects.toThrow(
      /prefetch applies to strategy zero3/,
    );
    // model parallelism: the grid and schedule the trainers will read; a placement needs one machine per rank
    expect(await c.call('runs.plan', { config: { strategy: 'pp', pp: 2, schedule: 'gpipe', micro_batches: 4 } })).toMatchObject({
      strategy: 'pp',
      world: 2,
      tp: 1,
      pp: 2,
      dp: 1,
      schedule: 'gpipe',
      micro_batches: 4,
    });
    expect(await c.call('runs.plan', { config: { strategy: 'tp', tp: 2 } })).toMatchObject({
      strategy: 'tp',
      world: 2,
      tp: 2,
      pp: 1,
      dp: 1,
    });
    expect(await c.call('runs.plan', { config: { strategy: '3d', dp: 2, tp: 2, pp: 2, micro_batches: 2 } })).toMatchObject({
      strategy: '3d',
      world: 8,
      tp: 2,
      pp: 2,
      dp: 2,
      schedule: '1f1b',
    });
    expect((await c.call('runs.plan', { config: { strategy: 'ddp' } })).schedule).toBeUndefined();
    await expect(c.call('runs.plan', { config: { strategy: 'tp', tp: 3, model: { n_head: 2 } } })).rejects.toThrow(
      /n_head \(2\) must be divisible by/,
    );
    await expect(c.call('runs.plan', { config: { strategy: 'pp', pp: 2, placement: [{ machine: 'local' }] } })).rejects.toThrow(
      /config\.placement names 1 rank\(s\), the run has world 2/,
    );
    // planning creates no run folder
    expect((await c.call('runs.list', {})).runs.map((r) => r.id)).toEqual(['pp-fixture']);
  });

  it('peers.add lists an address as not paired; a malformed address or an unreachable agent is a clear error', async () => {
    await expect(c.call('peers.add', { address: 'no-port' })).rejects.toThrow(/peers\.add params: address: an agent address is HOST:PORT/);
    const p = await c.call('peers.add', { address: '127.0.0.1:9' });
    expect(p).toMatchObject({ address: '127.0.0.1:9', state: 'added', agentId: null });
    expect((await c.call('peers.list', {})).peers.map((x) => [x.address, x.state])).toEqual([['127.0.0.1:9', 'added']]);
    await expect(c.call('peers.pair', { address: '127.0.0.1:9', code: 'ABCDE-FGHJK' })).rejects.toThrow(
      /cannot reach agent at 127\.0\.0\.1:9/,
    );
    await expect(c.call('peers.pair', { address: '127.0.0.1:9', code: 'x' })).rejects.toThrow(/"x" is not a pairing code/);
  });

  it('GET /api/reports/RUN/FORMAT: 401 without or with a wrong token; 404 for an unknown run; 400 for an unknown format; the CSV with the token', async () => {
    for (const t of [undefined, 'wrong']) {
      const r = await get('/api/reports/pp-fixture/csv', t);
      expect(r.status).toBe(401);
      expect(await r.text()).not.toMatch(/step/);
    }
    expect((await get('/api/reports/nope/csv', serve.token)).status).toBe(404);
    expect((await get('/api/reports/pp-fixture/exe', serve.token)).status).toBe(400);
    const r = await get('/api/reports/pp-fixture/csv', serve.token);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-disposition')).toBe('attachment; filename="pp-fixture-metrics.csv"');
    const rows = (await r.text()).trim().split('\n');
    expect(rows.length).toBe(1 + 3);
    const trace = (await (await get('/api/reports/pp-fixture/trace', serve.token)).json()) as {
      traceEvents: { ph: string; pid: number; tid: number }[];
    };
    expect(new Set(trace.traceEvents.filter((e) => e.ph === 'X').map((e) => e.pid))).toEqual(new Set([1, 2]));
  });
});
