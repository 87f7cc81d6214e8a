// The summary of a finished run, one builder for `train --json` (its last line, summary.json)
// and for runs the controller launches through the API: the same keys whichever started it.
import { TABLE } from '../../common/strategies.js';
import { precisionOf, type RankMessage, type TrainJob } from '../../workers/protocol/train.js';
import { type BubbleMeter, theoreticalBubble } from './bubble.js';
import { meanTflops, type RankTflops } from '../../common/advisor/rank-tflops.js';

type Done = Extract<RankMessage, { type: 'done' }>;

export interface RunSummaryInput {
  job: TrainJob;
  runDir: string;
  /** each rank's 'done' message */
  done: Map<number, Done>;
  /** tokens/s of every step (the first, which compiles, is left out of the mean) */
  tokensPerS: number[];
  /** each step's TFLOP/s per rank (steps whose ranks reported their FLOPs) */
  tflops?: Record<string, RankTflops>[];
  /** loss of the last step this process saw (NaN when it saw none, e.g. a resume with no new step) */
  lastLoss: number;
  lastVal?: number;
  /** pipeline runs: the stages' measured idle time */
  bubble?: BubbleMeter | null;
  /** what the job's resolution told the user (config keys accepted without effect, with why) */
  notes?: string[];
}

export function runSummary(s: RunSummaryInput): Record<string, unknown> {
  const par = s.job.parallel;
  const strategy = par?.strategy ?? 'single';
  const world = par?.world ?? 1;
  const ranks = [...s.done].sort((a, b) => a[0] - b[0]);
  const d0 = s.done.get(0)!;
  const t = s.tokensPerS;
  const mean = t.length > 1 ? t.slice(1).reduce((a, b) => a + b, 0) / (t.length - 1) : (t[0] ?? 0);
  const perRank = (f: (m: Done) => unknown) => Object.fromEntries(ranks.map(([r, m]) => [String(r), f(m)]));
  const tflops = meanTflops(s.tflops ?? []);
  const overlaps = ranks.map(([, m]) => m.overlap_pct).filter((x): x is number => x !== undefined);
  return {
    type: 'summary',
    run_dir: s.runDir,
    steps: d0.steps,
    final_loss: Number.isNaN(s.lastLoss) ? d0.final_loss : s.lastLoss,
    ...(s.lastVal !== undefined ? { val_loss: s.lastVal } : {}),
    ...(s.notes?.length ? { notes: s.notes } : {}),
    strategy,
    world,
    precision: precisionOf(s.job),
    // mixed precision: rank 0's final fp16 loss scale and the steps every rank skipped for an overflow
    ...(d0.loss_scale !== undefined ? { loss_scale: d0.loss_scale } : {}),
    ...(d0.skipped_steps !== undefined ? { skipped_steps: d0.skipped_steps } : {}),
    // and each rank's own count: the overflow verdict is global, so they agree (the data-parallel test checks it)
    ...(d0.skipped_steps !== undefined && world > 1 ? { skipped_steps_by_rank: perRank((m) => m.skipped_steps ?? null) } : {}),
    params: d0.params,
    tokens_per_s: mean,
    // achieved model / hardware TFLOP/s per rank and MFU where the peak is known, over the steps after the first
    ...(tflops ? { tflops } : {}),
    peak_bytes: perRank((m) => m.peak_bytes),
    ...(world > 1 ? { bytes_moved_per_step: perRank((m) => m.bytes_moved_per_step) } : {}),
    ...(world > 1 && ranks.some(([, m]) => m.shm_bytes_per_step !== undefined)
      ? { shm_bytes_per_step: perRank((m) => m.shm_bytes_per_step ?? 0) }
      : {}),
    ...(overlaps.length ? { overlap_pct: overlaps.reduce((a, b) => a + b, 0) / overlaps.length } : {}),
    ...(d0.buckets !== undefined ? { buckets: d0.buckets } : {}),
    // gradient compression (DDP's hook, ZeRO's 16-bit reduce-scatter) on every rank (PowerSGD's error feedback is each rank's own)
    ...(d0.grad_compression ? { grad_compression: perRank((m) => m.grad_compression ?? null) } : {}),
    // benchmarks: the device was emulated (workers/gpu/emulated-device.ts); every rank's report
    ...(s.job.emulate ? { emulated: { spec: s.job.emulate, ranks: perRank((m) => m.emulated ?? null) } } : {}),
    ...(s.bubble && par
      ? {
          bubble: {
            measured: s.bubble.measured(),
            theory: theoreticalBubble(par.world, par.micro_batches),
            schedule: par.schedule ?? '1f1b',
            micro_batches: par.micro_batches,
          },
          p2p_bytes_per_step: perRank((m) => m.p2p_bytes_per_step ?? 0),
          embedding_allreduce_bytes_per_step: perRank((m) => m.embedding_allreduce_bytes_per_step ?? 0),
          stages: ranks.map(([r, m]) => ({ rank: r, ...m.stage })),
        }
      : {}),
    // a grid with a data-parallel axis beside the model-parallel ones (3d) is reported with its stages
    ...(par && TABLE[par.strategy].knobs.has('dp')
      ? { grid: TABLE[par.strategy].grid(par), stages: ranks.map(([r, m]) => ({ rank: r, ...m.stage })) }
      : {}),
  };
}
