// `npm run bench:elastic`: what a lost machine costs an elastic run. Three machines of a
// namespaced LAN (bench/lan/harness.ts, 10 Gbit/s links): the controller and rank 0 on m0, paired
// agents on m1 and m2, one rank per machine. For ddp and zero3 at world 3 (`--elastic 2:3`,
// tiny) a real `shardwise train` has m2's agent killed -9 with every process under it after a
// step; the run goes on at world 2 (the agent is started again once the run ended, for the next
// case). JSON out, per case:
//   ms_kill_to_first_step  the kill to the new segment's first step line, as this bench sees it
//   detect_ms              the kill to the controller noticing (ms_kill_to_first_step - recovery_ms)
//   recovery_ms, recovery  the controller's: from noticing to the first step, and its phases
//                          (settle, re-plan, state, launch, join, first step: common/api/elastic.ts)
//   lost_steps, source     steps trained again; the state's source (memory: the replica on m0)
//   tokens_per_s_before/after  medians over each segment's steps but its first two (warm-up)
//   load_average           the host's 1-minute load average at the kill (these machines share its cores)
//   step_ms_before         the median step time before the loss (its first two steps left out)
//   target_ms, within_target  tiny: 20 s; other presets: 2 step times plus the ranks' start
//                          (the recovery's launch and join phases), as the issue states it
// --local: the older mode, every rank a process of this machine, rank 2 killed -9 (rank-lost).
// --preset NAME (default tiny): the model; small takes some seconds a step here.
// Needs root and iproute2 for the LAN (lanUnavailable says why not); Linux (/proc).
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { BIN, rankPids } from './faults/harness.js';
import { type LanCluster, startCluster } from './lan/cluster.js';
import { createLan, lanUnavailable } from './lan/harness.js';
import { median } from '../common/stats.js';

interface StepRow {
  type: string;
  step: number;
  step_ms: number;
  tokens_per_s: number;
}

const presetAt = process.argv.indexOf('--preset');
const PRESET = presetAt >= 0 ? process.argv[presetAt + 1]! : 'tiny';
const TINY = PRESET === 'tiny';
// a larger model's steps are slower: fewer of them, the loss earlier
const STEPS = TINY ? 24 : 14;
const KILL_AFTER = TINY ? 10 : 6;
const TINY_TARGET_MS = 20_000;

/** how a case runs its ranks: the command, and the loss it inflicts once rank 0 reported a step */
interface Mode {
  name: string;
  reason: 'rank-lost' | 'machine-lost';
  placement: string[];
  launch(args: string[]): ChildProcess;
  /** the loss (a rank or a machine killed -9); false: not yet possible (retried on the next output) */
  kill(child: ChildProcess): boolean | Promise<boolean>;
  /** after the run: what the loss took back (the agent started again) */
  after(): Promise<void>;
}

