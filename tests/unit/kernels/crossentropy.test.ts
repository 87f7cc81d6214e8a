import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDevice } from '../../../workers/gpu/device.js';
import { Runtime } from '../../../workers/gpu/runtime.js';
import { crossEntropyForward, softmaxCrossEntropy } from '../../../workers/kernels/crossentropy.js';
import { refCrossEntropyForward, refSoftmaxCrossEntropy } from '../../reference/ops.js';
import { Bench, bits, f64, relErr, rng, sizes } from './helpers.js';

// Error measure: relErr (helpers.ts), floor 1e-3 * max|ref|, bound 1e-4.
const TOL = 1e-4;

describe('softmax cross-entropy: GPU vs float64 reference', () => {
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
    [3, 50_257],
  ];

  it('losses, and dlogits in place (dlogits = logits), ignored targets >= V; same bits twice', async () => {
    for (const [N, V] of shapes) {
      const r = rng(N * 7 + V);
      const logits = r.normal(N * V, 3);
      const targets = r.u32(N, V);
      if (N > 2) targets[1] = V; // ignored row
      const scale = 1 / N;
      const bench = new Bench(rt, sizes(N, N * V, N, N));
      try {
        const t = {
          losses: bench.tensor('losses', N),
          logits: bench.tensor('logits', logits),
          targets: bench.tensor('targets', targets),
          losses2: bench.tensor('losses2', N),
        };
        await bench.run(crossEntropyForward(rt, { losses: t.losses2, logits: t.logits, targets: t.targets, N, V }));
        // the model overwrites its logits with dlogits
        const grad = softmaxCrossEntropy(rt, {
          losses: t.losses,
          dlogits: t.logits,
          logits: t.logits,
          targets: t.targets,
          N,
          V,
          dlossScale: scale,
        });
        await bench.run(grad);
        const ref = { losses: new Float64Array(N), dlogits: new Float64Array(N * V) };
        refSoftmaxCrossEntropy({ ...ref, logits: f64(logits), targets, N, V, dlossScale: scale });
        const refFwd = new Float64Array(N);
        refCrossEntropyForward({ losses: refFwd, logits: f64(logits), targets, N, V });
        const gLoss = await bench.read(t.losses);
        const gD = await bench.read(t.logits);
        const fwdLoss = await bench.read(t.losses2);
        expect(relErr(fwdLoss, refFwd), `forward losses N=${N} V=${V}`).toBeLessThan(TOL);
        expect(relErr(gLoss, ref.losses), `losses N=${N} V=${V}`).toBeLessThan(TOL);
        expect(relErr(gD, ref.dlogits), `dlogits N=${N} V=${V}`).toBeLessThan(TOL);
        if (N > 2) expect(gLoss[1]).toBe(0);
        // the forward and the fused gradient compute the loss with the same instructions
        expect(bits(gLoss)).toEqual(bits(fwdLoss));

        rt.write(t.logits, logits);
        await bench.run(grad);
        expect(bits(await bench.read(t.logits))).toEqual(bits(gD));
        expect(bits(await bench.read(t.losses))).toEqual(bits(gLoss));
      } finally {
        bench.dispose();
      }
    }
  });

  it('rows padded to Vp > V (a vocabulary padded for 16-bit storage): padding columns masked, their gradient 0; the bits of the unpadded rows', async () => {
    for (const [N, V, Vp] of [
      [7, 27, 28],
      [65, 13, 64],
    ] as const) {
      const r = rng(N + V + Vp);
      const logits = r.normal(N * V, 3);
      const targets = r.u32(N, V);
      targets[1] = V; // ignored row
      // padding columns hold a value that would dominate the softmax if it were not masked
      const padded = new Float32Array(N * Vp).fill(1e4);
      for (let n = 0; n < N; n++) padded.set(logits.subarray(n * V, (n + 1) * V), n * Vp);
      const bench = new Bench(rt, sizes(N, N * V, N, N, N * Vp));
      try {
        const t = {
          losses: bench.tensor('losses', N),
          logits: bench.tensor('logits', logits),
          targets: bench.tensor('targets', targets),
          lossesP: bench.tensor('lossesP', N),
          padded: bench.tensor('padded', padded),
        };
        const args = { targets: t.targets, N, V, dlossScale: 1 / N, scale: 2 ** 16 };
        await bench.run([
          ...softmaxCrossEntropy(rt, { ...args, losses: t.losses, dlogits: t.logits, logits: t.logits }),
          ...softmaxCrossEntropy(rt, { ...args, losses: t.lossesP, dlogits: t.padded, logits: t.padded, Vp }),
        ]);
        expect(bits(await bench.read(t.lossesP)), `losses N=${N} V=${V} Vp=${Vp}`).toEqual(bits(await bench.read(t.losses)));
        const d = await bench.read(t.logits);
        const dp = await bench.read(t.padded);
        for (let n = 0; n < N; n++) {
          expect(bits(dp.subarray(n * Vp, n * Vp + V)), `dlogits row ${n}`).toEqual(bits(d.subarray(n * V, (n + 1) * V)));
          expect(Array.from(dp.subarray(n * Vp + V, (n + 1) * Vp)), `padding columns of row ${n}`).toEqual(new Array(Vp - V).fill(0));
        }
        const ref = { losses: new Float64Array(N), dlogits: new Float64Array(N * V) };
        refSoftmaxCrossEntropy({ ...ref, logits: f64(logits), targets, N, V, dlossScale: 1 / N, scale: 2 ** 16 });
        expect(relErr(d, ref.dlogits), `dlogits with the loss-scale multiplier N=${N} V=${V}`).toBeLessThan(TOL);
      } finally {
        bench.dispose();
      }
    }
  });

  it('refuses a dlogits that is not the logits tensor, with a hint', () => {
    const bench = new Bench(rt, sizes(4, 8, 8, 4));
    try {
      const [losses, logits, dlogits, targets] = [
        bench.tensor('losses', 4),
        bench.tensor('logits', 8),
        bench.tensor('dlogits', 8),
        bench.tensor('targets', 4),
      ];
      expect(() => softmaxCrossEntropy(rt, { losses, dlogits, logits, targets, N: 4, V: 2, dlossScale: 1 })).toThrow(
        /not the logits tensor.*HINT/,
      );
    } finally {
      bench.dispose();
    }
  });
});
