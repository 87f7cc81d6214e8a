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
// storage with float64 accumulation. A bucket's collectives run one bucket after another so every
// rank posts them in the same order.
import type { ProcessGroup } from '../comm/index.js';
import { Rng } from '../model/rng.js';
import { mix32 } from '../data/prng.js';
import { CompressionCounter, type CommHook, type HookBucket, type HookState } from './hook.js';

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
}

export function planBucket(b: HookBucket, rank: number, minCompressionRate: number): Plan {
  const plan: Plan = { low: [], plain: [], plainElems: 0, pElems: 0, qElems: 0 };
  for (const t of b.tensors) {
    const n = t.shape[0] ?? 1;
    const m = t.numel / n;
    const r = Math.min(n, m, rank);
    if (t.shape.length >= 2 && (n + m) * r * minCompressionRate < n * m) {
      plan.low.push({ start: t.start, n, m, r, p: plan.pElems, q: plan.qElems });
      plan.pElems += n * r;
      plan.qElems += m * r;
    } else {
      plan.plain.push([t.start, t.numel]);
      plan.plainElems += t.numel;
    }
  }
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

export class PowerSgdHook implements CommHook {
  readonly name = 'powersgd';
  /** steps completed (PowerSGDState.iter) */
  iter = 0;
  /** error-feedback memory per bucket (PowerSGDState.error_dict) */
  readonly error = new Map<number, Float32Array>();
  /** Q per bucket, kept for warm start (PowerSGDState.q_memory_dict) */
  readonly q = new Map<number, Float32Array>();
  private readonly plans = new Map<number, Plan>();
  private tail: Promise<void> = Promise.resolve();
  private readonly counter = new CompressionCounter();

  constructor(readonly o: PowerSgdOptions) {
    if (!Number.isInteger(o.rank) || o.rank < 1) throw new Error(`PowerSGD rank must be a positive integer, got ${o.rank}`);
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
    if (this.iter < this.o.startIter) {
      await pg.allReduce(data, { op: 'sum', labels }).wait();
      this.counter.add(data.length, data.byteLength);
      return;
    }
    const W = pg.size;
    for (let i = 0; i < data.length; i++) data[i] *= W; // PyTorch's bucket: each rank's mean gradient
    let before: Float32Array | null = null;
    if (this.o.errorFeedback) {
      const e = this.error.get(b.index);
      if (e) for (let i = 0; i < data.length; i++) data[i] += e[i];
      before = data.slice();
    }
    let plan = this.plans.get(b.index);
    if (!plan) this.plans.set(b.index, (plan = planBucket(b, this.o.rank, this.o.minCompressionRate)));

    let Q = this.q.get(b.index);
    if (!this.o.warmStart || !Q) {
      Q = new Float32Array(plan.qElems);
      // the same numbers on every rank, different at every step and bucket
      const rng = new Rng(mix32((this.o.seed ^ mix32(this.iter + 1)) + b.index * 0x9e3779b9));
      for (let i = 0; i < Q.length; i++) Q[i] = rng.normal();
      this.q.set(b.index, Q);
    }
    for (const l of plan.low) orthogonalize(Q, l.q, l.m, l.r, this.o.epsilon);
    const P = new Float32Array(plan.pElems);
    for (const l of plan.low) mulMQ(data, l, Q, P);

    const plain = new Float32Array(plan.plainElems);
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
    for (const l of plan.low) orthogonalize(P, l.p, l.n, l.r, this.o.epsilon);
    for (const l of plan.low) mulMtP(data, l, P, Q);
    if (Q.length) await pg.allReduce(Q, { op: 'sum', labels: { ...labels, part: 'Q' } }).wait();
    for (let i = 0; i < Q.length; i++) Q[i] /= W;
    for (const l of plan.low) mulPQt(P, Q, l, data);

    if (before) {
      const e = this.error.get(b.index) ?? new Float32Array(data.length);
      for (let i = 0; i < data.length; i++) e[i] = before[i] - data[i];
      this.error.set(b.index, e);
    }
    if (!this.o.warmStart) this.q.delete(b.index);
    this.counter.add(data.length, plain.byteLength + P.byteLength + Q.byteLength);
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
