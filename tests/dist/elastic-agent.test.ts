// An elastic run that loses a machine: a real `shardwise agent` on loopback, paired, runs rank 2
// of a ddp world of 3 (`--elastic 2:3`); the agent is killed -9 mid-run. The run records the
// machine as lost and goes on with the two ranks left on this machine, from the newest state;
// the agent started again (same address, same pairing) brings it back to three ranks.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, expect, it } from 'vitest';
import type { ElasticSummary } from '../../common/api/elastic.js';
import { BIN, jsonLines, tempDir } from '../cli/helpers.js';
import { type AgentProcess, controller, startAgent } from './agent-helpers.js';
import { alive, childPids, rankPids, waitFor } from './helpers/processes.js';

let agent: AgentProcess | undefined;
afterAll(() => agent?.stop());

it('the agent holding rank 2 killed -9 after step 6: the run goes on as ddp x 2 here (machine-lost); the agent back, it returns to 3 (scale-up) and completes', async () => {
  const home = tempDir('elastic-controller');
  const stateDir = tempDir('elastic-agent-state');
  agent = await startAgent(['--port', '0', '--host', '127.0.0.1', '--mdns', 'off', '--state-dir', stateDir]);
  const addr = `127.0.0.1:${agent.port}`;
  const paired = controller(home, ['pair', addr, '--code', agent.codes.at(-1)!]);
  expect(paired.code, paired.stderr).toBe(0);

  const out = path.join(tempDir('elastic-agent'), 'run');
  const args = ['train', '--preset', 'tiny', '--strategy', 'ddp', '--world', '3', '--batch-size', '12', '--steps', '40'];
  args.push('--checkpoint-interval', '4', '--eval-interval', '0', '--elastic', '2:3', '--placement', `local,local,${addr}`);
  const child = spawn(process.execPath, [BIN, ...args, '--out', out, '--json'], {
    env: { ...process.env, SHARDWISE_HOME: home, SHARDWISE_DEBUG: '', SHARDWISE_COMM_TIMEOUT_MS: '5000' },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise<number>((resolve) => child.on('exit', (c) => resolve(c ?? -1)));
  const steps = () => jsonLines(stdout).filter((m) => m.type === 'step').length;
  await waitFor(() => steps() >= 6, 180_000, `6 steps (${stderr.slice(-500)})`);
  const started = jsonLines(stdout).find((m) => m.type === 'ranks') as { ranks: { rank: number; machine: string; pid: number }[] };
  const remote = started.ranks.find((r) => r.rank === 2)!;
  expect(remote.machine).toContain(addr);
  const local = [...rankPids(child.pid!).values()];
  // the agent itself (the worker process under the `shardwise agent` command), then the command: the machine is gone
  for (const pid of childPids(agent.child.pid!)) process.kill(pid, 'SIGKILL');
  agent.child.kill('SIGKILL');

  // the run goes on at 2; then the machine comes back
  await waitFor(() => stdout.includes('"reason":"machine-lost"'), 120_000, `the machine-lost segment (${stderr.slice(-500)})`);
  const port = agent.port;
  agent = await startAgent(['--port', String(port), '--host', '127.0.0.1', '--mdns', 'off', '--state-dir', stateDir]);

  expect(await exited, stderr).toBe(0);
  const summary = JSON.parse(readFileSync(path.join(out, 'summary.json'), 'utf8'));
  const elastic = summary.elastic as ElasticSummary;
  expect(elastic.segments.map((s) => [s.reason, s.world])).toEqual([
    ['start', 3],
    ['machine-lost', 2],
    ['scale-up', 3],
  ]);
  const back = elastic.segments[2]!;
  expect(back.placement.slice(0, 2)).toEqual(['this machine', 'this machine']);
  expect(back.placement[2]).toContain(addr);
  expect(back.source).toBe('disk'); // the stop's checkpoint of its step
  expect(back.lost_steps).toBe(0);
  expect(summary.world).toBe(3);
  const after = elastic.segments[1]!;
  expect(after.placement).toEqual(['this machine', 'this machine']);
  expect(after.detail).toContain(addr);
  expect(after.source).toBe('memory');
  expect(elastic.lost_steps).toBeLessThanOrEqual(1);
  expect(summary.steps).toBe(40);
  // the killed agent's rank went with it (its watchdog); nothing of the run is left here
  await new Promise((r) => setTimeout(r, 1000));
  expect(alive(remote.pid)).toBe(false);
  for (const pid of local) expect(alive(pid)).toBe(false);
}, 300_000);
