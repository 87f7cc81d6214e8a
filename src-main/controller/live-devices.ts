// devices.live: the live fields of this machine's GPUs between full probes. A full probe
// (DeviceCache: WebGPU adapters in a child process + systeminformation) takes seconds and runs
// every few minutes; utilisation, memory and temperature change every second, and nvidia-smi
// answers them in tens of ms. One query serves every caller for `maxAgeMs`.
import type { DevicesView, LiveDevicesView } from '../../common/api/index.js';
import { type NvidiaSmiGpu, queryNvidiaSmi } from '../machine/nvidia-smi.js';

type Controller = DevicesView['system']['controllers'][number];

/**
 * The probe's controllers with nvidia-smi's live figures laid over them: the NVIDIA controllers
 * in order match nvidia-smi's indices (both follow PCI order, as withNvidiaSmi joins them); a
 * field nvidia-smi does not report ([N/A]) keeps the probe's value.
 */
export function liveControllers(controllers: Controller[], smi: NvidiaSmiGpu[]): Controller[] {
  const out = controllers.map((c) => ({ ...c }));
  const nvidia = out.filter((c) => /nvidia/i.test(`${c.vendor} ${c.model}`));
  for (const row of smi) {
    const c = nvidia[row.index];
    if (!c) continue;
    if (row.utilizationPct !== null) c.utilizationPct = row.utilizationPct;
    if (row.memoryUsedMiB !== null) c.memoryUsedMiB = row.memoryUsedMiB;
    if (row.memoryTotalMiB !== null) c.memoryTotalMiB = row.memoryTotalMiB;
    if (row.temperatureC !== null) c.temperatureC = row.temperatureC;
    if (row.powerDrawW !== null) c.powerDrawW = row.powerDrawW;
  }
  return out;
}

export class LiveDevices {
  private last: { at: number; view: LiveDevicesView } | null = null;
  private inflight: Promise<LiveDevicesView> | null = null;

  constructor(
    private readonly probed: () => Promise<DevicesView>,
    private readonly query: () => Promise<NvidiaSmiGpu[]> = () => queryNvidiaSmi(2000),
    private readonly maxAgeMs = 2000,
    private readonly now: () => number = Date.now,
  ) {}

  read(): Promise<LiveDevicesView> {
    if (this.last && this.now() - this.last.at < this.maxAgeMs) return Promise.resolve(this.last.view);
    this.inflight ??= this.take().finally(() => (this.inflight = null));
    return this.inflight;
  }

  private async take(): Promise<LiveDevicesView> {
    const [base, smi] = await Promise.all([this.probed(), this.query()]);
    const at = this.now();
    const view: LiveDevicesView = {
      controllers: liveControllers(base.system.controllers, smi),
      source: smi.length ? 'nvidia-smi' : 'probe',
      taken_at: new Date(at).toISOString(),
      probed_at: base.probed_at,
    };
    this.last = { at, view };
    return view;
  }
}
