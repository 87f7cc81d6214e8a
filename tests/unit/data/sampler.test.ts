import { describe, expect, it } from 'vitest';
import { BatchSampler, evalBatches, evalWindows, rankRows, STREAM_VAL, splitTokens } from '../../../workers/data/sampler.js';

const tokens = Uint32Array.from({ length: 10_000 }, (_, i) => (i * 7919) % 65);

describe('batch sampler', () => {
  const s = new BatchSampler(tokens, { batchSize: 8, blockSize: 16, seed: 1337 });

  it('targets are the inputs shifted by one token, row by row', () => {
    const b = s.batchAt(3);
    expect(b.inputs.length).toBe(8 * 16);
    for (let r = 0; r < 8; r++) {
      const o = b.offsets[r];
      expect(o).toBeGreaterThanOrEqual(0);
      expect(o + 16 + 1).toBeLessThanOrEqual(tokens.length);
      for (let t = 0; t < 16; t++) {
        expect(b.inputs[r * 16 + t]).toBe(tokens[o + t]);
        expect(b.targets[r * 16 + t]).toBe(tokens[o + t + 1]);
      }
    }
  });

  it('batch k depends only on (seed, step): a fresh sampler resumed at step 100 gives identical batches 100..104', () => {
    const a = new BatchSampler(tokens, { batchSize: 8, blockSize: 16, seed: 1337 });
    for (let k = 0; k < 100; k++) a.batchAt(k); // an uninterrupted run drew steps 0..99 first
    const resumed = new BatchSampler(tokens, { batchSize: 8, blockSize: 16, seed: 1337 });
    for (let k = 100; k < 105; k++) {
      expect(resumed.batchAt(k).inputs).toEqual(a.batchAt(k).inputs);
      expect(resumed.batchAt(k).targets).toEqual(a.batchAt(k).targets);
    }
  });

  it('pins the offsets of seed 1337 step 0 (same numbers on every machine)', () => {
    expect(s.offsetsAt(0)).toMatchInlineSnapshot(`
      [
        9214,
        7153,
        295,
        231,
        9152,
        7827,
        8808,
        5999,
      ]
    `);
  });

  it('different steps, seeds and the validation stream give different windows', () => {
    expect(s.offsetsAt(1)).not.toEqual(s.offsetsAt(2));
    const t = new BatchSampler(tokens, { batchSize: 8, blockSize: 16, seed: 1338 });
    expect(t.offsetsAt(1)).not.toEqual(s.offsetsAt(1));
    const v = new BatchSampler(tokens, { batchSize: 8, blockSize: 16, seed: 1337, stream: STREAM_VAL });
    expect(v.offsetsAt(1)).not.toEqual(s.offsetsAt(1));
  });

  it('offsets cover the whole range of windows, including the last one (n-T-1)', () => {
    const small = Uint32Array.from({ length: 20 }, (_, i) => i);
    const q = new BatchSampler(small, { batchSize: 64, blockSize: 16, seed: 0 });
    const seen = new Set<number>();
    for (let k = 0; k < 20; k++) q.offsetsAt(k).forEach((o) => seen.add(o));
    expect([...seen].sort((a, b) => a - b)).toEqual([0, 1, 2, 3]);
  });

  it('DP: 4 ranks of 2 rows each reassemble the global batch of 8 exactly', () => {
    for (const step of [0, 7, 123]) {
      const g = s.batchAt(step);
      const parts = [0, 1, 2, 3].map((r) => s.rankBatchAt(step, r, 4));
      parts.forEach((p) => expect(p.B).toBe(2));
      const inputs = new Uint32Array(8 * 16);
      const targets = new Uint32Array(8 * 16);
      parts.forEach((p, r) => {
        inputs.set(p.inputs, r * 2 * 16);
        targets.set(p.targets, r * 2 * 16);
      });
      expect(inputs).toEqual(g.inputs);
      expect(targets).toEqual(g.targets);
    }
  });

  it("micro-batches of rank 1 of 2 (4 rows) in 2 slices of 2 rows are that rank's rows in order", () => {
    const rb = s.rankBatchAt(5, 1, 2);
    const m0 = s.microBatchAt(5, 1, 2, 0, 2);
    const m1 = s.microBatchAt(5, 1, 2, 1, 2);
    expect(m0.B).toBe(2);
    expect([...m0.inputs, ...m1.inputs]).toEqual([...rb.inputs]);
    expect(() => s.microBatchAt(5, 1, 2, 0, 3)).toThrow('4 rows per rank are not divisible into 3 micro-batches');
  });

  it('a batch not divisible by the DP size is a clear error', () => {
    expect(() => rankRows(8, 0, 3)).toThrow(
      'global batch size 8 is not divisible by the data-parallel size 3: choose a batch size that is a multiple of 3',
    );
    expect(() => rankRows(8, 4, 4)).toThrow('rank 4 is outside the data-parallel group of 4');
  });

  it('splits the last 10% off for validation', () => {
    const { train, val } = splitTokens(tokens, 16);
    expect(train.length).toBe(9000);
    expect(val.length).toBe(1000);
    expect(val[0]).toBe(tokens[9000]);
  });
});

describe('eval windows', () => {
  it('windows at 0, T, 2T, ... predict every token once up to the last full window', () => {
    const toks = Uint32Array.from({ length: 35 }, (_, i) => i);
    const w = evalWindows(toks, 8); // floor(34/8) = 4 windows, 32 predicted tokens
    expect(w).toEqual({ starts: [0, 8, 16, 24], count: 4, tokens: 32 });
    const bs = [...evalBatches(toks, 8, 3)];
    expect(bs.map((b) => b.B)).toEqual([3, 1]);
    const predicted = bs.flatMap((b) => [...b.targets]);
    expect(predicted).toEqual(Array.from({ length: 32 }, (_, i) => i + 1));
    expect(bs[1].inputs).toEqual(Uint32Array.from({ length: 8 }, (_, i) => 24 + i));
  });

  it('exactly T+1 tokens give one window; T tokens are too short', () => {
    expect(evalWindows(new Uint32Array(9), 8).count).toBe(1);
    expect(() => evalWindows(new Uint32Array(8), 8)).toThrow(
      'text too short to evaluate: 8 tokens, but one window of block size 8 needs 9',
    );
  });
});
