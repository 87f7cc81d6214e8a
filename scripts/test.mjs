#!/usr/bin/env node
// The whole test suite: build (typecheck + emit dist/ for the CLI and rank processes), then
// every vitest file. Ends with the plain summary line CI reads: "N passed, N failed[, N skipped]".
// SHARDWISE_TEST_DURATIONS=1 also refreshes tests/durations.json (the files' longest-first order)
// from the run's per-file times, when it passed (tests/durations-reporter.ts).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const root = path.dirname(path.dirname(new URL(import.meta.url).pathname));
const run = (cmd, args, opts = {}) => spawnSync(cmd, args, { cwd: root, stdio: 'inherit', ...opts });

// Lint (typescript-eslint) and the formatter's check first: a lint error fails the suite.
const lint = run('npm', ['run', '--silent', 'lint']);
if (lint.status !== 0) {
  console.log('lint failed (npm run lint; npm run format fixes formatting): the test suite did not run');
  console.log('0 passed, 1 failed');
  process.exit(1);
}

const build = run('npm', ['run', '--silent', 'build']);
if (build.status !== 0) {
  console.log('build failed: the test suite did not run');
  console.log('0 passed, 1 failed');
  process.exit(1);
}

const dir = mkdtempSync(path.join(tmpdir(), 'shardwise-test-'));
const report = path.join(dir, 'vitest.json');
const extra = process.argv.slice(2);
const vt = run(process.execPath, [
  path.join(root, 'node_modules/vitest/vitest.mjs'),
  'run',
  '--reporter=default',
  '--reporter=json',
  `--outputFile.json=${report}`,
  ...(process.env.SHARDWISE_TEST_DURATIONS === '1' ? ['--reporter=./tests/durations-reporter.ts'] : []),
  ...extra,
]);
let passed = 0,
  failed = 0,
  skipped = 0;
try {
  const r = JSON.parse(readFileSync(report, 'utf8'));
  passed = r.numPassedTests;
  // a file that failed with no failing test (an import error, a failing beforeAll) counts once;
  // numFailedTestSuites would count every describe around a failing test as well
  const fileErrors = (r.testResults ?? []).filter(
    (f) => f.status === 'failed' && !(f.assertionResults ?? []).some((a) => a.status === 'failed'),
  ).length;
  failed = r.numFailedTests + fileErrors;
  skipped = (r.numPendingTests ?? 0) + (r.numTodoTests ?? 0);
} catch (e) {
  console.log(`could not read the vitest report (${e.message})`);
  failed += 1;
}
rmSync(dir, { recursive: true, force: true });
if (vt.status !== 0 && failed === 0) failed = 1;
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
process.exit(failed > 0 ? 1 : 0);
