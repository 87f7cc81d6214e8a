// PowerSGD's per-bucket plan (which tensors are compressed, the payloads' sizes, the device
// FLOPs an emulated device charges) and where a bucket's math runs: BucketMath is the hook's view
// of one bucket's numbers, either its host copy (hostMath, here: the unit tests' simulated groups
// and any caller that hands the hook a Float32Array) or the device's gradient view
// (powersgd-device.ts, what DDP uses). The hook (powersgd.ts) runs the same steps on either.
import { type HookBucket, wireNumel } from './hook.js';

/** A tensor of the bucket compressed as an n x m matrix of rank r, with its P and Q slices. */
export interface Low {
  start: number;
  n: number;
  m: number;
  r: number;
  /** element offsets of its P (n x r) and Q (m x r) in the bucket's P and Q memories */
  p: number;
  q: number;
}

export interface Plan {
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

/**
 * One bucket's numbers and the math on them, step by step as the hook calls it. `x` is the
 * bucket (this rank's gradients, scaled by 1/world on entry), `e` its error memory.
 */
export interface BucketMath {
  /** the uncompressed steps: the bucket on the host, in `into` (its first numel values; the rest is the wire's zero padding) or, where it is on the host already and no `into` is given, itself */
  readAll(into: Float32Array | null): Promise<Float32Array>;
  /** the uncompressed steps: the reduced bucket back (its first numel values) */
  writeAll(from: Float32Array): void;
  /** x = x·world + e and e = x (error feedback), else x = x·world */
  feedIn(): void;
  /** P = M·Q for each compressed tensor (Q: the host's, orthogonalized); P and the uncompressed tensors (packed) onto the host */
  computeP(Q: Float32Array, P: Float32Array, plain: Float32Array): Promise<void>;
  /** the uncompressed tensors' results (packed) into x; P (reduced, orthogonalized) where Q = Mᵀ·P runs; Q onto the host */
  computeQ(plain: Float32Array, P: Float32Array, Q: Float32Array): Promise<void>;
  /** M = P·Qᵀ into x (Q: reduced over the ranks, divided by the world size); then e = e − x */
  decompress(P: Float32Array, Q: Float32Array): void;
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

/** The math over a host copy `x` of the bucket; `error` holds its error memory (made at the first compressed step). */
export function hostMath(
  plan: Plan,
  x: Float32Array,
  world: number,
  error: { get(): Float32Array | undefined; set(e: Float32Array): void } | null,
): BucketMath {
  return {
    readAll: async (into) => {
      into?.set(x);
      return into ?? x;
    },
    writeAll: (from) => {
      if (from !== x) x.set(from.subarray(0, x.length));
    },
    feedIn: () => {
      for (let i = 0; i < x.length; i++) x[i] *= world;
      if (!error) return;
      let e = error.get();
      if (!e) error.set((e = new Float32Array(x.length)));
      for (let i = 0; i < x.length; i++) x[i] += e[i];
      e.set(x);
    },
    computeP: async (Q, P, plain) => {
      for (const l of plan.low) mulMQ(x, l, Q, P);
      let at = 0;
      for (const [s, k] of plan.plain) {
        plain.set(x.subarray(s, s + k), at);
        at += k;
      }
    },
    computeQ: async (plain, P, Q) => {
      let at = 0;
      for (const [s, k] of plan.plain) {
        x.set(plain.subarray(at, at + k), s);
        at += k;
      }
      for (const l of plan.low) mulMtP(x, l, P, Q);
    },
    decompress: (P, Q) => {
      for (const l of plan.low) mulPQt(P, Q, l, x);
      const e = error?.get();
      if (e) for (let i = 0; i < x.length; i++) e[i] -= x[i];
    },
  };
}
