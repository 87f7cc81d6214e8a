// A bound on the core: workers/model, workers/train and workers/parallel together hold
// fewer than 3,911 lines (their size before the one-core redesign), so that a concern added
// later does not grow the core. Where such a concern goes instead (its own folder beside them,
// as comm-hooks/, precision/ and telemetry/ are): ARCHITECTURE.md, "Folders" and "Where to add".
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const CORE = ['workers/model', 'workers/train', 'workers/parallel'];
const BOUND = 3911;

/** Lines of the .ts files under `dir`, recursively, counted as `find DIR -name '*.ts' | xargs cat | wc -l` counts them. */
function linesUnder(dir: string): number {
  return readdirSync(path.join(root, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .reduce((n, f) => n + (readFileSync(path.join(root, dir, f), 'utf8').match(/\n/g)?.length ?? 0), 0);
}

it(`workers/model, workers/train and workers/parallel hold fewer than ${BOUND} lines together`, () => {
  const per = CORE.map((dir) => ({ dir, lines: linesUnder(dir) }));
  // it really counted: each folder holds the core's code (a renamed folder would count 0)
  for (const { dir, lines } of per) expect(lines, `${dir} holds ${lines} lines of TypeScript`).toBeGreaterThan(300);
  const total = per.reduce((n, x) => n + x.lines, 0);
  expect(
    total,
    `${per.map((x) => `${x.dir} ${x.lines}`).join(' + ')} = ${total} lines, not fewer than ${BOUND}: put a new concern in its own folder beside the core, behind an interface the core calls (ARCHITECTURE.md, "Where to add"), and trim repeated or dead code`,
  ).toBeLessThan(BOUND);
});

// The benchmarks' emulated device (workers/gpu/emulated-device.ts) sits behind the device's
// StepClock (workers/gpu/step-clock.ts): the engines call it the same way on a real adapter, so
// nothing in the core names it, its bucket padding or its wire shapes.
it('the core never names the emulated device, its padding or its wire shapes', () => {
  const hits: string[] = [];
  for (const dir of CORE)
    for (const f of readdirSync(path.join(root, dir), { recursive: true, encoding: 'utf8' }).filter((x) => x.endsWith('.ts'))) {
      const lines = readFileSync(path.join(root, dir, f), 'utf8').split('\n');
      lines.forEach((l, i) => {
        if (/emulat|wireScale|wireShapes/i.test(l)) hits.push(`${dir}/${f}:${i + 1}: ${l.trim()}`);
      });
    }
  expect(hits, 'emulation reaches the core: put it behind workers/gpu/step-clock.ts').toEqual([]);
});
