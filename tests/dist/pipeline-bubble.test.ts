import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect, it } from 'vitest';
import { C, type PipelineRun, PipelineRuns } from './helpers/pipeline-runs.js';

// The pipeline bubble measured on real rank processes (one per stage) against its theory. The
// stages mostly sleep out their padded spans, so this file gets its own worker slot beside a
// CPU-bound one instead of lengthening tests/dist/pipeline.test.ts.
const LONG = 900_000;
const pp = new PipelineRuns();

// Every forward is padded to PAD_MS and every backward to twice that, so stage costs are equal
// (the theory's precondition) whatever the CPU. Why 200 ms still measures the schedule within 5
// points: with spans padded, a step's window is (m+p-1) x 3 PAD plus the 2(p-1) boundary hops of
// the critical path (forward chain, then backward chain) at d ms each, and every stage is busy
// m x 3 PAD of it; the measured bubble then exceeds (p-1)/(m+p-1) by about
// 2m(p-1)d / (3 PAD (m+p-1)^2), at most d / (6 PAD) over p = 2, 4 and m = 1..8. 5 points hold
// for hops up to 60 ms (90 at 300 ms); compute spans measured unpadded at load 20-30 on 2 cores:
// median 7-40 ms, worst 165 ms forward and 320 ms backward (p 4, m 8), under their pads. A run
// whose compute outgrew a pad anyway is measured again (below).
const PAD_MS = 200;

it(
  `bubble: with equal-cost stages (every forward padded to ${PAD_MS} ms and every backward to ${2 * PAD_MS} ms on every stage), measured within 5 points of (p-1)/(m+p-1), p = 2 and 4, m = 1..8, GPipe and 1F1B`,
  async () => {
    const cfg = path.join(pp.root, 'equal-stages.json');
    writeFileSync(cfg, JSON.stringify({ model: { n_layer: 4, d_model: C, n_head: 2 }, parallel: { stage_delay_ms: PAD_MS } }));
    type Case = { p: number; m: number; schedule: string };
    const cases: Case[] = [2, 4].flatMap((p) => [1, 2, 4, 8].flatMap((m) => ['gpipe', '1f1b'].map((schedule) => ({ p, m, schedule }))));
    const report: string[] = [];
    let worst = 0;
    const runCases = (batch: Case[], attempt: number) =>
      pp.concurrently(
        batch.map(({ p, m, schedule }) => ({
          name: `bubble-${schedule}-${p}-${m}-${attempt}`,
          steps: 2, // the first step compiles the kernels and is not measured: step 2 is
          extra: [
            '--config',
            cfg,
            '--strategy',
            'pp',
            '--pp',
            String(p),
            '--micro-batches',
            String(m),
            '--schedule',
            schedule,
            '--checkpoint-interval',
            '0',
          ],
        })),
      );
    // The theory holds for equal-cost stages. A stage's real compute or a late timer that outgrows
    // its pad (the host shares 2 cores with another test file) breaks that precondition, not the
    // schedule: such a run is measured again, alone, up to twice. A run whose spans all kept their
    // pads gets no second chance.
    const overruns = (run: PipelineRun): number => {
      const spans = readFileSync(path.join(run.dir, 'spans.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      return spans.filter(
        (x) =>
          x.step > 1 &&
          x.stage !== undefined &&
          (x.kind === 'forward' || x.kind === 'backward') &&
          x.end - x.start > (x.kind === 'forward' ? PAD_MS : 2 * PAD_MS) * 1.05,
      ).length;
    };
    const judge = ({ p, m, schedule }: Case, run: PipelineRun, attempt: number): boolean => {
      const b = run.summary.bubble;
      expect(b.theory).toBeCloseTo((p - 1) / (m + p - 1), 12);
      expect(b.schedule).toBe(schedule);
      expect(b.measured).toHaveLength(p);
      const dev = Math.max(...b.measured.map((x) => Math.abs(x - b.theory)));
      const over = overruns(run);
      report.push(
        `${schedule} p=${p} m=${m}${attempt > 0 ? ` (again, alone: ${attempt})` : ''}: theory ${b.theory.toFixed(3)} measured ${b.measured.map((x) => x.toFixed(3)).join(' ')}; spans over their pad: ${over}`,
      );
      if (dev < 0.05 || over === 0 || attempt === 2) {
        worst = Math.max(worst, dev);
        return true;
      }
      return false;
    };
    // up to 4 rank processes at a time (two runs of 2 stages, or one of 4): the stages mostly wait
    // out their padded spans (8 at once measured p = 2, m = 8 at 0.164 against 0.111 in CI)
    const again: Case[] = [];
    for (let i = 0; i < cases.length;) {
      const batch = cases.slice(i, i + 4 / cases[i]!.p);
      i += batch.length;
      const runs = await runCases(batch, 0);
      batch.forEach((c, k) => {
        if (!judge(c, runs[k]!, 0)) again.push(c);
      });
    }
    for (const c of again) for (let attempt = 1; attempt <= 2; attempt++) if (judge(c, (await runCases([c], attempt))[0]!, attempt)) break;
    console.log(`pipeline bubble, measured vs theory:\n${report.join('\n')}`);
    expect(worst, report.join('\n')).toBeLessThan(0.05);
  },
  LONG,
);
