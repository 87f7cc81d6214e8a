// 16-bit storage of the rest of the kernels the GPT dispatches (precision.test.ts has matmul,
// attention, layernorm, gelu, the reductions, cast and AdamW): the embedding (single device and a
// vocab-parallel shard), the row-parallel bias-residual, and the cross-entropies on 16-bit logits,
// against the float64 reference on inputs rounded to the format. Bounds (precision-variants.ts,
// derived in precision.test.ts's header): TOL32 for outputs kept in f32, TOL32 + rnd(1 + TOL32)
// for outputs stored in 16 bits, where for each kernel:
//   embedding out = st(tok + pos): one f32 addition (correctly rounded, 2^-24 relative) then one
//     rounding to the format: within 2^-24 + rnd, below the 16-bit bound.
//   dwte, dwpe += f32 sum of m terms (the positions of one token, or of one t over B), rounded once:
//     the f32 part is gamma_m * sum|terms| <= TOL32 * max(|ref|, floor) for m <= 66 terms of size ~1
//     against a floor of CANCEL_FLOOR * max|ref|; then one rounding. A kernel rounding after every
//     position would add up to m roundings (m up to 22 here) and fails the bound.
//   biasResidual out = st(res + (sum + bias)): two f32 additions, then one rounding.
//   losses (f32) from 16-bit logits: the fp32 kernel's TOL32 on the same values. The softmax
//     statistics are f32 and taken in column order at every width, so the losses also have the bits
//     of the fp32 kernel run on the same (format-rounded) values, which the test checks.
//   dlogits = st((softmax - onehot) * dlossScale * scale): the fp32 kernel's TOL32, then one rounding.
// The loss-scale multiplier is the one fp16 dynamic loss scaling starts with (2^16) for fp16, and a
// static scale that is not a power of two (1000, DeepSpeed's fp16.loss_scale) for bf16.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDevice } from '../../../workers/gpu/device.js';
import { roundTo } from '../../../workers/gpu/precision.js';
import { Runtime } from '../../../workers/gpu/runtime.js';
import { biasResidual } from '../../../workers/kernels/bias-residual.js';
import { crossEntropyForward, softmaxCrossEntropy } from '../../../workers/kernels/crossentropy.js';
import { encoderBackward, encoderForward } from '../../../workers/kernels/encoder.js';
import { vocabCrossEntropy, vocabEmbeddingBackward, vocabEmbeddingForward } from '../../../workers/kernels/vocab-parallel.js';
import {
  refBiasResidual,
  refEmbeddingBackward,
  refEmbeddingForward,
  refEncoderBackward,
  refEncoderForward,
  refSoftmaxCrossEntropy,
} from '../../reference/ops.js';
import { Bench, bits, f64, relErr, rng, sizes } from './helpers.js';
import { bound16, CANCEL_FLOOR, eachVariant, TOL32, type Variant, variantsOf } from './precision-variants.js';

/** The loss-scale multiplier each format is tested with (see the header). */
const lossScaleOf = (v: Variant) => (v.precision === 'fp16' ? 2 ** 16 : 1000);

/** Rows of V values laid out in rows of Vp, the padding columns holding `fill`. */
function padRows(x: Float32Array, N: number, V: number, Vp: number, fill: number): Float32Array {
  const out = new Float32Array(N * Vp).fill(fill);
  for (let n = 0; n < N; n++) out.set(x.subarray(n * V, (n + 1) * V), n * Vp);
  return out;
}

