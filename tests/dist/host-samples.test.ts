// Host CPU and RAM of real runs: `shardwise serve` launches a single-rank tiny run on the
// SwiftShader adapter; while it goes the controller samples this machine once a second into the
// run folder's host.jsonl, runs.host returns the rows, and sampling stops when the run ends. A
// DDP run with rank 1 on a paired agent (loopback) gets rows for both machines, the agent's
// read by the agent itself. `shardwise train` in a terminal samples its run the same way.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunEvent } from '../../common/api/index.js';
import { type WsApiClient } from '../../src-renderer/src/api/ws-client.js';
import { shardwise } from '../cli/helpers.js';
import { type AgentProcess, startAgent } from './agent-helpers.js';
import { collectEvents, connect, ended, type Serve, startServe, stopServe } from './helpers/serve.js';

const terminal = (e: RunEvent) =>
  ended(e) || (e.type === 'snapshot' && ['completed', 'failed', 'stopped'].includes(e.snapshot.state.status));

describe('host samples of a run driven by shardwise serve', () => {
  let dir: string;
  let serve: Serve;
  let api: WsApiClient;
  let agent: AgentProcess | undefined;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'shardwise-host-'));
    serve = await startServe(path.join(dir, 'runs'), { SHARDWISE_HOME: path.join(dir, 'home'), SHARDWISE_NO_MDNS: '1' });
    api = await connect(serve);
  }, 60_000);
  afterAll(async () => {
    api?.close();
    if (serve) await stopServe(serve);
    await agent?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('writes a row about every second for this machine while the run goes, and none after it ended', async () => {
    const { runId, dir: runDir } = await api.call('runs.launch', {
      config: { preset: 'tiny', steps: 40, eval_interval: 0, name: 'host-run' },
    });
    const t0 = Date.now();
    const events = await collectEvents(api, runId, terminal);
    const seconds = (Date.now() - t0) / 1000;
    expect(events.some((e) => e.type === 'state' && e.state.status === 'completed')).toBe(true);
    const { rows } = await api.call('runs.host', { runId });
    // the first reading primes the counters; then one a second (a loaded machine may stretch a tick)
    expect(rows.length).toBeGreaterThanOrEqual(Math.max(1, Math.floor(seconds / 3)));
    expect(rows.length).toBeLessThanOrEqual(Math.ceil(seconds) + 1);
    for (const r of rows) {
      expect(r.machine).toBe(hostname());
      expect(r.cpu_pct).toBeGreaterThanOrEqual(0);
      expect(r.cpu_pct).toBeLessThanOrEqual(100);
      expect(r.mem_used).toBeGreaterThan(0);
      expect(r.mem_used).toBeLessThanOrEqual(r.mem_total);
    }
    const file = path.join(runDir, 'host.jsonl');
    const after = readFileSync(file, 'utf8');
    await new Promise((r) => setTimeout(r, 2500));
    expect(readFileSync(file, 'utf8')).toBe(after); // stopped with the run
  }, 300_000);

  it('a run with a rank on a paired agent gets rows for this machine and for the agent, named as the topology names it', async () => {
    agent = await startAgent(['--port', '0', '--name', 'agent-h', '--mdns', 'off']);
    const addr = `127.0.0.1:${agent.port}`;
    await agent.waitFor(/pairing code: [0-9A-Z]{5}-[0-9A-Z]{5}/);
    await api.call('peers.pair', { address: addr, code: agent.codes.at(-1)! });
    const { runId } = await api.call('runs.launch', {
      config: {
        preset: 'tiny',
        strategy: 'ddp',
        world: 2,
        steps: 20,
        eval_interval: 0,
        name: 'host-agent',
        placement: [{ machine: 'local' }, { machine: addr }],
      },
    });
    const events = await collectEvents(api, runId, terminal);
    expect(events.some((e) => e.type === 'state' && e.state.status === 'completed')).toBe(true);
    const { rows } = await api.call('runs.host', { runId });
    const machines = [...new Set(rows.map((r) => r.machine))].sort();
    expect(machines).toEqual([`agent-h (${addr})`, hostname()].sort());
    const agentRows = rows.filter((r) => r.machine !== hostname());
    expect(agentRows.length).toBeGreaterThanOrEqual(1);
    for (const r of agentRows) expect(r.mem_used).toBeLessThanOrEqual(r.mem_total);
  }, 300_000);

  it('`shardwise train` samples this machine into its run folder too, and exits when the run ends', () => {
    const out = path.join(dir, 'cli-run');
    const r = shardwise(['train', '--preset', 'tiny', '--steps', '15', '--eval-interval', '0', '--out', out], { timeoutMs: 240_000 });
    expect(r.code, r.stderr).toBe(0);
    const rows = readFileSync(path.join(out, 'host.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { machine: string; mem_total: number });
    expect(rows.length).toBeGreaterThanOrEqual(1);
    expect(rows.every((x) => x.machine === hostname() && x.mem_total > 0)).toBe(true);
  }, 300_000);
});
