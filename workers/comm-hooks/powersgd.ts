// PowerSGD (Vogels et al. 2019) as PyTorch's powerSGD_hook and PowerSGDState do it, per tensor
// of the bucket:
//   - the first `startIter` steps all-reduce the bucket uncompressed (start_powerSGD_iter);
//   - then each rank adds its error-feedback memory to the bucket (use_error_feedback) and views
//     every gradient as a matrix (shape[0], rest). A matrix worth compressing (min_compression_rate:
//     (n + m)·r·rate < n·m, so 1-D tensors, biases and layernorm, never are) gets M ≈ P·Qᵀ of rank
//     r = min(n, m, rank): P = M·Q, all-reduce P, orthogonalize P (Gram-Schmidt), Q = Mᵀ·P,
//     all-reduce Q and divide by the world size, M = P·Qᵀ. The other tensors are all-reduced in
//     one uncompressed batch and divided by the world size;
//   - the error memory becomes (bucket + old error) − its decompressed result;
//   - Q starts from a seeded standard normal, orthogonalized, the same on every rank; with
//     warm_start each step starts from the last step's Q (orthogonalized again).
// PyTorch's buckets hold each rank's mean gradient; ours hold it divided by the world size (the
// loss carries that division, hook.ts), so the hook multiplies by the world size on entry: its
// error memory, P and Q are then PyTorch's numbers, and its result the averaged gradient that a
// plain sum would have given.
// The math runs on the host copy of the bucket (DDP reads every bucket back anyway), in float32
// storage with float64 accumulation, into payload buffers kept per bucket (no allocation per step).
// A bucket's collectives run one bucket after another so every rank posts them in the same order.
//
// On an emulated device (benchmarks, gpu/emulated-device.ts) the math is also charged where a GPU
// would run it, at the device's rate (HookDevice): error feedback and P = M·Q when the bucket is
// ready, between the backward layers recorded before and after it (the readback waits for them);
// orthogonalizing P and Q = Mᵀ·P once P's all-reduce is back, before Q is sent; M = P·Qᵀ and the
// new error memory once Q is back. With an emulated shape each tensor also has that shape's
// dimensions (HookTensor.wire): the FLOPs are the shape's, and the plain part, P and Q go on the
// wire at the shape's sizes (zero-padded: the padding sums to zero and the numbers stay the real
// ones), as the uncompressed rows send the shape's gradient bytes.
import type { ProcessGroup } from '../comm/index.js';
import { mix32, SplitMix32 } from '../data/prng.js';
import { CompressionCounter, type CommHook, type HookBucket, type HookDevice, type HookState, wireNumel } from './hook.js';

export interface PowerSgdOptions {
  /** matrix_approximation_rank */
  rank: number;
  /** start_powerSGD_iter: steps all-reduced uncompressed first */
  startIter: number;
  /** min_compression_rate (PyTorch's default 2) */
  minCompressionRate: number;
  /** use_error_feedback (default on) */
  errorFeedback: boolean;
  /** warm_start: reuse last step's Q (default on) */
  warmStart: boolean;
  /** seeds Q's random starts (PyTorch's random_seed); the same on every rank */
  seed: number;
  /**
   * added to each column's norm before dividing (PyTorch's orthogonalization_epsilon): a zero
   * column (a vanishing gradient) stays zero instead of becoming NaN
   */
  epsilon: number;
}

export const POWERSGD_DEFAULTS: Omit<PowerSgdOptions, 'rank' | 'seed'> = {
  startIter: 10,
  minCompressionRate: 2,
  errorFeedback: true,
  warmStart: true,
  epsilon: 1e-8,
};

/** A tensor of the bucket compressed as an n x m matrix of rank r, with its P and Q slices. */
interface Low {
  start: number;
  n: number;
  m: number;
  r: number;
  /** element offsets of its P (n x r) and Q (m x r) in the bucket's P and Q memories */
  p: number;
  q: number;
}

interface Plan {
  low: Low[];
  /** [start, numel] of the tensors all-reduced uncompressed */
  plain: [number, number][];
  plainElems: number;
  pElems: number;
  qElems: number;
  /** the payloads' lengths on the wire: the real ones, or the emulated shape's (HookTensor.wire) */
  wire: { plain: number; p: number; q: number; bucket: number };
  /** device FLOPs (at the wire's dimensions) before P's all-reduce, between P's and Q's, after Q's */
  flops: { ready: number; middle: number; done: number };
}

