import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDevice } from '../../../workers/gpu/device.js';
import { Runtime } from '../../../workers/gpu/runtime.js';
import { biasBackward } from '../../../workers/kernels/bias-backward.js';
import { matmul, vec4Fits } from '../../../workers/kernels/matmul.js';
import { refBiasBackward, refMatmul } from '../../reference/ops.js';
import { Bench, bits, f64, relErr, rng, sizes } from './helpers.js';

// Error measure: relErr (helpers.ts), bound 1e-4, with floor 1e-2 * max|ref| for the
// matmul outputs: a float32 dot product of K terms has an absolute error that scales with the
// terms, so outputs that cancel to near 0 are held to 1e-6 * max|ref| absolute instead.
const TOL = 1e-4;
const FLOOR = 1e-2;

describe('matmul: GPU vs float64 reference, every transpose case, any shape', () => {
  let rt: Runtime;
  beforeAll(async () => {
    rt = new Runtime(await openDevice());
  });
  afterAll(() => rt.destroy());

  async function check(
    M: number,
    N: number,
    K: number,
    o: { transA?: boolean; transB?: boolean; bias?: boolean; accumulate?: boolean },
    seed: number,
  ) {
    const r = rng(seed);
    const a = r.f32(M * K);
    const b = r.f32(K * N);
    const bias = o.bias ? r.f32(N) : null;
    const out0 = r.f32(M * N);
    const bench = new Bench(rt, sizes(M * K, K * N, N, M * N));
    try {
      const tOut = bench.tensor('out', out0);
      const flags = { transA: o.transA, transB: o.transB, accumulate: o.accumulate };
      const d = matmul(rt, {
        out: tOut,
        a: bench.tensor('a', a),
        b: bench.tensor('b', b),
        bias: bias ? bench.tensor('bias', bias) : null,
        M,
        N,
        K,
        ...flags,
      });
      await bench.run(d);
      const gpu = await bench.read(tOut);
      const ref = f64(out0);
      refMatmul({ out: ref, a: f64(a), b: f64(b), bias: bias ? f64(bias) : null, M, N, K, ...flags });
      const e = relErr(gpu, ref, FLOOR);
      expect(e, `matmul M=${M} N=${N} K=${K} ${JSON.stringify(o)}: rel err ${e}`).toBeLessThan(TOL);
    } finally {
      bench.dispose();
    }
  }

  const shapes: [number, number, number][] = [
    [1, 1, 1],
    [7, 65, 129],
    [129, 7, 65],
    [65, 129, 7],
    [33, 31, 1],
    [64, 64, 64],
    [1, 129, 65],
    [129, 1, 33],
    // multiples of 4 (vec4 kernel, all four layouts) that are not multiples of the 32x32 tile
    [4, 4, 4],
    [36, 68, 20],
    [132, 44, 64],
    // vec4 for some layouts only: M = 65 (transA falls back), N = 65 (b not transposed falls back)
    [65, 12, 8],
    [12, 65, 8],
  ];
  it('plain, transA, transB, both: shapes 1, 7, 65, 129 and non-divisible combos within 1e-4', async () => {
    let seed = 1;
    for (const [M, N, K] of shapes) {
      for (const transA of [false, true]) for (const transB of [false, true]) await check(M, N, K, { transA, transB }, seed++);
    }
  });

  it('takes the vec4 kernel exactly when the contiguous dimensions are multiples of 4', () => {
    const t = { numel: 1 << 20, byteOffset: 0 } as never;
    const fits = (M: number, N: number, K: number, transA: boolean, transB: boolean) =>
      vec4Fits({ out: t, a: t, b: t, M, N, K, transA, transB });
    expect(fits(36, 68, 20, false, false)).toBe(true);
    expect(fits(65, 12, 8, false, true)).toBe(true);
    expect(fits(65, 12, 8, true, false)).toBe(false);
    expect(fits(12, 65, 8, false, true)).toBe(true);
    expect(fits(12, 65, 8, false, false)).toBe(false);
    expect(fits(12, 12, 6, false, false)).toBe(false);
  });

  it('bias and accumulate (out += a@b + bias) within 1e-4', async () => {
    await check(65, 129, 33, { bias: true }, 100);
    await check(65, 129, 33, { accumulate: true }, 101);
    await check(7, 65, 129, { bias: true, accumulate: true, transB: true }, 102);
    await check(129, 7, 65, { accumulate: true, transA: true }, 103);
    for (const [i, [transA, transB]] of [
      [false, false],
      [false, true],
      [true, false],
      [true, true],
    ].entries()) {
      await check(36, 68, 20, { bias: true, accumulate: true, transA, transB }, 110 + i);
    }
  });

  it('a larger shape (256x320x192, linear-layer style transB + bias) within 1e-4', async () => {
    await check(256, 320, 192, { transB: true, bias: true }, 7);
  });

  it('wide row-major b (N >= 512: transposed into a workspace first) within 1e-4, plain and transA', async () => {
    await check(20, 516, 256, { bias: true, accumulate: true }, 8);
    await check(36, 512, 260, { transA: true }, 9);
  });

  it('biasBackward: column sums, overwrite and accumulate, deterministic bits', async () => {
    for (const [M, N, acc] of [
      [1, 1, false],
      [7, 65, true],
      [129, 7, false],
      [1000, 33, true],
      [4096, 3, false],
      // N % 4 == 0: column-quad kernels
      [130, 64, true],
      [7, 4, false],
      [1000, 192, false],
    ] as [number, number, boolean][]) {
      const r = rng(M * 31 + N);
      const dout = r.f32(M * N);
      const db0 = r.f32(N);
      const bench = new Bench(rt, sizes(M * N, N));
      try {
        const tDb = bench.tensor('dbias', db0);
        const d = biasBackward(rt, { dbias: tDb, dout: bench.tensor('dout', dout), M, N, accumulate: acc });
        await bench.run(d);
        const gpu = await bench.read(tDb);
        const ref = f64(db0);
        refBiasBackward({ dbias: ref, dout: f64(dout), M, N, accumulate: acc });
        expect(relErr(gpu, ref), `biasBackward M=${M} N=${N}`).toBeLessThan(TOL);
        if (!acc) {
          await bench.run(d);
          expect(bits(await bench.read(tDb))).toEqual(bits(gpu));
        }
      } finally {
        bench.dispose();
      }
    }
  });
});
