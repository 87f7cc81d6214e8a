// DDP's communication bucket by bucket, for a caller that knows the run's buckets and its
// communication hook (time.ts TimeQuery.ddp; bench:lan predicts its rows with it). time.ts's
// whole-model estimate for ddp treats the gradients as one transfer less backward; this follows
// the buckets as backward readies them, one collective after the other on the link, and the
// hook's payloads and device math. Restated from the rank's code (common/ cannot import workers/;
// tests/unit/advisor/ddp-comm.test.ts checks it against those files):
//   buckets   workers/parallel/ddp.ts planBuckets: parameters in reverse (forward-order) layout,
//             a first bucket of first_bucket_mb then bucket_cap_mb, counted in gradient bytes; a
//             bucket is one contiguous range of the slot-aligned flat layout (model-layout.ts)
//   ready     workers/model/gpt.ts: a layer's parameters are ready once its backward is recorded;
//             layers go head (ln_f), block L-1 .. block 0, embedding (wte, wpe)
//   payloads  no hook: the bucket's range, times the emulated shape's scale where a proxy computes
//             (DDP pads it with zeros); fp16/bf16 (comm-hooks/half-compress.ts): 2 bytes per
//             element; PowerSGD (comm-hooks/powersgd.ts planBucket): the uncompressed tensors and P
//             in one round, then Q, with its math on the device around them
//   host      where the caller knows how fast a rank's host sums (DdpComm.host): each all-reduce
//             takes at least its reductions' time, (N-1)/N of the payload summed on the CPU
//             (workers/comm/host-memory: float32 in WebAssembly SIMD, 16-bit in JS) while the
//             link carries the next pieces, so the longer of the two
// Dimensions: a tensor is (rows, cols) as model-layout.ts names it; cols 1 is a 1-D tensor.
import type { GradCompression } from '../grad-compression.js';
import { type GptConfig, gptTensors } from '../model-layout.js';
import { slotElems } from '../padding.js';
import { gptParamCount } from '../model-params.js';

/** PowerSGD's defaults where the setting leaves them out (comm-hooks/powersgd.ts POWERSGD_DEFAULTS, PyTorch's) */
export const POWERSGD_DEFAULT_RANK = 1;
export const POWERSGD_MIN_COMPRESSION_RATE = 2;

/** What the caller knows of a run's DDP: the job's bucket caps and hook, and (benchmarks) the proxy that fills the buckets. */
export interface DdpComm {
  /** parallel.bucket_cap_mb and first_bucket_mb of the job (MiB) */
  bucket_cap_mb: number;
  first_bucket_mb: number;
  compression?: GradCompression;
  /**
   * An emulated shape's proxy (workers/gpu/emulated-device.ts): the model the rank computes, whose
   * parameters fill the buckets; the time query's model is the shape it times and sends. Its
   * vocab is the run's dataset's.
   */
  proxy?: Omit<GptConfig, 'n_head'>;
  /**
   * How fast one rank's host sums a collective's payload, ns per element by dtype, with the share
   * of a core the rank gets already in it (workers/comm/host-memory/reduce-rate.ts measures one
   * thread). Absent: the host's reductions are taken as hidden under the link.
   */
  host?: HostReduce;
}

/** ns per element of a host sum, by the payload's dtype */
export interface HostReduce {
  float32: number;
  float16: number;
  bfloat16: number;
}

export interface DdpTensor {
  name: string;
  /** gpt.ts's layer index: 0 embedding, l + 1 block l, n_layer + 1 the head */
  layer: number;
  /** shape of the computed tensor (the proxy's where one computes) */
  rows: number;
  cols: number;
  /** shape on the wire (the timed model's tensor of that name) */
  wire: { rows: number; cols: number };
}

export interface DdpBucket {
  index: number;
  tensors: DdpTensor[];
  /** the layer whose backward completes the bucket (the lowest index among its tensors') */
  readyLayer: number;
  /** elements of the bucket's range in the flat layout */
  elems: number;
  /** elements of the uncompressed all-reduce: the range, scaled to the timed model's bytes where a proxy computes */
  plainWire: number;
  /** elements of the timed model's tensors (a hook's payloads follow them) */
  hookWire: number;
}

/** layer index of a parameter, as workers/model/gpt.ts groups them */
const layerOf = (t: { name: string; layer: number | null }, nLayer: number) =>
  t.layer !== null ? t.layer + 1 : t.name.startsWith('transformer.ln_f') ? nLayer + 1 : 0;

/**
 * The buckets of a DDP run of `model` (the timed model; `ddp.proxy` fills them where given), as
 * planBuckets makes them. `E`: bytes per gradient element (4, or 2 in mixed precision, whose wire
 * leaves the slots' padding out).
 */
