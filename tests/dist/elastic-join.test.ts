// A machine paired while an elastic run runs joins it: `shardwise train --strategy ddp --world 2
// --elastic 2:3` on this machine, no placement; mid-run a real `shardwise agent` on loopback is
// paired with this controller (`shardwise pair`, another process). The run notices it, stops at
// its next step with a checkpoint and goes on as ddp x 3 with rank 2 on the agent, then completes.
import path from 'node:path';
import { afterAll, expect, it } from 'vitest';
import type { ElasticSummary } from '../../common/api/elastic.js';
import { tempDir } from '../cli/helpers.js';
import { type AgentProcess, controller, startAgent } from './agent-helpers.js';
import { expectCleanlyGone, losses, readJson, Run } from './helpers/elastic-run.js';
import { childPids } from './helpers/processes.js';

let agent: AgentProcess | undefined;
afterAll(() => agent?.stop());

it('an agent paired while ddp 2 --elastic 2:3 runs here: the run grows to 3 (scale-up, rank 2 on the agent, no step lost) and completes', async () => {
  const home = tempDir('elastic-join-controller');
  const dir = path.join(tempDir('elastic-join'), 'run');
  const steps = 18;
  const run = new Run(
    ['--preset', 'tiny', '--strategy', 'ddp', '--world', '2', '--batch-size', '12', '--steps', String(steps)].concat([
      '--checkpoint-interval',
      '100',
      '--eval-interval',
      '0',
      '--elastic',
      '2:3',
      '--out',
      dir,
    ]),
    { SHARDWISE_HOME: home },
  );
  const poll = setInterval(() => run.ranks(), 300);
  agent = await startAgent(['--port', '0', '--host', '127.0.0.1', '--mdns', 'off']);
  const addr = `127.0.0.1:${agent.port}`;
  await run.untilStep(3);
  const paired = controller(home, ['pair', addr, '--code', agent.codes.at(-1)!]);
  expect(paired.code, paired.stderr).toBe(0);
  const agentRanks = new Set<number>();
  const agentPoll = setInterval(() => {
    // the agent's rank processes: children of its worker (the process under the `shardwise agent` command)
    for (const worker of childPids(agent!.child.pid!)) for (const pid of childPids(worker)) agentRanks.add(pid);
  }, 300);
  const code = await run.exited;
  clearInterval(poll);
  clearInterval(agentPoll);
  expect(code, run.stderr).toBe(0);

  const summary = readJson(path.join(dir, 'summary.json'));
  const elastic = summary.elastic as ElasticSummary;
  expect(elastic.segments.map((s) => [s.reason, s.world])).toEqual([
    ['start', 2],
    ['scale-up', 3],
  ]);
  const grown = elastic.segments[1]!;
  expect(grown.placement.slice(0, 2)).toEqual(['this machine', 'this machine']);
  expect(grown.placement[2]).toContain(addr);
  expect(grown.detail).toMatch(new RegExp(`\\(${addr.replace(/\./g, '\\.')}\\) joined \\(paired since the run began\\)`));
  expect(grown).toMatchObject({ source: 'disk', lost_steps: 0 }); // the stop's checkpoint of its step
  expect(grown.from_step).toBeGreaterThanOrEqual(3);
  expect(summary.world).toBe(3);
  expect(summary.steps).toBe(steps);
  expect([...losses(dir).keys()]).toEqual(Array.from({ length: steps }, (_, i) => i + 1));
  await expectCleanlyGone(run, dir);
  await new Promise((r) => setTimeout(r, 1000));
  // the agent's rank ended with the run
  expect(agentRanks.size).toBeGreaterThan(0);
  for (const worker of childPids(agent.child.pid!)) expect(childPids(worker).filter((p) => agentRanks.has(p))).toEqual([]);
}, 300_000);
