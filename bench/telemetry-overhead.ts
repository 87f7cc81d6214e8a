// npm run bench:telemetry — what rank span telemetry costs a step: the same DDP run (tiny,
// world 2, `shardwise train --json`) with spans on (the default: a compute span per layer and
// pass, a comm span per collective, sent to the controller and written to spans.jsonl) and with
// `"telemetry": {"spans": false}`, alternated so drift on a shared machine hits both.
// The step time is the wall time between consecutive step lines reaching this process, so it
// holds everything the spans cost (per-layer queue marks, draining them, the message, the
// controller's write), not only the rank's own step_ms (also reported: it leaves the emit out).
// Median over steps 3..N of each run, then over runs (overhead_pct), and the median of the
// per-pair differences (overhead_pct_paired), and the CPU time per step of the run's processes
// (cpu_*; on SwiftShader the GPU work is CPU work too, but its spinning threads make it swing with
// the load as well). On a machine shared with other work whole runs swing more than the effect, so
// rank_side_in_process interleaves steps with and without spans in one process (paired, ABBA):
// the steadiest figure there. Prints one JSON object.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { BatchSampler, loadDataset } from '../workers/data/index.js';
import { openDevice } from '../workers/gpu/device.js';
import { Runtime } from '../workers/gpu/runtime.js';
import { Gpt } from '../workers/model/gpt.js';
import { initialFullParams } from '../workers/model/tp-layout.js';
import { AdamW, DEFAULT_ADAMW } from '../workers/optim/adamw.js';
import { GpuTimeline } from '../workers/gpu/gpu-timeline.js';
import { PRESETS } from '../workers/protocol/presets.js';
import { singleStep } from './single-step.js';
import { trainJson } from './run-and-read.js';
import { median, relDiffPct, round } from '../common/stats.js';

const steps = Number(process.env.BENCH_STEPS ?? 20);
const pairs = Number(process.env.BENCH_PAIRS ?? 3);
const root = mkdtempSync(path.join(tmpdir(), 'shardwise-bench-telemetry-'));
const offConfig = path.join(root, 'spans-off.json');
writeFileSync(offConfig, JSON.stringify({ telemetry: { spans: false } }));

/** CPU ms (user + system, every thread: SwiftShader's too) of a process and its descendants, from /proc (Linux) */
function treeCpuMs(pid: number): number {
  const stat = `/proc/${pid}/stat`;
  if (!existsSync(stat)) return 0;
  let ticks = 0;
  try {
    // the fields after the command's closing parenthesis: utime and stime are the 12th and 13th
    const f = readFileSync(stat, 'utf8')
      .slice(readFileSync(stat, 'utf8').lastIndexOf(')') + 2)
      .split(' ');
    ticks = Number(f[11]) + Number(f[12]);
    for (const task of readdirSync(`/proc/${pid}/task`)) {
      const kids = readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim();
      for (const k of kids ? kids.split(' ') : []) ticks += (treeCpuMs(Number(k)) / 1000) * 100;
    }
  } catch {
    // the process exited while we read it
  }
  return (ticks * 1000) / 100; // USER_HZ is 100 on Linux
}

interface RunTimes {
  /** CPU ms per step of the run's processes (train + ranks), steps 3..N */
  cpuPerStep: number;
  /** wall ms between consecutive step lines, steps 3..N */
  wall: number[];
  /** the rank's own step_ms, steps 3..N */
  rank: number[];
  spans: boolean;
}

async function run(name: string, spans: boolean): Promise<RunTimes> {
  const args = [
    '--preset',
    'tiny',
    '--strategy',
    'ddp',
    '--world',
    '2',
    '--steps',
    String(steps),
    '--eval-interval',
    '0',
    '--checkpoint-interval',
    '0',
    '--out',
    path.join(root, name),
  ];
  if (!spans) args.push('--config', offConfig);
  const arrivals: number[] = [];
  const cpuAt: number[] = [];
  const { steps: stepLines, summary } = await trainJson(name, args, {
    onLine(m, pid) {
      if (m.type !== 'step') return;
      arrivals.push(performance.now());
      if (m.step === 2 || m.step === steps) cpuAt.push(treeCpuMs(pid));
    },
  });
  // spans on: the summary's overlap comes from them; off: there must be none
  const sawSpans = summary.type === 'summary' && summary.overlap_pct !== undefined;
  if (sawSpans !== spans) throw new Error(`run ${name}: spans were ${sawSpans ? 'on' : 'off'}, expected ${spans ? 'on' : 'off'}`);
  const wall = arrivals.slice(2).map((t, i) => t - arrivals[i + 1]!);
  const rank = stepLines.filter((m) => m.step >= 3).map((m) => m.step_ms as number);
  return { wall, rank, spans, cpuPerStep: (cpuAt[1]! - cpuAt[0]!) / (steps - 2) };
}