const prod = (xs: readonly number[]) => xs.reduce((a, x) => a * x, 1);
/** FLOPs of orthogonalize() over an n x r matrix: each column's norm and division, and its projection out of the later ones */
const gramSchmidtFlops = (n: number, r: number) => 3 * n * r + 2 * n * r * (r - 1);

export function planBucket(b: HookBucket, rank: number, minCompressionRate: number, o: { errorFeedback?: boolean } = {}): Plan {
  const plan: Plan = {
    low: [],
    plain: [],
    plainElems: 0,
    pElems: 0,
    qElems: 0,
    wire: { plain: 0, p: 0, q: 0, bucket: wireNumel(b) },
    flops: { ready: 0, middle: 0, done: 0 },
  };
  const ef = o.errorFeedback ?? true;
  // elementwise passes over the whole bucket: x world size, plus adding and updating the error memory
  plan.flops.ready += plan.wire.bucket * (ef ? 2 : 1);
  plan.flops.done += ef ? plan.wire.bucket : 0;
  for (const t of b.tensors) {
    const n = t.shape[0] ?? 1;
    const m = t.numel / n;
    const r = Math.min(n, m, rank);
    if (t.shape.length >= 2 && (n + m) * r * minCompressionRate < n * m) {
      plan.low.push({ start: t.start, n, m, r, p: plan.pElems, q: plan.qElems });
      plan.pElems += n * r;
      plan.qElems += m * r;
      const w = t.wire ?? t.shape;
      const [wn, wm] = [w[0]!, prod(w) / w[0]!];
      const wr = Math.min(wn, wm, rank);
      plan.wire.p += wn * wr;
      plan.wire.q += wm * wr;
      const mm = 2 * wn * wm * wr; // one of M·Q, Mᵀ·P, P·Qᵀ
      plan.flops.ready += gramSchmidtFlops(wm, wr) + mm;
      plan.flops.middle += gramSchmidtFlops(wn, wr) + mm;
      plan.flops.done += wm * wr + mm;
    } else {
      plan.plain.push([t.start, t.numel]);
      plan.plainElems += t.numel;
      plan.wire.plain += t.wire ? prod(t.wire) : t.numel;
    }
  }
  plan.flops.middle += plan.wire.plain;
  for (const k of ['plain', 'p', 'q'] as const)
    if (plan.wire[k] < { plain: plan.plainElems, p: plan.pElems, q: plan.qElems }[k])
      throw new Error(
        `bucket ${b.index}: the emulated shape's ${k} payload (${plan.wire[k]}) is smaller than the real one (${{ plain: plan.plainElems, p: plan.pElems, q: plan.qElems }[k]}); emulate a shape at least as large as the model that computes it`,
      );
  return plan;
}

/** Gram-Schmidt over the r columns of a row-major n x r matrix at `off` (in place). */
export function orthogonalize(a: Float32Array, off: number, n: number, r: number, epsilon: number) {
  for (let i = 0; i < r; i++) {
    let sq = 0;
    for (let k = 0; k < n; k++) sq += a[off + k * r + i] ** 2;
    const norm = Math.sqrt(sq) + epsilon;
    for (let k = 0; k < n; k++) a[off + k * r + i] /= norm;
    for (let j = i + 1; j < r; j++) {
      let dot = 0;
      for (let k = 0; k < n; k++) dot += a[off + k * r + i] * a[off + k * r + j];
      for (let k = 0; k < n; k++) a[off + k * r + j] -= dot * a[off + k * r + i];
    }
  }
}

/** P (n x r) = M (n x m) · Q (m x r) */
function mulMQ(M: Float32Array, l: Low, Q: Float32Array, P: Float32Array) {
  const { n, m, r } = l;
  const acc = new Float64Array(r);
  for (let a = 0; a < n; a++) {
    acc.fill(0);
    const row = l.start + a * m;
    for (let j = 0; j < m; j++) {
      const x = M[row + j];
      if (x === 0) continue;
      const qj = l.q + j * r;
      for (let k = 0; k < r; k++) acc[k] += x * Q[qj + k];
    }
    for (let k = 0; k < r; k++) P[l.p + a * r + k] = acc[k];
  }
}

