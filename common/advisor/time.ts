// Predicted time of one optimizer step of a layout, from a machine's measured kernel and link
// speeds (the machine profile, profile.ts). Four parts, as the dashboard stacks them:
//   compute      every kernel a rank launches for its micro-batches (workers/model/gpt.ts's
//                forward and backward, the recompute under activation checkpointing, the
//                optimizer), each a fixed launch cost plus its work at the throughput the
//                profile measured for that op near that size. Ranks that share one device share
//                its throughput times the aggregate speedup the profile measured for that many
//                processes on it (`shared`; more ranks than it measured: its largest k's; none
//                measured: 1, the device's busy time is the sum of theirs): k processes each
//                running a whole training step at once (op 'step', at the micro-batches layouts
//                run, interpolated by the size of the rank's launches), else, in a profile
//                without them, each kernel's own figure at its size. A GPU time-slices (about 1);
//                a software adapter on a few cores can do better (one process leaves cores idle
//                while it encodes and waits on readbacks, and a second fills them) or worse (they
//                contend). What-if devices assume 1
//   comm_exposed the algorithm's bytes (ring all-reduce, reduce-scatter, all-gather, the parameter
//                server's gather and broadcast, tensor parallelism's all-reduces, the pipeline's
//                sends) at the link's bandwidth and latency, plus the staging copies every
//                collective makes (the comm layer reduces on the host) and, for each one the rank
//                waits on, a host round trip (submit, wait for the device, map the result back),
//                less what DDP and ZeRO-2/3 hide behind backward (buckets fire while earlier
//                layers still compute). Where the caller knows DDP's buckets and communication
//                hook (TimeQuery.ddp), they are followed one by one (ddp-comm.ts), with the hook's
//                payloads and its math on the device (counted in compute)
//   bubble       the device's idle time in the pipeline: (p - 1) micro-batch slots of the slowest
//                stage, for GPipe and 1F1B alike (1F1B saves memory, not time), less what other
//                stages on the same device fill (ranks sharing one adapter: none idles it).
//                Apart from it, rank_idle: each rank's own idle share of the step's window,
//                (p - 1)/(m + p - 1), what the run view measures from a rank's spans
//   host_copy    ZeRO-Offload: the gradient shard down, the new weights up, AdamW on the CPU
// Mixed precision (bf16, fp16): the matmuls and the attention at the profile's 16-bit timings
// where it has them (else its fp32 ones, said in the plan's notes), the memory-bound kernels by
// their bytes at 2 per element, and 2-byte gradients, weights and activations on the wire.
// Pure arithmetic; the inputs say which device and link each rank uses.
import { type GptConfig, gridCoords, stageRanges } from '../model-layout.js';
import { strategyOf } from '../strategies.js';
import { computeBytes, DEFAULT_PRECISION, type Precision } from '../precision.js';
import { type DdpComm, ddpBuckets, ddpTimeline } from './ddp-comm.js';
import { flopsPerToken } from './flops.js';
import type { MemoryLayout } from './memory.js';
import { STEP_SHARE_OP } from './profile.js';
import type { StepTime } from './types.js';

/** One timed launch of the profile (profile.ts KernelTiming). */
export interface KernelSample {
  op: string;
  flops: number;
  bytes: number;
  ms: number;
  /** the 16-bit format its compute tensors were stored in; absent = fp32 */
  precision?: Precision;
}

/** What the time model needs of a device. */
export interface DeviceSpeed {
  kernels: readonly KernelSample[];
  h2d_gbps: number;
  d2h_gbps: number;
  /** peak dense TFLOP/s at the run's precision, where known (MFU) */
  peak_tflops?: number;
  /**
   * The fixed cost of one launch among many recorded in a pass (its dispatch, bindings and the
   * barrier after it), ms: what a launch costs however little it computes. Absent (a profile from
   * before it was measured): the smallest timed launch of an op bounds every smaller one.
   */
  launch_ms?: number;
  /**
   * One host round trip, ms: submit what is recorded, wait for the device to reach it, map a few
   * bytes back. A collective the rank waits on pays it before any byte moves (the comm layer
   * reads device data to the host), as does every pipeline hop. Absent: 0.
   */
  sync_ms?: number;
  /** k processes on the device at once against one, by kernel size (profile.ts SharedTiming); absent: 1 */
  shared?: readonly ShareSample[];
  /**
   * The device times its FLOP-bound kernels only (an emulated device, speedOfEmulated): memory-bound
   * kernels cost it nothing. Absent: every kernel is timed.
   */
  flops_only?: boolean;
  /** a software adapter (its device is the CPU): PowerSGD's math then runs on the host by default */
  is_software?: boolean;
}

