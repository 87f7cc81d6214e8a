// The rank side of a strategy (its row in common/strategies.ts says what it is to the user and
// the predictions): what it does around the model's step. The trainer runs, per optimizer
// step: zeroGrad; for each micro-batch: forward, beforeBackward(isLast), backward; then
// finishGradients() and optimizerStep(lr). The model never sees the network: strategies use
// its hooks and its parameter store.
import type { ProcessGroup } from '../comm/index.js';
import type { Runtime } from '../gpu/runtime.js';
import type { Gpt } from '../model/gpt.js';
import type { AdamW } from '../optim/adamw.js';
import type { GradCompressionReport, HookState } from '../comm-hooks/index.js';

export interface StrategyContext {
  rt: Runtime;
  model: Gpt;
  /** the optimizer, where this rank keeps one (DP: rank 0 only) */
  opt: AdamW | null;
  pg: ProcessGroup;
}

export interface RankStrategy {
  readonly name: string;
  /** make every rank start from the same weights (rank 0's) */
  setup(): Promise<void>;
  /** called before each micro-batch's backward; isLast: the gradients are synchronised on this one */
  beforeBackward(isLast: boolean): void;
  /** all gradient communication of the step is done and the reduced gradients are in place */
  finishGradients(): Promise<void>;
  /**
   * update the weights with learning rate lr, from gradients that carry the loss scale
   * `gradScale` (fp16; 1 otherwise); returns the global gradient norm (unscaled, before
   * clipping): inf or NaN when the gradients overflowed (an fp16 optimizer then skipped the update)
   */
  optimizerStep(lr: number, gradScale?: number): Promise<number>;
  /** the whole optimizer state for a checkpoint (collective where it is sharded); null where this rank keeps none */
  optimizerState(): Promise<OptimizerState | null>;
  /** continue from a checkpoint's optimizer state (each rank takes what it keeps) */
  loadOptimizerState(s: OptimizerState): void;
  /**
   * Mixed precision: take the whole model's fp32 weights (this rank's layout) as the optimizer's
   * master weights, and derive the 16-bit weights from them. Absent: the strategy trains fp32 only.
   */
  loadMasterWeights?(values: Map<string, Float32Array>): void;
  /** bytes this strategy keeps in host memory (ZeRO-Offload), reported beside the device bytes */
  hostBytes?(): Record<string, number>;
  /**
   * The whole weights gathered from every rank (a collective), where no rank holds them all
   * (ZeRO-3, tensor parallel); then the forward pass is collective too, and every rank evaluates.
   */
  fullParams?(): Promise<Map<string, Float32Array>>;
  /** what the strategy adds to the run summary (DDP: its bucket count, its compression hook's report) */
  summary?():
    | { buckets?: number; grad_compression?: GradCompressionReport }
    | Promise<{ buckets?: number; grad_compression?: GradCompressionReport }>;
  /** a communication hook's state (PowerSGD: error feedback, Q, iteration), this rank's own */
  commHookState?(): Promise<HookState | null>;
  loadCommHookState?(s: HookState): void;
}

export interface OptimizerState {
  m: Map<string, Float32Array>;
  v: Map<string, Float32Array>;
  /** AdamW's step count t */
  step: number;
  /** mixed precision: the fp32 master weights (what a checkpoint saves as the parameters) */
  master?: Map<string, Float32Array>;
}

/** Checkpoint state of an unsharded AdamW (null where the rank has none). */
export async function replicatedOptimizerState(opt: AdamW | null): Promise<OptimizerState | null> {
  if (!opt) return null;
  const s = await opt.readState();
  return { ...s, step: opt.step, ...(opt.master ? { master: await opt.readMaster() } : {}) };
}

/**
 * This rank's AdamW with no gradient communication: the single strategy's step, and the
 * optimizer of a pipeline stage that has no data-parallel replicas, whose squared gradient norm
 * `normSq` also sums the other stages' (and tensor-parallel shards') gradients (grad-norm.ts).
 */
export class LocalOptimizer implements RankStrategy {
  readonly name = 'local optimizer';
  constructor(
    private readonly c: { rt: Runtime; opt: AdamW },
    private readonly normSq?: () => Promise<number>,
  ) {}
  async setup() {}
  beforeBackward() {}
  async finishGradients() {}
  async optimizerStep(lr: number, gradScale = 1) {
    const { rt, opt } = this.c;
    const sq = this.normSq ? await this.normSq() : null;
    if (sq === null) opt.recordGradNorm();
    else rt.write(opt.gradSumSq, Float32Array.of(sq));
    opt.recordStep(lr, gradScale);
    return sq === null ? opt.readGradNorm(gradScale) : opt.settle(sq, gradScale);
  }
  optimizerState() {
    return replicatedOptimizerState(this.c.opt);
  }
  loadOptimizerState(s: OptimizerState) {
    this.c.opt.writeState(s, s.step);
  }
  loadMasterWeights(values: Map<string, Float32Array>) {
    this.c.opt.writeMaster(values);
  }
}

/** Every rank takes rank 0's weights (DDP's initial broadcast). */
export async function broadcastParams(c: Pick<StrategyContext, 'rt' | 'pg'> & { model: Pick<Gpt, 'params'> }, labels = {}) {
  const store = c.model.params;
  const all = await store.readParams();
  const flat = new Float32Array(store.flatElems);
  for (const r of store.refs) flat.set(all.get(r.name)!, r.offset);
  await c.pg.broadcast(flat, { root: 0, labels: { what: 'initial weights', ...labels } }).wait();
  for (const r of store.refs) c.rt.write(r.param, flat.subarray(r.offset, r.offset + r.numel));
}
