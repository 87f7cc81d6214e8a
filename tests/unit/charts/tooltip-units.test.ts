// Tooltips carry a unit and four significant digits: a memory chart's "total 2.443 MiB", not
// "total2.443397521972656"; span charts' times are rounded to the microsecond.
import { describe, expect, it } from 'vitest';
import { memoryChartOption } from '../../../common/charts/index.js';
import { bytesTooltip, roundMs, tooltipMiB } from '../../../common/charts/tooltip-units.js';

describe('tooltip values', () => {
  it('formats bytes in the unit the chart is drawn in', () => {
    expect(tooltipMiB(2.443397521972656)).toBe('2.443 MiB');
    expect(bytesTooltip('KiB')(1536.25)).toBe('1,536 KiB');
    expect(bytesTooltip('GiB')(null)).toBe('—');
    expect(() => bytesTooltip('MB')).toThrow('no tooltip formatter for the unit "MB"');
    expect(roundMs(9041.891357421875)).toBe(9041.891);
  });

  it("a memory chart's tooltip writes its values in the chart's unit", () => {
    const steps = [1, 2].map((step) => ({
      type: 'step' as const,
      step,
      loss: 1,
      lr: 1e-3,
      grad_norm: 1,
      tokens_per_s: 1,
      step_ms: 1,
      memory: { '0': { params: 2 * 2 ** 20, grads: 2 ** 19 } },
    }));
    const o = memoryChartOption(0, steps) as { tooltip: { valueFormatter: (v: unknown) => string } };
    expect(o.tooltip.valueFormatter(2.443397521972656)).toBe('2.443 MiB');
  });
});