/**
 * One measured sharing point: k processes running `op` at that size together did `speedup` times
 * one's launches per second. Op 'step' is a rank's whole training step (its launches, readbacks
 * and update), its size `flops` the mean FLOPs of one of its matmul or attention launches.
 */
export interface ShareSample {
  k: number;
  op: string;
  flops: number;
  bytes: number;
  speedup: number;
  /** what was timed, e.g. 'small step B=4' */
  shape?: string;
  /** a step's: its micro-batch, one process's step alone at it, and the whole batch it is part of with one process's step at that (profile.ts SharedTiming) */
  batch?: number;
  alone_ms?: number;
  whole_batch?: number;
  whole_batch_ms?: number;
}

export interface LinkSpeed {
  gbps: number;
  latency_us: number;
}

/** Ops whose work is their FLOPs; the others are timed by the bytes they move. */
export const FLOP_OPS: ReadonlySet<string> = new Set(['matmul', 'attention']);
/**
 * AdamW's bytes touched per element it updates: fp32 param, grad and two moments read, three
 * written (7 x 4); in mixed precision the fp32 master and moments read and written (6 x 4), the
 * 16-bit gradient read and the 16-bit weight written (2 x 2): 28 either way.
 */
const ADAMW_BYTES = 28;

const sampleFormat = (k: KernelSample): Precision => k.precision ?? 'fp32';

/** Whether the device's profile timed the FLOP-bound kernels (matmul, attention) at this precision. */
export const timesPrecision = (d: DeviceSpeed, p: Precision): boolean =>
  p === 'fp32' || d.kernels.some((k) => FLOP_OPS.has(k.op) && sampleFormat(k) === p);

/**
 * ms of one launch of `op` doing `flops` / moving `bytes`. The samples are the profile's launches
 * of that op (a FLOP-bound op's at `precision` where the profile timed it, else its fp32 ones; a
 * memory-bound op's fp32 ones, its bytes saying what the precision changes). With the device's
 * launch cost known: that cost plus the work at the throughput the samples reached near that size
 * (log-log between them, the nearest one's beyond); without it: the samples' times interpolated
 * (log-log), linear beyond the largest, the smallest launch's time below it.
 */
export function kernelMs(d: DeviceSpeed, op: string, flops: number, bytes: number, precision: Precision = 'fp32'): number {
  const byFlops = FLOP_OPS.has(op);
  const work = byFlops ? flops : bytes;
  if (work <= 0 || (d.flops_only && !byFlops)) return 0;
  const metric = (k: KernelSample) => (byFlops ? k.flops : k.bytes);
  const format = byFlops && timesPrecision(d, precision) ? precision : 'fp32';
  const usable = (k: KernelSample) => metric(k) > 0 && sampleFormat(k) === format;
  let samples = d.kernels.filter((k) => k.op === op && usable(k));
  // an op the profile did not time runs at the rate of the ops of its kind (FLOP- or memory-bound) it did time
  if (samples.length === 0) samples = d.kernels.filter((k) => FLOP_OPS.has(k.op) === byFlops && usable(k));
  if (samples.length === 0) throw new Error(`the machine profile times no kernel to estimate ${op} from`);
  const launch = d.launch_ms;
  if (launch !== undefined) {
    // throughput (work per ms beyond the launch cost) of each sample; a sample no longer than a launch bounds the rate from below by its whole time
    const pts = samples.map((k) => ({ w: metric(k), rate: metric(k) / Math.max(k.ms - launch, k.ms / 2) })).sort((a, b) => a.w - b.w);
    return launch + work / interpolate(pts, work, (p) => p.rate);
  }
  const pts = samples.map((k) => ({ w: metric(k), ms: k.ms })).sort((a, b) => a.w - b.w);
  const first = pts[0]!;
  const last = pts.at(-1)!;
  if (work <= first.w) return first.ms;
  if (work >= last.w) return (last.ms * work) / last.w;
  return interpolate(pts, work, (p) => p.ms);
}

/**
 * The aggregate throughput of k ranks running `op` at this size together on device d, over one
 * rank's: the profile's samples at the largest k it measured up to k (the op's own, else those of
 * its kind, FLOP- or memory-bound), log-log between their sizes, the nearest one's beyond. 1 for a
 * rank alone, and where nothing was measured (a time-slicing GPU's figure).
 */
export function shareSpeedup(d: DeviceSpeed, op: string, flops: number, bytes: number, k: number): number {
  if (k < 2 || !d.shared?.length) return 1;
  const upTo = d.shared.filter((x) => x.k <= k && x.op !== STEP_SHARE_OP);
  if (upTo.length === 0) return 1;
  const kk = Math.max(...upTo.map((x) => x.k));
  const byFlops = FLOP_OPS.has(op);
  const metric = (x: ShareSample) => (byFlops ? x.flops : x.bytes);
  const atK = upTo.filter((x) => x.k === kk && metric(x) > 0);
  let samples = atK.filter((x) => x.op === op);
  if (samples.length === 0) samples = atK.filter((x) => FLOP_OPS.has(x.op) === byFlops);
  if (samples.length === 0) return 1;
  const pts = samples.map((x) => ({ w: metric(x), s: x.speedup })).sort((a, b) => a.w - b.w);
  return interpolate(pts, Math.max(byFlops ? flops : bytes, Number.MIN_VALUE), (p) => p.s);
}

