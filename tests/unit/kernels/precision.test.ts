// 16-bit storage (bf16, fp16 packed two per u32; fp16 native where the adapter has shader-f16):
// every kernel with a 16-bit variant against the float64 reference, computed from the same inputs
// rounded to the format (the values the GPU actually reads).
//
// The bound, for an output stored in 16 bits:
//   |gpu - ref| <= |f32 result - ref| + |rounding of the f32 result|
//              <= TOL32 * |ref| + rnd * |ref| (1 + TOL32)
// TOL32 = 1e-4 is the fp32 tests' bound for the same kernels (f32 accumulation over a reduction of
// length K <= 768: gamma_K = K 2^-24 / (1 - K 2^-24) <= 4.6e-5, plus WGSL's few-ULP allowance for
// tanh, sqrt and division). rnd is one rounding to the format: the unit roundoff u (2^-8 bf16,
// 2^-11 fp16) for round to nearest even; bf16 is rounded by our bit operations (nearest even by
// construction), fp16 by pack2x16float, which WGSL lets round to either neighbour: rnd = 2u there.
// Accumulating outputs (dst += src, dinp +=, dweight +=) round once, after an f32 sum: same bound.
// Outputs kept in f32 (layernorm statistics, the sum of squares, AdamW's master weights and
// moments) carry only the f32 term. Elements that cancel to ~0 are measured against a floor
// (relErr, helpers.ts), as in the fp32 tests.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDevice } from '../../../workers/gpu/device.js';
import { encode16, roundTo } from '../../../workers/gpu/precision.js';
import { Runtime } from '../../../workers/gpu/runtime.js';
import { adamw, type AdamwHyper } from '../../../workers/kernels/adamw.js';
import { attentionBackward, attentionForward } from '../../../workers/kernels/attention.js';
import { biasBackward } from '../../../workers/kernels/bias-backward.js';
import { cast } from '../../../workers/kernels/cast.js';
import { geluBackward, geluForward } from '../../../workers/kernels/gelu.js';
import { layernormBackward, layernormForward } from '../../../workers/kernels/layernorm.js';
import { matmul } from '../../../workers/kernels/matmul.js';
import { sumSquares } from '../../../workers/kernels/reduce.js';
import { addInPlace } from '../../../workers/kernels/residual.js';
import {
  refAdamw,
  refAddInPlace,
  refAttentionBackward,
  refAttentionForward,
  refBiasBackward,
  refGeluBackward,
  refGeluForward,
  refLayernormBackward,
  refLayernormForward,
  refMatmul,
  refSumSquares,
} from '../../reference/ops.js';
import { Bench, f64, relErr, rng, sizes } from './helpers.js';
import { bound16, CANCEL_FLOOR, eachVariant, TOL32, type Variant, variantsOf } from './precision-variants.js';

