// ZeRO-Offload's host AdamW in WebAssembly SIMD (workers/optim/cpu-adamw-simd.ts) gives the JS
// loop's bits: master weights and both moments after several steps, over a shard whose weight
// decay changes in runs of every length (shorter than a vector, across the gradient staging
// blocks), with gradients that clip and that do not, zeros and subnormals among them.
import { describe, expect, it } from 'vitest';
import { CpuAdamW } from '../../../workers/optim/cpu-adamw.js';
import { ADAMW_BLOCK } from '../../../workers/optim/cpu-adamw-simd.js';

const config = { lr: 6e-4, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, maxGradNorm: 1 };

function rng(seed: number) {
  let s = seed >>> 0 || 1;
  return () => ((s ^= s << 13), (s ^= s >>> 17), (s ^= s << 5), (s >>> 0) / 2 ** 32);
}

function expectSameBits(got: Float32Array, want: Float32Array, what: string) {
  const g = new Uint32Array(got.buffer, got.byteOffset, got.length);
  const w = new Uint32Array(want.buffer, want.byteOffset, want.length);
  for (let i = 0; i < got.length; i++)
    if (g[i] !== w[i])
      expect.fail(`${what}: element ${i} is ${got[i]} (0x${g[i]!.toString(16)}), the JS loop gives ${want[i]} (0x${w[i]!.toString(16)})`);
}

describe("ZeRO-Offload's AdamW in WebAssembly SIMD", () => {
  it("runs here, and after 6 steps its master weights and moments are the JS loop's bit for bit", () => {
    const n = 3 * ADAMW_BLOCK + 13;
    const r = rng(42);
    const master = Float32Array.from({ length: n }, () => (r() - 0.5) * 0.04);
    // decay runs of 1..9 elements, and two long ones across the staging blocks
    const decay = new Uint8Array(n);
    for (let i = 0, on = 1; i < n; on ^= 1) {
      const len = i > ADAMW_BLOCK - 50 && i < ADAMW_BLOCK ? 2 * ADAMW_BLOCK : 1 + Math.floor(r() * 9);
      decay.fill(on, i, Math.min(n, i + len));
      i += len;
    }
    const simd = new CpuAdamW(config, master, decay);
    const js = new CpuAdamW(config, master, decay, { simd: false });
    expect(simd.simd).toBe(true);
    expect(js.simd).toBe(false);
    for (let step = 1; step <= 6; step++) {
      const grads = Float32Array.from({ length: n }, (_, i) =>
        i % 97 === 0 ? 0 : i % 89 === 0 ? 1e-42 : (r() - 0.5) * 10 ** -(1 + (i % 4)),
      );
      const before = grads.slice();
      // steps 1, 3, 5 clip (norm 40 against maxGradNorm 1); the others do not
      const sq = step % 2 ? 1600 : 0.25;
      const lr = config.lr * (step / 6);
      const a = simd.update(grads, sq, lr);
      const b = js.update(grads, sq, lr);
      expectSameBits(grads, before, `step ${step}: the gradients are read, not written`);
      expectSameBits(a, b, `step ${step} master weights`);
      expectSameBits(simd.m, js.m, `step ${step} first moment`);
      expectSameBits(simd.v, js.v, `step ${step} second moment`);
    }
    // and the update did move the weights
    expect(simd.master.some((x, i) => x !== master[i])).toBe(true);
  });

  it('a shard shorter than a vector, and an empty one, take the JS loop inside the same object', () => {
    for (const n of [0, 3]) {
      const master = Float32Array.from({ length: n }, (_, i) => 0.01 * (i + 1));
      const decay = new Uint8Array(n).fill(1);
      const simd = new CpuAdamW(config, master, decay);
      const js = new CpuAdamW(config, master, decay, { simd: false });
      const grads = Float32Array.from({ length: n }, (_, i) => 0.1 * (i - 1));
      expectSameBits(simd.update(grads, 0.05, 1e-3), js.update(grads, 0.05, 1e-3), `n ${n}`);
    }
  });
});
