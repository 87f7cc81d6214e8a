import { describe, expect, it } from 'vitest';
import {
  type LayerTimes,
  partitionByCost,
  partitionByTime,
  partitionLayers,
  stageMs,
} from '../../../workers/parallel/pipeline-schedule.js';
import { rng } from '../rng.js';

type Ranges = { from: number; to: number }[];

/** The largest stage cost of a split (embedding on the first stage, head on the last). */
const largest = (r: Ranges, blocks: number[], emb: number, head: number) =>
  Math.max(
    ...r.map((x, s) => blocks.slice(x.from, x.to).reduce((a, b) => a + b, 0) + (s === 0 ? emb : 0) + (s === r.length - 1 ? head : 0)),
  );

/** Every split of n blocks into p consecutive non-empty stages. */
function* splits(n: number, p: number, from = 0): Generator<Ranges> {
  if (p === 1) {
    yield [{ from, to: n }];
    return;
  }
  for (let to = from + 1; to <= n - (p - 1); to++) for (const rest of splits(n, p - 1, to)) yield [{ from, to }, ...rest];
}

describe('stage partition by cost (parameters or measured time)', () => {
  it('uniform costs: the same split as by parameter count', () => {
    for (const [n, p] of [
      [4, 2],
      [4, 4],
      [6, 3],
      [8, 3],
    ] as const)
      expect(partitionByCost(new Array(n).fill(7), p, 3, 5)).toEqual(partitionLayers(n, p, 7, 3, 5));
  });

  it('given timings: the stages sum to balanced times, the embedding counted on the first stage and the head on the last', () => {
    // a slow head (LM head + cross-entropy over the vocabulary) and a cheap embedding lookup:
    // by time, the first stage takes more blocks than the last
    const t: LayerTimes = { embedding: 1, blocks: [10, 10, 10, 10, 10, 10], head: 25 };
    const r = partitionByTime(t, 2);
    expect(r).toEqual([
      { from: 0, to: 4 },
      { from: 4, to: 6 },
    ]);
    expect(r.map((x, s) => stageMs(t, { ...x, first: s === 0, last: s === 1 }))).toEqual([41, 45]);
    // one slow block (say a longer attention) sits alone
    expect(partitionByTime({ embedding: 0, blocks: [5, 5, 30, 5, 5], head: 0 }, 3)).toEqual([
      { from: 0, to: 2 },
      { from: 2, to: 3 },
      { from: 3, to: 5 },
    ]);
    // by parameters the same model splits evenly: the heavy wte sits in both the embedding and the head
    expect(partitionLayers(6, 2, 10, 30, 30)).toEqual([
      { from: 0, to: 3 },
      { from: 3, to: 6 },
    ]);
  });

  it('the largest stage is the smallest any split achieves (exhaustive check on random timings)', () => {
    const next = rng(12345).next;
    const rand = () => next() * 20;
    for (let trial = 0; trial < 200; trial++) {
      const n = 2 + (trial % 7);
      const p = 1 + (trial % Math.min(n, 4));
      const blocks = Array.from({ length: n }, rand);
      const emb = rand();
      const head = rand();
      const r = partitionByCost(blocks, p, emb, head);
      expect(r).toHaveLength(p);
      expect(r[0]!.from).toBe(0);
      expect(r.at(-1)!.to).toBe(n);
      r.forEach((x, s) => {
        expect(x.to).toBeGreaterThan(x.from);
        if (s > 0) expect(x.from).toBe(r[s - 1]!.to);
      });
      const best = Math.min(...[...splits(n, p)].map((s) => largest(s, blocks, emb, head)));
      expect(largest(r, blocks, emb, head)).toBeCloseTo(best, 9);
    }
  });

  it('refuses fewer blocks than stages and costs that are not finite, naming them', () => {
    expect(() => partitionByCost([1, 1], 3, 0, 0)).toThrow(/n_layer 2 is smaller than the pipeline stages \(parallel.pp = 3\)/);
    expect(() => partitionByCost([1, Number.NaN, 1], 2, 0, 0)).toThrow(/cost of block 1 is NaN/);
    expect(() => partitionByCost([1, 1], 2, -1, 0)).toThrow(/cost of embedding is -1/);
  });
});
