// Predicted time of one optimizer step of a layout, from a machine's measured kernel and link
// speeds (the machine profile, profile.ts). Four parts, as the dashboard stacks them:
//   compute      every kernel a rank launches for its micro-batches (workers/model/gpt.ts's
//                forward and backward, the recompute under activation checkpointing, the
//                optimizer), each timed from the profile's launches of the same op at the
//                nearest sizes; ranks that share one device share its throughput
//   comm_exposed the algorithm's bytes (ring all-reduce, reduce-scatter, all-gather, the parameter
//                server's gather and broadcast, tensor parallelism's all-reduces, the pipeline's
//                sends) at the link's bandwidth and latency, plus the staging copies every
//                collective makes (the comm layer reduces on the host), less what DDP and ZeRO-2/3
//                hide behind backward (buckets fire while earlier layers still compute)
//   bubble       the pipeline's idle time: (p - 1) micro-batch slots of the slowest stage, for
//                GPipe and 1F1B alike (1F1B saves memory, not time)
//   host_copy    ZeRO-Offload: the gradient shard down, the new weights up, AdamW on the CPU
// Pure arithmetic; the inputs say which device and link each rank uses.
import { type GptShape, gridCoords, stageRanges } from '../model-layout.js';
import { strategyOf } from '../strategies.js';
import { flopsPerToken } from './flops.js';
import type { MemoryLayout } from './memory.js';
import type { StepTime } from './types.js';

/** One timed launch of the profile (profile.ts KernelTiming). */
export interface KernelSample {
  op: string;
  flops: number;
  bytes: number;
  ms: number;
}

/** What the time model needs of a device. */
export interface DeviceSpeed {
  kernels: readonly KernelSample[];
  h2d_gbps: number;
  d2h_gbps: number;
  /** peak dense TFLOP/s at the run's precision, where known (MFU) */
  peak_tflops?: number;
}

export interface LinkSpeed {
  gbps: number;
  latency_us: number;
}

/** Ops whose work is their FLOPs; the others are timed by the bytes they move. */
const FLOP_OPS = new Set(['matmul', 'attention']);
/** CPU AdamW (ZeRO-Offload): bytes touched per element (param, grad, two moments read; three written) */
const ADAMW_BYTES = 28;

/** ms of one launch of `op` doing `flops` / moving `bytes`: interpolated between the profile's launches of that op (log-log), linear beyond the largest, the smallest launch's time below it (launch overhead). */
export function kernelMs(d: DeviceSpeed, op: string, flops: number, bytes: number): number {
  const byFlops = FLOP_OPS.has(op);
  const work = byFlops ? flops : bytes;
  if (work <= 0) return 0;
  const metric = (k: KernelSample) => (byFlops ? k.flops : k.bytes);
  let samples = d.kernels.filter((k) => k.op === op && metric(k) > 0);
  // an op the profile did not time runs at the rate of the ops of its kind (FLOP- or memory-bound) it did time
  if (samples.length === 0) samples = d.kernels.filter((k) => FLOP_OPS.has(k.op) === byFlops && metric(k) > 0);
  if (samples.length === 0) throw new Error(`the machine profile times no kernel to estimate ${op} from`);
  const pts = samples.map((k) => ({ w: metric(k), ms: k.ms })).sort((a, b) => a.w - b.w);
  const first = pts[0]!;
  const last = pts.at(-1)!;
  if (work <= first.w) return first.ms;
  if (work >= last.w) return (last.ms * work) / last.w;
  const i = pts.findIndex((p) => p.w >= work);
  const a = pts[i - 1]!;
  const b = pts[i]!;
  if (b.w === a.w) return b.ms;
  const f = Math.log(work / a.w) / Math.log(b.w / a.w);
  return Math.exp(Math.log(a.ms) + f * (Math.log(b.ms) - Math.log(a.ms)));
}

/** A launch the rank makes: op, its FLOPs and bytes, how many times per micro-batch. */
interface Launch {
  op: string;
  flops: number;
  bytes: number;
  n: number;
}

