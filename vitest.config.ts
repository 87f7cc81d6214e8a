import { defineConfig } from 'vitest/config';
import { LongestFirstSequencer } from './tests/sequencer.js';

// GPU tests share one SwiftShader adapter on 2 cores: run test files in a few forked
// processes (Dawn's native binding is not worker-thread safe) with generous timeouts,
// the longest files first (tests/sequencer.ts) so that no long file runs alone at the end.
export default defineConfig({
  test: {
    include: ['tests/**/*.test.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 180_000,
    hookTimeout: 180_000,
    reporters: ['default'],
    sequence: { sequencer: LongestFirstSequencer },
  },
});
