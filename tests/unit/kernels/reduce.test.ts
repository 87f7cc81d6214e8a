import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDevice } from '../../../workers/gpu/device.js';
import { Runtime } from '../../../workers/gpu/runtime.js';
import { sum, sumSquares } from '../../../workers/kernels/reduce.js';
import { refSum, refSumSquares } from '../../reference/ops.js';
import { Bench, bits, f64, relErr, rng, sizes } from './helpers.js';

// sums of positive terms (sumSquares) within 1e-5 relative; signed sums within 1e-4 of
// max(|sum|, 1e-3 * sum|x|) (cancellation makes |sum| itself no scale for the error).
describe('reductions: deterministic sum and sumSquares', () => {
  let rt: Runtime;
  beforeAll(async () => {
    rt = new Runtime(await openDevice());
  });
  afterAll(() => rt.destroy());

  it('sum (with scale) and sumSquares (overwrite, accumulate) for n = 1 .. 3e6, same bits every run', async () => {
    for (const n of [1, 7, 65, 129, 1024, 1025, 100_003, 3_000_001]) {
      const r = rng(n);
      const x = r.f32(n, -1, 1.2);
      const bench = new Bench(rt, sizes(n, 1, 1));
      try {
        const tx = bench.tensor('x', x);
        const tSum = bench.tensor('sum', 1);
        const tSq = bench.tensor('sq', new Float32Array([2.5]));
        const ds = sum(rt, { out: tSum, inp: tx, n, scale: 0.25 });
        const dq = sumSquares(rt, { out: tSq, inp: tx, n, accumulate: true });
        await bench.run([...ds, ...dq]);
        const refS = new Float64Array(1);
        refSum({ out: refS, inp: f64(x), n, scale: 0.25 });
        const refQ = new Float64Array([2.5]);
        refSumSquares({ out: refQ, inp: f64(x), n, accumulate: true });
        let absSum = 0;
        for (const v of x) absSum += Math.abs(v);
        const gS = await bench.read(tSum);
        const gQ = await bench.read(tSq);
        expect(
          Math.abs(gS[0] - refS[0]) / Math.max(Math.abs(refS[0]), 1e-3 * 0.25 * absSum),
          `sum n=${n}: ${gS[0]} vs ${refS[0]}`,
        ).toBeLessThan(1e-4);
        expect(relErr(gQ, refQ), `sumSquares n=${n}`).toBeLessThan(1e-5);
        // overwrite mode, and the same bits on a second run
        await bench.run(sumSquares(rt, { out: tSq, inp: tx, n }));
        const once = await bench.read(tSq);
        refSumSquares({ out: refQ, inp: f64(x), n });
        expect(relErr(once, refQ), `sumSquares overwrite n=${n}`).toBeLessThan(1e-5);
        await bench.run(ds);
        expect(bits(await bench.read(tSum))).toEqual(bits(gS));
        await bench.run(sumSquares(rt, { out: tSq, inp: tx, n }));
        expect(bits(await bench.read(tSq))).toEqual(bits(once));
      } finally {
        bench.dispose();
      }
    }
  });
});
