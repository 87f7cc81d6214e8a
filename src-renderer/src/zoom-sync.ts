// One zoom for a run's step charts (TensorBoard's linked x axes): every chart drawn against the
// optimizer step gets the same inside (wheel / drag) zoom on its x axis and joins one ECharts
// connect group, so zooming one zooms them all to the same steps. Charts on another axis
// (timeline in ms, memory per rank, bars) keep their own zoom.
import type { EChartsOption } from 'echarts';

/** the dataZoom id every step chart shares: connect forwards a zoom by the id it came from */
export const STEP_ZOOM_ID = 'step-zoom';

/** Is the option drawn against the step (stepLineFrame's x axis)? */
export function isStepChart(option: EChartsOption): boolean {
  const x = Array.isArray(option.xAxis) ? option.xAxis[0] : option.xAxis;
  return !!x && (x as { name?: unknown }).name === 'step' && (x as { type?: unknown }).type === 'value';
}

// one zoomed object per option: a re-render with the same option must hand ECharts the same
// object, or every chart of the view would redraw whenever any one changed
const zoomed = new WeakMap<EChartsOption, EChartsOption>();

/** A step chart with the shared inside zoom (an option that has its own dataZoom is left as it is). */
export function withStepZoom(option: EChartsOption): EChartsOption {
  if (!isStepChart(option) || option.dataZoom) return option;
  let z = zoomed.get(option);
  if (!z) {
    z = { ...option, dataZoom: [{ type: 'inside', id: STEP_ZOOM_ID, xAxisIndex: 0, filterMode: 'none' }] };
    zoomed.set(option, z);
  }
  return z;
}
