// "Export as PyTorch job…", the dashboard's pure side (src-renderer/src/export-job.ts): which runs
// offer it, the checkpoints the dialog lists, and runs.export's layout from its fields.
import { describe, expect, it } from 'vitest';
import type { LayoutPlan } from '../../common/advisor/types.js';
import { canExport, exportableCheckpoints, exportFieldsOf, exportFieldsOfPlan, exportLayoutOf } from '../../src-renderer/src/export-job.js';

describe('export dialog', () => {
  it('a completed or stopped run with a checkpoint before its last step offers the export; others do not', () => {
    expect(canExport('completed', [10, 20], 20)).toBe(true);
    expect(canExport('stopped', [4], 300)).toBe(true);
    expect(canExport('completed', [20], 20)).toBe(false); // nothing left to train
    expect(canExport('completed', [], 20)).toBe(false);
    expect(canExport('running', [10], 20)).toBe(false);
    expect(canExport('failed', [10], 20)).toBe(false);
  });
  it('lists the checkpoints with steps left, newest first', () => {
    expect(exportableCheckpoints([10, 20, 15], 20)).toEqual([15, 10]);
  });
  it("fills the fields with the run's own layout, or an Advisor row's, and sends them as the layout", () => {
    expect(exportFieldsOf({ parallel: { strategy: 'ddp', world: 2, micro_batches: 1 } })).toEqual({
      strategy: 'ddp',
      world: 2,
      micro_batches: 1,
    });
    expect(exportFieldsOf({})).toEqual({ strategy: 'single', world: 1, micro_batches: 1 });
    const plan = { layout: { strategy: 'zero1', world: 4, micro_batches: 2 } } as LayoutPlan;
    expect(exportLayoutOf(exportFieldsOfPlan(plan))).toEqual({ strategy: 'zero1', world: 4, micro_batches: 2 });
  });
});
