// The one set of summary statistics (common/stats.ts) the benchmarks, the profiler and the charts
// take of repeated measurements, and the JSON-lines reader the benchmarks run `train --json` with.
import { describe, expect, it } from 'vitest';
import { mean, median, percentile, relDiffPct, round } from '../../common/stats.js';
import { jsonLines, TrainRunError } from '../../bench/run-and-read.js';

describe('stats', () => {
  it('median: the middle of an odd count (3 of 5, 7, 3), the mean of the two middles of an even one (4.5 of 6, 3, 9, 1), NaN of none', () => {
    expect(median([5, 7, 3])).toBe(5);
    expect(median([6, 3, 9, 1])).toBe(4.5);
    expect(median([])).toBeNaN();
    const xs = [3, 1, 2];
    median(xs);
    expect(xs).toEqual([3, 1, 2]); // the input is left as it was
  });

  it('mean 2.5 of 1..4; percentile 0, 50, 90 and 100 of 10, 20, 30, 40, 50 interpolate between ranks: 10, 30, 46, 50', () => {
    expect(mean([1, 2, 3, 4])).toBe(2.5);
    expect(mean([])).toBeNaN();
    expect([0, 50, 90, 100].map((p) => percentile([50, 10, 40, 20, 30], p))).toEqual([10, 30, 46, 50]);
  });

  it('relDiffPct: 110 is +10% of 100, 90 is -10%; round keeps the digits asked (2 by default)', () => {
    expect(relDiffPct(110, 100)).toBeCloseTo(10, 12);
    expect(relDiffPct(90, 100)).toBeCloseTo(-10, 12);
    expect([round(1.23456), round(1.23456, 1), round(1234.5, 0)]).toEqual([1.23, 1.2, 1235]);
  });
});

describe('run-and-read', () => {
  it('reads the JSON lines of train --json and skips the others (a warning, a blank)', () => {
    const text = '{"type":"step","step":1,"step_ms":12.5}\nwarning: slow adapter\n\n{"type":"summary","final_loss":2.1}\n';
    expect(jsonLines(text)).toEqual([
      { type: 'step', step: 1, step_ms: 12.5 },
      { type: 'summary', final_loss: 2.1 },
    ]);
  });

  it('a failed run names the case, the exit code and the last line of stderr, and keeps the tail', () => {
    const e = new TrainRunError('ddp x2 fp16', 2, 'shardwise: starting\nshardwise: --world 3: batch size 8 is not divisible');
    expect(e.message).toBe('ddp x2 fp16: shardwise train exited 2: shardwise: --world 3: batch size 8 is not divisible');
    expect(e.stderrTail.split('\n')).toHaveLength(2);
  });
});
