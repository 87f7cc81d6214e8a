import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDevice } from '../../../workers/gpu/device.js';
import { Runtime } from '../../../workers/gpu/runtime.js';
import { encoderBackward, encoderForward } from '../../../workers/kernels/encoder.js';
import { refEncoderBackward, refEncoderForward } from '../../reference/ops.js';
import { Bench, bits, f64, relErr, rng, sizes } from './helpers.js';

// Error measure: relErr (helpers.ts), floor 1e-3 * max|ref|, bound 1e-4.
const TOL = 1e-4;

describe('encoder (token + position embedding): GPU vs float64 reference', () => {
  let rt: Runtime;
  beforeAll(async () => {
    rt = new Runtime(await openDevice());
  });
  afterAll(() => rt.destroy());

  // [B, T, C, V, maxT]: repeated ids (small V), unique ids (V >> B*T), maxT > T
  const shapes: [number, number, number, number, number][] = [
    [1, 1, 1, 1, 1],
    [1, 7, 65, 3, 7],
    [7, 65, 7, 129, 100],
    [3, 129, 65, 65, 129],
    [2, 33, 16, 50_000, 64],
  ];

  it('forward exact; backward accumulates into dwte and dwpe within 1e-4, same bits on every run', async () => {
    for (const [B, T, C, V, maxT] of shapes) {
      const r = rng(B * T * C + V);
      const idx = r.u32(B * T, V);
      if (B * T > 4) idx.fill(idx[0], 0, 4); // a token repeated at the start
      const wte = r.f32(V * C);
      const wpe = r.f32(maxT * C);
      const dout = r.f32(B * T * C);
      const dwte0 = r.f32(V * C);
      const dwpe0 = r.f32(maxT * C);
      const bench = new Bench(rt, sizes(B * T * C, B * T, V * C, maxT * C, B * T * C, V * C, maxT * C));
      try {
        const t = {
          out: bench.tensor('out', B * T * C),
          idx: bench.tensor('idx', idx),
          wte: bench.tensor('wte', wte),
          wpe: bench.tensor('wpe', wpe),
          dout: bench.tensor('dout', dout),
          dwte: bench.tensor('dwte', dwte0),
          dwpe: bench.tensor('dwpe', dwpe0),
        };
        await bench.run(encoderForward(rt, { out: t.out, idx: t.idx, wte: t.wte, wpe: t.wpe, B, T, C }));
        const refOut = new Float64Array(B * T * C);
        refEncoderForward({ out: refOut, idx, wte: f64(wte), wpe: f64(wpe), B, T, C });
        // one float32 addition of float32 values: exact up to that rounding
        expect(Array.from(await bench.read(t.out))).toEqual(Array.from(Float32Array.from(refOut)));

        const bwd = encoderBackward(rt, { dwte: t.dwte, dwpe: t.dwpe, dout: t.dout, idx: t.idx, B, T, C, V });
        await bench.run(bwd);
        const ref = { dwte: f64(dwte0), dwpe: f64(dwpe0) };
        refEncoderBackward({ ...ref, dout: f64(dout), idx, B, T, C, V });
        const gDwte = await bench.read(t.dwte);
        const gDwpe = await bench.read(t.dwpe);
        expect(relErr(gDwte, ref.dwte), `dwte B=${B} T=${T} C=${C} V=${V}`).toBeLessThan(TOL);
        expect(relErr(gDwpe, ref.dwpe), `dwpe B=${B} T=${T} C=${C}`).toBeLessThan(TOL);

        rt.write(t.dwte, dwte0);
        rt.write(t.dwpe, dwpe0);
        await bench.run(bwd);
        expect(bits(await bench.read(t.dwte))).toEqual(bits(gDwte));
        expect(bits(await bench.read(t.dwpe))).toEqual(bits(gDwpe));
      } finally {
        bench.dispose();
      }
    }
  });
});
