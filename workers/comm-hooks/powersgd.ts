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
// Where the math runs (powersgd-math.ts BucketMath): DDP makes the hook with its runtime and
// hands it each bucket's gradient view (runOnDevice): the error feedback and the three products
// run on the device as WGSL kernels, and only P, Q and the uncompressed tensors are read back
// (powersgd-device.ts), as PyTorch's hook keeps them on the GPU. A hook made without a runtime
// takes host copies (run) and does the same math in float32 storage with float64 accumulation.
// Orthogonalizing P and Q (n·r and m·r numbers) is on the host either way, beside the collectives.
// Payload buffers are kept per bucket (no allocation per step). A bucket's collectives run one
// bucket after another so every rank posts them in the same order.
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
import type { GpuTensor } from '../gpu/allocator.js';
import type { Runtime } from '../gpu/runtime.js';
import { CompressionCounter, type CommHook, type HookBucket, type HookDevice, type HookReport, type HookState } from './hook.js';
import { PowerSgdDevice } from './powersgd-device.js';
import { type BucketMath, hostMath, type Plan, planBucket } from './powersgd-math.js';

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

/** A bucket's host buffers, kept across steps. */
interface Buffers {
  /** P (n x r per tensor), the wire's length: the real part, then zeros */
  P: Float32Array;
  /** the uncompressed tensors, packed, the wire's length */
  plain: Float32Array;
  /** Q on the wire where the emulated shape's is longer than the real one (else Q itself is sent) */
  qWire: Float32Array | null;
  /** the whole bucket on the host during the first steps: the wire's length where the emulated shape's is longer (device math: always; host math: only then) */
  bucketWire: Float32Array | null;
}

export class PowerSgdHook implements CommHook {
  readonly name = 'powersgd';
  /** steps completed (PowerSGDState.iter) */
  iter = 0;
  /** host math: the error-feedback memory per bucket (PowerSGDState.error_dict); device math keeps it on the device */
  readonly error = new Map<number, Float32Array>();
  /** Q per bucket, kept for warm start (PowerSGDState.q_memory_dict) */
  readonly q = new Map<number, Float32Array>();
  private readonly plans = new Map<number, Plan>();
  private readonly buffers = new Map<number, Buffers>();
  private tail: Promise<void> = Promise.resolve();
  private readonly counter = new CompressionCounter();
  /** the device math and its buffers (runOnDevice); null: the hook takes host copies (run) */
  private readonly gpu: PowerSgdDevice | null;

  /**
   * `device`: where the math is timed (an emulated device); null: its real time. `onDevice`: the
   * runtime the buckets' gradients live on and the world size: the math runs there (DDP's
   * runOnDevice); absent, the hook takes host copies (run).
   */
  constructor(
    readonly o: PowerSgdOptions,
    private readonly device: HookDevice | null = null,
    onDevice: { rt: Runtime; world: number } | null = null,
  ) {
    if (!Number.isInteger(o.rank) || o.rank < 1) throw new Error(`PowerSGD rank must be a positive integer, got ${o.rank}`);
    this.gpu = onDevice ? new PowerSgdDevice(onDevice.rt, onDevice.world, o.errorFeedback) : null;
  }

  get onDevice(): boolean {
    return this.gpu !== null;
  }

  private planOf(b: HookBucket): Plan {
    let plan = this.plans.get(b.index);
    if (!plan) this.plans.set(b.index, (plan = planBucket(b, this.o.rank, this.o.minCompressionRate, this.o)));
    return plan;
  }

  private buffersOf(b: HookBucket, plan: Plan, numel: number, onDevice: boolean): Buffers {
    let buf = this.buffers.get(b.index);
    if (!buf)
      this.buffers.set(
        b.index,
        (buf = {
          P: new Float32Array(plan.wire.p),
          plain: new Float32Array(plan.wire.plain),
          qWire: plan.wire.q > plan.qElems ? new Float32Array(plan.wire.q) : null,
          bucketWire: onDevice || plan.wire.bucket > numel ? new Float32Array(Math.max(plan.wire.bucket, numel)) : null,
        }),
      );
    return buf;
  }

  bucketReady(b: HookBucket) {
    if (this.device && this.iter >= this.o.startIter) this.device.enqueueFlops(this.planOf(b).flops.ready);
  }

  /** The hook on a host copy of the bucket (the result replaces `data`). */
  run(pg: ProcessGroup, b: HookBucket, data: Float32Array): Promise<void> {
    if (this.gpu) throw new Error('PowerSGD: this hook runs its math on the device; hand it the bucket there (runOnDevice)');
    const plan = this.planOf(b);
    const error = this.o.errorFeedback
      ? { get: () => this.error.get(b.index), set: (e: Float32Array) => this.error.set(b.index, e) }
      : null;
    return this.chain(pg, b, data.length, hostMath(plan, data, pg.size, error), false);
  }

