// Predicted device bytes of one rank of a layout, per memory category, as the rank's allocator
// counts them (content bytes of every live tensor; workers/gpu/allocator.ts). Every buffer is
// allocated once, when the rank builds its model and strategy, so the peak is that sum. This
// file restates, as arithmetic, what each piece of the rank allocates (tests/dist/advisor-
// memory.test.ts checks it against real runs):
//   params, grads, optimizer  workers/model/params.ts (the arenas; ZeRO-3's ring buffers),
//                             workers/optim/{adamw,sharded-adamw}.ts, workers/parallel/zero{1,2,3}.ts
//   activations               workers/model/activations.ts allocateActivations, once per model
//                             instance: one for data parallelism, one per micro-batch in flight on a
//                             pipeline stage (workers/parallel/pipeline.ts, pipeline-schedule.ts)
//   comm                      ZeRO-2/3's gradient bucket rings (params.ts placeGradsInBuckets)
//   workspace                 the backward scratch (allocateScratch), the loss scalars of every
//                             model instance, the gradient-norm scalars, and the kernels' shared
//                             scratch (workers/kernels/util.ts `scratch`: one buffer per name and size)
// Dimensions as llm.c names them: B micro-batch rows, T tokens, C d_model, NH heads, V vocabulary,
// TP tensor-parallel ranks.
// Element sizes follow the run's precision (common/precision.ts): fp32 stores everything in 4
// bytes. bf16/fp16 (mixed precision) store the compute copy of the weights, the gradients, the
// activations the kernels take at 16 bits (the layer outputs, the residual stream, the logits),
// the backward scratch and the gradient buckets in 2 bytes (H below); what the kernels keep in f32
// stays 4 bytes (layernorm statistics, attention probabilities and their gradient, losses, partial
// sums) and token ids are u32. The optimizer holds the fp32 master copy and AdamW's two fp32
// moments (12 bytes per element it updates), and ZeRO-Offload's host side the master, the moments
// and the 16-bit gradient shard, as common/model-state.ts counts them.
import type { BytesByCategory } from '../memory-categories.js';
import { type GptConfig, type GridShape, gridCoords, rankTensors, stageRanges } from '../model-layout.js';
import { paddedVocab, shardBounds, SLOT_ELEMS, slotElems, slotElemsAt, vocabAlign } from '../padding.js';
import { computeBytes, DEFAULT_PRECISION, type Precision } from '../precision.js';
import { strategyOf, type StrategyName } from '../strategies.js';

/** f32 statistics, losses, u32 token ids */
const F32 = 4;

/** The layout knobs memory depends on (LayoutSchema's, resolved). */
export interface MemoryLayout {
  strategy: StrategyName;
  world: number;
  tp?: number;
  pp?: number;
  dp?: number;
  micro_batches: number;
  schedule?: 'gpipe' | '1f1b';
  offload_optimizer?: boolean;
  activation_checkpointing?: boolean;
  /** tp/3d with checkpointing: each TP rank keeps 1/TP of each checkpointed input (default on) */
  partition_activations?: boolean;
  /** ZeRO-2/3 gradient bucket cap in MiB (default 0.25, the job's) */
  bucket_cap_mb?: number;
  /** the run's precision (default fp32) */
  precision?: Precision;
}

export interface MemoryQuery {
  model: GptConfig;
  /** global batch (sequences per step) and sequence length */
  batch_size: number;
  seq_len: number;
  layout: MemoryLayout;
}

export interface RankMemoryPrediction {
  device: BytesByCategory & { total: number };
  /** ZeRO-Offload: the shard's fp32 master weights, moments and reduced gradients on the host */
  host: number;
}

export const DEFAULT_BUCKET_CAP_MB = 0.25;

/** One parameter tensor in the rank's flat layout: its place (slot-aligned) and size. */
interface Slot {
  name: string;
  layer: number | null;
  offset: number;
  numel: number;
}

/** The rank's tensors at the run's precision (wte's rows padded as the engine pads them), each in whole slots of `slotPrecision`. */
function flatLayout(
  m: Omit<GptConfig, 'n_head'>,
  g: GridShape,
  rank: number,
  precision: Precision,
  slotPrecision: Precision,
): { slots: Slot[]; flatElems: number } {
  let offset = 0;
  const slots = rankTensors(m, g, rank, precision).map(({ tensor, numel }) => {
    const s = { name: tensor.name, layer: tensor.layer, offset, numel };
    offset += slotElems(numel, slotPrecision);
    return s;
  });
  return { slots, flatElems: offset };
}

