import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDevice } from '../../../workers/gpu/device.js';
import { Runtime } from '../../../workers/gpu/runtime.js';
import { biasResidual } from '../../../workers/kernels/bias-residual.js';
import { vocabCrossEntropy, vocabEmbeddingBackward, vocabEmbeddingForward } from '../../../workers/kernels/vocab-parallel.js';
import { vocabShard } from '../../../workers/model/tp-layout.js';
import { refEncoderBackward, refEncoderForward, refSoftmaxCrossEntropy } from '../../reference/ops.js';
import { Bench, f64, relErr, rng, sizes } from './helpers.js';

// Megatron's vocab-parallel ops, one shard per simulated rank on one device; the all-reduces
// between passes are done on the host here (sum / max over the shards' outputs), so the test
// checks exactly what the kernels contribute. Reference: the float64 single-device op.
// Error measure: relErr (helpers.ts), floor 1e-3 * max|ref|, bound 1e-4.
const TOL = 1e-4;

describe('vocab-parallel embedding and cross-entropy, bias-residual: GPU shards vs float64 reference', () => {
  let rt: Runtime;
  beforeAll(async () => {
    rt = new Runtime(await openDevice());
  });
  afterAll(() => rt.destroy());

  // [B, T, C, V, TP]: vocab not divisible by TP (padding rows/columns), a shard of padding only (V=5, TP=4: 2+2+1+0 real)
  const shapes: [number, number, number, number, number][] = [
    [2, 7, 16, 27, 2],
    [3, 5, 8, 27, 4],
    [1, 9, 4, 5, 4],
    [2, 33, 65, 129, 3],
  ];

  it('embedding: the shards sum to wte[idx] + wpe exactly; dwte shards are the reference rows (padding rows stay 0), dwpe whole on every rank', async () => {
    for (const [B, T, C, V, TP] of shapes) {
      const r = rng(B * T * C + V * TP);
      const idx = r.u32(B * T, V);
      const wte = r.f32(V * C);
      const wpe = r.f32(T * C);
      const dout = r.f32(B * T * C);
      const refOut = new Float64Array(B * T * C);
      refEncoderForward({ out: refOut, idx, wte: f64(wte), wpe: f64(wpe), B, T, C });
      const ref = { dwte: new Float64Array(V * C), dwpe: new Float64Array(T * C) };
      refEncoderBackward({ ...ref, dout: f64(dout), idx, B, T, C, V });
      const summed = new Float32Array(B * T * C);
      for (let rank = 0; rank < TP; rank++) {
        const { vStart, Vl } = vocabShard(V, TP, rank);
        const shard = new Float32Array(Vl * C);
        shard.set(wte.subarray(Math.min(vStart, V) * C, Math.min(vStart + Vl, V) * C));
        const bench = new Bench(rt, sizes(B * T * C, B * T, Vl * C, T * C, B * T * C, Vl * C, T * C));
        try {
          const t = {
            out: bench.tensor('out', B * T * C),
            idx: bench.tensor('idx', idx),
            wte: bench.tensor('wte', shard),
            wpe: bench.tensor('wpe', wpe),
            dout: bench.tensor('dout', dout),
            dwte: bench.tensor('dwte', Vl * C),
            dwpe: bench.tensor('dwpe', T * C),
          };
          await bench.run(
            vocabEmbeddingForward(rt, { out: t.out, idx: t.idx, wte: t.wte, wpe: t.wpe, B, T, C, vStart, Vl, addPositions: rank === 0 }),
          );
          const out = await bench.read(t.out);
          for (let i = 0; i < out.length; i++) summed[i] = summed[i]! + out[i]!;
          await bench.run(vocabEmbeddingBackward(rt, { dwte: t.dwte, dwpe: t.dwpe, dout: t.dout, idx: t.idx, B, T, C, vStart, Vl }));
          const dwte = await bench.read(t.dwte);
          const real = Math.max(0, Math.min(Vl, V - vStart));
          expect(
            relErr(dwte.subarray(0, real * C), ref.dwte.subarray(vStart * C, (vStart + real) * C)),
            `dwte rank ${rank}/${TP} V=${V}`,
          ).toBeLessThan(TOL);
          expect(
            Array.from(dwte.subarray(real * C)).every((x) => x === 0),
            `padding rows of dwte rank ${rank}`,
          ).toBe(true);
          expect(relErr(await bench.read(t.dwpe), ref.dwpe), `dwpe rank ${rank}`).toBeLessThan(TOL);
        } finally {
          bench.dispose();
        }
      }
      // one non-zero token row and one position row per element: the single-device bits
      expect(Array.from(summed)).toEqual(Array.from(Float32Array.from(refOut)));
    }
  });

  it('cross-entropy: losses and dlogits of the shards equal the single-device softmax cross-entropy; padding columns get 0; ignored rows 0', async () => {
    for (const [B, T, , V, TP] of shapes) {
      const N = B * T;
      const r = rng(N * 31 + V + TP);
      const logits = r.normal(N * V, 3);
      const targets = r.u32(N, V);
      if (N > 2) targets[1] = V + 7; // ignored row (target >= V)
      const scale = 1 / N;
      const ref = { losses: new Float64Array(N), dlogits: new Float64Array(N * V) };
      refSoftmaxCrossEntropy({ ...ref, logits: f64(logits), targets, N, V, dlossScale: scale });
      const benches: Bench[] = [];
      try {
        const ranks = Array.from({ length: TP }, (_, rank) => {
          const { vStart, Vl } = vocabShard(V, TP, rank);
          const shard = new Float32Array(N * Vl).fill(1e4); // padding columns hold garbage: must be masked
          for (let n = 0; n < N; n++) for (let v = 0; v < Vl && vStart + v < V; v++) shard[n * Vl + v] = logits[n * V + vStart + v]!;
          const bench = new Bench(rt, sizes(N, N * Vl, N, N, N, N));
          benches.push(bench);
          const t = {
            losses: bench.tensor('losses', N),
            logits: bench.tensor('logits', shard),
            targets: bench.tensor('targets', targets),
            rowMax: bench.tensor('rowMax', N),
            rowSum: bench.tensor('rowSum', N),
            targetLogit: bench.tensor('targetLogit', N),
          };
          const passes = vocabCrossEntropy(rt, { ...t, N, V, vStart, Vl, writeGrad: true, dlossScale: scale });
          return { t, passes, vStart, Vl };
        });
        // pass 1, then the host plays all-reduce(max) and all-reduce(sum)
        const mx = new Float32Array(N).fill(-Infinity);
        const tl = new Float32Array(N);
        for (const k of ranks) {
          await benches[0]!.run(k.passes.stats);
          const m = await rt.read(k.t.rowMax);
          const x = await rt.read(k.t.targetLogit);
          for (let n = 0; n < N; n++) {
            mx[n] = Math.max(mx[n]!, m[n]!);
            tl[n] = tl[n]! + x[n]!;
          }
        }
        const s = new Float32Array(N);
        for (const k of ranks) {
          rt.write(k.t.rowMax, mx);
          rt.write(k.t.targetLogit, tl);
          await benches[0]!.run(k.passes.sumExp);
          const x = await rt.read(k.t.rowSum);
          for (let n = 0; n < N; n++) s[n] = s[n]! + x[n]!;
        }
        const dlogits = new Float32Array(N * V);
        for (const k of ranks) {
          rt.write(k.t.rowSum, s);
          await benches[0]!.run(k.passes.finish);
          const losses = await rt.read(k.t.losses);
          expect(relErr(losses, ref.losses), `losses N=${N} V=${V} TP=${TP}`).toBeLessThan(TOL);
          if (N > 2) expect(losses[1]).toBe(0);
          const d = await rt.read(k.t.logits);
          for (let n = 0; n < N; n++) {
            for (let v = 0; v < k.Vl; v++) {
              if (k.vStart + v < V) dlogits[n * V + k.vStart + v] = d[n * k.Vl + v]!;
              else expect(d[n * k.Vl + v], `padding column ${k.vStart + v} of row ${n}`).toBe(0);
            }
          }
        }
        expect(relErr(dlogits, ref.dlogits), `dlogits N=${N} V=${V} TP=${TP}`).toBeLessThan(TOL);
      } finally {
        for (const b of benches) b.dispose();
      }
    }
  });

  it('bias-residual: out = res + (sum + bias) exactly as float32 does it', async () => {
    for (const [N, C] of [
      [1, 1],
      [7, 65],
      [129, 64],
    ] as const) {
      const r = rng(N * C);
      const res = r.f32(N * C);
      const s = r.f32(N * C);
      const bias = r.f32(C);
      const bench = new Bench(rt, sizes(N * C, N * C, N * C, C));
      try {
        const t = {
          out: bench.tensor('out', N * C),
          res: bench.tensor('res', res),
          sum: bench.tensor('sum', s),
          bias: bench.tensor('bias', bias),
        };
        await bench.run(biasResidual(rt, { ...t, N, C }));
        const want = new Float32Array(N * C);
        for (let i = 0; i < N * C; i++) want[i] = Math.fround(res[i]! + Math.fround(s[i]! + bias[i % C]!));
        expect(Array.from(await bench.read(t.out))).toEqual(Array.from(want));
      } finally {
        bench.dispose();
      }
    }
  });
});
