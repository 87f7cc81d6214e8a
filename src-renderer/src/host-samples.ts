// The run view's host CPU and RAM samples (runs.host): read when the view opens, then only the
// new rows every few seconds while the run is live, drawn as two charts in the memory section
// (common/charts/host.ts).
import { onBeforeUnmount, type Ref, shallowRef, watch } from 'vue';
import type { HostRow } from '../../common/api/index.js';
import { hostCpuChartOption, hostMemoryChartOption, type RunChart } from '../../common/charts/index.js';
import { useApi } from './api/connection';

const POLL_MS = 3000;

export function useHostSamples(runId: string, live: Ref<boolean>) {
  const rows = shallowRef<HostRow[]>([]);
  let timer: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;

  async function fetchNew() {
    const last = rows.value[rows.value.length - 1];
    try {
      const r = await (await useApi()).call('runs.host', { runId, ...(last ? { fromTime: last.time + 1 } : {}) });
      if (r.rows.length) rows.value = [...rows.value, ...r.rows];
    } catch {
      // a run without host samples, or a moment without the controller: the charts just wait
    }
    clearTimeout(timer);
    if (live.value && !stopped) timer = setTimeout(() => void fetchNew(), POLL_MS);
  }
  void fetchNew();
  watch(live, () => void fetchNew());
  onBeforeUnmount(() => {
    stopped = true;
    clearTimeout(timer);
  });
  return rows;
}

/** The host charts as run charts of the memory section (none before the first sample). */
export function hostCharts(rows: readonly HostRow[]): RunChart[] {
  const out: RunChart[] = [];
  const cpu = hostCpuChartOption(rows);
  const mem = hostMemoryChartOption(rows);
  if (cpu) out.push({ id: 'host-cpu', section: 'memory', height: 280, columns: 2, option: cpu });
  if (mem) out.push({ id: 'host-ram', section: 'memory', height: 280, columns: 2, option: mem });
  return out;
}
