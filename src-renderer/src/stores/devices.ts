// The Devices panel's state: this machine's WebGPU adapters and the system's view of its GPUs.
import { defineStore } from 'pinia';
import type { DevicesView } from '../../../common/api/index.js';
import { NotConnectedError, useApi } from '../api/connection';

/** One row of the panel; mirrors the `shardwise devices --json` adapter entries it will show. */
export interface DeviceRow {
  index: number;
  description: string;
  backend: string;
  isSoftware: boolean;
  /** where the driver came from: 'system' or the SwiftShader ICD file */
  source: string;
  /** the system GPU it runs on (index into gpus), null for a software adapter */
  systemGpu: number | null;
}

export type DevicesStatus = 'not-connected' | 'loading' | 'ready' | 'error';

export const useDevicesStore = defineStore('devices', {
  state: () => ({
    adapters: [] as DeviceRow[],
    gpus: [] as DevicesView['system']['controllers'],
    systemError: '' as string,
    probedAt: '' as string,
    /** nvidia-smi when live fields are re-read every few seconds, probe when nothing reports them */
    liveSource: '' as '' | 'nvidia-smi' | 'probe',
    liveAt: '' as string,
    status: 'not-connected' as DevicesStatus,
    error: '' as string,
  }),
  actions: {
    /** This machine's adapters through the typed API (`devices.list`, or `devices.refresh` to probe again). */
    async load(probeAgain = false): Promise<void> {
      let api;
      try {
        api = await useApi();
      } catch (e) {
        this.status = e instanceof NotConnectedError ? 'not-connected' : 'error';
        this.error = (e as Error).message;
        return;
      }
      if (this.status !== 'ready') this.status = 'loading';
      try {
        const report = await api.call(probeAgain ? 'devices.refresh' : 'devices.list', {});
        this.adapters = report.adapters.map((a) => ({
          index: a.index,
          description: a.description || a.device,
          backend: a.backend,
          isSoftware: a.isSoftware,
          source: a.source,
          systemGpu: a.systemGpu,
        }));
        this.gpus = report.system.controllers;
        this.systemError = report.system.error ?? '';
        this.probedAt = report.probed_at;
        this.status = 'ready';
        if (!report.probe.ok) {
          this.status = 'error';
          this.error = report.probe.error ?? 'the WebGPU probe failed';
        }
      } catch (e) {
        this.status = 'error';
        this.error = (e as Error).message;
      }
    },
    /** Live utilisation, memory, temperature (`devices.live`: re-read without probing adapters). */
    async loadLive(): Promise<void> {
      if (this.status !== 'ready') return;
      try {
        const api = await useApi();
        const live = await api.call('devices.live', {});
        this.gpus = live.controllers;
        this.liveSource = live.source;
        this.liveAt = live.taken_at;
      } catch {
        // a missed sample is not an error worth a banner; the next poll tries again
      }
    },
  },
});

/** Poll `devices.live` while a view that shows it is mounted: returns the stop function. */
export function pollLiveDevices(store: ReturnType<typeof useDevicesStore>, everyMs = 3000): () => void {
  const timer = setInterval(() => void store.loadLive(), everyMs);
  return () => clearInterval(timer);
}