export function ddpBuckets(model: Omit<GptConfig, 'n_head'>, ddp: DdpComm, E: number): DdpBucket[] {
  const fill = ddp.proxy ?? model;
  const wireOf = new Map(gptTensors(model).map((t) => [t.name, { rows: t.rows, cols: t.cols }]));
  const scale = ddp.proxy
    ? gptParamCount({ ...model, block_size: fill.block_size }, model.vocab_size) / gptParamCount(fill, fill.vocab_size)
    : 1;
  let offset = 0;
  const refs = gptTensors(fill).map((t) => {
    const r = { t, numel: t.rows * t.cols, offset };
    offset += E === 4 ? slotElems(r.numel) : r.numel;
    return r;
  });
  const first = ddp.first_bucket_mb * 2 ** 20;
  const cap = ddp.bucket_cap_mb * 2 ** 20;
  const out: DdpBucket[] = [];
  let cur: typeof refs = [];
  let bytes = 0;
  const close = () => {
    if (cur.length === 0) return;
    const start = Math.min(...cur.map((r) => r.offset));
    const last = cur.reduce((a, r) => (r.offset > a.offset ? r : a));
    const elems = last.offset + last.numel - start;
    const tensors = [...cur]
      .sort((a, b) => a.offset - b.offset)
      .map(({ t }) => ({ name: t.name, layer: layerOf(t, fill.n_layer), rows: t.rows, cols: t.cols, wire: wireOf.get(t.name)! }));
    out.push({
      index: out.length,
      tensors,
      readyLayer: Math.min(...tensors.map((t) => t.layer)),
      elems,
      plainWire: Math.round(elems * scale),
      hookWire: ddp.proxy ? tensors.reduce((a, t) => a + t.wire.rows * t.wire.cols, 0) : elems,
    });
    cur = [];
    bytes = 0;
  };
  for (const r of [...refs].reverse()) {
    const c = out.length === 0 ? first : cap;
    if (cur.length > 0 && (cap === 0 || bytes + r.numel * E > c)) close();
    cur.push(r);
    bytes += r.numel * E;
  }
  close();
  return out;
}

/** One bucket through PowerSGD once it compresses: its payloads (elements) and its device FLOPs before P's all-reduce, between P's and Q's, after Q's. */
export interface PowerSgdBucket {
  plain: number;
  p: number;
  q: number;
  flops: { ready: number; middle: number; done: number };
}

/** FLOPs of Gram-Schmidt over an n x r matrix (comm-hooks/powersgd.ts orthogonalize) */
const gramSchmidtFlops = (n: number, r: number) => 3 * n * r + 2 * n * r * (r - 1);

/** planBucket's payloads and FLOPs: a matrix is compressed where (n + m)·r·rate < n·m on its computed shape; sizes and FLOPs are the wire's. */
export function powerSgdBucket(b: DdpBucket, g: GradCompression): PowerSgdBucket {
  const rank = g.matrix_approximation_rank ?? POWERSGD_DEFAULT_RANK;
  const rate = g.min_compression_rate ?? POWERSGD_MIN_COMPRESSION_RATE;
  const ef = g.use_error_feedback ?? true;
  const out: PowerSgdBucket = { plain: 0, p: 0, q: 0, flops: { ready: b.hookWire * (ef ? 2 : 1), middle: 0, done: ef ? b.hookWire : 0 } };
  for (const t of b.tensors) {
    const [n, m] = [t.rows, t.cols];
    const r = Math.min(n, m, rank);
    if (t.cols > 1 && (n + m) * r * rate < n * m) {
      const [wn, wm] = [t.wire.rows, t.wire.cols];
      const wr = Math.min(wn, wm, rank);
      out.p += wn * wr;
      out.q += wm * wr;
      const mm = 2 * wn * wm * wr;
      out.flops.ready += gramSchmidtFlops(wm, wr) + mm;
      out.flops.middle += gramSchmidtFlops(wn, wr) + mm;
      out.flops.done += wm * wr + mm;
    } else out.plain += t.wire.rows * t.wire.cols;
  }
  out.flops.middle += out.plain;
  return out;
}

/** What the timeline needs of the device, the link and the rank's backward. */
export interface DdpTimelineInput {
  buckets: readonly DdpBucket[];
  compression?: GradCompression;
  /** bytes per element of the uncompressed payload (4, or 2 in mixed precision) */
  E: number;
  /** device ms of the last micro-batch's backward of each layer (gpt.ts's index) */
  layerMs: (layer: number) => number;
  /** layers, highest index first (the order backward runs them) */
  layers: readonly number[];
  /** device ms of `flops` of a hook's math */
  hookMs: (flops: number) => number;
  /** ms of one all-reduce of `bytes` over the group */
  allReduceMs: (bytes: number) => number;
  /** ranks in the group, and their hosts' sums (DdpComm.host; absent: hidden under the link) */
  world?: number;
  host?: HostReduce;
  /** the 16-bit format of a mixed-precision run's uncompressed payload (E = 2) */
  halfDtype?: 'float16' | 'bfloat16';
  /** ms to copy `bytes` off the device, and back onto it */
  d2hMs: (bytes: number) => number;
  h2dMs: (bytes: number) => number;
  /** a host round trip the rank waits on (a readback), ms */
  syncMs: number;
  /** PowerSGD's math on the device (reading back P, Q and the 1-D tensors), else on the host (reading back the bucket) */
  hookOnDevice?: boolean;
}

