import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDevice } from '../../../workers/gpu/device.js';
import { Runtime } from '../../../workers/gpu/runtime.js';
import { layernormBackward, layernormForward } from '../../../workers/kernels/layernorm.js';
import { refLayernormBackward, refLayernormForward } from '../../reference/ops.js';
import { Bench, bits, f64, relErr, rng, sizes } from './helpers.js';

// Error measure: relErr (helpers.ts), bound 1e-4, floor 1e-3 * max|ref| for mean, rstd and
// the column sums; 1e-2 * max|ref| for out and dinp, whose elements are differences of O(1)
// terms (norm * w + b, dnorm - mean - norm * mean) that cancel to near 0 in places.
const TOL = 1e-4;
const CANCEL_FLOOR = 1e-2;

describe('layernorm: GPU vs float64 reference', () => {
  let rt: Runtime;
  beforeAll(async () => {
    rt = new Runtime(await openDevice());
  });
  afterAll(() => rt.destroy());

  const shapes: [number, number][] = [
    [1, 1],
    [1, 7],
    [7, 65],
    [65, 129],
    [129, 7],
    [1000, 33],
    [64, 768],
    // C % 4 == 0: the vec4 kernels, with N not a multiple of the 64-row chunking
    [65, 64],
    [7, 12],
    [1, 4],
  ];

  it('forward (out, mean, rstd) and backward (dinp, dweight, dbias all accumulate) for N, C in 1, 7, 65, 129, ...; backward bits repeat', async () => {
    for (const [N, C] of shapes) {
      const r = rng(N * 1000 + C);
      // an offset mean and a spread variance, as residual streams have
      const inp = r.f32(N * C, -2, 3);
      const weight = r.f32(C, 0.5, 1.5);
      const bias = r.f32(C);
      const dout = r.f32(N * C);
      const dinp0 = r.f32(N * C);
      const dw0 = r.f32(C);
      const db0 = r.f32(C);
      const bench = new Bench(rt, sizes(N * C, N, N, N * C, C, C, N * C, N * C, C, C));
      try {
        const t = {
          out: bench.tensor('out', N * C),
          mean: bench.tensor('mean', N),
          rstd: bench.tensor('rstd', N),
          inp: bench.tensor('inp', inp),
          weight: bench.tensor('weight', weight),
          bias: bench.tensor('bias', bias),
          dout: bench.tensor('dout', dout),
          dinp: bench.tensor('dinp', dinp0),
          dweight: bench.tensor('dweight', dw0),
          dbias: bench.tensor('dbias', db0),
        };
        await bench.run(layernormForward(rt, { out: t.out, mean: t.mean, rstd: t.rstd, inp: t.inp, weight: t.weight, bias: t.bias, N, C }));
        const ref = { out: new Float64Array(N * C), mean: new Float64Array(N), rstd: new Float64Array(N) };
        refLayernormForward({ ...ref, inp: f64(inp), weight: f64(weight), bias: f64(bias), N, C });
        const gOut = await bench.read(t.out);
        const gMean = await bench.read(t.mean);
        const gRstd = await bench.read(t.rstd);
        expect(relErr(gOut, ref.out, CANCEL_FLOOR), `out N=${N} C=${C}`).toBeLessThan(TOL);
        expect(relErr(gMean, ref.mean), `mean N=${N} C=${C}`).toBeLessThan(TOL);
        expect(relErr(gRstd, ref.rstd), `rstd N=${N} C=${C}`).toBeLessThan(TOL);

        // the backward uses the GPU's saved mean/rstd, as the model does
        const bwd = layernormBackward(rt, {
          dinp: t.dinp,
          dweight: t.dweight,
          dbias: t.dbias,
          dout: t.dout,
          inp: t.inp,
          weight: t.weight,
          mean: t.mean,
          rstd: t.rstd,
          N,
          C,
        });
        await bench.run(bwd);
        const rb = { dinp: f64(dinp0), dweight: f64(dw0), dbias: f64(db0) };
        refLayernormBackward({ ...rb, dout: f64(dout), inp: f64(inp), weight: f64(weight), mean: f64(gMean), rstd: f64(gRstd), N, C });
        const gDinp = await bench.read(t.dinp);
        const gDw = await bench.read(t.dweight);
        const gDb = await bench.read(t.dbias);
        expect(relErr(gDinp, rb.dinp, CANCEL_FLOOR), `dinp N=${N} C=${C}`).toBeLessThan(TOL);
        expect(relErr(gDw, rb.dweight), `dweight N=${N} C=${C}`).toBeLessThan(TOL);
        expect(relErr(gDb, rb.dbias), `dbias N=${N} C=${C}`).toBeLessThan(TOL);

        // determinism: same inputs, same bits
        rt.write(t.dinp, dinp0);
        rt.write(t.dweight, dw0);
        rt.write(t.dbias, db0);
        await bench.run(bwd);
        expect(bits(await bench.read(t.dweight))).toEqual(bits(gDw));
        expect(bits(await bench.read(t.dbias))).toEqual(bits(gDb));
        expect(bits(await bench.read(t.dinp))).toEqual(bits(gDinp));
      } finally {
        bench.dispose();
      }
    }
  });
});
