// The comparison's overlay and config diff over real run rows: the 8-rank 3d run kept in
// tests/e2e/fixtures and the 2-stage pipeline run the dashboard tests write.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { compareOverlayOption, overlayXs, type StepMetric } from '../../../common/charts/index.js';
import { configDiff, flattenConfig } from '../../../common/config-diff.js';
import { writePipelineRun } from '../../e2e/run-fixtures.js';
import { threeDRun } from '../three-d-fixture.js';

function pipelineRun() {
  const dir = mkdtempSync(path.join(tmpdir(), 'overlay-'));
  try {
    writePipelineRun(dir);
    const rows = readFileSync(path.join(dir, 'metrics.jsonl'), 'utf8')
      .split('\n')
      .filter((l) => l.trim())
      .map((l) => JSON.parse(l) as StepMetric & { type: string });
    return {
      config: JSON.parse(readFileSync(path.join(dir, 'config.json'), 'utf8')) as Record<string, unknown>,
      steps: rows.filter((r) => r.type === 'step'),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('compare overlay', () => {
  const a = threeDRun();
  const b = pipelineRun();
  const runs = [
    { id: 'run-3d', steps: a.steps },
    { id: 'run-pp', steps: b.steps },
  ];

  it('draws both runs on one chart with one y axis, one line per run named by its id, each point its own loss', () => {
    const o = compareOverlayOption(runs, 'loss', 'step') as { yAxis: unknown; series: { name: string; data: number[][] }[] };
    expect(Array.isArray(o.yAxis)).toBe(false); // a single axis both series share
    expect(o.series.map((s) => s.name)).toEqual(['run-3d', 'run-pp']);
    expect(o.series[0]!.data).toEqual(a.steps.map((s) => [s.step, s.loss]));
    expect(o.series[1]!.data).toEqual(b.steps.map((s) => [s.step, s.loss]));
  });

  it('time axis: seconds of training at the end of each step, the running sum of step_ms', () => {
    const xs = overlayXs(a.steps, 'time');
    let acc = 0;
    a.steps.forEach((s, i) => {
      acc += s.step_ms! / 1000;
      expect(xs[i]).toBeCloseTo(acc, 9);
    });
    expect(xs).toEqual([...xs].sort((x, y) => x - y));
  });

  it('tokens axis: tokens seen so far; the 3d run sees batch 8 x 64 tokens a step', () => {
    // tiny preset, batch_size 8, block_size 64 = 512 tokens per optimizer step
    expect(overlayXs(a.steps, 'tokens')).toEqual(a.steps.map((_, i) => 512 * (i + 1)));
    const o = compareOverlayOption(runs, 'loss', 'tokens') as { xAxis: { name: string } };
    expect(o.xAxis.name).toBe('tokens seen');
  });

  it('leaves out a metric a step lacks rather than drawing it at 0', () => {
    const steps = [
      { step: 1, loss: 3 },
      { step: 2, loss: 2.5, grad_norm: 1 },
    ] as StepMetric[];
    const o = compareOverlayOption([{ id: 'x', steps }], 'grad_norm', 'step') as { series: { data: number[][] }[] };
    expect(o.series[0]!.data).toEqual([[2, 1]]);
  });
});

describe('config diff', () => {
  const a = threeDRun().config;
  const b = pipelineRun().config;

  it('lists the keys whose values differ, with each run’s value, and not the ones they share', () => {
    const rows = configDiff([a, b]);
    const byKey = Object.fromEntries(rows.map((r) => [r.key, r.values]));
    expect(byKey['parallel.strategy']).toEqual(['"3d"', '"pp"']);
    expect(byKey['parallel.world']).toEqual(['8', '2']);
    expect(byKey['parallel.micro_batches']).toEqual(['2', '4']);
    // the pipeline fixture names fewer train keys: present on one side only
    expect(byKey['train.weight_decay']).toEqual(['0.1', undefined]);
    // shared keys and run_dir (each run's own folder) are not differences
    expect(byKey['train.batch_size']).toBeUndefined();
    expect(byKey['model.d_model']).toBeUndefined();
    expect(byKey['run_dir']).toBeUndefined();
    expect(rows.map((r) => r.key)).toEqual([...rows.map((r) => r.key)].sort());
  });

  it('two identical configs differ nowhere; arrays compare as a whole', () => {
    expect(configDiff([a, structuredClone(a)])).toEqual([]);
    expect(flattenConfig({ placement: [{ machine: 'x' }] }).get('placement')).toBe('[{"machine":"x"}]');
    expect(configDiff([{ p: [1, 2] }, { p: [1, 3] }])).toEqual([{ key: 'p', values: ['[1,2]', '[1,3]'] }]);
  });
});
