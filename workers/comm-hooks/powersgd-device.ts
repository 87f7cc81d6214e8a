// PowerSGD's math on the device, where PyTorch's powerSGD_hook runs it: DDP hands the hook the
// bucket's gradient view instead of a host copy, and only P, Q and the uncompressed tensors
// travel between the device and the host (the collectives run on the host). Per bucket:
//   feedIn     x = x·world + e, e = x (powersgd-feedback.wgsl)
//   computeP   P = M·Q per compressed tensor (matmul.wgsl), the uncompressed tensors copied
//              beside the P slices; one readback of both
//   computeQ   the uncompressed tensors' reduced values written into x, P (reduced, orthogonalized
//              on the host: n x r is small) written up, Q = Mᵀ·P; one readback of Q
//   decompress Q (reduced) written up, M = P·Qᵀ into x, e = e − x
// Every slice starts on a slot boundary (viewOf's alignment), so the device's P and Q buffers
// hold the host's packed P and Q with gaps; unpacking them is a host copy of n·r and m·r floats.
// The error memory is the bucket's size, in the `comm` category of the memory figures.
import { type GpuTensor, SLICE_ALIGN, viewOf } from '../gpu/allocator.js';
import type { Dispatch, Runtime } from '../gpu/runtime.js';
import { matmul } from '../kernels/matmul.js';
import { powerSgdFeedback } from '../kernels/powersgd-feedback.js';
import { sumSquares } from '../kernels/reduce.js';
import type { BucketMath, Plan } from './powersgd-math.js';

const SLOT = SLICE_ALIGN / 4;
const up = (n: number) => Math.ceil(n / SLOT) * SLOT;

/** A bucket's device buffers and launches, made at its first step (its error memory zero until the first compressed one). */
interface DeviceBucket {
  numel: number;
  /** error memory (n) */
  e: GpuTensor;
  /** each compressed tensor's P, then each uncompressed tensor, at slot offsets */
  pPlain: GpuTensor;
  /** each compressed tensor's Q at slot offsets */
  q: GpuTensor;
  /** element offsets in pPlain of each low tensor's P, of each plain tensor; in q of each Q; pEnd: where the last P ends */
  pAt: number[];
  plainAt: number[];
  qAt: number[];
  pEnd: number;
  feedIn: Dispatch[];
  residual: Dispatch[];
  mq: Dispatch[];
  mtp: Dispatch[];
  pqt: Dispatch[];
  /** host copies of pPlain and q in the device's layout (readbacks and uploads) */
  hostP: Float32Array;
  hostQ: Float32Array;
}

export class PowerSgdDevice {
  private readonly buckets = new Map<number, DeviceBucket>();
  /** error memories restored from a checkpoint before their bucket's first compressed step */
  private readonly restored = new Map<number, Float32Array>();
  private normSq: GpuTensor | null = null;

  constructor(
    readonly rt: Runtime,
    readonly world: number,
    private readonly feedback: boolean,
  ) {}

  /** The bucket's math over its gradient view `x` (its buffers made the first time). */
  math(index: number, plan: Plan, x: GpuTensor): BucketMath {
    const d = this.buckets.get(index) ?? this.make(index, plan, x);
    const { rt } = this;
    // the host's packed Q into the device's slots, in one upload
    const writeQ = (Q: Float32Array) => {
      if (!plan.low.length) return;
      plan.low.forEach((l, i) => d.hostQ.set(Q.subarray(l.q, l.q + l.m * l.r), d.qAt[i]));
      rt.write(d.q, d.hostQ);
    };
    return {
      readAll: async (into) => {
        if (!into) throw new Error('PowerSGD on the device: the uncompressed steps read the bucket into a host buffer; pass one');
        await rt.read(x, x.numel, 0, into);
        return into;
      },
      writeAll: (from) => rt.write(x, from.subarray(0, x.numel)),
      feedIn: () => rt.run(d.feedIn),
      computeP: async (Q, P, plain) => {
        writeQ(Q);
        rt.run(d.mq);
        plan.plain.forEach(([s, k], i) => rt.copy(x, d.pPlain, k * 4, s * 4, d.plainAt[i]! * 4));
        const host = await rt.read(d.pPlain, d.pPlain.numel, 0, d.hostP);
        plan.low.forEach((l, i) => P.set(host.subarray(d.pAt[i], d.pAt[i]! + l.n * l.r), l.p));
        let at = 0;
        plan.plain.forEach(([, k], i) => {
          plain.set(host.subarray(d.plainAt[i], d.plainAt[i]! + k), at);
          at += k;
        });
      },
      computeQ: async (plain, P, Q) => {
        let at = 0;
        for (const [s, k] of plan.plain) {
          rt.write(x, plain.subarray(at, at + k), s);
          at += k;
        }
        plan.low.forEach((l, i) => d.hostP.set(P.subarray(l.p, l.p + l.n * l.r), d.pAt[i]));
        if (d.pEnd) rt.write(d.pPlain, d.hostP.subarray(0, d.pEnd));
        rt.run(d.mtp);
        const host = await rt.read(d.q, d.q.numel, 0, d.hostQ);
        plan.low.forEach((l, i) => Q.set(host.subarray(d.qAt[i], d.qAt[i]! + l.m * l.r), l.q));
      },
      decompress: (_P, Q) => {
        writeQ(Q);
        rt.run(d.pqt);
        rt.run(d.residual);
      },
    };
  }

