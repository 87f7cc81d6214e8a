// Large shapes, kept few (SwiftShader on 2 cores): a big matmul on the vec4 path, attention at
// T = 1024, and a grid past 65535 workgroups (folded into 2D). References on sampled elements.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDevice } from '../../../workers/gpu/device.js';
import { Runtime } from '../../../workers/gpu/runtime.js';
import { attentionForward } from '../../../workers/kernels/attention.js';
import { geluForward } from '../../../workers/kernels/gelu.js';
import { matmul } from '../../../workers/kernels/matmul.js';
import { grid } from '../../../workers/kernels/util.js';
import { refAttentionForward } from '../../reference/ops.js';
import { Bench, f64, relErr, rng, sizes } from './helpers.js';

describe('large shapes', () => {
  let rt: Runtime;
  beforeAll(async () => {
    rt = new Runtime(await openDevice());
  });
  afterAll(() => rt.destroy());

  it('grid() folds workgroup counts above the per-dimension limit into x * y >= count', () => {
    const fake = { limits: { maxComputeWorkgroupsPerDimension: 65535 } } as unknown as Runtime;
    for (const n of [1, 65535, 65536, 200_000, 16_777_217 / 256, 4e6]) {
      const [x, y] = grid(fake, n);
      expect(x).toBeLessThanOrEqual(65535);
      expect(y).toBeLessThanOrEqual(65535);
      expect(x * y).toBeGreaterThanOrEqual(Math.ceil(n));
    }
  });

  it('matmul 1024x768x512 (transB, bias) matches float64 on 2000 sampled outputs within 1e-4 (floor 1e-2 * max)', async () => {
    const [M, N, K] = [1024, 768, 512];
    const r = rng(42);
    const a = r.f32(M * K);
    const b = r.f32(N * K);
    const bias = r.f32(N);
    const bench = new Bench(rt, sizes(M * K, N * K, N, M * N));
    try {
      const out = bench.tensor('out', M * N);
      await bench.run(
        matmul(rt, { out, a: bench.tensor('a', a), b: bench.tensor('b', b), bias: bench.tensor('bias', bias), M, N, K, transB: true }),
      );
      const got = await bench.read(out);
      const g: number[] = [];
      const ref: number[] = [];
      for (let s = 0; s < 2000; s++) {
        const i = Math.floor(r.next() * M);
        const j = Math.floor(r.next() * N);
        let v = bias[j];
        for (let k = 0; k < K; k++) v += a[i * K + k] * b[j * K + k];
        g.push(got[i * N + j]);
        ref.push(v);
      }
      expect(relErr(g, ref, 1e-2)).toBeLessThan(1e-4);
    } finally {
      bench.dispose();
    }
  });

  it('attention forward at T = 1024 (B 1, C 16, NH 2) within 1e-4', async () => {
    const [B, T, C, NH] = [1, 1024, 16, 2];
    const qkv = rng(7).normal(B * T * 3 * C, 1);
    const bench = new Bench(rt, sizes(B * T * C, B * NH * T * T, B * T * 3 * C));
    try {
      const out = bench.tensor('out', B * T * C);
      const att = bench.tensor('att', B * NH * T * T);
      await bench.run(attentionForward(rt, { out, att, qkv: bench.tensor('qkv', qkv), B, T, C, NH }));
      const ref = { out: new Float64Array(B * T * C), att: new Float64Array(B * NH * T * T) };
      refAttentionForward({ ...ref, qkv: f64(qkv), B, T, C, NH });
      expect(relErr(await bench.read(out), ref.out, 1e-2)).toBeLessThan(1e-4);
      expect(relErr(await bench.read(att), ref.att)).toBeLessThan(1e-4);
    } finally {
      bench.dispose();
    }
  });

  it('an elementwise kernel over 16,777,217 elements (65,537 workgroups, folded) writes every element', async () => {
    const n = 16_777_217; // odd: the scalar kernel, 256 per workgroup
    const x = new Float32Array(n);
    for (let i = 0; i < n; i++) x[i] = ((i % 1000) - 500) / 100;
    const bench = new Bench(rt, sizes(n, n));
    try {
      const out = bench.tensor('out', n);
      await bench.run(geluForward(rt, { out, inp: bench.tensor('x', x), n }));
      const got = await bench.read(out);
      const S2PI = Math.sqrt(2 / Math.PI);
      let worst = 0;
      for (const i of [0, 1, 255, 256, 65535 * 256 - 1, 65535 * 256, n - 2, n - 1, 12_345_678]) {
        const v = x[i];
        const ref = 0.5 * v * (1 + Math.tanh(S2PI * (v + 0.044715 * v ** 3)));
        worst = Math.max(worst, Math.abs(got[i] - ref) / Math.max(Math.abs(ref), 1e-3));
      }
      expect(worst).toBeLessThan(1e-4);
    } finally {
      bench.dispose();
    }
  });
});
