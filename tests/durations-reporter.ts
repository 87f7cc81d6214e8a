// Refreshes tests/durations.json, the per-file times behind the suite's longest-first order
// (tests/sequencer.ts), from a run that passed: `SHARDWISE_TEST_DURATIONS=1 npm test` adds this
// reporter. A file's time is all its worker spent on it (environment, harness, import, its tests
// and hooks: a beforeAll that trains the baseline counts), as the order needs. Files the run did
// not include keep their time; files that no longer exist are dropped.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Reporter, TestModule } from 'vitest/node';
import { DURATIONS } from './sequencer.js';

const ROOT = path.dirname(path.dirname(DURATIONS));

export default class DurationsReporter implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>, _errors: unknown, reason: 'passed' | 'interrupted' | 'failed') {
    if (reason !== 'passed') {
      console.log(`tests/durations.json left as it was: the run ${reason}`);
      return;
    }
    const ms: Record<string, number> = existsSync(DURATIONS) ? JSON.parse(readFileSync(DURATIONS, 'utf8')).ms : {};
    for (const m of modules) {
      const d = m.diagnostic();
      const total = d.environmentSetupDuration + d.prepareDuration + d.collectDuration + d.setupDuration + d.duration;
      ms[path.relative(ROOT, m.moduleId).split(path.sep).join('/')] = Math.round(total / 100) * 100;
    }
    for (const f of Object.keys(ms)) if (!existsSync(path.join(ROOT, f))) delete ms[f];
    const sorted = Object.fromEntries(Object.entries(ms).sort(([, a], [, b]) => b - a));
    const about =
      'Wall time (ms) of each test file in a full run of the suite, for the longest-first order of tests/sequencer.ts; refreshed by tests/durations-reporter.ts (SHARDWISE_TEST_DURATIONS=1 npm test)';
    writeFileSync(DURATIONS, `${JSON.stringify({ about, ms: sorted }, null, 2)}\n`);
    console.log(`tests/durations.json refreshed: ${Object.keys(sorted).length} files`);
  }
}
