// runs.launch with ranks on a paired LAN agent, through the typed API: a real `shardwise agent`
// and a real `shardwise serve` on loopback (their own state folders), paired with peers.pair
// and the code the agent printed. A DDP run with rank 1 on the agent trains the single-device
// losses; its state and summary say where each rank ran; a placement the controller cannot run
// is refused naming the field; killing the remote rank fails the run naming rank and machine,
// a resume runs on the same machines; stop leaves no rank process on the agent.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunEvent, StepRow } from '../../common/api/index.js';
import type { WsApiClient } from '../../src-renderer/src/api/ws-client.js';
import { tempDir } from '../cli/helpers.js';
import { type AgentProcess, startAgent } from './agent-helpers.js';
import { alive, collectEvents, connect, type Serve, startServe, stopServe, waitFor } from './helpers/serve.js';

const STEPS = 6;
// one config for the single-device reference and the placed DDP run: same seed, same global batch
const BASE = { preset: 'tiny', steps: STEPS, batch_size: 8, seed: 11, eval_interval: 0, checkpoint_interval: 0 } as const;

const terminal = (e: RunEvent) =>
  (e.type === 'state' && ['completed', 'failed', 'stopped'].includes(e.state.status)) ||
  (e.type === 'snapshot' && ['completed', 'failed', 'stopped'].includes(e.snapshot.state.status));

function lossesOf(events: RunEvent[]): Map<number, number> {
  const byStep = new Map<number, number>();
  for (const e of events) {
    if (e.type === 'snapshot') for (const r of e.snapshot.recent_steps) byStep.set(r.step, r.loss);
    if (e.type === 'step') byStep.set((e.row as StepRow).step, e.row.loss);
  }
  return byStep;
}

