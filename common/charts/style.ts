// Colours and shared option pieces, so every chart of the dashboard and the report reads alike.
import type { EChartsOption } from 'echarts';

export const COLORS = {
  loss: '#5470c6',
  smoothed: '#1f3b99',
  val: '#ee6666',
  tokens: '#91cc75',
  gradNorm: '#fac858',
  lr: '#73c0de',
  forward: '#5b8ff9',
  backward: '#5ad8a6',
  optimizer: '#8c8c8c',
  bubble: 'rgba(160,160,160,0.35)',
  peak: '#d4380d',
  predicted: '#722ed1',
} as const;

/** One colour per memory category (common/memory-categories.ts), stacked bottom to top in this order. */
export const CATEGORY_COLORS: Record<string, string> = {
  params: '#5470c6',
  grads: '#91cc75',
  optimizer: '#fac858',
  activations: '#ee6666',
  comm: '#73c0de',
  workspace: '#9a60b4',
};

/** One colour per collective or p2p op; unknown ops get a stable colour from their name. */
const OP_COLORS: Record<string, string> = {
  allReduce: '#fa8c16',
  allGather: '#9254de',
  reduceScatter: '#f5222d',
  broadcast: '#a0522d',
  reduce: '#eb2f96',
  gather: '#13c2c2',
  scatter: '#2f54eb',
  send: '#08979c',
  recv: '#36cfc9',
  barrier: '#595959',
};
const SPARE = ['#d4b106', '#7cb305', '#c41d7f', '#1d39c4', '#ad6800', '#006d75'];

export function opColor(op: string): string {
  const known = OP_COLORS[op];
  if (known) return known;
  let h = 0;
  for (const ch of op) h = (h * 31 + ch.charCodeAt(0)) >>> 0;
  return SPARE[h % SPARE.length]!;
}

/** Bytes as B / KiB / MiB / GiB with three significant digits. */
export function formatBytes(b: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = b;
  let i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  // 1000..1023 of a unit: toPrecision(3) would write 1.01e+3
  return `${i === 0 || Math.abs(v) >= 100 ? v.toFixed(0) : v.toPrecision(3)} ${units[i]}`;
}

/** The binary unit a chart of values up to `max` bytes is drawn in. */
export function byteUnit(max: number): { unit: string; scale: number } {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (max >= 1024 ** (i + 1) && i < units.length - 1) i++;
  return { unit: units[i]!, scale: 1024 ** i };
}

export const percent = (x: number): string => `${(100 * x).toFixed(1)}%`;

/** A line chart over steps: the frame every training curve shares. */
export function stepLineFrame(title: string, yName: string, subtext?: string): EChartsOption {
  return {
    title: { text: title, ...(subtext ? { subtext } : {}), left: 'center', textStyle: { fontSize: 14 } },
    tooltip: { trigger: 'axis' },
    grid: { left: 64, right: 24, top: subtext ? 64 : 48, bottom: 40 },
    xAxis: { type: 'value', name: 'step', nameLocation: 'middle', nameGap: 24, minInterval: 1, min: 'dataMin' },
    yAxis: { type: 'value', name: yName, scale: true },
  };
}