const mm = (M: number, N: number, K: number, n = 1): Launch => ({
  op: 'matmul',
  flops: 2 * M * N * K,
  bytes: 4 * (M * K + K * N + M * N),
  n,
});
const ew = (op: string, elems: number, arrays: number, n = 1): Launch => ({ op, flops: 0, bytes: 4 * elems * arrays, n });

/** One micro-batch's forward and backward launches on a rank computing `blocks` blocks (1/TP of each), the embedding and/or the head. */
function microBatchLaunches(
  m: GptShape,
  o: { B: number; T: number; TP: number; blocks: number; first: boolean; last: boolean; checkpointing: boolean },
) {
  const { B, T, TP, blocks } = o;
  const C = m.d_model;
  const N = B * T;
  const Vl = Math.ceil(m.vocab / TP);
  const blockFwd: Launch[] = [
    ew('layernorm', N * C, 3, 2),
    mm(N, (3 * C) / TP, C),
    { op: 'attention', flops: (4 * B * T * T * C) / TP, bytes: (4 * (N * 4 * C + B * T * T)) / TP, n: 1 },
    mm(N, C, C / TP),
    mm(N, C, (4 * C) / TP),
    ew('gelu', (N * 4 * C) / TP, 2),
    mm(N, C, (4 * C) / TP),
    ew('residual', N * C, 3, 2),
  ];
  // backward: the input's and the weight's gradient of each linear, the bias column sums
  const blockBwd: Launch[] = [
    ew('layernorm', N * C, 5, 2),
    mm(N, C, (3 * C) / TP, 2),
    { op: 'attention', flops: (8 * B * T * T * C) / TP, bytes: (4 * (N * 7 * C + 2 * B * T * T)) / TP, n: 1 },
    mm(N, C / TP, C, 2),
    mm(N, (4 * C) / TP, C, 2),
    ew('gelu', (N * 4 * C) / TP, 3),
    mm(N, C, (4 * C) / TP, 2),
    ew('bias', N * C * (1 + 1 + 7 / TP), 1),
  ];
  const fwd: Launch[] = [];
  const bwd: Launch[] = [];
  for (let l = 0; l < blocks; l++) {
    fwd.push(...blockFwd);
    bwd.push(...blockBwd, ...(o.checkpointing ? blockFwd : []));
  }
  if (o.first) {
    fwd.push(ew('encoder', N * C, 3));
    bwd.push(ew('encoder', N * C, 3));
  }
  if (o.last) {
    fwd.push(ew('layernorm', N * C, 3), mm(N, Vl, C), ew('crossentropy', N * Vl, 2));
    bwd.push(ew('crossentropy', N * Vl, 2), mm(N, C, Vl, 2), ew('layernorm', N * C, 5));
  }
  return { fwd, bwd };
}

const launchesMs = (d: DeviceSpeed, ls: Launch[]) => ls.reduce((s, l) => s + l.n * kernelMs(d, l.op, l.flops, l.bytes), 0);

/** ms to move `bytes` over a link once (one message) */
const xfer = (l: LinkSpeed, bytes: number) => l.latency_us / 1000 + bytes / (l.gbps * 1e6);
/** ring all-reduce of `bytes` over n ranks: 2(n-1) steps of bytes/n */
export const allReduceMs = (l: LinkSpeed, bytes: number, n: number) => (n <= 1 ? 0 : 2 * (n - 1) * xfer(l, bytes / n));
/** reduce-scatter or all-gather of `bytes` (the whole buffer) over n ranks */
export const halfRingMs = (l: LinkSpeed, bytes: number, n: number) => (n <= 1 ? 0 : (n - 1) * xfer(l, bytes / n));

export interface TimeQuery {
  model: GptShape & { n_head: number };
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