const span = (ss: Slot[]) => (ss.length ? Math.max(...ss.map((s) => s.offset + s.numel)) - Math.min(...ss.map((s) => s.offset)) : 0);
const padSlots = (n: number) => Math.ceil(n / SLOT_ELEMS) * SLOT_ELEMS;

/** Layer in backward order: 0 = head (ln_f), 1..L = blocks L-1..0, L+1 = embedding (params.ts backwardLayer). */
function backwardLayer(s: Slot, L: number): number {
  if (s.name.startsWith('transformer.ln_f.')) return 0;
  return s.layer !== null ? L - s.layer : L + 1;
}

/** ZeRO-2/3: two ring buffers of whole-layer buckets up to the cap, and one for the embedding (elements). */
function gradBucketElems(slots: Slot[], L: number, capBytes: number, elemBytes: number): number[] {
  const layers: Slot[][] = Array.from({ length: L + 2 }, () => []);
  for (const s of slots) layers[backwardLayer(s, L)]!.push(s);
  const groups: Slot[][] = [];
  let cur: Slot[] = [];
  for (let l = 0; l <= L; l++) {
    const next = [...cur, ...layers[l]!];
    if (cur.length > 0 && span(next) * elemBytes > capBytes) {
      groups.push(cur);
      cur = [...layers[l]!];
    } else cur = next;
  }
  if (cur.length) groups.push(cur);
  const ring = Math.max(SLOT_ELEMS, ...groups.map((g) => padSlots(span(g))));
  return [...new Array<number>(Math.min(2, groups.length)).fill(ring), padSlots(span(layers[L + 1]!))];
}

/** ZeRO-3: the embedding's own buffer and two ring buffers of whole layers (elements). */
function paramRingElems(slots: Slot[], L: number): number[] {
  const byLayer: Slot[][] = Array.from({ length: L + 2 }, () => []);
  for (const s of slots) byLayer[L + 1 - backwardLayer(s, L)]!.push(s);
  const ring = Math.max(...byLayer.slice(1).map((ss) => padSlots(span(ss))));
  return [ring, ring, padSlots(span(byLayer[0]!))];
}

/** Rows per chunk of the two-pass column sums (kernels/bias-backward.ts colsumChunkRows) and the chunks of M rows. */
const colsumChunks = (M: number) => Math.max(1, Math.ceil(M / Math.max(16, Math.ceil(M / 64))));
/** reduce.ts reducePartials */
const reducePartials = (n: number) => Math.max(1, Math.min(n, 1024));

/** The kernels' shared scratch: one buffer per (name, size) (kernels/util.ts). */
class KernelScratch {
  private readonly keys = new Set<string>();
  elems = 0;
  add(name: string, numel: number) {
    const key = `${name}:${numel}`;
    if (this.keys.has(key)) return;
    this.keys.add(key);
    this.elems += Math.max(1, numel);
  }
  /** elements of the compute precision (H bytes each) among `elems`: the matmul's transposed copies */
  halfElems = 0;
  /** matmul.ts: a wide row-major b (not transposed, N >= 512, K*N >= 256*512) is streamed transposed through a scratch copy (vec4 path only) */
  matmul(M: number, N: number, K: number, transA: boolean, transB: boolean) {
    const vec4 = K % 4 === 0 && K > 0 && (!transA || M % 4 === 0) && (transB || N % 4 === 0);
    if (vec4 && !transB && N >= 512 && K * N >= 256 * 512 && !this.keys.has(`matmul.bT:${K * N}`)) this.halfElems += K * N;
    if (vec4 && !transB && N >= 512 && K * N >= 256 * 512) this.add('matmul.bT', K * N);
    this.add('dummy4', 4);
  }
  /** linear.ts linearBackward: dx = dy @ W, dW += dy^T @ x, db += colsum(dy) */
  linearBackward(rows: number, C: number, OC: number, bias: boolean) {
    this.matmul(rows, C, OC, false, false);
    this.matmul(OC, C, rows, true, false);
    if (bias) this.add('colsum.partial', colsumChunks(rows) * OC);
  }
}