/**
 * The aggregate throughput of k ranks each running its whole step on device d at once, over one
 * rank's alone, where the profile measured it (op 'step'): its samples at the largest k measured
 * up to k, log-log by the step's size (the mean FLOPs of one matmul or attention launch), the
 * nearest one's beyond. Undefined for a rank alone and where no step was measured.
 */
export function stepShareSpeedup(d: DeviceSpeed, flopsPerLaunch: number, k: number): number | undefined {
  const steps = (d.shared ?? []).filter((x) => x.op === STEP_SHARE_OP && x.k <= k && x.flops > 0);
  if (k < 2 || steps.length === 0) return undefined;
  const kk = Math.max(...steps.map((x) => x.k));
  const pts = steps
    .filter((x) => x.k === kk)
    .map((x) => ({ w: x.flops, s: x.speedup }))
    .sort((a, b) => a.w - b.w);
  return interpolate(pts, Math.max(flopsPerLaunch, Number.MIN_VALUE), (p) => p.s);
}

/**
 * How a rank's step at a part `part` (micro-batch over the whole batch, at most 1) of the batch runs
 * against what the kernel model makes of it: the profile's steps alone at micro-batches of the
 * shape nearest the model (by the mean FLOPs of a launch at the whole batch), each as
 *   (its step alone / the whole batch's step alone) / (the model's step at that part / at the whole batch)
 * log-log by the part between them and 1 at the whole batch, the nearest one's below them. On a
 * software adapter a smaller step can use its cores and caches better than the model's per-kernel
 * rates (timed at the whole batch's sizes) say: at small's sizes here a step of 4 sequences took
 * 0.36 of one of 8, not half. 1 where no step was measured alone beside its whole batch.
 * `stepMsAt(b)`: the model's single-rank step (forward and backward of every layer) at micro-batch b.
 */
/** The profile's steps timed alone at a micro-batch beside their whole batch's step: what microBatchScale (and the plan's note) go by. */
export const aloneStepSamples = (d: DeviceSpeed): ShareSample[] =>
  (d.shared ?? []).filter(
    (x) => x.op === STEP_SHARE_OP && x.flops > 0 && x.batch && x.whole_batch && x.batch < x.whole_batch && x.alone_ms && x.whole_batch_ms,
  );

export function microBatchScale(
  d: DeviceSpeed,
  part: number,
  batch: number,
  wholeFlopsPerLaunch: number,
  stepMsAt: (b: number) => number,
): number {
  if (part >= 1) return 1;
  const steps = aloneStepSamples(d);
  if (steps.length === 0) return 1;
  // the shape: the one whose whole batch's launches are nearest the model's in size
  const wholeOf = (x: ShareSample) => (x.flops * x.whole_batch!) / x.batch!;
  const dist = (x: ShareSample) => Math.abs(Math.log(wholeOf(x) / Math.max(wholeFlopsPerLaunch, Number.MIN_VALUE)));
  const nearest = steps.reduce((a, b) => (dist(b) < dist(a) ? b : a));
  // its micro-batches: the steps compared with the same whole-batch measurement
  const same = steps.filter((x) => x.whole_batch === nearest.whole_batch && x.whole_batch_ms === nearest.whole_batch_ms);
  const whole = stepMsAt(batch);
  const pts = same
    .map((x) => {
      const p = x.batch! / x.whole_batch!;
      return { w: p, c: x.alone_ms! / x.whole_batch_ms! / (stepMsAt(p * batch) / whole) };
    })
    .filter((x) => Number.isFinite(x.c) && x.c > 0);
  if (pts.length === 0) return 1;
  pts.push({ w: 1, c: 1 });
  pts.sort((a, b) => a.w - b.w);
  return interpolate(pts, part, (x) => x.c);
}

/** the size a step's sharing is interpolated by: the mean FLOPs of its matmul and attention launches (0 without any) */
function flopsPerFlopLaunch(ls: readonly Launch[]): number {
  let flops = 0;
  let n = 0;
  for (const l of ls)
    if (FLOP_OPS.has(l.op)) {
      flops += l.n * l.flops;
      n += l.n;
    }
  return n > 0 ? flops / n : 0;
}

