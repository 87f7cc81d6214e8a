// `shardwise profile`'s whole-step line names each of its two ratios: the k processes' throughput
// together over one alone, and the whole batch split over the k against one process running it.
import { describe, expect, it } from 'vitest';
import { sharedStepLine } from '../../src-main/cli/profile-shared-line.js';

describe("profile's two-process line", () => {
  it('says which ratio is which, with the times each comes from', () => {
    // alone 10 ms per micro-batch of 4; 2 at once 19.4 ms each: x1.03 together.
    // The batch of 8 split over 2: 19.4 * 8 / (2 * 4) = 19.4 ms against 18.6 ms by one: x0.96.
    const line = sharedStepLine({
      k: 2,
      op: 'step',
      shape: 'tiny B=4',
      flops: 1,
      bytes: 1,
      speedup: 1.03,
      batch: 4,
      alone_ms: 10,
      shared_ms: 19.4,
      whole_batch: 8,
      whole_batch_ms: 18.6,
    });
    expect(line).toBe(
      'tiny B=4                 2 at once: throughput x1.03 of one alone (each its own micro-batch of 4: 19.4 ms each at once, 10.0 ms alone); ' +
        'the batch of 8 split over the 2: 19.4 ms against 18.6 ms by one, x0.96 its speed',
    );
  });

  it('without the whole-batch timing it prints the throughput ratio alone', () => {
    const line = sharedStepLine({ k: 2, op: 'step', shape: 's', flops: 1, bytes: 1, speedup: 0.5, batch: 2, alone_ms: 4, shared_ms: 16 });
    expect(line).toMatch(
      /2 at once: throughput x0\.50 of one alone \(each its own micro-batch of 2: 16\.0 ms each at once, 4\.0 ms alone\)$/,
    );
  });
});
