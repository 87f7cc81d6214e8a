import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDevice } from '../../../workers/gpu/device.js';
import { Runtime } from '../../../workers/gpu/runtime.js';
import { attentionBackward, attentionForward } from '../../../workers/kernels/attention.js';
import { refAttentionBackward, refAttentionForward } from '../../reference/ops.js';
import { Bench, bits, f64, relErr, rng, sizes } from './helpers.js';

// Error measure: relErr (helpers.ts), bound 1e-4; floor 1e-3 * max|ref| for att, 1e-2 * max|ref|
// for out and dqkv (sums over t and hs of signed terms that cancel to near 0 in places).
const TOL = 1e-4;
const CANCEL_FLOOR = 1e-2;

describe('causal attention: GPU vs float64 reference', () => {
  let rt: Runtime;
  beforeAll(async () => {
    rt = new Runtime(await openDevice());
  });
  afterAll(() => rt.destroy());

  // [B, T, C, NH]
  const shapes: [number, number, number, number][] = [
    [1, 1, 1, 1],
    [1, 7, 14, 2],
    [2, 65, 12, 3],
    [1, 129, 16, 2],
    [7, 5, 65, 5],
    [2, 64, 64, 2],
    // hs % 4 == 0: the vec4 kernels (hs 4, 8, 12, 32), T not a multiple of 4
    [1, 7, 8, 2],
    [2, 65, 24, 2],
    [1, 129, 64, 2],
    [3, 9, 16, 4],
  ];

  it('forward (out, att) and backward (dqkv overwritten) for T in 1, 7, 65, 129, hs 1 .. 32 (scalar and vec4 kernels); bits repeat', async () => {
    for (const [B, T, C, NH] of shapes) {
      const r = rng(B * 100 + T * 10 + C);
      const qkv = r.normal(B * T * 3 * C, 1);
      const dout = r.f32(B * T * C);
      const nAtt = B * NH * T * T;
      const bench = new Bench(rt, sizes(B * T * C, nAtt, B * T * 3 * C, B * T * C, B * T * 3 * C));
      try {
        const t = {
          out: bench.tensor('out', B * T * C),
          att: bench.tensor('att', r.f32(nAtt)), // garbage: the forward must write all of it
          qkv: bench.tensor('qkv', qkv),
          dout: bench.tensor('dout', dout),
          dqkv: bench.tensor('dqkv', r.f32(B * T * 3 * C)), // garbage: overwritten
        };
        await bench.run(attentionForward(rt, { out: t.out, att: t.att, qkv: t.qkv, B, T, C, NH }));
        const ref = { out: new Float64Array(B * T * C), att: new Float64Array(nAtt) };
        refAttentionForward({ ...ref, qkv: f64(qkv), B, T, C, NH });
        const gAtt = await bench.read(t.att);
        expect(relErr(await bench.read(t.out), ref.out, CANCEL_FLOOR), `out B=${B} T=${T} C=${C} NH=${NH}`).toBeLessThan(TOL);
        expect(relErr(gAtt, ref.att), `att B=${B} T=${T} C=${C} NH=${NH}`).toBeLessThan(TOL);

        const bwd = attentionBackward(rt, { dqkv: t.dqkv, dout: t.dout, qkv: t.qkv, att: t.att, B, T, C, NH });
        await bench.run(bwd);
        const refD = new Float64Array(B * T * 3 * C);
        refAttentionBackward({ dqkv: refD, dout: f64(dout), qkv: f64(qkv), att: f64(gAtt), B, T, C, NH });
        const gD = await bench.read(t.dqkv);
        expect(relErr(gD, refD, CANCEL_FLOOR), `dqkv B=${B} T=${T} C=${C} NH=${NH}`).toBeLessThan(TOL);
        await bench.run(bwd);
        expect(bits(await bench.read(t.dqkv))).toEqual(bits(gD));
      } finally {
        bench.dispose();
      }
    }
  });
});
