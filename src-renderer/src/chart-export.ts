// Saving one chart as an image: PNG from the instance's own canvas (getDataURL at twice the
// pixels, on white: a transparent PNG reads badly in a slide), SVG by drawing the same option
// once more into a throwaway instance with ECharts' SVG renderer (the dashboard draws on canvas,
// which has no vector form). Both are saved by the browser from a blob or data URL.
import * as echarts from 'echarts';

export type ImageFormat = 'png' | 'svg';

/** "Loss" -> "RUNID-loss.png": the chart id names the file; anything unsafe in a file name becomes "-". */
export const imageFileName = (base: string, format: ImageFormat): string => `${base.replace(/[^A-Za-z0-9._-]+/g, '-')}.${format}`;

export function chartPng(chart: echarts.ECharts): string {
  return chart.getDataURL({ type: 'png', pixelRatio: 2, backgroundColor: '#fff' });
}

/** The chart's current option (zoom window included) drawn by the SVG renderer, as SVG text. */
export function chartSvg(chart: echarts.ECharts): string {
  const host = document.createElement('div');
  const width = chart.getWidth();
  const height = chart.getHeight();
  host.style.cssText = `position:fixed;left:-10000px;top:0;width:${width}px;height:${height}px`;
  document.body.appendChild(host);
  const svg = echarts.init(host, undefined, { renderer: 'svg', width, height });
  try {
    svg.setOption({ ...(chart.getOption() as echarts.EChartsOption), animation: false, backgroundColor: '#fff' });
    return svg.renderToSVGString();
  } finally {
    svg.dispose();
    host.remove();
  }
}

export function saveChartImage(chart: echarts.ECharts, base: string, format: ImageFormat): string {
  const name = imageFileName(base, format);
  const url = format === 'png' ? chartPng(chart) : URL.createObjectURL(new Blob([chartSvg(chart)], { type: 'image/svg+xml' }));
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  if (format === 'svg') setTimeout(() => URL.revokeObjectURL(url), 60_000);
  return name;
}
