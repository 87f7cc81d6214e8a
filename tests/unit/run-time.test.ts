// A resumed run's training time is its steps' time; its wall time counts the pause, and each is
// labelled: 50 steps of 1 s trained 50 s over a wall time of 3 min 29 s.
import { describe, expect, it } from 'vitest';
import { formatDuration, runTimesLine, trainingMs, wallMs } from '../../common/run-time.js';

describe('training and wall time', () => {
  it('a run stopped and resumed three minutes later', () => {
    const steps = Array.from({ length: 50 }, (_, i) => ({ step: i + 1, step_ms: 1000 }));
    const state = { created_at: '2026-01-01T00:00:00.000Z', updated_at: '2026-01-01T00:03:29.000Z' };
    expect(trainingMs(steps)).toBe(50_000);
    expect(wallMs(state)).toBe(209_000);
    expect(runTimesLine(state, steps)).toBe('training 50 s · wall 3 min 29 s');
  });

  it('skips steps without a time and formats hours', () => {
    expect(trainingMs([{ step_ms: 250 }, {}, { step_ms: Number.NaN }, { step_ms: 750 }])).toBe(1000);
    expect(formatDuration(2 * 3_600_000 + 5 * 60_000)).toBe('2 h 5 min');
    expect(formatDuration(-1)).toBe('—');
  });
});
