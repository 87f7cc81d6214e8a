// npm run bench:telemetry — what rank span telemetry costs a step: the same DDP run (tiny,
// world 2, `shardwise train --json`) with spans on (the default: a compute span per layer and
// pass, a comm span per collective, sent to the controller and written to spans.jsonl) and with
// `"telemetry": {"spans": false}`, alternated so drift on a shared machine hits both.
// The step time is the wall time between consecutive step lines reaching this process, so it
// holds everything the spans cost (per-layer queue marks, draining them, the message, the
// controller's write), not only the rank's own step_ms (also reported: it leaves the emit out).
// Median over steps 3..N of each run, then over runs (overhead_pct), and the median of the
// per-pair differences (overhead_pct_paired). Prints one JSON object.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const BIN = fileURLToPath(new URL('../../bin/shardwise.js', import.meta.url));
const steps = Number(process.env.BENCH_STEPS ?? 20);
const pairs = Number(process.env.BENCH_PAIRS ?? 3);
const root = mkdtempSync(path.join(tmpdir(), 'shardwise-bench-telemetry-'));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const offConfig = path.join(root, 'spans-off.json');
writeFileSync(offConfig, JSON.stringify({ telemetry: { spans: false } }));

interface RunTimes {
  /** wall ms between consecutive step lines, steps 3..N */
  wall: number[];
  /** the rank's own step_ms, steps 3..N */
  rank: number[];
  spans: boolean;
}

function run(name: string, spans: boolean): Promise<RunTimes> {
  const args = ['train', '--preset', 'tiny', '--strategy', 'ddp', '--world', '2', '--steps', String(steps), '--eval-interval', '0', '--checkpoint-interval', '0', '--out', path.join(root, name), '--json'];
  if (!spans) args.push('--config', offConfig);
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let partial = '';
  let err = '';
  const arrivals: number[] = [];
  const rank: number[] = [];
  let sawSpans = false;
  child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    const now = performance.now();
    const lines = (partial + d).split('\n');
    partial = lines.pop()!;
    for (const l of lines) {
      if (!l.startsWith('{')) continue;
      const m = JSON.parse(l) as { type: string; step?: number; step_ms?: number; overlap_pct?: number };
      if (m.type === 'step') {
        arrivals.push(now);
        if (m.step! >= 3) rank.push(m.step_ms!);
      }
      if (m.type === 'summary' && m.overlap_pct !== undefined) sawSpans = true;
    }
  });
  return new Promise((resolve, reject) =>
    child.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`train (${name}) exited ${code}: ${err}`));
      // spans on: the summary's overlap comes from them; off: there must be none
      if (sawSpans !== spans) return reject(new Error(`run ${name}: spans were ${sawSpans ? 'on' : 'off'}, expected ${spans ? 'on' : 'off'}`));
      const wall = arrivals.slice(2).map((t, i) => t - arrivals[i + 1]!);
      resolve({ wall, rank, spans });
    }),
  );
}

// BENCH_CONCURRENT=1: each pair's two runs at the same time, so they see the same load (a busy
// shared machine: they split its CPUs, and the one with more work per step takes longer)
const concurrent = process.env.BENCH_CONCURRENT === '1';
const on: RunTimes[] = [];
const off: RunTimes[] = [];
for (let i = 0; i < pairs; i++) {
  if (concurrent) {
    const [a, b] = await Promise.all([run(`on-${i}`, true), run(`off-${i}`, false)]);
    on.push(a);
    off.push(b);
  } else if (i % 2 === 0) {
    // alternate which goes first, so a trend in the machine's load does not favour one
    on.push(await run(`on-${i}`, true));
    off.push(await run(`off-${i}`, false));
  } else {
    off.push(await run(`off-${i}`, false));
    on.push(await run(`on-${i}`, true));
  }
}
rmSync(root, { recursive: true, force: true });

const perRun = (rs: RunTimes[], k: 'wall' | 'rank') => rs.map((r) => median(r[k]));
const stepOn = median(perRun(on, 'wall'));
const stepOff = median(perRun(off, 'wall'));
const round = (x: number) => Math.round(x * 100) / 100;
process.stdout.write(
  `${JSON.stringify({
    step_ms_on: round(stepOn),
    step_ms_off: round(stepOff),
    overhead_pct: round(((stepOn - stepOff) / stepOff) * 100),
    // each pair ran back to back, under about the same load: the median of their differences is the steadier figure on a shared machine
    overhead_pct_paired: round(median(on.map((r, i) => ((median(r.wall) - median(off[i]!.wall)) / median(off[i]!.wall)) * 100))),
    rank_step_ms_on: round(median(perRun(on, 'rank'))),
    rank_step_ms_off: round(median(perRun(off, 'rank'))),
    runs: { on: perRun(on, 'wall').map(round), off: perRun(off, 'wall').map(round) },
    strategy: 'ddp',
    world: 2,
    preset: 'tiny',
    steps,
    pairs,
    mode: concurrent ? 'concurrent pairs' : 'alternating runs',
  })}\n`,
);
