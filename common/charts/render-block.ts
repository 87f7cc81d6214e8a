// The one renderItem of the span charts (timeline and pipeline, ECharts custom series). Each
// datum is [lane, start, end, step, label]: a block on category row `lane` from `start` to `end`
// (x axis), clipped to the grid, coloured by the datum's itemStyle, with `label` written inside
// when it fits (label -1: none).
// It must stay self-contained (no imports, no closure over module variables): the HTML report
// ships it to the page as its source text (Function.prototype.toString) beside JSON options.
import type { CustomSeriesRenderItemAPI, CustomSeriesRenderItemParams, CustomSeriesRenderItemReturn } from 'echarts';

export function renderSpanBlock(params: CustomSeriesRenderItemParams, api: CustomSeriesRenderItemAPI): CustomSeriesRenderItemReturn {
  const lane = api.value(0) as number;
  const a = api.coord([api.value(1), lane]);
  const b = api.coord([api.value(2), lane]);
  const rowHeight = (api.size!([0, 1]) as number[])[1]!;
  const h = Math.max(2, rowHeight * 0.6);
  const grid = params.coordSys as unknown as { x: number; y: number; width: number; height: number };
  const x0 = Math.max(a[0]!, grid.x);
  const x1 = Math.min(b[0]!, grid.x + grid.width);
  if (x1 < x0) return null;
  const width = Math.max(x1 - x0, 0.5); // a sub-pixel span stays visible
  const label = api.value(4) as number;
  const rect = {
    type: 'rect' as const,
    shape: { x: x0, y: a[1]! - h / 2, width, height: h },
    style: { fill: api.visual('color') as string },
  };
  if (label === -1 || width < 14) return rect;
  return {
    type: 'group',
    children: [
      rect,
      {
        type: 'text',
        style: { text: String(label), x: x0 + width / 2, y: a[1]!, align: 'center', verticalAlign: 'middle', fill: '#fff', fontSize: 10 },
      },
    ],
  };
}
