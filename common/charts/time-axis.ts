// Labels of the span charts' time axis (ms since the first span): rounded to what a reader can
// tell apart, "850 ms" below a second and "9.05 s" above. ECharts puts a label at each end of
// a zoomed window, at the raw extent (it read "9,053.4248046875" before this formatter).
// It must stay self-contained (no imports, no closure over module variables): the HTML report
// ships it to the page as its source text, like renderSpanBlock.
export function formatMsLabel(value: number): string {
  const a = Math.abs(value);
  if (a < 1000) return `${a >= 10 || a === 0 ? Math.round(value) : value.toFixed(1)} ms`;
  const s = value / 1000;
  return `${a >= 100_000 ? Math.round(s) : a >= 10_000 ? s.toFixed(1) : s.toFixed(2)} s`;
}

/** The value axis of a span chart, in ms from the first span, labelled by formatMsLabel. */
export const timeAxis = () =>
  ({
    type: 'value',
    name: 'time since the first span',
    min: 0,
    nameLocation: 'middle',
    nameGap: 26,
    // labels that would overlap a neighbour (the window's end next to a round tick) are dropped
    axisLabel: { formatter: formatMsLabel, hideOverlap: true },
  }) as const;

/** The zoom slider under a span chart: its handle labels are times too. */
export const timeZoom = (startValue: number) => [
  {
    type: 'slider' as const,
    xAxisIndex: 0,
    filterMode: 'weakFilter' as const,
    startValue,
    bottom: 8,
    height: 18,
    labelFormatter: formatMsLabel,
  },
  { type: 'inside' as const, xAxisIndex: 0, filterMode: 'weakFilter' as const },
];
