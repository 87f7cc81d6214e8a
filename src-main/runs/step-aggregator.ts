// One line per optimizer step from the ranks' messages: each rank reports its share of the
// global mean loss (they sum to it), rank 0 the gradient norm and learning rate; the step's
// time is the slowest rank's; each rank's achieved TFLOP/s (and MFU where its peak is known) are
// over that time (common/advisor/rank-tflops.ts).
import type { RankMessage } from '../../workers/protocol/train.js';
import { type RankTflops, stepTflops } from '../../common/advisor/rank-tflops.js';

type StepMsg = Extract<RankMessage, { type: 'step' }>;

export interface StepLine {
  type: 'step';
  step: number;
  loss: number;
  lr: number;
  grad_norm: number;
  tokens_per_s: number;
  step_ms: number;
  /** per rank: achieved model and hardware TFLOP/s, and MFU where the adapter's peak is known */
  tflops?: Record<string, RankTflops>;
  memory: Record<string, Record<string, number>>;
  /** fp16: the loss scale of this step's backward (rank 0's: every rank scales alike) */
  loss_scale?: number;
  /** mixed precision: the update was skipped (the gradients overflowed on some rank) */
  skipped?: boolean;
  /** mixed precision: steps skipped so far */
  skipped_steps?: number;
}

export class StepAggregator {
  private readonly pending = new Map<number, Map<number, StepMsg>>();
  lastLoss = NaN;
  /** fp32 peak TFLOP/s of each rank's adapter, where known (set at its ready message) */
  readonly peaks = new Map<number, number>();

  constructor(private readonly world: number) {}

  /** Returns the step's line once every rank reported it. */
  add(rank: number, m: StepMsg): StepLine | null {
    let byRank = this.pending.get(m.step);
    if (!byRank) this.pending.set(m.step, (byRank = new Map()));
    byRank.set(rank, m);
    if (byRank.size < this.world) return null;
    this.pending.delete(m.step);
    const ranks = [...byRank.entries()].sort((a, b) => a[0] - b[0]);
    // sum in rank order: the same float result whatever order the messages came in
    let loss = 0;
    for (const [, x] of ranks) loss += x.loss;
    const r0 = byRank.get(0)!;
    const stepMs = Math.max(...ranks.map(([, x]) => x.step_ms));
    this.lastLoss = loss;
    const flops = new Map(ranks.flatMap(([r, x]) => (x.flops ? [[r, x.flops] as const] : [])));
    return {
      type: 'step',
      step: m.step,
      loss,
      lr: r0.lr,
      grad_norm: r0.grad_norm,
      tokens_per_s: (r0.tokens * 1000) / stepMs,
      step_ms: stepMs,
      ...(flops.size === ranks.length ? { tflops: stepTflops(flops, stepMs, this.peaks) } : {}),
      memory: Object.fromEntries(ranks.map(([r, x]) => [String(r), x.memory])),
      ...(r0.loss_scale !== undefined ? { loss_scale: r0.loss_scale } : {}),
      ...(r0.skipped !== undefined ? { skipped: r0.skipped } : {}),
      ...(r0.skipped_steps !== undefined ? { skipped_steps: r0.skipped_steps } : {}),
    };
  }
}