/** y at work w, log-log between the points around it, the nearest point's y outside them */
function interpolate<P extends { w: number }>(pts: P[], w: number, y: (p: P) => number): number {
  if (w <= pts[0]!.w) return y(pts[0]!);
  if (w >= pts.at(-1)!.w) return y(pts.at(-1)!);
  const i = pts.findIndex((p) => p.w >= w);
  const a = pts[i - 1]!;
  const b = pts[i]!;
  if (b.w === a.w) return y(b);
  const f = Math.log(w / a.w) / Math.log(b.w / a.w);
  return Math.exp(Math.log(y(a)) + f * (Math.log(y(b)) - Math.log(y(a))));
}

/** A launch the rank makes: op, its FLOPs and bytes, how many times per micro-batch, and the passes it runs in (each pass one launch). */
interface Launch {
  op: string;
  flops: number;
  bytes: number;
  n: number;
  passes?: number;
}

/**
 * One micro-batch's forward and backward launches on a rank computing `blocks` blocks (1/TP of
 * each), the embedding and/or the head, as workers/model/gpt.ts records them; E bytes per element
 * of the compute tensors. Multi-pass kernels (layernorm backward's row and column passes, the
 * two-pass bias column sums, attention backward's scores then inputs, the embedding's backward)
 * pay one launch per pass.
 */
function microBatchLaunches(
  m: Omit<GptConfig, 'n_head'>,
  o: { B: number; T: number; TP: number; blocks: number; first: boolean; last: boolean; checkpointing: boolean; E: number },
) {
  const { B, T, TP, blocks, E } = o;
  const mm = (M: number, N: number, K: number, n = 1): Launch => ({
    op: 'matmul',
    flops: 2 * M * N * K,
    bytes: E * (M * K + K * N + M * N),
    n,
  });
  const ew = (op: string, elems: number, arrays: number, n = 1, passes = 1): Launch => ({
    op,
    flops: 0,
    bytes: E * elems * arrays,
    n,
    passes,
  });
  const C = m.d_model;
  const N = B * T;
  const Vl = Math.ceil(m.vocab_size / TP);
  const blockFwd: Launch[] = [
    ew('layernorm', N * C, 3, 2),
    mm(N, (3 * C) / TP, C),
    { op: 'attention', flops: (4 * B * T * T * C) / TP, bytes: (E * N * 4 * C + 4 * B * T * T) / TP, n: 1 },
    mm(N, C, C / TP),
    mm(N, C, (4 * C) / TP),
    ew('gelu', (N * 4 * C) / TP, 2),
    mm(N, C, (4 * C) / TP),
    // the residual stream copied into each row-parallel output before it accumulates
    ew('residual', N * C, 2, 2),
  ];
  // backward: the input's and the weight's gradient of each linear, its bias column sums (two passes)
  const blockBwd: Launch[] = [
    ew('layernorm', N * C, 5, 2, 4),
    mm(N, C, (3 * C) / TP, 2),
    ew('bias', (N * 3 * C) / TP, 1, 1, 2),
    { op: 'attention', flops: (8 * B * T * T * C) / TP, bytes: (E * N * 7 * C + 4 * 2 * B * T * T) / TP, n: 1, passes: 2 },
    mm(N, C / TP, C, 2),
    ew('bias', N * C, 1, 1, 2),
    mm(N, (4 * C) / TP, C, 2),
    ew('bias', (N * 4 * C) / TP, 1, 1, 2),
    ew('gelu', (N * 4 * C) / TP, 3),
    mm(N, C, (4 * C) / TP, 2),
    ew('bias', N * C, 1, 1, 2),
  ];
  const fwd: Launch[] = [];
  const bwd: Launch[] = [];
  /** backward's launches by kind of layer (gpt.ts's layers: the embedding, a block, the head) */
  const bwdOf = { embedding: [] as Launch[], block: [...blockBwd, ...(o.checkpointing ? blockFwd : [])], head: [] as Launch[] };
  for (let l = 0; l < blocks; l++) {
    fwd.push(...blockFwd);
    bwd.push(...bwdOf.block);
  }
  if (o.first) {
    fwd.push(ew('encoder', N * C, 3));
    bwdOf.embedding.push(ew('encoder', N * C, 3, 1, 2));
    bwd.push(...bwdOf.embedding);
  }
  if (o.last) {
    // ln_f, the tied LM head, the cross-entropy and its gradient, the loss sum
    fwd.push(ew('layernorm', N * C, 3), mm(N, Vl, C), ew('crossentropy', N * Vl, 2), ew('reduce', N, 1));
    bwdOf.head.push(mm(N, C, Vl, 2), ew('layernorm', N * C, 5, 1, 4));
    bwd.push(...bwdOf.head);
  }
  return { fwd, bwd, bwdOf };
}

/**
 * ms of the launches on device d; with `sharedBy` ranks on it, each launch over their aggregate
 * speedup at its size: the rank's part of the device's busy time when they all run.
 */
