// AdamW on the host (ZeRO-Offload): fp32 master weights and both moments live in this
// process's memory, and the update runs on the CPU, the same formula as the device kernel
// (workers/kernels/adamw.wgsl), each result rounded to float32 as the device stores it:
//   g *= min(1, maxGradNorm / (norm + 1e-6)); p *= 1 - lr wd
//   m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; p -= (lr/bc1) m / (sqrt(v)/sqrt(bc2) + eps)
import type { AdamwConfig } from './adamw.js';

const f = Math.fround;

export class CpuAdamW {
  readonly master: Float32Array;
  readonly m: Float32Array;
  readonly v: Float32Array;
  step = 0;

  /** @param decay per element: 1 where weight decay applies (nanoGPT: matrices and embeddings) */
  constructor(
    readonly config: AdamwConfig,
    master: Float32Array,
    private readonly decay: Uint8Array,
  ) {
    this.master = Float32Array.from(master);
    this.m = new Float32Array(master.length);
    this.v = new Float32Array(master.length);
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
    const clip = c.maxGradNorm > 0 ? Math.min(1, f(c.maxGradNorm / f(norm + 1e-6))) : 1;
    const b1 = f(c.beta1);
    const b2 = f(c.beta2);
    const stepSize = f(lr / (1 - c.beta1 ** this.step));
    const sqrtBc2 = f(Math.sqrt(1 - c.beta2 ** this.step));
    const eps = f(c.eps);
    const keep = f(1 - lr * c.weightDecay);
    const { master: p, m, v } = this;
    for (let i = 0; i < p.length; i++) {
      const g = f(grads[i]! * clip);
      const mi = f(f(b1 * m[i]!) + f(f(1 - b1) * g));
      const vi = f(f(b2 * v[i]!) + f(f(f(1 - b2) * g) * g));
      m[i] = mi;
      v[i] = vi;
      const w = this.decay[i] ? f(p[i]! * keep) : p[i]!;
      p[i] = f(w - f(f(stepSize * mi) / f(f(f(Math.sqrt(vi)) / sqrtBc2) + eps)));
    }
    return p;
  }
}
