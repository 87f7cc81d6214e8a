// `npm run bench:elastic`: what a lost rank costs an elastic run. For ddp and zero3 at world 3
// (`--elastic 2:3`, tiny), a real `shardwise train` has rank 2 killed -9 after a step; the run
// goes on at world 2. JSON out: the time from the kill to the first step of the new segment (as
// this bench sees it, and the controller's recovery_ms from the loss being noticed), the steps
// lost, the state's source, and tokens/s before and after. Ranks run on this machine (one
// machine's processes; the LAN harness's machines are not used here). Linux (/proc).
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { BIN, rankPids } from './faults/harness.js';

interface StepRow {
  type: string;
  step: number;
  tokens_per_s: number;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)]! : NaN;
};

async function lossCase(strategy: string, steps: number, killAfter: number) {
  const dir = mkdtempSync(path.join(tmpdir(), `shardwise-bench-elastic-${strategy}-`));
  const out = path.join(dir, 'run');
  const args = ['train', '--preset', 'tiny', '--strategy', strategy, '--world', '3', '--batch-size', '12', '--steps', String(steps)];
  args.push('--checkpoint-interval', '8', '--eval-interval', '0', '--elastic', '2:3', '--out', out, '--json');
  const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, SHARDWISE_COMM_TIMEOUT_MS: '5000' } });
  let stdout = '';
  let stderr = '';
  let killedAt = 0;
  let firstAfter = 0;
  const stepLines = () => stdout.split('\n').filter((l) => l.includes('"type":"step"'));
  child.stderr.on('data', (d) => (stderr += d));
  child.stdout.on('data', (d) => {
    stdout += d;
    // the first step line after the new segment's line
    const seg = stdout.indexOf('"reason":"rank-lost"');
    if (killedAt && !firstAfter && seg >= 0 && stdout.indexOf('"type":"step"', seg) >= 0) firstAfter = Date.now();
    if (!killedAt && stepLines().some((l) => l.includes(`"step":${killAfter},`))) {
      const pid = rankPids(child.pid!).get(2);
      if (pid !== undefined) {
        killedAt = Date.now();
        process.kill(pid, 'SIGKILL');
      }
    }
  });
  const code = await new Promise<number>((resolve) => child.on('exit', (c) => resolve(c ?? -1)));
  if (code !== 0) throw new Error(`${strategy}: the run failed (exit ${code}): ${stderr.slice(-2000)}`);
  const summary = JSON.parse(readFileSync(path.join(out, 'summary.json'), 'utf8'));
  const [before, after] = summary.elastic.segments;
  const rows = readFileSync(path.join(out, 'metrics.jsonl'), 'utf8')
    .split('\n')
    .filter((l) => l.includes('"type":"step"'))
    .map((l) => JSON.parse(l) as StepRow);
  // the first steps of a segment warm up (pipelines compile, buffers grow): the median of the rest
  const tps = (from: number, to: number) =>
    Math.round(median(rows.filter((r) => r.step > from + 1 && r.step <= to).map((r) => r.tokens_per_s)));
  rmSync(dir, { recursive: true, force: true });
  return {
    strategy,
    world_before: before.world,
    world_after: after.world,
    killed_after_step: killAfter,
    ms_kill_to_first_step: firstAfter ? firstAfter - killedAt : null,
    recovery_ms: after.recovery_ms,
    lost_steps: summary.elastic.lost_steps,
    source: after.source,
    resumed_from_step: after.from_step,
    tokens_per_s_before: tps(0, before.to_step),
    tokens_per_s_after: tps(after.from_step, after.to_step),
  };
}

const results = [];
for (const strategy of ['ddp', 'zero3']) results.push(await lossCase(strategy, 24, 10));
process.stdout.write(
  `${JSON.stringify({ bench: 'elastic', preset: 'tiny', machine: 'one machine, local rank processes', target_recovery_ms: 20_000, results }, null, 2)}\n`,
);