const launchesMs = (d: DeviceSpeed, ls: Launch[], p: Precision, sharedBy = 1) =>
  ls.reduce(
    (s, l) =>
      s +
      (l.n * (kernelMs(d, l.op, l.flops, l.bytes, p) + ((l.passes ?? 1) - 1) * (d.launch_ms ?? 0))) /
        shareSpeedup(d, l.op, l.flops, l.bytes, sharedBy),
    0,
  );

/** ms to move `bytes` over a link once (one message) */
const xfer = (l: LinkSpeed, bytes: number) => l.latency_us / 1000 + bytes / (l.gbps * 1e6);
/** ring all-reduce of `bytes` over n ranks: 2(n-1) steps of bytes/n */
export const allReduceMs = (l: LinkSpeed, bytes: number, n: number) => (n <= 1 ? 0 : 2 * (n - 1) * xfer(l, bytes / n));
/** reduce-scatter or all-gather of `bytes` (the whole buffer) over n ranks */
export const halfRingMs = (l: LinkSpeed, bytes: number, n: number) => (n <= 1 ? 0 : (n - 1) * xfer(l, bytes / n));

export interface TimeQuery {
  model: GptConfig;
  batch_size: number;
  seq_len: number;
  layout: MemoryLayout;
  /** the device of each rank (same object = same device: its ranks take turns on it) */
  devices: readonly DeviceSpeed[];
  /** the link between the layout's ranks (the slowest one its collectives cross) */
  link: LinkSpeed;
  /** parameters Ψ of the whole model and of each rank's share (elements) */
  params: number;
  rankParams: readonly number[];
  /**
   * DDP's bucket caps and communication hook, where the caller knows them (bench:lan): the step's
   * communication then follows the buckets and the hook (ddp-comm.ts). Absent: the whole-model
   * estimate (a plain all-reduce less backward).
   */
  ddp?: DdpComm;
}

export interface TimePrediction extends StepTime {
  tokens_per_s: number;
  /** model FLOPs per step (flops.ts: 6Ψ + attention per token, no recomputation): what MFU divides */
  model_flops: number;
}