/**
 * The rank's own span cost, steps interleaved in one process so each pair of steps sees the same
 * load: the tiny model's training step with the trainer's compute spans (a queue mark after each
 * layer's forward and backward, drained after the step, serialised as the spans message is) and
 * without, ABBA order. Comm spans are recorded either way (workers/comm), so they are not in it.
 */
async function inProcess(pairsOfSteps: number) {
  const p = PRESETS.tiny!;
  const data = loadDataset('builtin:grammar', p.block_size);
  const rt = new Runtime(await openDevice(process.env.SHARDWISE_DEVICE));
  const cfg = { n_layer: p.n_layer, n_head: p.n_head, d_model: p.d_model, block_size: p.block_size, vocab_size: data.tokenizer.vocabSize };
  const model = new Gpt(rt, cfg, { B: p.batch_size, T: p.block_size });
  const opt = new AdamW(rt, model.params, { ...DEFAULT_ADAMW, lr: p.lr });
  model.params.writeParams(initialFullParams(cfg, 1));
  const sampler = new BatchSampler(data.train, { batchSize: p.batch_size, blockSize: p.block_size, seed: 1 });
  const timeline = new GpuTimeline(rt);
  let sink = 0;
  const step = async (i: number, spans: boolean) => {
    model.hooks.afterForward = spans ? (l) => timeline.mark('forward', l.name, 0) : undefined;
    model.hooks.afterBackward = spans ? (l) => timeline.mark('backward', l.name, 0) : undefined;
    const t0 = performance.now();
    await singleStep(model, opt, sampler, i, p.lr);
    if (spans)
      sink += JSON.stringify({
        type: 'spans',
        rank: 0,
        step: i,
        spans: (await timeline.drain()).map((s) => ({ kind: s.kind, name: s.layer, start: s.start, end: s.end, micro: s.micro })),
      }).length;
    return performance.now() - t0;
  };
  for (let i = 0; i < 3; i++) await step(i, i % 2 === 0); // compile and warm up both paths
  const on: number[] = [];
  const off: number[] = [];
  for (let k = 0; k < pairsOfSteps; k++) {
    const first = k % 2 === 0; // ABBA
    const a = await step(3 + 2 * k, first);
    const b = await step(4 + 2 * k, !first);
    (first ? on : off).push(a);
    (first ? off : on).push(b);
  }
  rt.destroy();
  const diffs = on.map((x, k) => relDiffPct(x, off[k]!));
  return {
    step_ms_on: round(median(on)),
    step_ms_off: round(median(off)),
    overhead_pct_paired: round(median(diffs)),
    steps: 2 * pairsOfSteps,
    span_bytes_per_step: Math.round(sink / pairsOfSteps),
  };
}
const rankSide = await inProcess(Number(process.env.BENCH_INPROCESS_PAIRS ?? 30));

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
process.stdout.write(
  `${JSON.stringify({
    step_ms_on: round(stepOn),
    step_ms_off: round(stepOff),
    overhead_pct: round(relDiffPct(stepOn, stepOff)),
    // each pair ran back to back, under about the same load: the median of their differences is the steadier figure on a shared machine
    overhead_pct_paired: round(median(on.map((r, i) => relDiffPct(median(r.wall), median(off[i]!.wall))))),
    cpu_ms_per_step_on: round(median(on.map((r) => r.cpuPerStep))),
    cpu_ms_per_step_off: round(median(off.map((r) => r.cpuPerStep))),
    cpu_overhead_pct_paired: round(median(on.map((r, i) => relDiffPct(r.cpuPerStep, off[i]!.cpuPerStep)))),
    rank_step_ms_on: round(median(perRun(on, 'rank'))),
    rank_step_ms_off: round(median(perRun(off, 'rank'))),
    runs: { on: perRun(on, 'wall').map(round), off: perRun(off, 'wall').map(round) },
    rank_side_in_process: rankSide,
    strategy: 'ddp',
    world: 2,
    preset: 'tiny',
    steps,
    pairs,
    mode: concurrent ? 'concurrent pairs' : 'alternating runs',
  })}\n`,
);
