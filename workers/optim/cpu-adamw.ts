// AdamW on the host (ZeRO-Offload): fp32 master weights and both moments live in this
// process's memory, and the update runs on the CPU, the same formula as the device kernel
// (workers/kernels/adamw.wgsl), each result rounded to float32 as the device stores it:
//   g *= min(1, maxGradNorm / (norm + 1e-6)); p *= 1 - lr wd
//   m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; p -= (lr/bc1) m / (sqrt(v)/sqrt(bc2) + eps)
// In WebAssembly SIMD where it runs (cpu-adamw-simd.ts: the state in its memory, the same bits),
// over the runs of elements with and without weight decay; the JS loop does the tails of the
// runs, and everything where the SIMD kernel does not run.
import type { AdamwConfig } from './adamw.js';
import { ADAMW_BLOCK, type AdamwWasm, createAdamwWasm } from './cpu-adamw-simd.js';

const f = Math.fround;

/** one update's float32 scalars */
interface Scalars {
  clip: number;
  b1: number;
  omb1: number;
  b2: number;
  omb2: number;
  stepSize: number;
  sqrtBc2: number;
  eps: number;
  keep: number;
}

export class CpuAdamW {
  readonly master: Float32Array;
  readonly m: Float32Array;
  readonly v: Float32Array;
  step = 0;
  private readonly wasm: AdamwWasm | null;
  /** maximal runs [start, end) of elements that do or do not take weight decay */
  private readonly runs: { start: number; end: number; decay: boolean }[] = [];

  /**
   * @param decay per element: 1 where weight decay applies (nanoGPT: matrices and embeddings)
   * @param o.simd false: the JS loop only (tests compare the two)
   */
  constructor(
    readonly config: AdamwConfig,
    master: Float32Array,
    private readonly decay: Uint8Array,
    o: { simd?: boolean } = {},
  ) {
    const n = master.length;
    this.wasm = o.simd === false ? null : createAdamwWasm(n);
    this.master = this.wasm ? this.wasm.p : new Float32Array(n);
    this.master.set(master);
    this.m = this.wasm?.m ?? new Float32Array(n);
    this.v = this.wasm?.v ?? new Float32Array(n);
    for (let i = 0; i < n;) {
      let j = i + 1;
      while (j < n && !decay[j] === !decay[i]) j++;
      this.runs.push({ start: i, end: j, decay: !!decay[i] });
      i = j;
    }
  }

  /** whether the update runs in WebAssembly SIMD */
  get simd(): boolean {
    return this.wasm !== null;
  }

  /** bytes of host memory: master weights, and the two moments */
  get hostBytes() {
    return { params: this.master.byteLength, optimizer: this.m.byteLength + this.v.byteLength };
  }

  /** One update with the global squared gradient norm; returns the new master weights. */
  update(grads: Float32Array, gradSumSq: number, lr: number): Float32Array {
    this.step += 1;
    const c = this.config;
    const norm = f(Math.sqrt(f(gradSumSq)));
    const b1 = f(c.beta1);
    const b2 = f(c.beta2);
    const k: Scalars = {
      clip: c.maxGradNorm > 0 ? Math.min(1, f(c.maxGradNorm / f(norm + 1e-6))) : 1,
      b1,
      omb1: f(1 - b1),
      b2,
      omb2: f(1 - b2),
      stepSize: f(lr / (1 - c.beta1 ** this.step)),
      sqrtBc2: f(Math.sqrt(1 - c.beta2 ** this.step)),
      eps: f(c.eps),
      keep: f(1 - lr * c.weightDecay),
    };
    if (!this.wasm) this.jsRange(0, this.master.length, grads, 0, k);
    else this.simdUpdate(this.wasm, grads, k);
    return this.master;
  }

  /** The kernel over each block of gradients (staged into its memory), run by run; tails in JS. */
  private simdUpdate(w: AdamwWasm, grads: Float32Array, k: Scalars) {
    const n = this.master.length;
    let r = 0;
    for (let s = 0; s < n; s += ADAMW_BLOCK) {
      const e = Math.min(n, s + ADAMW_BLOCK);
      w.g.set(grads.subarray(s, e));
      while (this.runs[r]!.end <= s) r++;
      for (let q = r; q < this.runs.length && this.runs[q]!.start < e; q++) {
        const run = this.runs[q]!;
        const [lo, hi] = [Math.max(run.start, s), Math.min(run.end, e)];
        const vecHi = lo + ((hi - lo) & ~3);
        if (vecHi > lo) {
          const keep = run.decay ? k.keep : 1;
          w.run(
            w.at.p + 4 * lo,
            w.at.m + 4 * lo,
            w.at.v + 4 * lo,
            w.at.g + 4 * (lo - s),
            4 * (vecHi - lo),
            k.clip,
            k.b1,
            k.omb1,
            k.b2,
            k.omb2,
            k.stepSize,
            k.sqrtBc2,
            k.eps,
            keep,
          );
        }
        if (vecHi < hi) this.jsRange(vecHi, hi, w.g, s, k);
      }
    }
  }

  /** The JS loop over [from, to); grads[i - gBase] is element i's gradient. */
  private jsRange(from: number, to: number, grads: Float32Array, gBase: number, k: Scalars) {
    const { master: p, m, v } = this;
    const { clip, b1, omb1, b2, omb2, stepSize, sqrtBc2, eps, keep } = k;
    for (let i = from; i < to; i++) {
      const g = f(grads[i - gBase]! * clip);
      const mi = f(f(b1 * m[i]!) + f(omb1 * g));
      const vi = f(f(b2 * v[i]!) + f(f(omb2 * g) * g));
      m[i] = mi;
      v[i] = vi;
      const w = this.decay[i] ? f(p[i]! * keep) : p[i]!;
      p[i] = f(w - f(f(stepSize * mi) / f(f(f(Math.sqrt(vi)) / sqrtBc2) + eps)));
    }
  }
}