export function predictStepTime(q: TimeQuery): TimePrediction {
  const { model: m, layout: lay } = q;
  const s = strategyOf(lay.strategy)!;
  const g = s.grid({ world: lay.world, tp: lay.tp, pp: lay.pp, dp: lay.dp });
  const M = lay.micro_batches;
  const B = q.batch_size / g.dp / M;
  const T = q.seq_len;
  const C = m.d_model;
  const N = lay.world;
  const stages = stageRanges(m, g.pp);
  const shareOf = new Map<DeviceSpeed, number>();
  for (let r = 0; r < N; r++) shareOf.set(q.devices[r]!, (shareOf.get(q.devices[r]!) ?? 0) + 1);
  const checkpointing = lay.activation_checkpointing === true;
  const offload = lay.offload_optimizer === true;
  const precision = lay.precision ?? DEFAULT_PRECISION;
  /** bytes per element of the compute copy: weights, gradients, activations, and so on the wire */
  const E = computeBytes(precision);

  // one rank's forward and backward of the whole model at micro-batch b, alone (microBatchScale's model side)
  const wholeLaunches = (b: number) => {
    const x = microBatchLaunches(m, { B: b, T, TP: 1, blocks: m.n_layer, first: true, last: true, checkpointing: false, E });
    return [...x.fwd, ...x.bwd];
  };
  const wholeFlops = flopsPerFlopLaunch(wholeLaunches(q.batch_size));
  const wholeStepMs = (d: DeviceSpeed) => (b: number) => launchesMs(d, wholeLaunches(b), precision);

  // per rank: one micro-batch's forward and backward, and the optimizer, on its device shared k ways
  const perRank = Array.from({ length: N }, (_, r) => {
    const c = gridCoords(g, r);
    const st = stages[c.pp]!;
    const d = q.devices[r]!;
    const k = shareOf.get(d)!;
    const { fwd, bwd, bwdOf } = microBatchLaunches(m, {
      B,
      T,
      TP: g.tp,
      blocks: st.to - st.from,
      first: st.first,
      last: st.last,
      checkpointing,
      E,
    });
    // the elements this rank's optimizer updates on the device
    const owned = q.rankParams[r]!;
    const sharded = s.zeroStage > 0 ? owned / N : g.dp > 1 && s.pipelined ? owned / g.dp : owned;
    const updates = offload ? 0 : s.optimizerRanks === 'rank0' && r !== 0 ? 0 : sharded;
    const opt = updates > 0 ? kernelMs(d, 'adamw', 0, ADAMW_BYTES * updates) : 0;
    // the device shared k ways: the k ranks' whole steps together at the speedup measured for steps of this size, else launch by launch
    const stepShare = stepShareSpeedup(d, flopsPerFlopLaunch([...fwd, ...bwd]), k);
    // a micro-batch smaller than the batch: its launches as fast as the profile's steps at that part of a batch ran
    const scale = microBatchScale(d, B / q.batch_size, q.batch_size, wholeFlops, wholeStepMs(d));
    const ms = (ls: Launch[], sharedBy = 1) => scale * launchesMs(d, ls, precision, sharedBy);
    const shared = (ls: Launch[]) => (stepShare !== undefined ? ms(ls) / stepShare : ms(ls, k));
    const optShared =
      updates === 0 ? 0 : stepShare !== undefined ? opt / stepShare : opt / shareSpeedup(d, 'adamw', 0, ADAMW_BYTES * updates, k);
    return {
      fwd: ms(fwd),
      bwd: ms(bwd),
      opt,
      // the same launches as this rank's part of its device's busy time, the device shared k ways
      fwdShared: shared(fwd),
      bwdShared: shared(bwd),
      optShared,
      /** each kind of layer's backward, as fwdShared (DDP's bucket timeline) */
      bwdLayerShared: {
        embedding: shared(bwdOf.embedding),
        block: shared(bwdOf.block),
        head: shared(bwdOf.head),
      },
      k,
      d,
      owned,
      sharded,
    };
  });
  const busy = (x: (typeof perRank)[number]) => M * (x.fwd + x.bwd) + x.opt;
  const busyShared = (x: (typeof perRank)[number]) => M * (x.fwdShared + x.bwdShared) + x.optShared;
  const slowest = perRank.reduce((a, b) => (busy(a) >= busy(b) ? a : b));
  // ranks sharing a device run at once on it: its busy time, their work at its throughput times their aggregate speedup, bounds the step
  const deviceBusy = new Map<DeviceSpeed, number>();
  for (const x of perRank) deviceBusy.set(x.d, (deviceBusy.get(x.d) ?? 0) + busyShared(x));
  const busiest = Math.max(...deviceBusy.values());
  /** a rank's kernels run slower by the ranks it shares its device with, less their aggregate speedup */
  const k = slowest.k;
  const link = q.link;
  const d0 = perRank[0]!.d;
  /** staging copies of a collective's buffer: down before, up after (the comm layer reduces on the host) */
  const staging = (bytes: number) => bytes / (d0.d2h_gbps * 1e6) + bytes / (d0.h2d_gbps * 1e6);
  /** a host round trip the rank waits on (a collective's readback, a pipeline hop) */
  const sync = d0.sync_ms ?? 0;
  /** the gradients (and weights) of the whole model on the wire */
  const P4 = E * q.params;

  const compute = Math.max(busiest, busy(slowest));
  /** a communication hook's math on the device (DDP with a known hook: q.ddp) */
  let hookCompute = 0;
  let comm = 0;
  let bubble = 0;
  let hostCopy = 0;
  const backward = k * M * slowest.bwdShared;
  // the data-parallel family's gradient (and weight) traffic, as the table says the strategy moves it (one rank, and the
  // model-parallel strategies, whose traffic follows below: none here)
  const traffic =
    s.splitsModel || s.oneRank ? 'none' : s.optimizerRanks === 'rank0' ? 'parameter-server' : s.bucketAllReduce ? 'buckets' : s.zeroStage;
  switch (traffic) {
    case 'none':
      break;
    case 'parameter-server':
      // rank 0 receives every gradient and sends every weight, one peer after the other; each rank reads its gradients, rank 0 its new weights
      comm = 2 * (N - 1) * xfer(link, P4) + 2 * staging(P4) + 2 * sync;
      break;
    case 'buckets': {
      if (q.ddp) {
        // the buckets and the hook known: follow them through the last micro-batch's backward (ddp-comm.ts)
        const t = ddpTimeline({
          buckets: ddpBuckets(m, q.ddp, E),
          ...(q.ddp.compression ? { compression: q.ddp.compression } : {}),
          E,
          layerMs: (l) =>
            k * (l === 0 ? slowest.bwdLayerShared.embedding : l > m.n_layer ? slowest.bwdLayerShared.head : slowest.bwdLayerShared.block),
          layers: Array.from({ length: m.n_layer + 2 }, (_, i) => m.n_layer + 1 - i),
          // PyTorch's hooks run their math on the device: at its matmul rate
          hookMs: (flops) => kernelMs(slowest.d, 'matmul', flops, 0, precision),
          allReduceMs: (bytes) => allReduceMs(link, bytes, N),
          world: N,
          ...(q.ddp.host ? { host: q.ddp.host } : {}),
          ...(precision !== 'fp32' ? { halfDtype: precision === 'bf16' ? ('bfloat16' as const) : ('float16' as const) } : {}),
          d2hMs: (bytes) => bytes / (d0.d2h_gbps * 1e6),
          h2dMs: (bytes) => bytes / (d0.h2d_gbps * 1e6),
          syncMs: sync,
          hookOnDevice: (q.ddp.compression?.math ?? (d0.is_software ? 'host' : 'device')) === 'device',
        });
        hookCompute = t.hook_device_ms;
        comm = Math.max(0, t.end_ms - t.backward_ms - hookCompute);
        break;
      }
      // buckets all-reduce while backward computes the earlier layers; the last bucket (the embedding) cannot hide, nor its readback
      const total = allReduceMs(link, P4, N) + staging(P4);
      const lastBucket = allReduceMs(link, E * (m.vocab_size + m.block_size) * C, N) + sync;
      comm = Math.max(total - backward, lastBucket);
      break;
    }
    case 1:
      // after backward: the gradients read and reduce-scattered, the updated shard read and all-gathered
      comm = 2 * halfRingMs(link, P4, N) + staging(P4) + 2 * sync;
      break;
    case 2: {
      // the buckets reduce-scatter during backward (the last one's readback is exposed); the updated shard read and all-gathered
      const scatter = halfRingMs(link, P4, N) + staging(P4 / 2);
      comm = Math.max(scatter - backward, 0) + halfRingMs(link, P4, N) + staging(P4 / 2) + 2 * sync;
      break;
    }
    case 3: {
      // weights gathered before each layer's forward and again before its backward (prefetched one layer ahead); gradients
      // reduce-scattered during backward (the last bucket's readback exposed); the updated shard read to the host
      const gather = halfRingMs(link, P4, N) + staging(P4 / 2);
      const scatter = halfRingMs(link, P4, N) + staging(P4 / 2);
      const forward = k * M * slowest.fwdShared;
      comm =
        Math.max(M * gather - forward, gather / (m.n_layer + 2)) +
        Math.max(M * gather + scatter - backward, gather / (m.n_layer + 2)) +
        2 * sync;
      break;
    }
  }
  if (g.tp > 1) {
    // Megatron: per block two all-reduces of (B,T,C) forward and two backward, plus the embedding's and the LM head's input
    // gradient; the vocab-parallel cross-entropy's three of (B,T) row statistics. With checkpointing each block's
    // recompute all-reduces twice more and gathers its partitioned input once. Every one is awaited where it is
    // recorded: a host round trip each, and the grad norm's
    const act = E * B * T * C;
    const blocks = Math.max(...stages.map((x) => x.to - x.from));
    const wide = 4 * blocks + 2 + (checkpointing ? 2 * blocks : 0);
    const gathers = checkpointing ? blocks : 0;
    const perMicro =
      wide * (allReduceMs(link, act, g.tp) + staging(act) + sync) +
      gathers * (halfRingMs(link, act, g.tp) + staging(act) + sync) +
      3 * (allReduceMs(link, 4 * B * T, g.tp) + sync);
    comm += M * perMicro + sync;
  }
  if (g.pp > 1) {
    // every micro-batch's activation goes forward and its gradient back across each boundary; each stage waits for
    // its device after every forward and backward of a micro-batch (the output is read to be sent)
    const act = E * B * T * C;
    const hop = xfer(link, act) + staging(act) + sync;
    // the schedule's span on the slowest stage: (m + p - 1) slots; a device shared by the stages fills its idle slots with their work
    const slot = slowest.fwd + slowest.bwd + 2 * hop;
    bubble = Math.max(0, (M + g.pp - 1) * slot + slowest.opt - compute);
    comm += M * 2 * hop;
    // the tied wte: its gradient summed over the first and last stage
    comm += allReduceMs(link, (E * m.vocab_size * C) / g.tp, 2) + staging((E * m.vocab_size * C) / g.tp) + sync;
  }
  if (g.dp > 1 && s.pipelined) {
    // 3d: ZeRO-1 over the data-parallel group of the stage's (TP shard of its) parameters
    const bytes = E * slowest.owned;
    comm += 2 * halfRingMs(link, bytes, g.dp) + staging(bytes) + 2 * sync;
  }
  if (offload) {
    // the reduced gradient shard down, AdamW on the host, the new weights up
    const shard = E * slowest.sharded;
    hostCopy = sync + shard / (d0.d2h_gbps * 1e6) + shard / (d0.h2d_gbps * 1e6) + (ADAMW_BYTES * slowest.sharded) / (HOST_GBPS * 1e6);
  }
  const step = compute + hookCompute + comm + bubble + hostCopy;
  const tokens = q.batch_size * T;
  return {
    step_ms: step,
    compute_ms: compute + hookCompute,
    comm_exposed_ms: comm,
    bubble_ms: bubble,
    ...(g.pp > 1 ? { rank_idle_ms: rankIdleFraction(g.pp, M) * step } : {}),
    host_copy_ms: hostCopy,
    tokens_per_s: step > 0 ? (tokens * 1000) / step : 0,
    model_flops: tokens * flopsPerToken(m, T).model,
  };
}