  // per rank: one micro-batch's forward and backward, and the optimizer, on its device shared k ways
  const perRank = Array.from({ length: N }, (_, r) => {
    const c = gridCoords(g, r);
    const st = stages[c.pp]!;
    const d = q.devices[r]!;
    const k = shareOf.get(d)!;
    const { fwd, bwd } = microBatchLaunches(m, { B, T, TP: g.tp, blocks: st.to - st.from, first: st.first, last: st.last, checkpointing });
    // the elements this rank's optimizer updates on the device
    const owned = q.rankParams[r]!;
    const sharded = s.zeroStage > 0 ? owned / N : g.dp > 1 && s.pipelined ? owned / g.dp : owned;
    const updates = offload ? 0 : s.optimizerRanks === 'rank0' && r !== 0 ? 0 : sharded;
    const opt = updates > 0 ? kernelMs(d, 'adamw', 0, ADAMW_BYTES * updates) : 0;
    return { fwd: launchesMs(d, fwd), bwd: launchesMs(d, bwd), opt, k, d, owned, sharded };
  });
  const busy = (x: (typeof perRank)[number]) => M * (x.fwd + x.bwd) + x.opt;
  const slowest = perRank.reduce((a, b) => (busy(a) >= busy(b) ? a : b));
  // ranks sharing a device run one after the other on it: its busy time bounds the step
  const deviceBusy = new Map<DeviceSpeed, number>();
  for (const x of perRank) deviceBusy.set(x.d, (deviceBusy.get(x.d) ?? 0) + busy(x));
  const busiest = Math.max(...deviceBusy.values());
  /** a rank's kernels run slower by the ranks it shares its device with */
  const k = slowest.k;
  const link = q.link;
  const d0 = perRank[0]!.d;
  /** staging copies of a collective's buffer: down before, up after (the comm layer reduces on the host) */
  const staging = (bytes: number) => bytes / (d0.d2h_gbps * 1e6) + bytes / (d0.h2d_gbps * 1e6);
  const P4 = 4 * q.params;

  const compute = Math.max(busiest, busy(slowest));
  let comm = 0;
  let bubble = 0;
  let hostCopy = 0;
  const backward = k * M * slowest.bwd;
  switch (lay.strategy) {
    case 'single':
      break;
    case 'dp':
      // rank 0 receives every gradient and sends every weight, one peer after the other
      comm = 2 * (N - 1) * xfer(link, P4) + 2 * staging(P4);
      break;
    case 'ddp': {
      // buckets all-reduce while backward computes the earlier layers; the last bucket (the embedding) cannot hide
      const total = allReduceMs(link, P4, N) + staging(P4);
      const lastBucket = allReduceMs(link, 4 * (m.vocab + m.block_size) * C, N);
      comm = Math.max(total - backward, lastBucket);
      break;
    }
    case 'zero1':
      comm = 2 * halfRingMs(link, P4, N) + staging(P4);
      break;
    case 'zero2': {
      const scatter = halfRingMs(link, P4, N) + staging(P4 / 2);
      comm = Math.max(scatter - backward, 0) + halfRingMs(link, P4, N) + staging(P4 / 2);
      break;
    }
    case 'zero3': {
      // weights gathered before each layer's forward and again before its backward (prefetched one layer ahead); gradients reduce-scattered during backward
      const gather = halfRingMs(link, P4, N) + staging(P4 / 2);
      const scatter = halfRingMs(link, P4, N) + staging(P4 / 2);
      const forward = k * M * slowest.fwd;
      comm = Math.max(M * gather - forward, gather / (m.n_layer + 2)) + Math.max(M * gather + scatter - backward, gather / (m.n_layer + 2));
      break;
    }
    case 'tp':
    case 'pp':
    case '3d':
      break;
  }
  if (g.tp > 1) {
    // Megatron: per block two all-reduces of (B,T,C) forward and two backward, plus the embedding's and the cross-entropy's
    const act = 4 * B * T * C;
    const blocks = Math.max(...stages.map((x) => x.to - x.from));
    const perMicro = (4 * blocks + 2) * (allReduceMs(link, act, g.tp) + staging(act)) + 3 * allReduceMs(link, 4 * B * T, g.tp);
    comm += M * perMicro * (checkpointing ? 1.5 : 1);
  }
  if (g.pp > 1) {
    // every micro-batch's activation goes forward and its gradient back across each boundary
    const act = 4 * B * T * C;
    const hop = xfer(link, act) + staging(act);
    // the schedule's span on the slowest stage: (m + p - 1) slots; a device shared by the stages fills its idle slots with their work
    const slot = slowest.fwd + slowest.bwd + 2 * hop;
    bubble = Math.max(0, (M + g.pp - 1) * slot + slowest.opt - compute);
    comm += M * 2 * hop;
    // the tied wte: its gradient summed over the first and last stage
    comm += allReduceMs(link, (4 * m.vocab * C) / g.tp, 2) + staging((4 * m.vocab * C) / g.tp);
  }
  if (g.dp > 1 && s.pipelined) {
    // 3d: ZeRO-1 over the data-parallel group of the stage's (TP shard of its) parameters
    const bytes = 4 * slowest.owned;
    comm += 2 * halfRingMs(link, bytes, g.dp) + staging(bytes);
  }
  if (offload) {
    // the reduced gradient shard down, AdamW on the host, the new weights up
    const shard = 4 * slowest.sharded;
    hostCopy = shard / (d0.d2h_gbps * 1e6) + shard / (d0.h2d_gbps * 1e6) + (ADAMW_BYTES * slowest.sharded) / (HOST_GBPS * 1e6);
  }
  const step = compute + comm + bubble + hostCopy;
  const tokens = q.batch_size * T;
  return {
    step_ms: step,
    compute_ms: compute,
    comm_exposed_ms: comm,
    bubble_ms: bubble,
    host_copy_ms: hostCopy,
    tokens_per_s: step > 0 ? (tokens * 1000) / step : 0,
    model_flops: tokens * flopsPerToken({ n_layer: m.n_layer, d_model: m.d_model, vocab_size: m.vocab }, T).model,
  };
}

