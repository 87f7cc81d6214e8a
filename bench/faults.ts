// npm run bench:faults — the fault matrix (what a run survives): ddp 2, zero3 2, pp 2 (1F1B) and 3d
// 2×2×2 on tiny, 60 steps, a checkpoint every 10; each run is hit after step 25 by one fault
// (kill -9 of rank 1, SIGSTOP of rank 1, kill -9 of its controller, SIGINT to the controller,
// the API's runs.stop), then resumed. A case holds when no rank process is left 5 s after the
// fault, no ring file of it lingers on /dev/shm, and every step's loss equals the uninterrupted
// run's bit for bit. Prints one JSON object. BENCH_LAYOUTS / BENCH_FAULTS (comma lists of
// names: 'ddp 2', 'zero3 2', 'pp 2 1f1b', '3d 2x2x2'; kill-rank, stop-rank, kill-controller,
// sigint, runs-stop) pick a part; BENCH_STEPS, BENCH_FAULT_AFTER change the sizes.
import { rmSync } from 'node:fs';
import os from 'node:os';
import { caseDir, type CaseResult, DEFAULT_OPTIONS, type Fault, FAULTS, faultCase, LAYOUTS, referenceRun } from './faults/harness.js';

const pick = <T extends string>(all: readonly T[], env: string | undefined, what: string): T[] => {
  if (!env) return [...all];
  const want = env.split(',').map((s) => s.trim());
  const unknown = want.filter((w) => !all.includes(w as T));
  if (unknown.length) throw new Error(`unknown ${what} ${unknown.join(', ')}; choose from ${all.join(', ')}`);
  return want as T[];
};
const layouts = pick(
  LAYOUTS.map((l) => l.name),
  process.env.BENCH_LAYOUTS,
  'layout',
).map((n) => LAYOUTS.find((l) => l.name === n)!);
const faults = pick<Fault>(FAULTS, process.env.BENCH_FAULTS, 'fault');
const o = {
  ...DEFAULT_OPTIONS,
  ...(process.env.BENCH_STEPS ? { steps: Number(process.env.BENCH_STEPS) } : {}),
  ...(process.env.BENCH_FAULT_AFTER ? { faultAfter: Number(process.env.BENCH_FAULT_AFTER) } : {}),
};

const results: (CaseResult | { layout: string; fault: Fault; error: string })[] = [];
for (const layout of layouts) {
  const refDir = caseDir(`${layout.name}-ref`);
  const reference = referenceRun(layout, o, refDir);
  rmSync(refDir, { recursive: true, force: true });
  for (const fault of faults) {
    const dir = caseDir(`${layout.name}-${fault}`);
    try {
      const r = await faultCase(layout, fault, reference, o, dir);
      results.push(r);
      process.stderr.write(
        `${layout.name} ${fault}: ${r.loss_mismatches.length === 0 && r.ranks_left.length === 0 && r.shm_left.length === 0 ? 'held' : 'FAILED'} (resumed from ${r.resumed_from}, ${r.ms} ms)\n`,
      );
    } catch (e) {
      results.push({ layout: layout.name, fault, error: (e as Error).message });
      process.stderr.write(`${layout.name} ${fault}: ERROR ${(e as Error).message}\n`);
    }
    rmSync(dir, { recursive: true, force: true });
  }
}
const held = results.filter(
  (r) => !('error' in r) && r.loss_mismatches.length === 0 && r.ranks_left.length === 0 && r.shm_left.length === 0,
);
process.stdout.write(
  `${JSON.stringify({ date: new Date().toISOString(), cpus: os.cpus().length, cpu: os.cpus()[0]?.model, options: o, cases: results.length, held: held.length, results })}\n`,
);