export interface DdpTimeline {
  /** device time of backward (the last micro-batch's), hook work left out */
  backward_ms: number;
  /** from the start of that backward to the gradients reduced on every rank: the device and the link both done */
  end_ms: number;
  /** device time of the hook's math (PowerSGD), all of it */
  hook_device_ms: number;
}

/**
 * The last micro-batch's backward and its buckets' communication, as workers/parallel/ddp.ts and
 * the hooks run them: the device runs the layers in order (PowerSGD's first math queued right after
 * the layer that completes a bucket); a bucket's readback returns once the device reaches it (a host
 * round trip, its copy); collectives take the link one after the other in bucket order. PowerSGD
 * runs its buckets one after another: P's round, then its middle math (queued behind everything
 * recorded, so behind the rest of backward), Q's round, then its last math (queued; the next
 * bucket's middle waits for it). Its math is timed at the device's rate either way (an emulated
 * device charges it there); where it runs decides the copies: on the device (hookOnDevice,
 * comm-hooks/powersgd-device.ts) P and the uncompressed tensors are read back, then Q after a
 * round trip of its own, and no bucket is read back or written whole; on the host the bucket is.
 */
export function ddpTimeline(i: DdpTimelineInput): DdpTimeline {
  const psgd = i.compression?.hook === 'powersgd' ? i.compression : null;
  const half = i.compression?.hook === 'fp16' || i.compression?.hook === 'bf16';
  const plans = psgd ? i.buckets.map((b) => powerSgdBucket(b, psgd)) : [];
  let dev = 0;
  let backward = 0;
  let hookDevice = 0;
  const readback: number[] = [];
  for (const layer of i.layers) {
    const t = i.layerMs(layer);
    dev += t;
    backward += t;
    for (const b of i.buckets) {
      if (b.readyLayer !== layer) continue;
      if (psgd) {
        const p = plans[b.index]!;
        const ms = i.hookMs(p.flops.ready);
        dev += ms;
        hookDevice += ms;
        // on the device only P and the uncompressed tensors come back
        if (i.hookOnDevice) {
          readback[b.index] = dev + i.syncMs + i.d2hMs(4 * (p.plain + p.p));
          continue;
        }
      }
      readback[b.index] = dev + i.syncMs + i.d2hMs(i.E * b.elems);
    }
  }
  /** a ring all-reduce's sums on one rank: (N-1)/N of the payload */
  const hostMs = (elems: number, dtype: keyof HostReduce) =>
    i.host && i.world && i.world > 1 ? ((i.world - 1) / i.world) * elems * (i.host[dtype] / 1e6) : 0;
  /** an all-reduce of `elems` elements of `bytesPer` bytes: the link's time or its host sums', whichever is longer */
  const allReduce = (elems: number, bytesPer: number, dtype: keyof HostReduce) =>
    elems > 0 ? Math.max(i.allReduceMs(elems * bytesPer), hostMs(elems, dtype)) : 0;
  const ar = (elems: number, bytesPer: number) => allReduce(elems, bytesPer, 'float32');
  let link = 0;
  let end = dev;
  let hookFree = 0;
  for (const b of i.buckets) {
    const at = readback[b.index]!;
    if (!psgd) {
      // the payload: the bucket (padded to the timed model's bytes), or its 16-bit cast
      const hookDtype = i.compression?.hook === 'bf16' ? 'bfloat16' : 'float16';
      const onWire = half
        ? allReduce(Math.max(b.hookWire, b.elems), 2, hookDtype)
        : allReduce(b.plainWire, i.E, i.E === 4 ? 'float32' : (i.halfDtype ?? 'float16'));
      link = Math.max(at, link) + onWire;
      end = Math.max(end, link + i.h2dMs(i.E * b.elems));
      continue;
    }
    const p = plans[b.index]!;
    // the plain tensors and P posted together, one after the other on the link
    link = Math.max(at, hookFree, link) + ar(p.plain, 4) + ar(p.p, 4);
    const middle = i.hookMs(p.flops.middle);
    const done = i.hookMs(p.flops.done);
    hookDevice += middle + done;
    if (i.hookOnDevice) {
      // P up, the middle math, then Q's readback (a round trip) before Q's all-reduce
      dev = Math.max(dev, link + i.h2dMs(4 * (p.plain + p.p))) + middle;
      link = Math.max(dev + i.syncMs + i.d2hMs(4 * p.q), link) + ar(p.q, 4);
      // Q up, then M = P·Qᵀ and the error memory on the device: the gradients stay there
      dev = Math.max(dev, link + i.h2dMs(4 * p.q)) + done;
      hookFree = link;
      end = Math.max(end, dev);
      continue;
    }
    // on the host: the math between the rounds, the bucket written back at the end
    dev = Math.max(dev, link) + middle;
    link = Math.max(dev, link) + ar(p.q, 4);
    dev = Math.max(dev, link) + done;
    hookFree = link;
    end = Math.max(end, dev, link + i.h2dMs(i.E * b.elems));
  }
  // the optimizer reads the gradient norm: one more round trip once everything is in
  return { backward_ms: backward, end_ms: end + i.syncMs, hook_device_ms: hookDevice };
}