/** The host's memory bandwidth as CPU AdamW streams it (GB/s): a conservative figure for one core of a desktop CPU. */
export const HOST_GBPS = 5;

const sample = (op: string, flops: number, bytes: number, ms: number, precision: Precision = 'fp32'): KernelSample => ({
  op,
  flops,
  bytes,
  ms,
  ...(precision !== 'fp32' ? { precision } : {}),
});

/**
 * The speeds a plan assumes where no profile was measured (`shardwise profile` stores one):
 * SwiftShader on the 2-core development VM (24 GiB), measured there on a quiet machine. A
 * launch costs 0.3 ms and a host round trip 0.15 ms (a 64-element kernel 200 times in one pass;
 * the same kernel, its 64 floats read back and written again). Matmuls run far below their large
 * size rate when small: 64 x 64 x 64 (0.52 MFLOP) took 2.4 ms, 256 x 256 x 256 (33.6 MFLOP)
 * 21 ms (1.6 GFLOP/s, bench:engine), the largest ~2 GFLOP/s (a register-blocked matmul); attention, untimed, runs
 * at the matmuls' rate; memory-bound kernels stream ~2 GB/s. Loopback TCP with bufferutil
 * ~0.8 GB/s. Every plan made from them says so in its notes.
 */
export const DEFAULT_DEVICE_SPEED: DeviceSpeed = {
  kernels: [
    sample('matmul', 5.24e5, 0, 2.4),
    sample('matmul', 4.19e6, 0, 2.9),
    sample('matmul', 3.36e7, 0, 21),
    sample('matmul', 2e9, 0, 1000),
    sample('layernorm', 0, 1e6, 0.8),
    sample('layernorm', 0, 1e9, 500),
  ],
  h2d_gbps: 2,
  d2h_gbps: 2,
  launch_ms: 0.3,
  sync_ms: 0.15,
};
export const DEFAULT_LINK: LinkSpeed = { gbps: 0.8, latency_us: 100 };

