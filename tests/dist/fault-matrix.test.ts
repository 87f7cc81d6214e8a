// The fault matrix's representative subset (the whole matrix: npm run bench:faults). Each case is
// a real run hit mid-run by a fault, then resumed: every step's loss must equal the uninterrupted
// run's bit for bit (fp32), each step must be on record once, and 5 s after the run ended no rank
// process and no ring file of it may be left. Every fault and every layout of the matrix appears
// once: ddp 2 × SIGINT, zero3 2 × SIGSTOP of a rank, pp 2 (1F1B) × kill -9 of the controller,
// 3d 2×2×2 × runs.stop, ddp 2 × kill -9 of a rank. 30 steps, a checkpoint every 10, the fault
// after step 15, to keep the suite's time in check.
import { rmSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { caseDir, type Fault, faultCase, LAYOUTS, type MatrixOptions, referenceRun } from '../../bench/faults/harness.js';

const O: MatrixOptions = { steps: 30, checkpointInterval: 10, faultAfter: 15 };
const CASES: [string, Fault[]][] = [
  ['ddp 2', ['sigint', 'kill-rank']],
  ['zero3 2', ['stop-rank']],
  ['pp 2 1f1b', ['kill-controller']],
  ['3d 2x2x2', ['runs-stop']],
];

describe.each(CASES)('%s', (name, faults) => {
  const layout = LAYOUTS.find((l) => l.name === name)!;
  let reference: Map<number, number>;
  it(`trains ${O.steps} steps uninterrupted (the reference losses)`, () => {
    const dir = caseDir(`${name}-ref`);
    reference = referenceRun(layout, O, dir);
    rmSync(dir, { recursive: true, force: true });
    expect(reference.size).toBe(O.steps);
  }, 600_000);
  it.each(faults)(
    `%s after step ${O.faultAfter}, then a resume: the same loss at every step, each step once, nothing left`,
    async (fault) => {
      const dir = caseDir(`${name}-${fault}`);
      const r = await faultCase(layout, fault, reference, O, dir);
      const what = `${name} ${fault}: ${JSON.stringify(r)}`;
      expect(r.loss_mismatches, what).toEqual([]);
      expect(r.step_lines, what).toBe(O.steps);
      expect(r.ranks_left, what).toEqual([]);
      expect(r.ranks_gone_ms, what).toBeLessThan(5000);
      expect(r.shm_left, what).toEqual([]);
      // a resume continues from a checkpoint at or after the last interval before the fault
      expect(r.resumed_from, what).toBeGreaterThanOrEqual(O.checkpointInterval * Math.floor(O.faultAfter / O.checkpointInterval));
      rmSync(dir, { recursive: true, force: true });
    },
    600_000,
  );
});