describe('16-bit storage kernels (bf16, fp16): GPU vs float64 reference on format-rounded inputs', () => {
  let rt: Runtime;
  let variants: Variant[];
  beforeAll(async () => {
    rt = new Runtime(await openDevice());
    // SwiftShader lacks shader-f16: the native path runs where the adapter has it
    variants = variantsOf(rt);
  });
  afterAll(() => rt.destroy());

  const each = (body: (v: Variant) => Promise<void>) => eachVariant(rt, variants, body);

  it('cast fp32 -> 16 bits: bf16 bit-exact round to nearest even; fp16 within one ulp of it, and exact at infinities and NaN', async () => {
    const r = rng(3);
    const x = r.normal(4096, 1);
    // ties, the largest halves, the overflow threshold of fp16 (65520 rounds to infinity), NaN
    const special = [
      1 + 2 ** -8,
      1 + 3 * 2 ** -8,
      1 + 2 ** -11,
      1 + 3 * 2 ** -11,
      65504,
      -65504,
      65519,
      65520,
      -65520,
      1e6,
      -1e6,
      3e38,
      NaN,
    ];
    x.set(special, 0);
    await each(async (v) => {
      const bench = new Bench(rt, sizes(x.length, x.length));
      try {
        const inp = bench.tensor('inp', x);
        const out = bench.tensor('out', x.length, v.precision);
        await bench.run(cast(rt, { out, inp, n: x.length }));
        const got = await rt.readBits(out);
        const want = encode16(v.precision, x);
        let worst = 0;
        for (let i = 0; i < x.length; i++) {
          const finite = (want[i]! & 0x7fff) < (v.precision === 'bf16' ? 0x7f80 : 0x7c00);
          const d = Math.abs(got[i]! - want[i]!);
          // fp16: pack2x16float may pick the other neighbour of a finite value; never at inf/NaN
          const ok = d === 0 || (v.precision === 'fp16' && finite && d === 1);
          if (!ok) worst = Math.max(worst, d);
          if (!ok)
            expect.fail(
              `${v.label}: cast(${x[i]}) gave bits ${got[i]!.toString(16)}, round to nearest even gives ${want[i]!.toString(16)}`,
            );
        }
        expect(worst, v.label).toBe(0);
      } finally {
        bench.dispose();
      }
    });
  });

  it(`gelu forward/backward and addInPlace, n = 4096 and 70000, within TOL32 + rnd (bf16 ${bound16({ precision: 'bf16' }).toExponential(2)}, fp16 ${bound16({ precision: 'fp16' }).toExponential(2)})`, async () => {
    await each(async (v) => {
      for (const n of [4096, 70_000]) {
        const r = rng(n);
        const x = roundTo(v.precision, r.normal(n, 3));
        x[0] = 12;
        x[1] = -12;
        const dout = roundTo(v.precision, r.f32(n));
        const dst = roundTo(v.precision, r.normal(n, 1));
        const src = roundTo(v.precision, r.normal(n, 1));
        const bench = new Bench(rt, sizes(n, n, n, n, n));
        try {
          const tx = bench.tensor('x', x, v.precision);
          const ty = bench.tensor('y', n, v.precision);
          const td = bench.tensor('dout', dout, v.precision);
          const tdst = bench.tensor('dst', dst, v.precision);
          const tsrc = bench.tensor('src', src, v.precision);
          await bench.run([
            ...geluForward(rt, { out: ty, inp: tx, n }),
            ...geluBackward(rt, { dinp: td, inp: tx, dout: td, n }),
            ...addInPlace(rt, { dst: tdst, src: tsrc, n }),
          ]);
          const refY = new Float64Array(n);
          refGeluForward({ out: refY, inp: f64(x), n });
          const refDx = new Float64Array(n);
          refGeluBackward({ dinp: refDx, inp: f64(x), dout: f64(dout), n });
          const refDst = f64(dst);
          refAddInPlace({ dst: refDst, src: f64(src), n });
          const b = bound16(v);
          expect(relErr(await bench.read(ty), refY), `${v.label} gelu n=${n}`).toBeLessThan(b);
          expect(relErr(await bench.read(td), refDx), `${v.label} geluBackward n=${n}`).toBeLessThan(b);
          expect(relErr(await bench.read(tdst), refDst), `${v.label} addInPlace n=${n}`).toBeLessThan(b);
        } finally {
          bench.dispose();
        }
      }
    });
  });

  it('layernorm forward (16-bit out, f32 mean/rstd) and backward (accumulating dinp, dweight, dbias), biasBackward: C = 4, 64, 768', async () => {
    await each(async (v) => {
      for (const [N, C] of [
        [8, 4],
        [33, 64],
        [64, 768],
      ] as const) {
        const r = rng(N * C);
        const x = roundTo(
          v.precision,
          r.normal(N * C, 2).map((e, i) => e + (i % C) * 0.01),
        );
        const w = roundTo(v.precision, r.normal(C, 1));
        const bi = roundTo(v.precision, r.normal(C, 0.5));
        const dout = roundTo(v.precision, r.normal(N * C, 1));
        const dinp0 = roundTo(v.precision, r.normal(N * C, 0.1));
        const dw0 = roundTo(v.precision, r.normal(C, 0.1));
        const db0 = roundTo(v.precision, r.normal(C, 0.1));
        const dbias0 = roundTo(v.precision, r.normal(C, 0.1));
        const bench = new Bench(rt, sizes(N * C, N * C, N * C, N * C, C, C, C, C, C, C, N, N));
        try {
          const t = {
            x: bench.tensor('x', x, v.precision),
            out: bench.tensor('out', N * C, v.precision),
            w: bench.tensor('w', w, v.precision),
            b: bench.tensor('b', bi, v.precision),
            dout: bench.tensor('dout', dout, v.precision),
            dinp: bench.tensor('dinp', dinp0, v.precision),
            dw: bench.tensor('dw', dw0, v.precision),
            db: bench.tensor('db', db0, v.precision),
            dbias: bench.tensor('dbias', dbias0, v.precision),
            mean: bench.tensor('mean', N),
            rstd: bench.tensor('rstd', N),
          };
          await bench.run([
            ...layernormForward(rt, { out: t.out, mean: t.mean, rstd: t.rstd, inp: t.x, weight: t.w, bias: t.b, N, C }),
            ...layernormBackward(rt, {
              dinp: t.dinp,
              dweight: t.dw,
              dbias: t.db,
              dout: t.dout,
              inp: t.x,
              weight: t.w,
              mean: t.mean,
              rstd: t.rstd,
              N,
              C,
            }),
            ...biasBackward(rt, { dbias: t.dbias, dout: t.dout, M: N, N: C, accumulate: true }),
          ]);
          const ref = { out: new Float64Array(N * C), mean: new Float64Array(N), rstd: new Float64Array(N) };
          refLayernormForward({ ...ref, inp: f64(x), weight: f64(w), bias: f64(bi), N, C });
          const rb = { dinp: f64(dinp0), dweight: f64(dw0), dbias: f64(db0) };
          refLayernormBackward({ ...rb, dout: f64(dout), inp: f64(x), weight: f64(w), mean: ref.mean, rstd: ref.rstd, N, C });
          const refDbias = f64(dbias0);
          refBiasBackward({ dbias: refDbias, dout: f64(dout), M: N, N: C, accumulate: true });
          const b = bound16(v);
          const at = `${v.label} N=${N} C=${C}`;
          expect(relErr(await bench.read(t.out), ref.out, CANCEL_FLOOR), `out ${at}`).toBeLessThan(b);
          expect(relErr(await bench.read(t.mean), ref.mean), `mean ${at}`).toBeLessThan(TOL32);
          expect(relErr(await bench.read(t.rstd), ref.rstd), `rstd ${at}`).toBeLessThan(TOL32);
          expect(relErr(await bench.read(t.dinp), rb.dinp, CANCEL_FLOOR), `dinp ${at}`).toBeLessThan(b);
          expect(relErr(await bench.read(t.dw), rb.dweight), `dweight ${at}`).toBeLessThan(b);
          expect(relErr(await bench.read(t.db), rb.dbias), `dbias ${at}`).toBeLessThan(b);
          expect(relErr(await bench.read(t.dbias), refDbias), `biasBackward ${at}`).toBeLessThan(b);
        } finally {
          bench.dispose();
        }
      }
    });
  });

  it('matmul, the four layouts with bias and accumulate (the linears forward, dx and dW +=), M=64 N=96 K=192: 16-bit a, b, out, bias within TOL32 + rnd', async () => {
    const [M, N, K] = [64, 96, 192];
    await each(async (v) => {
      for (const [transA, transB] of [
        [false, false],
        [false, true],
        [true, false],
        [true, true],
      ] as const) {
        const r = rng(M + N + K + (transA ? 1 : 0) + (transB ? 2 : 0));
        const a = roundTo(v.precision, r.normal(M * K, 1));
        const b = roundTo(v.precision, r.normal(K * N, 0.1));
        const bias = roundTo(v.precision, r.normal(N, 0.5));
        const out0 = roundTo(v.precision, r.normal(M * N, 1));
        const bench = new Bench(rt, sizes(M * K, K * N, N, M * N));
        try {
          const t = {
            a: bench.tensor('a', a, v.precision),
            b: bench.tensor('b', b, v.precision),
            bias: bench.tensor('bias', bias, v.precision),
            out: bench.tensor('out', out0, v.precision),
          };
          await bench.run(matmul(rt, { out: t.out, a: t.a, b: t.b, bias: t.bias, M, N, K, transA, transB, accumulate: true }));
          const ref = f64(out0);
          refMatmul({ out: ref, a: f64(a), b: f64(b), bias: f64(bias), M, N, K, transA, transB, accumulate: true });
          expect(relErr(await bench.read(t.out), ref), `${v.label} matmul tA=${transA} tB=${transB}`).toBeLessThan(bound16(v));
        } finally {
          bench.dispose();
        }
      }
      // shapes the 16-bit path cannot take are refused with a hint, not computed at width 1
      const bench = new Bench(rt, sizes(8 * 6, 6 * 8, 64));
      try {
        const [a, b, out] = [bench.tensor('a', 48, v.precision), bench.tensor('b', 48, v.precision), bench.tensor('o', 64, v.precision)];
        expect(() => matmul(rt, { out, a, b, M: 8, N: 8, K: 6 })).toThrow(/vec4 kernel/);
      } finally {
        bench.dispose();
      }
    });
  });

  it('attention forward (16-bit out, f32 probabilities) and backward (16-bit dqkv): hs 4 .. 32, T 9 .. 129, within TOL32 + rnd', async () => {
    await each(async (v) => {
      for (const [B, T, C, NH] of [
        [3, 9, 16, 4],
        [2, 65, 24, 2],
        [1, 129, 64, 2],
      ] as const) {
        const r = rng(B * 100 + T * 10 + C);
        const qkv = roundTo(v.precision, r.normal(B * T * 3 * C, 1));
        const dout = roundTo(v.precision, r.f32(B * T * C));
        const nAtt = B * NH * T * T;
        const bench = new Bench(rt, sizes(B * T * C, nAtt, B * T * 3 * C, B * T * C, B * T * 3 * C));
        try {
          const t = {
            out: bench.tensor('out', B * T * C, v.precision),
            att: bench.tensor('att', nAtt),
            qkv: bench.tensor('qkv', qkv, v.precision),
            dout: bench.tensor('dout', dout, v.precision),
            dqkv: bench.tensor('dqkv', B * T * 3 * C, v.precision),
          };
          await bench.run([
            ...attentionForward(rt, { out: t.out, att: t.att, qkv: t.qkv, B, T, C, NH }),
            ...attentionBackward(rt, { dqkv: t.dqkv, dout: t.dout, qkv: t.qkv, att: t.att, B, T, C, NH }),
          ]);
          const ref = { out: new Float64Array(B * T * C), att: new Float64Array(nAtt) };
          refAttentionForward({ ...ref, qkv: f64(qkv), B, T, C, NH });
          const gAtt = await bench.read(t.att);
          const refD = new Float64Array(B * T * 3 * C);
          refAttentionBackward({ dqkv: refD, dout: f64(dout), qkv: f64(qkv), att: f64(gAtt), B, T, C, NH });
          const at = `${v.label} B=${B} T=${T} C=${C} NH=${NH}`;
          expect(relErr(await bench.read(t.out), ref.out, CANCEL_FLOOR), `out ${at}`).toBeLessThan(bound16(v));
          expect(relErr(gAtt, ref.att), `att ${at}`).toBeLessThan(TOL32);
          expect(relErr(await bench.read(t.dqkv), refD, CANCEL_FLOOR), `dqkv ${at}`).toBeLessThan(bound16(v));
        } finally {
          bench.dispose();
        }
      }
    });
  });

  it('sumSquares of 16-bit input (f32 sum): within gamma_m, m = 4 ceil(n / 4P) + P terms per chain (P = 1024 partials)', async () => {
    await each(async (v) => {
      for (const n of [4, 4096, 70_000]) {
        const x = roundTo(v.precision, rng(n + 1).normal(n, 1));
        const bench = new Bench(rt, sizes(n, 1));
        try {
          const tx = bench.tensor('x', x, v.precision);
          const out = bench.tensor('out', 1);
          await bench.run(sumSquares(rt, { out, inp: tx, n }));
          const ref = new Float64Array(1);
          refSumSquares({ out: ref, inp: f64(x), n });
          const P = Math.min(n, 1024);
          const m = 4 * Math.ceil(n / (4 * P)) + P;
          const gamma = (m * 2 ** -24) / (1 - m * 2 ** -24);
          expect(relErr(await bench.read(out), ref), `${v.label} n=${n}`).toBeLessThan(gamma);
        } finally {
          bench.dispose();
        }
      }
    });
  });

  it('AdamW on 16-bit loss-scaled gradients (scale 2^10): unscaled update and clipping on the unscaled norm within 1e-4; an inf or NaN gradient skips the step (weights and moments keep their bits)', async () => {
    const n = 4100;
    const scale = 2 ** 10;
    await each(async (v) => {
      const r = rng(7);
      const params = r.normal(n, 0.02);
      const bench = new Bench(rt, sizes(n, n, n, n, 1));
      try {
        const t = {
          params: bench.tensor('p', params),
          grads: bench.tensor('g', n, v.precision),
          m: bench.tensor('m', n),
          v: bench.tensor('v', n),
          gradSumSq: bench.tensor('gss', 1),
        };
        const opt = adamw(rt, { params: t.params, grads: t.grads, m: t.m, v: t.v, n, gradSumSq: t.gradSumSq, skipNonFinite: true });
        const norm = sumSquares(rt, { out: t.gradSumSq, inp: t.grads, n });
        const ref = { params: f64(params), m: new Float64Array(n), v: new Float64Array(n) };
        for (let step = 1; step <= 3; step++) {
          // the scaled gradients as the 16-bit backward leaves them; the reference unscales the same values
          const scaled = roundTo(
            v.precision,
            r.normal(n, 0.5).map((g) => g * scale),
          );
          rt.write(t.grads, scaled);
          // step 2 clips (the unscaled norm is ~32), the others do not
          const h: AdamwHyper = {
            lr: 1e-2,
            beta1: 0.9,
            beta2: 0.95,
            eps: 1e-8,
            weightDecay: 0.1,
            step,
            maxGradNorm: step === 2 ? 1 : 0,
            gradScale: scale,
          };
          opt.set(h);
          rt.run([...norm, ...opt.dispatches]);
          const grads = f64(scaled).map((g) => g / scale);
          const ss = new Float64Array(1);
          refSumSquares({ out: ss, inp: grads, n });
          refAdamw({ ...ref, grads, n, gradSumSq: ss }, h);
        }
        await rt.sync();
        expect(relErr(await bench.read(t.params), ref.params, 1e-2), `${v.label} params`).toBeLessThan(1e-4);
        expect(relErr(await bench.read(t.m), ref.m), `${v.label} m`).toBeLessThan(1e-4);
        expect(relErr(await bench.read(t.v), ref.v), `${v.label} v`).toBeLessThan(1e-4);

        for (const bad of [v.precision === 'fp16' ? 1e6 : Infinity, NaN]) {
          const before = await Promise.all([bench.read(t.params), bench.read(t.m), bench.read(t.v)]);
          const g = roundTo(v.precision, r.normal(n, 0.5));
          g[123] = bad; // fp16: 1e6 overflows the format to inf when stored
          rt.write(t.grads, g);
          opt.set({ lr: 1e-2, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, step: 4, maxGradNorm: 1, gradScale: scale });
          rt.run([...norm, ...opt.dispatches]);
          const sumSq = (await bench.read(t.gradSumSq))[0]!;
          expect(Number.isFinite(sumSq), `${v.label}: sum of squares with a ${bad} gradient is ${sumSq}`).toBe(false);
          const after = await Promise.all([bench.read(t.params), bench.read(t.m), bench.read(t.v)]);
          for (let k = 0; k < 3; k++)
            expect(Buffer.from(after[k]!.buffer).equals(Buffer.from(before[k]!.buffer)), `${v.label} ${bad}: state ${k} unchanged`).toBe(
              true,
            );
        }
      } finally {
        bench.dispose();
      }
    });
  });

  it('refuses 16-bit launches it cannot run: a length not a multiple of 4 (a row length named), mixed storage in one kernel, 16-bit master weights', async () => {
    const bench = new Bench(rt, sizes(8, 8, 8, 8, 8));
    try {
      // 7 elements: allocated but not written (16-bit writes copy whole 4-byte words)
      const a = bench.arena.alloc('a', [7], 'bf16');
      const b = bench.arena.alloc('b', [7], 'bf16');
      const c = bench.tensor('c', 8);
      expect(() => geluForward(rt, { out: a, inp: b, n: 7 })).toThrow(/multiple of 4/);
      expect(() => addInPlace(rt, { dst: bench.tensor('d', 8, 'fp16'), src: c, n: 8 })).toThrow(/fp16 but src .* is fp32/);
      expect(() => cast(rt, { out: c, inp: bench.tensor('e', 8, 'bf16'), n: 8 })).toThrow(/cast reads fp32/);
    } finally {
      bench.dispose();
    }
    // a row length that is not a multiple of 4: the error names the dimension to pad
    const rows = new Bench(rt, sizes(12, 2, 2, 12, 8, 8));
    try {
      const [out, mean, rstd, inp] = [
        rows.tensor('out', 12, 'bf16'),
        rows.tensor('mean', 2),
        rows.tensor('rstd', 2),
        rows.tensor('inp', 12, 'bf16'),
      ];
      const [weight, bias] = [rows.tensor('w', 8, 'bf16'), rows.tensor('b', 8, 'bf16')];
      expect(() => layernormForward(rt, { out, mean, rstd, inp, weight, bias, N: 2, C: 6 })).toThrow(/C \(d_model\) = 6 .*HINT: pad C/);
    } finally {
      rows.dispose();
    }
  });
});
