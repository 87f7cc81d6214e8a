// The rank watchdog (workers/protocol/rank-watchdog.ts): when the process that forked the ranks
// dies, a stopped rank is SIGKILLed within 5 s and the ring names it held on /dev/shm are removed;
// a pid whose start time is not the recorded one (a reused pid) is never touched; a run that
// ended tells it so and nothing is killed; it exits once its ranks are gone. And the agent's side: kill -9 of a process running
// AgentRuns (what `shardwise agent` forks ranks with) ends its stopped rank.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, rmSync } from 'node:fs';
import path from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { startTimeOf } from '../../workers/protocol/rank-watchdog.js';
import { tempDir } from '../cli/helpers.js';
import { tinyJob } from '../unit/tiny-job.js';
import { alive, stateOf, waitFor } from './helpers/processes.js';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const WATCHDOG = path.join(ROOT, 'dist/workers/protocol/rank-watchdog-main.js');
const started: ChildProcess[] = [];
const files: string[] = [];

afterEach(() => {
  for (const c of started.splice(0)) if (c.pid && alive(c.pid)) process.kill(c.pid, 'SIGKILL');
  for (const f of files.splice(0)) rmSync(f, { force: true });
});

/** A stand-in rank: a node process holding `file` open (when given), stopped with SIGSTOP. */
async function stoppedProcess(file?: string): Promise<number> {
  const code = file ? `require('fs').openSync(${JSON.stringify(file)}, 'w'); setInterval(() => {}, 1e6)` : 'setInterval(() => {}, 1e6)';
  const c = spawn(process.execPath, ['-e', code], { stdio: 'ignore' });
  started.push(c);
  const pid = c.pid!;
  if (file) await waitFor(() => existsSync(file), 10_000, `${file} to exist`);
  process.kill(pid, 'SIGSTOP');
  await waitFor(() => stateOf(pid) === 'T', 5000, `${pid} to stop`);
  return pid;
}

function watchdog(lines: object[], parentDies = true): { child: ChildProcess; exited: Promise<number> } {
  const child = spawn(process.execPath, [WATCHDOG], { stdio: ['pipe', 'ignore', 'ignore'] });
  started.push(child);
  const exited = new Promise<number>((resolve) => child.on('exit', (code) => resolve(code ?? -1)));
  for (const l of lines) child.stdin!.write(`${JSON.stringify(l)}\n`);
  if (parentDies) child.stdin!.end(); // what the kernel does to the pipe when its parent dies
  return { child, exited };
}

it('its parent gone: a stopped rank is SIGKILLed within 5 s and its /dev/shm ring name removed; a reused pid (other start time) is left alone', async () => {
  const ring = `/dev/shm/shardwise-${process.pid}-${randomBytes(16).toString('hex')}`;
  files.push(ring);
  const rank = await stoppedProcess(ring);
  const stranger = await stoppedProcess();
  const t0 = Date.now();
  const { exited } = watchdog([
    { pid: rank, start: startTimeOf(rank) },
    { pid: stranger, start: String(Number(startTimeOf(stranger)) + 1) },
  ]);
  expect(await exited).toBe(0);
  expect(Date.now() - t0).toBeLessThan(5000);
  await waitFor(() => !alive(rank), 1000, `rank ${rank} to be gone`);
  expect(existsSync(ring), ring).toBe(false);
  expect(alive(stranger), `pid ${stranger} with another start time`).toBe(true);
});

it('told the run ended: it exits at once and kills nothing', async () => {
  const rank = await stoppedProcess();
  const t0 = Date.now();
  const { exited } = watchdog([{ pid: rank, start: startTimeOf(rank) }, { end: true }]);
  expect(await exited).toBe(0);
  expect(Date.now() - t0).toBeLessThan(1500);
  expect(alive(rank)).toBe(true);
});

it('its parent alive: once every rank it watches is gone, it exits (within 5 s)', async () => {
  const rank = await stoppedProcess();
  const { child, exited } = watchdog([{ pid: rank, start: startTimeOf(rank) }], false);
  await new Promise((r) => setTimeout(r, 500));
  expect(alive(child.pid!), 'the watchdog while its rank lives').toBe(true);
  process.kill(rank, 'SIGKILL');
  const t0 = Date.now();
  expect(await exited).toBe(0);
  expect(Date.now() - t0).toBeLessThan(5000);
});

it('the agent killed -9 with its rank stopped: the rank is gone within 5 s', async () => {
  const root = tempDir('agent-watchdog');
  const runs = path.join(ROOT, 'dist/workers/agent/runs.js');
  const req = {
    runId: 'r1',
    job: tinyJob({ run_dir: 'ignored' }),
    ranks: [{ rank: 1, localRank: 0 }],
    // nobody listens there: the rank waits for its rendezvous, which is all this test needs of it
    comm: { worldSize: 2, masterAddr: '127.0.0.1', masterPort: 9, secret: 'x'.repeat(48), timeoutMs: 60_000 },
  };
  const host = spawn(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `const { AgentRuns } = await import(${JSON.stringify(runs)});
       const r = new AgentRuns(${JSON.stringify(root)}, () => {}).launch(${JSON.stringify(req)}, {}, '127.0.0.1', () => {});
       console.log(JSON.stringify(r.ranks)); setInterval(() => {}, 1e6);`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  started.push(host);
  const line = await new Promise<string>((resolve) => host.stdout!.once('data', (d: Buffer) => resolve(d.toString())));
  const [{ pid }] = JSON.parse(line) as { pid: number }[];
  process.kill(pid, 'SIGSTOP');
  await waitFor(() => stateOf(pid) === 'T', 5000, `rank ${pid} to stop`);
  host.kill('SIGKILL');
  const t0 = Date.now();
  await waitFor(() => !alive(pid), 5000, `the agent's stopped rank ${pid} to be gone`);
  expect(Date.now() - t0).toBeLessThan(5000);
});