describe('16-bit storage of the embedding, bias-residual and cross-entropy kernels: GPU vs float64 reference', () => {
  let rt: Runtime;
  let variants: Variant[];
  beforeAll(async () => {
    rt = new Runtime(await openDevice());
    variants = variantsOf(rt);
  });
  afterAll(() => rt.destroy());

  const each = (body: (v: Variant) => Promise<void>) => eachVariant(rt, variants, body);

  it('embedding forward (16-bit wte, wpe, out; u32 idx) and backward (dwte, dwpe +=, each f32 sum rounded once), and the refusal of C % 4 != 0', async () => {
    // [B, T, C, V, maxT]: 22 positions per token (V = 3), ~6 (V = 11), the tiny preset's shape, mostly unique ids
    const shapes: [number, number, number, number, number][] = [
      [2, 33, 16, 3, 40],
      [2, 33, 16, 11, 40],
      [4, 64, 64, 27, 64],
      [1, 9, 64, 300, 9],
    ];
    await each(async (v) => {
      for (const [B, T, C, V, maxT] of shapes) {
        const r = rng(B * T * C + V);
        const idx = r.u32(B * T, V);
        const wte = roundTo(v.precision, r.normal(V * C, 1));
        const wpe = roundTo(v.precision, r.normal(maxT * C, 1));
        const dout = roundTo(v.precision, r.normal(B * T * C, 1));
        const dwte0 = roundTo(v.precision, r.normal(V * C, 0.1));
        const dwpe0 = roundTo(v.precision, r.normal(maxT * C, 0.1));
        const bench = new Bench(rt, sizes(B * T * C, B * T, V * C, maxT * C, B * T * C, V * C, maxT * C));
        try {
          const t = {
            out: bench.tensor('out', B * T * C, v.precision),
            idx: bench.tensor('idx', idx),
            wte: bench.tensor('wte', wte, v.precision),
            wpe: bench.tensor('wpe', wpe, v.precision),
            dout: bench.tensor('dout', dout, v.precision),
            dwte: bench.tensor('dwte', dwte0, v.precision),
            dwpe: bench.tensor('dwpe', dwpe0, v.precision),
          };
          await bench.run([
            ...encoderForward(rt, { out: t.out, idx: t.idx, wte: t.wte, wpe: t.wpe, B, T, C }),
            ...encoderBackward(rt, { dwte: t.dwte, dwpe: t.dwpe, dout: t.dout, idx: t.idx, B, T, C, V }),
          ]);
          const refOut = new Float64Array(B * T * C);
          refEncoderForward({ out: refOut, idx, wte: f64(wte), wpe: f64(wpe), B, T, C });
          const ref = { dwte: f64(dwte0), dwpe: f64(dwpe0) };
          refEncoderBackward({ ...ref, dout: f64(dout), idx, B, T, C, V });
          const at = `${v.label} B=${B} T=${T} C=${C} V=${V}`;
          expect(relErr(await bench.read(t.out), refOut), `out ${at}`).toBeLessThan(bound16(v));
          expect(relErr(await bench.read(t.dwte), ref.dwte, CANCEL_FLOOR), `dwte ${at}`).toBeLessThan(bound16(v));
          expect(relErr(await bench.read(t.dwpe), ref.dwpe, CANCEL_FLOOR), `dwpe ${at}`).toBeLessThan(bound16(v));
        } finally {
          bench.dispose();
        }
      }
      const bench = new Bench(rt, sizes(12, 4, 12, 12));
      try {
        const [out, idx, wte, wpe] = [
          bench.tensor('out', 12, v.precision),
          bench.tensor('idx', new Uint32Array(4)),
          bench.tensor('wte', 12, v.precision),
          bench.tensor('wpe', 12, v.precision),
        ];
        expect(() => encoderForward(rt, { out, idx, wte, wpe, B: 1, T: 2, C: 6 })).toThrow(/C \(d_model\) = 6 .*HINT: pad C/);
      } finally {
        bench.dispose();
      }
    });
  });

  it('biasResidual (row-parallel linear output): out = res + (sum + bias) within TOL32 + rnd', async () => {
    await each(async (v) => {
      for (const [N, C] of [
        [7, 64],
        [129, 256],
      ] as const) {
        const r = rng(N * C + 5);
        const res = roundTo(v.precision, r.normal(N * C, 1));
        const s = roundTo(v.precision, r.normal(N * C, 1));
        const bias = roundTo(v.precision, r.normal(C, 0.5));
        const bench = new Bench(rt, sizes(N * C, N * C, N * C, C));
        try {
          const t = {
            out: bench.tensor('out', N * C, v.precision),
            res: bench.tensor('res', res, v.precision),
            sum: bench.tensor('sum', s, v.precision),
            bias: bench.tensor('bias', bias, v.precision),
          };
          await bench.run(biasResidual(rt, { ...t, N, C }));
          const ref = new Float64Array(N * C);
          refBiasResidual({ out: ref, res: f64(res), sum: f64(s), bias: f64(bias), N, C });
          expect(relErr(await bench.read(t.out), ref, CANCEL_FLOOR), `${v.label} N=${N} C=${C}`).toBeLessThan(bound16(v));
        } finally {
          bench.dispose();
        }
      }
    });
  });

  it('softmax cross-entropy on 16-bit logits padded to Vp: f32 losses within TOL32 with the fp32 kernel bits, scaled 16-bit dlogits within TOL32 + rnd, padding columns 0', async () => {
    // [N, V, Vp]: the built-in datasets' vocabularies (27, 13) padded to a multiple of 4 and of 64, a wide row
    const shapes: [number, number, number][] = [
      [7, 27, 28],
      [64, 13, 64],
      [33, 129, 132],
      [2, 8191, 8192],
    ];
    await each(async (v) => {
      const scale = lossScaleOf(v);
      for (const [N, V, Vp] of shapes) {
        const r = rng(N * 13 + V);
        const logits = roundTo(v.precision, r.normal(N * V, 3));
        const targets = r.u32(N, V);
        targets[1] = V + 3; // an ignored row
        const dlossScale = 1 / N;
        // padding columns hold a value that would dominate the softmax if it were not masked
        const padded = padRows(logits, N, V, Vp, 3e4);
        const bench = new Bench(rt, sizes(N, N * Vp, N, N, N, N * V));
        try {
          const t = {
            losses: bench.tensor('losses', N),
            logits: bench.tensor('logits', padded, v.precision),
            targets: bench.tensor('targets', targets),
            lossesFwd: bench.tensor('lossesFwd', N),
            losses32: bench.tensor('losses32', N),
            logits32: bench.tensor('logits32', logits),
          };
          await bench.run([
            ...crossEntropyForward(rt, { losses: t.lossesFwd, logits: t.logits, targets: t.targets, N, V, Vp }),
            ...crossEntropyForward(rt, { losses: t.losses32, logits: t.logits32, targets: t.targets, N, V }),
            ...softmaxCrossEntropy(rt, {
              losses: t.losses,
              dlogits: t.logits,
              logits: t.logits,
              targets: t.targets,
              N,
              V,
              Vp,
              dlossScale,
              scale,
            }),
          ]);
          const ref = { losses: new Float64Array(N), dlogits: new Float64Array(N * Vp) };
          refSoftmaxCrossEntropy({ ...ref, logits: f64(padded), targets, N, V, Vp, dlossScale, scale });
          const at = `${v.label} N=${N} V=${V} Vp=${Vp}`;
          const losses = await bench.read(t.losses);
          const d = await bench.read(t.logits);
          expect(relErr(losses, ref.losses), `losses ${at}`).toBeLessThan(TOL32);
          expect(losses[1], `ignored row ${at}`).toBe(0);
          expect(bits(await bench.read(t.lossesFwd)), `forward vs fused losses ${at}`).toEqual(bits(losses));
          expect(bits(await bench.read(t.losses32)), `16-bit vs fp32 logits, losses ${at}`).toEqual(bits(losses));
          expect(relErr(d, ref.dlogits), `dlogits ${at}`).toBeLessThan(bound16(v));
          for (let n = 0; n < N; n++)
            for (let c = V; c < Vp; c++)
              if (d[n * Vp + c] !== 0) expect.fail(`${at}: padding column ${c} of row ${n} has gradient ${d[n * Vp + c]}`);
          expect(
            Array.from(d.subarray(Vp, 2 * Vp)).every((x) => x === 0),
            `ignored row's gradient ${at}`,
          ).toBe(true);
        } finally {
          bench.dispose();
        }
      }
      // a row length 16-bit storage cannot read is refused, naming the vocabulary padding
      const bench = new Bench(rt, sizes(4, 4 * 28, 4));
      try {
        const [losses, logits, targets] = [
          bench.tensor('losses', 4),
          bench.tensor('logits', 4 * 28, v.precision),
          bench.tensor('targets', 4),
        ];
        expect(() => crossEntropyForward(rt, { losses, logits, targets, N: 4, V: 27 })).toThrow(
          /Vp \(the logits row length\) = 27 .*HINT: pad the vocabulary/,
        );
      } finally {
        bench.dispose();
      }
    });
  });

  it('vocab-parallel embedding and cross-entropy on 16-bit shards (vocabulary padded to a multiple of 4 x TP): each rank within the bounds, padding rows and columns 0', async () => {
    // [B, T, C, V, TP]; V = 5 over 4 ranks of 4 rows: ranks 2 and 3 hold padding only
    const shapes: [number, number, number, number, number][] = [
      [2, 7, 16, 27, 2],
      [3, 5, 8, 27, 4],
      [1, 9, 4, 5, 4],
    ];
    await each(async (v) => {
      const scale = lossScaleOf(v);
      for (const [B, T, C, V, TP] of shapes) {
        const N = B * T;
        const Vl = Math.ceil(V / (4 * TP)) * 4;
        const r = rng(N * 31 + V + TP);
        const idx = r.u32(N, V);
        const wte = roundTo(v.precision, r.normal(TP * Vl * C, 1)).fill(0, V * C); // padding rows are 0
        const wpe = roundTo(v.precision, r.normal(T * C, 1));
        const dout = roundTo(v.precision, r.normal(N * C, 1));
        const logits = roundTo(v.precision, r.normal(N * TP * Vl, 3));
        const targets = r.u32(N, V);
        targets[1] = V + 7; // ignored row
        const dlossScale = 1 / N;
        const ref = { losses: new Float64Array(N), dlogits: new Float64Array(N * TP * Vl) };
        // the whole padded row against the single-device reference: padding columns are masked there too
        refSoftmaxCrossEntropy({ ...ref, logits: f64(logits), targets, N, V, Vp: TP * Vl, dlossScale, scale });
        const benches: Bench[] = [];
        try {
          const ranks = Array.from({ length: TP }, (_, rank) => {
            const vStart = rank * Vl;
            const bench = new Bench(rt, sizes(N, N * Vl, N, N, N, N, N * C, N, Vl * C, T * C, N * C, Vl * C, T * C));
            benches.push(bench);
            const shard = new Float32Array(N * Vl);
            for (let n = 0; n < N; n++) shard.set(logits.subarray(n * TP * Vl + vStart, n * TP * Vl + vStart + Vl), n * Vl);
            const t = {
              losses: bench.tensor('losses', N),
              logits: bench.tensor('logits', shard, v.precision),
              targets: bench.tensor('targets', targets),
              rowMax: bench.tensor('rowMax', N),
              rowSum: bench.tensor('rowSum', N),
              targetLogit: bench.tensor('targetLogit', N),
            };
            const e = {
              out: bench.tensor('out', N * C, v.precision),
              idx: bench.tensor('idx', idx),
              wte: bench.tensor('wte', wte.slice(vStart * C, (vStart + Vl) * C), v.precision),
              wpe: bench.tensor('wpe', wpe, v.precision),
              dout: bench.tensor('dout', dout, v.precision),
              dwte: bench.tensor('dwte', Vl * C, v.precision),
              dwpe: bench.tensor('dwpe', T * C, v.precision),
            };
            const passes = vocabCrossEntropy(rt, { ...t, N, V, vStart, Vl, writeGrad: true, dlossScale, scale });
            return { t, e, passes, vStart, rank };
          });
          // the embedding of each rank
          for (const { e, vStart, rank } of ranks) {
            const at = `${v.label} rank ${rank}/${TP} V=${V} C=${C}`;
            await benches[0]!.run([
              ...vocabEmbeddingForward(rt, { ...e, B, T, C, vStart, Vl, addPositions: rank === 0 }),
              ...vocabEmbeddingBackward(rt, { ...e, B, T, C, vStart, Vl }),
            ]);
            const refOut = new Float64Array(N * C);
            const wteShard = f64(wte.slice(vStart * C, (vStart + Vl) * C));
            refEmbeddingForward({ out: refOut, idx, wte: wteShard, wpe: f64(wpe), B, T, C, vStart, Vl, addPositions: rank === 0 });
            const rb = { dwte: new Float64Array(Vl * C), dwpe: new Float64Array(T * C) };
            refEmbeddingBackward({ ...rb, dout: f64(dout), idx, B, T, C, vStart, Vl });
            expect(relErr(await rt.read(e.out), refOut), `embedding out ${at}`).toBeLessThan(bound16(v));
            const dwte = await rt.read(e.dwte);
            expect(relErr(dwte, rb.dwte, CANCEL_FLOOR), `dwte ${at}`).toBeLessThan(bound16(v));
            const real = Math.max(0, Math.min(Vl, V - vStart));
            expect(
              Array.from(dwte.subarray(real * C)).every((x) => x === 0),
              `padding rows of dwte ${at}`,
            ).toBe(true);
            expect(relErr(await rt.read(e.dwpe), rb.dwpe, CANCEL_FLOOR), `dwpe ${at}`).toBeLessThan(bound16(v));
          }
          // the cross-entropy: pass 1, then the host plays all-reduce(max) and all-reduce(sum) as in vocab-parallel.test.ts
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
          const dlogits = new Float32Array(N * TP * Vl);
          for (const k of ranks) {
            rt.write(k.t.rowSum, s);
            await benches[0]!.run(k.passes.finish);
            const at = `${v.label} rank ${k.rank}/${TP} N=${N} V=${V}`;
            const losses = await rt.read(k.t.losses);
            expect(relErr(losses, ref.losses), `losses ${at}`).toBeLessThan(TOL32);
            expect(losses[1], `ignored row ${at}`).toBe(0);
            const d = await rt.read(k.t.logits);
            for (let n = 0; n < N; n++) dlogits.set(d.subarray(n * Vl, (n + 1) * Vl), n * TP * Vl + k.vStart);
          }
          expect(relErr(dlogits, ref.dlogits), `dlogits ${v.label} N=${N} V=${V} TP=${TP}`).toBeLessThan(bound16(v));
          for (let n = 0; n < N; n++)
            for (let c = V; c < TP * Vl; c++)
              if (dlogits[n * TP * Vl + c] !== 0)
                expect.fail(`${v.label}: padding column ${c} of row ${n} has gradient ${dlogits[n * TP * Vl + c]}`);
        } finally {
          for (const b of benches) b.dispose();
        }
      }
      // a shard whose rows 16-bit storage cannot read in 4s is refused, saying how to pad
      const bench = new Bench(rt, sizes(4, 4 * 8, 4, 4, 4, 4));
      try {
        const t = {
          losses: bench.tensor('losses', 4),
          logits: bench.tensor('logits', 4 * 8, v.precision),
          targets: bench.tensor('targets', 4),
          rowMax: bench.tensor('rowMax', 4),
          rowSum: bench.tensor('rowSum', 4),
          targetLogit: bench.tensor('targetLogit', 4),
        };
        expect(() => vocabCrossEntropy(rt, { ...t, N: 4, V: 27, vStart: 7, Vl: 7, writeGrad: true, dlossScale: 1 })).toThrow(
          /Vl .* = 7 .*HINT: pad the vocabulary to a multiple of 4 x TP/,
        );
      } finally {
        bench.dispose();
      }
    });
  });
});
