import { defineConfig } from 'vitest/config';

// GPU tests share one SwiftShader adapter on 2 cores: run test files in a few forked
// processes (Dawn's native binding is not worker-thread safe) with generous timeouts.
export default defineConfig({
  test: {
    include: ['tests/**/*.test.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 180_000,
    hookTimeout: 180_000,
    reporters: ['default'],
  },
});
