// The order vitest starts test files in: longest first, by the per-file times of a full run
// committed in tests/durations.json (refreshed from a passing run by tests/durations-reporter.ts:
// SHARDWISE_TEST_DURATIONS=1 npm test). With 2 workers the suite's wall time is at least its
// longest file, and a long file that starts late runs alone at the end while the other worker
// idles. vitest's own order needs its results cache (node_modules/.vite), which a clean clone (CI)
// lacks: it then starts the largest files in bytes first, which put a 260 s file near the end.
// Files the table does not know yet (new ones) start first, as vitest's own order does: they may
// be long.
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

export const DURATIONS = path.join(path.dirname(new URL(import.meta.url).pathname), 'durations.json');

/** Measured wall time per test file (ms), by path from the repository root. */
export function fileDurations(): Map<string, number> {
  const table = JSON.parse(readFileSync(DURATIONS, 'utf8')) as { ms: Record<string, number> };
  return new Map(Object.entries(table.ms));
}

export class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const ms = fileDurations();
    const rel = (f: TestSpecification) => path.relative(this.ctx.config.root, f.moduleId).split(path.sep).join('/');
    const size = (f: TestSpecification) => statSync(f.moduleId).size;
    const unknown = files.filter((f) => !ms.has(rel(f))).sort((a, b) => size(b) - size(a));
    const known = files.filter((f) => ms.has(rel(f))).sort((a, b) => ms.get(rel(b))! - ms.get(rel(a))!);
    return [...unknown, ...known];
  }
}