/** Q (m x r) = Mᵀ (m x n) · P (n x r) */
function mulMtP(M: Float32Array, l: Low, P: Float32Array, Q: Float32Array) {
  const { n, m, r } = l;
  const acc = new Float64Array(m * r);
  for (let a = 0; a < n; a++) {
    const row = l.start + a * m;
    const pa = l.p + a * r;
    for (let j = 0; j < m; j++) {
      const x = M[row + j];
      if (x === 0) continue;
      for (let k = 0; k < r; k++) acc[j * r + k] += x * P[pa + k];
    }
  }
  for (let i = 0; i < m * r; i++) Q[l.q + i] = acc[i];
}

/** M (n x m) = P (n x r) · Qᵀ (r x m) */
function mulPQt(P: Float32Array, Q: Float32Array, l: Low, M: Float32Array) {
  const { n, m, r } = l;
  for (let a = 0; a < n; a++) {
    const pa = l.p + a * r;
    const row = l.start + a * m;
    for (let j = 0; j < m; j++) {
      let s = 0;
      for (let k = 0; k < r; k++) s += P[pa + k] * Q[l.q + j * r + k];
      M[row + j] = s;
    }
  }
}

/** A bucket's host buffers, kept across steps. */
interface Buffers {
  /** P (n x r per tensor), the wire's length: the real part, then zeros */
  P: Float32Array;
  /** the uncompressed tensors, packed, the wire's length */
  plain: Float32Array;
  /** Q on the wire where the emulated shape's is longer than the real one (else Q itself is sent) */
  qWire: Float32Array | null;
  /** the whole bucket on the wire during the first steps where the emulated shape's is longer */
  bucketWire: Float32Array | null;
  /** the bucket plus the old error, before compression (error feedback) */
  before: Float32Array | null;
}

export class PowerSgdHook implements CommHook {
  readonly name = 'powersgd';
  /** steps completed (PowerSGDState.iter) */
  iter = 0;
  /** error-feedback memory per bucket (PowerSGDState.error_dict) */
  readonly error = new Map<number, Float32Array>();
  /** Q per bucket, kept for warm start (PowerSGDState.q_memory_dict) */
  readonly q = new Map<number, Float32Array>();
  private readonly plans = new Map<number, Plan>();
  private readonly buffers = new Map<number, Buffers>();
  private tail: Promise<void> = Promise.resolve();
  private readonly counter = new CompressionCounter();

  /** `device`: where the math is timed (an emulated device); null: the host's real time */
  constructor(
    readonly o: PowerSgdOptions,
    private readonly device: HookDevice | null = null,
  ) {
    if (!Number.isInteger(o.rank) || o.rank < 1) throw new Error(`PowerSGD rank must be a positive integer, got ${o.rank}`);
  }

  private planOf(b: HookBucket): Plan {
    let plan = this.plans.get(b.index);
    if (!plan) this.plans.set(b.index, (plan = planBucket(b, this.o.rank, this.o.minCompressionRate, this.o)));
    return plan;
  }

  private buffersOf(b: HookBucket, plan: Plan, numel: number): Buffers {
    let buf = this.buffers.get(b.index);
    if (!buf)
      this.buffers.set(
        b.index,
        (buf = {
          P: new Float32Array(plan.wire.p),
          plain: new Float32Array(plan.wire.plain),
          qWire: plan.wire.q > plan.qElems ? new Float32Array(plan.wire.q) : null,
          bucketWire: plan.wire.bucket > numel ? new Float32Array(plan.wire.bucket) : null,
          before: this.o.errorFeedback ? new Float32Array(numel) : null,
        }),
      );
    return buf;
  }

  bucketReady(b: HookBucket) {
    if (this.device && this.iter >= this.o.startIter) this.device.enqueueFlops(this.planOf(b).flops.ready);
  }

  run(pg: ProcessGroup, b: HookBucket, data: Float32Array): Promise<void> {
    const done = this.tail.then(() => this.bucket(pg, b, data));
    this.tail = done.catch(() => {});
    return done;
  }

  endStep() {
    this.iter++;
  }

