// Host CPU load and RAM per machine over the run (host.jsonl: common/api/host.ts), drawn beside
// device memory: one line per machine, against seconds since the run's first sample, RAM with
// each machine's total as a dashed line (how close the host came to running out).
import type { EChartsOption, LineSeriesOption } from 'echarts';
import type { HostRow } from '../api/host.js';
import { byteUnit } from './style.js';

const MACHINE_COLORS = ['#5470c6', '#ee6666', '#91cc75', '#fac858', '#9a60b4', '#73c0de'];

function frame(title: string, yName: string): EChartsOption {
  return {
    title: { text: title, left: 'center', textStyle: { fontSize: 14 } },
    tooltip: { trigger: 'axis' },
    legend: { top: 30, type: 'scroll' },
    grid: { left: 64, right: 24, top: 70, bottom: 40 },
    xAxis: { type: 'value', name: 'seconds since the first sample', nameLocation: 'middle', nameGap: 24, min: 'dataMin', max: 'dataMax' },
    yAxis: { type: 'value', name: yName },
  };
}

/** The machines of the rows, in the order they first appear. */
export const hostMachines = (rows: readonly HostRow[]): string[] => [...new Set(rows.map((r) => r.machine))];

/** CPU % (all cores) per machine. */
export function hostCpuChartOption(rows: readonly HostRow[]): EChartsOption | null {
  if (rows.length === 0) return null;
  const t0 = rows[0]!.time;
  const series: LineSeriesOption[] = hostMachines(rows).map((m, i) => ({
    name: m,
    type: 'line',
    showSymbol: false,
    data: rows.filter((r) => r.machine === m).map((r) => [(r.time - t0) / 1000, Number(r.cpu_pct.toFixed(1))]),
    itemStyle: { color: MACHINE_COLORS[i % MACHINE_COLORS.length] },
  }));
  const f = frame('Host CPU', '% of all cores');
  return { ...f, yAxis: { ...(f.yAxis as object), min: 0, max: 100 }, series };
}

/** RAM in use per machine, its total dashed. */
export function hostMemoryChartOption(rows: readonly HostRow[]): EChartsOption | null {
  if (rows.length === 0) return null;
  const t0 = rows[0]!.time;
  const { unit, scale } = byteUnit(Math.max(...rows.map((r) => r.mem_total)));
  const round = (b: number) => Number((b / scale).toPrecision(4));
  const series: LineSeriesOption[] = hostMachines(rows).flatMap((m, i): LineSeriesOption[] => {
    const mine = rows.filter((r) => r.machine === m);
    const color = MACHINE_COLORS[i % MACHINE_COLORS.length];
    return [
      { name: m, type: 'line', showSymbol: false, data: mine.map((r) => [(r.time - t0) / 1000, round(r.mem_used)]), itemStyle: { color } },
      {
        name: `${m} total`,
        type: 'line',
        showSymbol: false,
        data: mine.map((r) => [(r.time - t0) / 1000, round(r.mem_total)]),
        lineStyle: { type: 'dashed', width: 1 },
        itemStyle: { color },
      },
    ];
  });
  return { ...frame('Host RAM', unit), series };
}