describe('runs.launch with a placement on a paired agent (serve + agent on loopback)', () => {
  let dir: string;
  let agent: AgentProcess;
  let serve: Serve;
  let api: WsApiClient;
  let addr: string;
  let agentMachine: string;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'shardwise-api-place-'));
    agent = await startAgent(['--port', '0', '--name', 'agent-b']);
    addr = `127.0.0.1:${agent.port}`;
    agentMachine = `agent-b (${addr})`;
    // its own controller identity; no mDNS: the test sends nothing beyond loopback
    serve = await startServe(path.join(dir, 'runs'), { SHARDWISE_HOME: tempDir('api-place-home'), SHARDWISE_NO_MDNS: '1' });
    api = await connect(serve);
  });
  afterAll(async () => {
    api?.close();
    if (serve) await stopServe(serve);
    await agent?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const ddp = (placement: { machine: string; device?: string }[], extra: Record<string, unknown> = {}) => ({
    config: { ...BASE, strategy: 'ddp', world: 2, placement, ...extra },
  });
  const refused = (method: 'runs.launch' | 'runs.plan', params: ReturnType<typeof ddp>) =>
    api.call(method, params).then(
      () => null,
      (e: Error) => ({ name: e.name, message: e.message }),
    );

  it('refuses placements it cannot run, naming the field: unpaired agent, count, rank 0 remote, unknown adapter, bad address', async () => {
    const unpaired = await refused('runs.launch', ddp([{ machine: 'local' }, { machine: addr }]));
    expect(unpaired?.name).toBe('ValidationError');
    expect(unpaired?.message).toMatch(
      new RegExp(`config\\.placement\\.1\\.machine: ${addr} is not a paired peer; pair it first with peers\\.pair`),
    );

    const peer = await api.call('peers.pair', { address: addr, code: agent.codes.at(-1)! });
    expect(peer).toMatchObject({ address: addr, state: 'paired', name: 'agent-b' });

    const count = await refused('runs.launch', ddp([{ machine: 'local' }]));
    expect(count).toMatchObject({
      name: 'ValidationError',
      message: expect.stringMatching(/config\.placement names 1 rank\(s\), the run has world 2/),
    });
    const remoteZero = await refused('runs.plan', ddp([{ machine: addr }, { machine: 'local' }]));
    expect(remoteZero).toMatchObject({
      name: 'ValidationError',
      message: expect.stringMatching(/config\.placement: rank 0 must be "local"/),
    });
    const noAdapter = await refused('runs.launch', ddp([{ machine: 'local' }, { machine: addr, device: 'no-such-gpu' }]));
    expect(noAdapter).toMatchObject({
      name: 'ValidationError',
      message: expect.stringMatching(
        /config\.placement\.1\.device: rank 1 on agent agent-b .*no adapter matches "no-such-gpu"; available: /,
      ),
    });
    const noIndex = await refused('runs.plan', ddp([{ machine: 'local', device: '9' }, { machine: addr }]));
    expect(noIndex).toMatchObject({
      name: 'ValidationError',
      message: expect.stringMatching(/config\.placement\.0\.device: rank 0 on this machine: no adapter with index 9/),
    });
    const notAddress = await refused('runs.launch', ddp([{ machine: 'local' }, { machine: 'somewhere' }]));
    expect(notAddress).toMatchObject({
      name: 'ValidationError',
      message: expect.stringMatching(/config\.placement\.1\.machine: "somewhere" is neither "local" nor an agent's HOST:PORT/),
    });
    // nothing was created by the refusals
    expect((await api.call('runs.list', {})).runs).toEqual([]);

    const plan = await api.call('runs.plan', ddp([{ machine: 'local' }, { machine: addr, device: '0' }]));
    expect(plan.placement).toEqual([
      { rank: 0, machine: 'this machine' },
      { rank: 1, machine: agentMachine, device: '0' },
    ]);
  });

  it('devices.live: the probed system GPUs, live fields read again (no nvidia-smi here: the probe values, said so)', async () => {
    const [probed, live] = await Promise.all([api.call('devices.list', {}), api.call('devices.live', {})]);
    expect(live.controllers).toEqual(probed.system.controllers);
    expect(live.probed_at).toBe(probed.probed_at);
    expect(live.source).toBe(/nvidia/i.test(JSON.stringify(probed.system.controllers)) ? 'nvidia-smi' : 'probe');
  });

  it(`a DDP run with rank 1 on the agent trains the single-device losses for ${STEPS} steps and records where each rank ran`, async () => {
    const single = await api.call('runs.launch', { config: { ...BASE, name: 'single' } });
    const placed = await api.call('runs.launch', ddp([{ machine: 'local' }, { machine: addr }], { name: 'placed' }));
    const [ref, run] = await Promise.all([collectEvents(api, single.runId, terminal), collectEvents(api, placed.runId, terminal)]);
    const detail = await api.call('runs.get', { runId: placed.runId });
    expect(detail.state.status, detail.state.error).toBe('completed');
    const want = lossesOf(ref);
    const got = lossesOf(run);
    expect(want.size).toBe(STEPS);
    expect([...got.keys()].sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6]);
    for (const [step, loss] of want)
      expect(Math.abs(got.get(step)! - loss) / loss, `step ${step}: ${got.get(step)} vs single ${loss}`).toBeLessThan(1e-5);

    expect(detail.state.ranks?.map((r) => r.machine)).toEqual(['this machine', agentMachine]);
    expect(detail.state.placement).toEqual([{ machine: 'local' }, { machine: addr }]);
    expect(detail.summary).toMatchObject({
      world: 2,
      strategy: 'ddp',
      ranks: [
        { rank: 0, machine: 'this machine' },
        { rank: 1, machine: agentMachine },
      ],
    });
    expect(detail.live).toBeNull();
    // the remote rank's process is gone too; its spans came back (on this machine's clock)
    expect(alive(detail.state.ranks![1]!.pid)).toBe(false);
    const spans = await api.call('runs.spans', { runId: placed.runId, fromStep: STEPS, toStep: STEPS });
    expect(new Set(spans.spans.map((s) => s.rank))).toEqual(new Set([0, 1]));
  });

  it("killing the remote rank fails the run naming rank 1 and the agent; resume runs on the same machines; stop reaps the agent's rank", async () => {
    const { runId } = await api.call(
      'runs.launch',
      ddp([{ machine: 'local' }, { machine: addr }], { steps: 5000, checkpoint_interval: 2 }),
    );
    await collectEvents(api, runId, (e) => e.type === 'checkpoint');
    const started = (await api.call('runs.get', { runId })).state.ranks!;
    expect(started.map((r) => r.machine)).toEqual(['this machine', agentMachine]);
    process.kill(started[1]!.pid, 'SIGKILL');
    const events = await collectEvents(api, runId, terminal, 60_000);
    const failed = await api.call('runs.get', { runId });
    expect(failed.state.status, JSON.stringify(events.slice(-2))).toBe('failed');
    expect(failed.state.error).toMatch(new RegExp(`rank 1 on agent-b \\(${addr.replace(/\./g, '\\.')}\\)`));
    // the first report wins: rank 1's death, or rank 0's collective failing on it (the death is named either way)
    expect([0, 1]).toContain(failed.state.failed_rank);
    expect(alive(started[0]!.pid)).toBe(false);

    // resume: placed like before (rank 1 on the agent again), then stopped; nothing is left on the agent
    await api.call('runs.resume', { runId });
    await collectEvents(api, runId, (e) => e.type === 'step');
    const resumed = (await api.call('runs.get', { runId })).state.ranks!;
    expect(resumed.map((r) => r.machine)).toEqual(['this machine', agentMachine]);
    expect(resumed[1]!.pid).not.toBe(started[1]!.pid);
    expect(alive(resumed[1]!.pid)).toBe(true);
    await api.call('runs.stop', { runId });
    for (const r of resumed) expect(alive(r.pid), `rank ${r.rank} (pid ${r.pid} on ${r.machine}) alive after stop`).toBe(false);
    expect((await api.call('runs.get', { runId })).state.status).toBe('stopped');
    // the agent keeps serving after its ranks were stopped
    await waitFor(() => agent.child.exitCode === null, 1000, 'the agent to keep running');
    expect((await api.call('peers.inspect', { address: addr })).machine.agentName).toBe('agent-b');
  });
});
