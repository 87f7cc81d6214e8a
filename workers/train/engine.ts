// What the one training loop (trainer.ts) asks of a rank, whatever the strategy: the loop owns
// the job checks, data, samplers, learning rate, messages, eval/checkpoint cadence and the end of
// the run; an engine owns the model replica or stage, its communication and its optimizer.
// Two engines: data-parallel (single, dp, ddp, zero1/2/3 with offload, tp: every rank runs the
// whole depth of the model) and pipeline (pp, 3d: every rank runs one stage).
import type { FlopsShare } from '../../common/advisor/flops.js';
import type { CommSpan, World } from '../comm/index.js';
import type { Batch, Dataset } from '../data/index.js';
import type { AdapterReport } from '../gpu/device.js';
import type { Runtime } from '../gpu/runtime.js';
import type { GptConfig } from '../model/config.js';
import type { AdamwConfig } from '../optim/adamw.js';
import type { HookState } from '../comm-hooks/index.js';
import type { OptimizerState } from '../parallel/strategy.js';
import type { Grid } from '../protocol/grid.js';
import type { ParallelSpec, RankMessage, TrainJob } from '../protocol/train.js';
import type { SpansMessage } from '../telemetry/spans-message.js';

export type Emit = (m: RankMessage) => void | Promise<void>;

/** What the loop has settled before an engine starts. */
export interface RunSetup {
  job: TrainJob;
  par: ParallelSpec;
  config: GptConfig;
  data: Dataset;
  /** the ranks' grid (strategy table): grid.dp replicas split the global batch */
  grid: Grid;
  /** global batch rows and sequence length */
  B: number;
  T: number;
  adamw: AdamwConfig;
  emit: Emit;
  /** joins the world (rank 0 hosts the store); the loop leaves it at the end of the run. An engine calls it once, when its order needs. */
  join(): Promise<World>;
}

/** The model's whole tensors and optimizer state in the single-device layout (a checkpoint). */
export interface WholeModel {
  params: Map<string, Float32Array>;
  state: OptimizerState;
  /** a gradient-compression hook's state, every data-parallel rank's in rank order (where the hook keeps one) */
  hooks?: HookState[];
}

type DoneMessage = Extract<RankMessage, { type: 'done' }>;

export interface RankEngine {
  readonly rank: number;
  readonly rt: Runtime;
  readonly adapter: AdapterReport;
  /** parameter count the ready and done messages report */
  readonly paramCount: number;
  /** the rows this rank reads of every global batch: data-parallel replica `rank` of `size` */
  readonly replica: { rank: number; size: number };
  /** the part of the model's FLOPs this rank computes: its stage's blocks, the LM head on the last, 1/tp of each */
  readonly flopsShare: FlopsShare;
  /**
   * take the whole model's weights (initial or a checkpoint's) and optimizer state, and a
   * checkpoint's hook states (every data-parallel rank's; each takes its own); then setup()
   */
  load(params: Map<string, Float32Array>, state: OptimizerState | null, hooks?: readonly HookState[] | null): void;
  /** collective start: every replica from the same weights, groups the step needs */
  setup(): Promise<void>;
  zeroGrad(): void;
  /**
   * forward and backward of the step's micro-batches (micro-batch k of this rank's rows from
   * `batch(k)`), gradients synchronised; fp16: backward seeded with the loss x lossScale
   */
  forwardBackward(batch: (micro: number) => Batch, lossScale?: number): Promise<void>;
  /**
   * the update at learning rate lr of gradients that carry lossScale; returns the global gradient
   * norm before clipping, unscaled: inf or NaN when they overflowed (fp16 skipped the update)
   */
  optimizerStep(lr: number, lossScale?: number): Promise<number>;
  /** this rank's share of the step's global mean loss (the controller sums the ranks' shares) */
  readLoss(): Promise<number>;
  /** mean validation loss over the batches where this rank reports it, null elsewhere (collective where the engine needs every rank) */
  evaluate(batches: readonly Batch[]): Promise<number | null>;
  /** the whole model on the rank that saves it, null elsewhere (collective) */
  gatherCheckpoint(): Promise<WholeModel | null>;
  /** the step's spans message from its communication spans (null when spans are off) */
  stepSpans(step: number, comm: readonly CommSpan[]): Promise<SpansMessage | null>;
  /** bytes kept in host memory (ZeRO-Offload), reported beside the device bytes */
  hostBytes(): Record<string, number>;
  /** what the engine adds to the done message, over the run's `steps` steps */
  summary(steps: number): Partial<DoneMessage> | Promise<Partial<DoneMessage>>;
}