/**
 * A what-if device from its peak: matmuls at half the peak, memory-bound kernels at 20 GB/s per
 * peak TFLOP/s (about an H100's HBM bandwidth against its fp32 peak), 10 µs per launch, PCIe 4
 * x16 copies (25 GB/s). Assumptions, stated in the plan's notes. `tflops` is the peak at the
 * plan's precision: the FLOP-bound samples are marked with it.
 */
export function speedOfPeak(tflops: number, precision: Precision = 'fp32'): DeviceSpeed {
  const flops = tflops * 1e12 * 0.5;
  const bytesPerS = tflops * 20e9;
  return {
    kernels: [
      sample('matmul', flops * 1e-5, 0, 0.01, precision),
      sample('matmul', flops, 0, 1000, precision),
      sample('attention', flops * 1e-5, 0, 0.01, precision),
      sample('attention', flops * 0.5, 0, 1000, precision),
      sample('layernorm', 0, bytesPerS * 1e-5, 0.01),
      sample('layernorm', 0, bytesPerS, 1000),
    ],
    h2d_gbps: 25,
    d2h_gbps: 25,
    peak_tflops: tflops,
  };
}

/**
 * An emulated device at a stated TFLOP/s (workers/gpu/emulated-times.ts, benchmarks): its clock
 * charges each layer pass its matmul and attention FLOPs at exactly that rate, with no launch cost
 * (emulate's overhead_ms 0), and nothing for the memory-bound kernels or the optimizer
 * (optimizer_ms 0); a communication hook's math at the same rate. What it does not emulate is the
 * host's: DEFAULT_DEVICE_SPEED's host round trip, and copies taken as free (they move the real
 * model's bytes, a few hundred KB for the proxies bench:lan runs).
 */
export function speedOfEmulated(tflops: number): DeviceSpeed {
  const perMs = tflops * 1e9;
  return {
    kernels: [sample('matmul', perMs, 0, 1), sample('attention', perMs, 0, 1)],
    h2d_gbps: Infinity,
    d2h_gbps: Infinity,
    launch_ms: 0,
    sync_ms: DEFAULT_DEVICE_SPEED.sync_ms,
    flops_only: true,
    peak_tflops: tflops,
  };
}

/** A rank's idle share of a pipeline step's window: (p - 1) of the (m + p - 1) slots, GPipe and 1F1B alike. */
export function rankIdleFraction(stages: number, micro: number): number {
  return stages > 1 ? (stages - 1) / (micro + stages - 1) : 0;
}