  /** The hook on the bucket's gradient view on the device, where PyTorch runs it: only P, Q and the uncompressed tensors come to the host. */
  runOnDevice(pg: ProcessGroup, b: HookBucket, grads: GpuTensor): Promise<void> {
    if (!this.gpu) throw new Error('PowerSGD: this hook was made without a device; hand it host copies of the buckets (run)');
    if (pg.size !== this.gpu.world) throw new Error(`PowerSGD: made for world ${this.gpu.world}, run over ${pg.size} ranks`);
    return this.chain(pg, b, grads.numel, this.gpu.math(b.index, this.planOf(b), grads), true);
  }

  /** one bucket after another, so every rank posts their collectives in the same order */
  private chain(pg: ProcessGroup, b: HookBucket, numel: number, math: BucketMath, onDevice: boolean): Promise<void> {
    const done = this.tail.then(() => this.bucket(pg, b, numel, math, onDevice));
    this.tail = done.catch(() => {});
    return done;
  }

  endStep() {
    this.iter++;
  }

  private async bucket(pg: ProcessGroup, b: HookBucket, numel: number, math: BucketMath, onDevice: boolean) {
    const labels = { ...b.labels, compression: this.name };
    const plan = this.planOf(b);
    const buf = this.buffersOf(b, plan, numel, onDevice);
    if (this.iter < this.o.startIter) {
      const wire = await math.readAll(buf.bucketWire);
      await pg.allReduce(wire, { op: 'sum', labels }).wait();
      math.writeAll(wire);
      this.counter.add(wire.length, wire.length * 4);
      return;
    }
    const W = pg.size;
    math.feedIn();

    let Q = this.q.get(b.index);
    if (!this.o.warmStart || !Q) {
      Q = new Float32Array(plan.qElems);
      // the same numbers on every rank, different at every step and bucket
      const rng = new SplitMix32(mix32((this.o.seed ^ mix32(this.iter + 1)) + b.index * 0x9e3779b9));
      for (let i = 0; i < Q.length; i++) Q[i] = rng.normal();
      this.q.set(b.index, Q);
    }
    for (const l of plan.low) orthogonalize(Q, l.q, l.m, l.r, this.o.epsilon);
    const { P, plain } = buf;
    await math.computeP(Q, P, plain);

    // both posted now, in this order on every rank; P needs no division (it is orthogonalized)
    const plainDone = plain.length ? pg.allReduce(plain, { op: 'sum', labels: { ...labels, part: 'uncompressed' } }).wait() : null;
    const pDone = P.length ? pg.allReduce(P, { op: 'sum', labels: { ...labels, part: 'P' } }).wait() : null;
    await plainDone;
    for (let i = 0; i < plan.plainElems; i++) plain[i] /= W;
    await pDone;
    const middle = this.device?.enqueueFlops(plan.flops.middle);
    for (const l of plan.low) orthogonalize(P, l.p, l.n, l.r, this.o.epsilon);
    await math.computeQ(plain, P, Q);
    if (middle !== undefined) await this.device!.reach(middle);
    if (buf.qWire) {
      buf.qWire.set(Q);
      await pg.allReduce(buf.qWire, { op: 'sum', labels: { ...labels, part: 'Q' } }).wait();
      Q.set(buf.qWire.subarray(0, Q.length));
    } else if (Q.length) await pg.allReduce(Q, { op: 'sum', labels: { ...labels, part: 'Q' } }).wait();
    for (let i = 0; i < Q.length; i++) Q[i] /= W;
    this.device?.enqueueFlops(plan.flops.done); // the write back and the optimizer's reads queue behind it
    math.decompress(P, Q);

    if (!this.o.warmStart) this.q.delete(b.index);
    this.counter.add(Math.max(plan.wire.bucket, numel), (plain.length + P.length + (buf.qWire ?? Q).length) * 4);
  }

  async report(): Promise<HookReport> {
    let norm: number;
    if (this.gpu) norm = await this.gpu.errorNorm();
    else {
      let sq = 0;
      for (const e of this.error.values()) for (let i = 0; i < e.length; i++) sq += e[i] * e[i];
      norm = Math.sqrt(sq);
    }
    return {
      uncompressed_bytes: this.counter.uncompressed,
      compressed_bytes: this.counter.compressed,
      error_feedback_norm: norm,
      math: this.gpu ? 'device' : 'host',
    };
  }

  async state(): Promise<HookState> {
    const tensors = new Map<string, Float32Array>();
    const errors = this.gpu ? await this.gpu.errors() : this.error;
    for (const [k, e] of errors) tensors.set(`error.${k}`, e.slice());
    for (const [k, q] of this.q) tensors.set(`q.${k}`, q.slice());
    return { iter: this.iter, tensors };
  }

  loadState(s: HookState) {
    this.iter = s.iter;
    this.error.clear();
    this.q.clear();
    const errors = new Map<number, Float32Array>();
    for (const [name, t] of s.tensors) {
      const [kind, k] = name.split('.');
      if (kind === 'error') errors.set(Number(k), t.slice());
      else if (kind === 'q') this.q.set(Number(k), t.slice());
      else throw new Error(`PowerSGD state: unknown tensor ${name} (expected error.<bucket> or q.<bucket>)`);
    }
    if (this.gpu) this.gpu.loadErrors(errors);
    else for (const [k, e] of errors) this.error.set(k, e);
  }
}