async function lossCase(mode: Mode, strategy: string) {
  const dir = mkdtempSync(path.join(tmpdir(), `shardwise-bench-elastic-${strategy}-`));
  const out = path.join(dir, 'run');
  const args = ['train', '--preset', PRESET, '--strategy', strategy, '--world', '3', '--batch-size', '12', '--steps', String(STEPS)];
  args.push(
    '--checkpoint-interval',
    TINY ? '8' : '4',
    '--eval-interval',
    '0',
    '--elastic',
    '2:3',
    ...mode.placement,
    '--out',
    out,
    '--json',
  );
  const child = mode.launch(args);
  let stdout = '';
  let stderr = '';
  let killedAt = 0;
  let killing = false;
  let firstAfter = 0;
  let load = 0;
  child.stderr!.on('data', (d) => (stderr += d));
  child.stdout!.on('data', async (d) => {
    stdout += d;
    // the first step line after the new segment's line
    const seg = stdout.indexOf(`"reason":"${mode.reason}"`);
    if (killedAt && !firstAfter && seg >= 0 && stdout.indexOf('"type":"step"', seg) >= 0) firstAfter = Date.now();
    const stepped = stdout.split('\n').some((l) => l.includes('"type":"step"') && l.includes(`"step":${KILL_AFTER},`));
    if (!killedAt && !killing && stepped) {
      killing = true;
      const at = Date.now();
      if (await mode.kill(child)) [killedAt, load] = [at, loadavg()[0]!];
      killing = false;
    }
  });
  const code = await new Promise<number>((resolve) => child.on('exit', (c) => resolve(c ?? -1)));
  await mode.after();
  if (code !== 0) throw new Error(`${strategy}: the run failed (exit ${code}): ${stderr.slice(-2000)}`);
  const summary = JSON.parse(readFileSync(path.join(out, 'summary.json'), 'utf8'));
  const [before, after] = summary.elastic.segments;
  const rows = readFileSync(path.join(out, 'metrics.jsonl'), 'utf8')
    .split('\n')
    .filter((l) => l.includes('"type":"step"'))
    .map((l) => JSON.parse(l) as StepRow);
  // the first steps of a segment warm up (pipelines compile, buffers grow): the median of the rest
  const settled = (from: number, to: number) => rows.filter((r) => r.step > from + 1 && r.step <= to);
  const tps = (from: number, to: number) => Math.round(median(settled(from, to).map((r) => r.tokens_per_s)));
  const stepMs = Math.round(median(settled(0, before.to_step).map((r) => r.step_ms)));
  const ranksStart = after.recovery ? after.recovery.launch_ms + after.recovery.join_ms : null;
  const target = TINY ? TINY_TARGET_MS : ranksStart !== null ? 2 * stepMs + ranksStart : null;
  rmSync(dir, { recursive: true, force: true });
  const toFirst = firstAfter ? firstAfter - killedAt : null;
  return {
    strategy,
    world_before: before.world,
    world_after: after.world,
    placement_after: after.placement,
    killed_after_step: KILL_AFTER,
    ms_kill_to_first_step: toFirst,
    detect_ms: toFirst !== null && after.recovery_ms !== undefined ? toFirst - after.recovery_ms : null,
    recovery_ms: after.recovery_ms,
    recovery: after.recovery,
    lost_steps: summary.elastic.lost_steps,
    source: after.source,
    resumed_from_step: after.from_step,
    tokens_per_s_before: tps(0, before.to_step),
    tokens_per_s_after: tps(after.from_step, after.to_step),
    step_ms_before: stepMs,
    target_ms: target === null ? null : Math.round(target),
    within_target: target !== null && toFirst !== null ? toFirst <= target : null,
    load_average: Math.round(load * 10) / 10,
  };
}

/** every rank a process of this machine; rank 2 killed */
const localMode: Mode = {
  name: 'one machine, local rank processes, rank 2 killed -9',
  reason: 'rank-lost',
  placement: [],
  launch: (args) => spawn(process.execPath, [BIN, ...args], { env: { ...process.env, SHARDWISE_COMM_TIMEOUT_MS: '5000' } }),
  kill(child) {
    const pid = rankPids(child.pid!).get(2);
    if (pid === undefined) return false;
    process.kill(pid, 'SIGKILL');
    return true;
  },
  after: async () => {},
};

/** one rank per machine of the LAN; m2's agent and everything under it killed */
function lanMode(cluster: LanCluster): Mode {
  return {
    name: "3 namespaced machines at 10 Gbit/s, one rank each; m2's agent killed -9 with its tree",
    reason: 'machine-lost',
    placement: ['--placement', cluster.placement([1, 1, 1])],
    launch: (args) => cluster.spawnShardwise(args, { env: { SHARDWISE_COMM_TIMEOUT_MS: '5000' } }),
    kill: async () => (await cluster.killAgent(2)).length > 0,
    after: () => cluster.restartAgent(2),
  };
}

const local = process.argv.includes('--local');
const results = [];
let machine: string;
if (local) {
  machine = localMode.name;
  for (const strategy of ['ddp', 'zero3']) results.push(await lossCase(localMode, strategy));
} else {
  const why = lanUnavailable();
  if (why) {
    process.stderr.write(`bench:elastic: the namespaced LAN cannot be made here (${why}); --local runs every rank on this machine\n`);
    process.exit(1);
  }
  const lan = createLan({ machines: 3, rateGbit: 10 });
  try {
    const cluster = await startCluster(lan);
    try {
      const mode = lanMode(cluster);
      machine = mode.name;
      for (const strategy of ['ddp', 'zero3']) results.push(await lossCase(mode, strategy));
    } finally {
      await cluster.stop();
    }
  } finally {
    lan.destroy();
  }
}
process.stdout.write(
  `${JSON.stringify({ bench: 'elastic', preset: PRESET, date: new Date().toISOString(), machine, results }, null, 2)}\n`,
);