  private make(index: number, plan: Plan, x: GpuTensor): DeviceBucket {
    const { rt } = this;
    const alloc = rt.allocator;
    let at = 0;
    const pAt = plan.low.map((l) => ((at = up(at)), (at += l.n * l.r) - l.n * l.r));
    const pEnd = at;
    const plainAt = plan.plain.map(([, k]) => ((at = up(at)), (at += k) - k));
    const pPlain = alloc.tensor(`powersgd.P+plain.${index}`, 'comm', [Math.max(1, at)]);
    at = 0;
    const qAt = plan.low.map((l) => ((at = up(at)), (at += l.m * l.r) - l.m * l.r));
    const q = alloc.tensor(`powersgd.Q.${index}`, 'comm', [Math.max(1, at)]);
    const e = alloc.tensor(`powersgd.error.${index}`, 'comm', [x.numel]);
    const saved = this.restored.get(index);
    if (saved) {
      if (saved.length !== x.numel)
        throw new Error(`PowerSGD state: bucket ${index}'s error memory has ${saved.length} values, the bucket ${x.numel}`);
      rt.write(e, saved);
      this.restored.delete(index);
    } else rt.clear(e);
    const fb = powerSgdFeedback(rt, { x, e, n: x.numel, world: this.world, feedback: this.feedback });
    const M = (l: Plan['low'][number]) => viewOf(x, `M${l.start}`, l.start, l.n * l.m);
    const P = (i: number, l: Plan['low'][number]) => viewOf(pPlain, `P${l.start}`, pAt[i]!, l.n * l.r);
    const Q = (i: number, l: Plan['low'][number]) => viewOf(q, `Q${l.start}`, qAt[i]!, l.m * l.r);
    const d: DeviceBucket = {
      numel: x.numel,
      e,
      pPlain,
      q,
      pAt,
      plainAt,
      qAt,
      pEnd,
      feedIn: fb.feedIn,
      residual: fb.residual,
      ...this.products(plan.low.map((l, i) => ({ l, M: M(l), P: P(i, l), Q: Q(i, l) }))),
      hostP: new Float32Array(pPlain.numel),
      hostQ: new Float32Array(q.numel),
    };
    this.buckets.set(index, d);
    return d;
  }

  /**
   * P = M·Q, Q = Mᵀ·P and M = P·Qᵀ of each compressed tensor, with the tiled matmul. (Kernels that
   * read M once per product with one vec4 of sums per invocation were tried: on SwiftShader they
   * took 2 to 5 times the tiled matmul's time at these shapes.)
   */
  private products(ts: { l: Plan['low'][number]; M: GpuTensor; P: GpuTensor; Q: GpuTensor }[]) {
    const rt = this.rt;
    return {
      mq: ts.flatMap(({ l, M, P, Q }) => matmul(rt, { out: P, a: M, b: Q, M: l.n, N: l.r, K: l.m })),
      mtp: ts.flatMap(({ l, M, P, Q }) => matmul(rt, { out: Q, a: M, b: P, M: l.m, N: l.r, K: l.n, transA: true })),
      pqt: ts.flatMap(({ l, M, P, Q }) => matmul(rt, { out: M, a: P, b: Q, M: l.n, N: l.m, K: l.r, transB: true })),
    };
  }

  /** Each bucket's error memory, read back (checkpoints); none without error feedback, as on the host. */
  async errors(): Promise<Map<number, Float32Array>> {
    if (!this.feedback) return new Map();
    const out = new Map(this.restored);
    for (const [k, d] of this.buckets) out.set(k, await this.rt.read(d.e));
    return out;
  }

  /** Restores error memories (a checkpoint's): into the buckets made already, else when they are. */
  loadErrors(errors: ReadonlyMap<number, Float32Array>) {
    this.restored.clear();
    for (const [k, e] of errors) {
      const d = this.buckets.get(k);
      if (!d) this.restored.set(k, e.slice());
      else if (e.length !== d.numel)
        throw new Error(`PowerSGD state: bucket ${k}'s error memory has ${e.length} values, the bucket ${d.numel}`);
      else this.rt.write(d.e, e);
    }
    for (const [k, d] of this.buckets) if (!errors.has(k)) this.rt.clear(d.e);
  }

  /** The L2 norm of all the error memories (one readback). */
  async errorNorm(): Promise<number> {
    const { rt } = this;
    if (!this.feedback) return 0;
    this.normSq ??= rt.allocator.tensor('powersgd.error_norm_sq', 'workspace', [1]);
    rt.clear(this.normSq);
    for (const d of this.buckets.values()) rt.run(sumSquares(rt, { out: this.normSq, inp: d.e, n: d.numel, accumulate: true }));
    let sq = (await rt.read(this.normSq))[0]!;
    for (const e of this.restored.values()) for (let i = 0; i < e.length; i++) sq += e[i]! * e[i]!;
    return Math.sqrt(sq);
  }
}
