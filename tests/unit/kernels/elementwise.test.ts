// gelu (forward, backward in place) and the residual addInPlace, at width 1 and width 4.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDevice } from '../../../workers/gpu/device.js';
import { Runtime } from '../../../workers/gpu/runtime.js';
import { geluBackward, geluForward } from '../../../workers/kernels/gelu.js';
import { addInPlace } from '../../../workers/kernels/residual.js';
import { refAddInPlace, refGeluBackward, refGeluForward } from '../../reference/ops.js';
import { Bench, f64, relErr, rng, sizes } from './helpers.js';

// Error measure: relErr (helpers.ts) with floor 1e-3 * max|ref|, bound 1e-4.
const TOL = 1e-4;
// 1000 and 4096: width 4 (n % 4 == 0); the others: width 1
const NS = [1, 7, 65, 129, 1000, 4096, 70_001];

describe('elementwise kernels: GPU vs float64 reference', () => {
  let rt: Runtime;
  beforeAll(async () => {
    rt = new Runtime(await openDevice());
  });
  afterAll(() => rt.destroy());

  it('geluForward and geluBackward (in place), n = 1 .. 70001, |x| up to 12, within 1e-4', async () => {
    for (const n of NS) {
      const r = rng(n);
      const x = r.normal(n, 3);
      if (n > 2) {
        x[0] = 12;
        x[1] = -12;
      }
      const dout = r.f32(n);
      const bench = new Bench(rt, sizes(n, n, n));
      try {
        const tx = bench.tensor('x', x);
        const ty = bench.tensor('y', n);
        const td = bench.tensor('dout', dout);
        // in place: the model overwrites dout with dinp
        await bench.run([...geluForward(rt, { out: ty, inp: tx, n }), ...geluBackward(rt, { dinp: td, inp: tx, dout: td, n })]);
        const refY = new Float64Array(n);
        refGeluForward({ out: refY, inp: f64(x), n });
        const refDx = new Float64Array(n);
        refGeluBackward({ dinp: refDx, inp: f64(x), dout: f64(dout), n });
        expect(relErr(await bench.read(ty), refY), `gelu forward n=${n}`).toBeLessThan(TOL);
        expect(relErr(await bench.read(td), refDx), `gelu backward in place n=${n}`).toBeLessThan(TOL);
      } finally {
        bench.dispose();
      }
    }
  });

  it('addInPlace, n = 1 .. 70001, within 1e-4', async () => {
    for (const n of NS) {
      const r = rng(n + 5);
      const a = r.f32(n);
      const b = r.f32(n);
      const bench = new Bench(rt, sizes(n, n));
      try {
        const ta = bench.tensor('a', a);
        const tb = bench.tensor('b', b);
        await bench.run(addInPlace(rt, { dst: ta, src: tb, n }));
        const ref = f64(a);
        refAddInPlace({ dst: ref, src: f64(b), n });
        expect(relErr(await bench.read(ta), ref), `addInPlace n=${n}`).toBeLessThan(TOL);
      } finally {
        bench.dispose();
      }
    }
  });

  it('refuses overlapping output and input with a hint instead of a silently dropped dispatch', () => {
    const arena = rt.allocator.arena('alias', 'workspace', 4096);
    try {
      const x = arena.alloc('x', [64]);
      const view = { ...x, name: 'x-shifted', byteOffset: x.byteOffset, byteLength: 128, numel: 32, shape: [32] };
      const y = arena.alloc('y', [64]);
      expect(() => geluForward(rt, { out: y, inp: y, n: 64 })).toThrow(/overlaps.*HINT/);
      expect(() => geluBackward(rt, { dinp: x, inp: y, dout: y, n: 64 })).toThrow(/in place.*HINT/);
      expect(() => addInPlace(rt, { dst: x, src: view, n: 32 })).toThrow(/overlaps/);
    } finally {
      rt.allocator.destroyArena(arena);
    }
  });
});