/** Activation slots of a pipeline stage: micro-batches in flight (pipeline-schedule.ts maxInFlight). */
export function activationSlots(schedule: 'gpipe' | '1f1b', p: number, stage: number, m: number): number {
  return schedule === 'gpipe' ? m : Math.min(p - stage, m);
}

/** Predicted peak device bytes of `rank`, per category. Throws where the layout does not fit the model (check it with the strategy's validate first). */
export function predictRankMemory(q: MemoryQuery, rank: number): RankMemoryPrediction {
  const { model: m, layout: lay } = q;
  const s = strategyOf(lay.strategy);
  if (!s) throw new Error(`unknown strategy ${lay.strategy}`);
  const g = s.grid({ world: lay.world, tp: lay.tp, pp: lay.pp, dp: lay.dp });
  const c = gridCoords(g, rank);
  const TP = g.tp;
  const M = lay.micro_batches;
  const B = q.batch_size / g.dp / M;
  const T = q.seq_len;
  if (!Number.isInteger(B) || B < 1) throw new Error(`batch ${q.batch_size} does not split into ${g.dp} x ${M} micro-batches`);
  const C = m.d_model;
  const NHl = m.n_head / TP;
  const L = m.n_layer;
  const BT = B * T;
  const stage = stageRanges(m, g.pp)[c.pp]!;
  const blocks = stage.to - stage.from;
  const precision = lay.precision ?? DEFAULT_PRECISION;
  // this rank's vocabulary rows: padded to a multiple of TP, of 4 TP at 16 bits (common/padding.ts)
  const Vl = paddedVocab(m.vocab_size, TP, vocabAlign(precision)) / TP;
  const checkpointing = lay.activation_checkpointing === true;
  const partitioned = checkpointing && TP > 1 && lay.partition_activations !== false;
  const offload = lay.offload_optimizer === true;
  // the model-parallel strategies' flat layout at the engine's slots (128 elements at 16 bits), so
  // 3d's ZeRO-1 shard is the allocator's (as common/model-state.ts counts it); the data-parallel
  // family's ZeRO shards stay on the Ψ formula's 64-element slots (within a slot per tensor of the engine's)
  const slotPrecision = s.splitsModel ? precision : DEFAULT_PRECISION;
  const { slots, flatElems } = flatLayout(m, g, rank, precision, slotPrecision);
  const numel = slots.reduce((a, x) => a + x.numel, 0);
  /** bytes of one element at the compute precision */
  const H = computeBytes(precision);
  /** bytes per element the optimizer updates: AdamW's two fp32 moments, and the fp32 master copy in mixed precision */
  const K = precision === 'fp32' ? 2 * F32 : 3 * F32;

  // --- activations of one model instance (activations.ts allocateActivations), in bytes: the
  // layer outputs at the compute precision, the layernorm statistics (4 per row) and the attention
  // probabilities in f32
  const blockSet = H * (3 * BT * C + (3 * BT * C) / TP + (BT * C) / TP + (8 * BT * C) / TP) + F32 * (4 * BT + B * NHl * T * T);
  const resid = H * (partitioned ? 2 * BT * C + (blocks * BT * C) / TP : (blocks + 1) * BT * C);
  // last stage: ln_f's output, its statistics, the logits, the losses and the targets; first stage: the token ids
  const ends = (stage.last ? H * (BT * C + BT * Vl) + F32 * (2 * BT + 2 * BT) : 0) + (stage.first ? F32 * BT : 0);
  const perInstance = resid + (checkpointing ? blockSet : blocks * blockSet) + ends;
  const instances = s.pipelined ? activationSlots(lay.schedule ?? '1f1b', g.pp, c.pp, M) : 1;

  // --- workspace: backward scratch (shared; tp's partial products at the compute precision, its
  // row statistics in f32), two loss scalars per instance, norms, kernel scratch (f32 elements)
  const scratchBytes = H * (2 * BT * C + (8 * BT * C) / TP + (TP > 1 ? BT * C : 0)) + F32 * (TP > 1 ? 3 * BT : 0);
  let workspace = 2 * instances;
  const k = new KernelScratch();
  const rows = BT;
  k.linearBackward(rows, C, (3 * C) / TP, true); // attn.c_attn
  k.linearBackward(rows, C / TP, C, true); // attn.c_proj
  k.linearBackward(rows, C, (4 * C) / TP, true); // mlp.c_fc
  k.linearBackward(rows, (4 * C) / TP, C, true); // mlp.c_proj
  k.add('layernorm.partial', 2 * colsumChunks(rows) * C);
  k.add('attention.dpreatt', B * NHl * T * T);
  if (stage.last) {
    k.linearBackward(rows, C, Vl, false); // the tied LM head
    k.add('reduce.partial', reducePartials(BT)); // the loss sum
  }
  if (stage.first) k.add('encoder.links', 2 * BT);

  // --- model states and the optimizer's norm scalars
  let params = H * numel;
  let grads = H * numel;
  let optimizer = 0;
  let comm = 0;
  let host = 0;
  const adamw = () => {
    optimizer = K * numel;
    workspace += 1;
    k.add('reduce.partial', reducePartials(flatElems));
  };
  /** ZeRO-1/2/3's sharded AdamW over this rank's shard of N (its moments, its norm) */
  const sharded = (N: number, me: number) => {
    const b = shardBounds(flatElems, N, slotElemsAt(slotPrecision));
    const n = b[me + 1]! - b[me]!;
    if (offload) {
      host = (3 * F32 + H) * n; // fp32 master weights, two moments, the reduced gradient shard (at the compute precision)
      return n;
    }
    optimizer = n > 0 ? K * n : 0;
    workspace += 1;
    if (n > 0) k.add('reduce.partial', reducePartials(n));
    return n;
  };
  /** the norm over TP shards and replicated tensors apart (grad-norm.ts GradSquares) */
  const gradSquares = (tensorParallel: boolean, skipWte: boolean) => {
    if (!tensorParallel) {
      workspace += 1;
      const skip = skipWte ? slotElems(slots[0]!.numel, slotPrecision) : 0;
      k.add('reduce.partial', reducePartials(flatElems - skip));
      return;
    }
    workspace += 2;
    for (const x of slots) if (!(skipWte && x.name === 'transformer.wte.weight')) k.add('reduce.partial', reducePartials(x.numel));
  };
  const capBytes = Math.max((lay.bucket_cap_mb ?? DEFAULT_BUCKET_CAP_MB) * 2 ** 20, 1);
  if (s.pipelined) {
    // a stage's optimizer: ZeRO-1 across its data-parallel replicas, else AdamW with the norm over the TP shards and the stages
    if (g.dp > 1) sharded(g.dp, c.dp);
    else {
      adamw();
      gradSquares(s.tensorParallel, stage.last && !stage.first);
    }
  } else if (s.zeroStage === 0) {
    if (s.optimizerRanks === 'every' || rank === 0) adamw();
    if (s.tensorParallel) gradSquares(true, false);
  } else if (s.zeroStage === 1) {
    sharded(lay.world, rank);
    // mixed-precision ZeRO-Offload keeps only the 16-bit weights on the device (model-state.ts): its
    // gradients leave backward through zero2's bucket buffers (workers/train/data-parallel-engine.ts)
    if (offload && precision !== 'fp32') {
      grads = 0;
      comm = H * gradBucketElems(slots, L, capBytes, H).reduce((a, x) => a + x, 0);
    }
  } else {
    const n = sharded(lay.world, rank);
    grads = offload ? 0 : H * Math.max(1, n);
    comm = H * gradBucketElems(slots, L, capBytes, H).reduce((a, x) => a + x, 0);
    if (s.zeroStage === 3) {
      params = H * (Math.max(1, n) + paramRingElems(slots, L).reduce((a, x) => a + x, 0));
      if (offload) throw new Error('zero3 has no optimizer offload here (ZeRO-Offload runs zero1 or zero2)');
    }
  }
  workspace += k.elems;
  const device = {
    params,
    grads,
    optimizer,
    activations: instances * perInstance,
    comm,
    workspace: scratchBytes + F32 * (workspace - k.halfElems) + H * k.halfElems,
    total: 0,
  };
  device.total = device.params + device.grads + device.optimizer + device.activations + device.comm + device.workspace;
  return { device, host };
}

/** Every rank's prediction. */
export function predictMemory(q: MemoryQuery): RankMemoryPrediction[] {
  return Array.from({ length: q.layout.world }, (_, r) => predictRankMemory(q, r));
}