/** The host's memory bandwidth as CPU AdamW streams it (GB/s): a conservative figure for one core of a desktop CPU. */
export const HOST_GBPS = 5;

const sample = (op: string, flops: number, bytes: number, ms: number): KernelSample => ({ op, flops, bytes, ms });

/**
 * The speeds a plan assumes where no profile was measured (`shardwise profile` stores one):
 * SwiftShader on a desktop CPU as DESIGN.md measured it here (a register-blocked WGSL matmul
 * ~2 GFLOP/s, ~0.05 ms per launch; loopback TCP with bufferutil ~0.8 GB/s). Every plan made
 * from them says so in its notes.
 */
export const DEFAULT_DEVICE_SPEED: DeviceSpeed = {
  kernels: [
    sample('matmul', 1e5, 0, 0.05),
    sample('matmul', 2e9, 0, 1000),
    sample('attention', 1e5, 0, 0.1),
    sample('attention', 1e9, 0, 1000),
    sample('layernorm', 0, 1e4, 0.05),
    sample('layernorm', 0, 1e9, 1000),
  ],
  h2d_gbps: 2,
  d2h_gbps: 2,
};
export const DEFAULT_LINK: LinkSpeed = { gbps: 0.8, latency_us: 100 };

/**
 * A what-if device from its peak: matmuls at half the peak, memory-bound kernels at 20 GB/s per
 * peak TFLOP/s (about an H100's HBM bandwidth against its fp32 peak), 10 µs per launch, PCIe 4
 * x16 copies (25 GB/s). Assumptions, stated in the plan's notes.
 */
export function speedOfPeak(tflops: number): DeviceSpeed {
  const flops = tflops * 1e12 * 0.5;
  const bytesPerS = tflops * 20e9;
  return {
    kernels: [
      sample('matmul', flops * 1e-5, 0, 0.01),
      sample('matmul', flops, 0, 1000),
      sample('attention', flops * 1e-5, 0, 0.01),
      sample('attention', flops * 0.5, 0, 1000),
      sample('layernorm', 0, bytesPerS * 1e-5, 0.01),
      sample('layernorm', 0, bytesPerS, 1000),
    ],
    h2d_gbps: 25,
    d2h_gbps: 25,
    peak_tflops: tflops,
  };
}