  private async bucket(pg: ProcessGroup, b: HookBucket, data: Float32Array) {
    const labels = { ...b.labels, compression: this.name };
    const plan = this.planOf(b);
    const buf = this.buffersOf(b, plan, data.length);
    if (this.iter < this.o.startIter) {
      if (buf.bucketWire) {
        buf.bucketWire.set(data);
        await pg.allReduce(buf.bucketWire, { op: 'sum', labels }).wait();
        data.set(buf.bucketWire.subarray(0, data.length));
      } else await pg.allReduce(data, { op: 'sum', labels }).wait();
      const sent = buf.bucketWire?.length ?? data.length;
      this.counter.add(sent, sent * 4);
      return;
    }
    const W = pg.size;
    for (let i = 0; i < data.length; i++) data[i] *= W; // PyTorch's bucket: each rank's mean gradient
    const before = buf.before;
    if (before) {
      const e = this.error.get(b.index);
      if (e) for (let i = 0; i < data.length; i++) data[i] += e[i];
      before.set(data);
    }

    let Q = this.q.get(b.index);
    if (!this.o.warmStart || !Q) {
      Q = new Float32Array(plan.qElems);
      // the same numbers on every rank, different at every step and bucket
      const rng = new SplitMix32(mix32((this.o.seed ^ mix32(this.iter + 1)) + b.index * 0x9e3779b9));
      for (let i = 0; i < Q.length; i++) Q[i] = rng.normal();
      this.q.set(b.index, Q);
    }
    for (const l of plan.low) orthogonalize(Q, l.q, l.m, l.r, this.o.epsilon);
    const P = buf.P;
    for (const l of plan.low) mulMQ(data, l, Q, P);

    const plain = buf.plain;
    let at = 0;
    for (const [s, k] of plan.plain) {
      plain.set(data.subarray(s, s + k), at);
      at += k;
    }
    // both posted now, in this order on every rank; P needs no division (it is orthogonalized)
    const plainDone = plain.length ? pg.allReduce(plain, { op: 'sum', labels: { ...labels, part: 'uncompressed' } }).wait() : null;
    const pDone = P.length ? pg.allReduce(P, { op: 'sum', labels: { ...labels, part: 'P' } }).wait() : null;
    await plainDone;
    at = 0;
    for (const [s, k] of plan.plain) {
      for (let i = 0; i < k; i++) data[s + i] = plain[at + i] / W;
      at += k;
    }
    await pDone;
    const middle = this.device?.enqueueFlops(plan.flops.middle);
    for (const l of plan.low) orthogonalize(P, l.p, l.n, l.r, this.o.epsilon);
    for (const l of plan.low) mulMtP(data, l, P, Q);
    if (middle !== undefined) await this.device!.reach(middle);
    if (buf.qWire) {
      buf.qWire.set(Q);
      await pg.allReduce(buf.qWire, { op: 'sum', labels: { ...labels, part: 'Q' } }).wait();
      Q.set(buf.qWire.subarray(0, Q.length));
    } else if (Q.length) await pg.allReduce(Q, { op: 'sum', labels: { ...labels, part: 'Q' } }).wait();
    for (let i = 0; i < Q.length; i++) Q[i] /= W;
    this.device?.enqueueFlops(plan.flops.done); // the write back and the optimizer's reads queue behind it
    for (const l of plan.low) mulPQt(P, Q, l, data);

    if (before) {
      const e = this.error.get(b.index) ?? new Float32Array(data.length);
      for (let i = 0; i < data.length; i++) e[i] = before[i] - data[i];
      this.error.set(b.index, e);
    }
    if (!this.o.warmStart) this.q.delete(b.index);
    this.counter.add(
      buf.bucketWire?.length ?? Math.max(plan.wire.bucket, data.length),
      (plain.length + P.length + (buf.qWire ?? Q).length) * 4,
    );
  }

  report() {
    let sq = 0;
    for (const e of this.error.values()) for (let i = 0; i < e.length; i++) sq += e[i] * e[i];
    return { uncompressed_bytes: this.counter.uncompressed, compressed_bytes: this.counter.compressed, error_feedback_norm: Math.sqrt(sq) };
  }

  state(): HookState {
    const tensors = new Map<string, Float32Array>();
    for (const [k, e] of this.error) tensors.set(`error.${k}`, e.slice());
    for (const [k, q] of this.q) tensors.set(`q.${k}`, q.slice());
    return { iter: this.iter, tensors };
  }

  loadState(s: HookState) {
    this.iter = s.iter;
    this.error.clear();
    this.q.clear();
    for (const [name, t] of s.tensors) {
      const [kind, k] = name.split('.');
      if (kind === 'error') this.error.set(Number(k), t.slice());
      else if (kind === 'q') this.q.set(Number(k), t.slice());
      else throw new Error(`PowerSGD state: unknown tensor ${name} (expected error.<bucket> or q.<bucket>)`);
    }
  }
}
