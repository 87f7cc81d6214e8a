// The Devices panel's state: this machine's WebGPU adapters and the system's view of its GPUs.
import { defineStore } from 'pinia';

/** One row of the panel; mirrors the `shardwise devices --json` adapter entries it will show. */
export interface DeviceRow {
  index: number;
  description: string;
  backend: string;
  isSoftware: boolean;
  /** where the driver came from: 'system' or the SwiftShader ICD file */
  source: string;
}

export type DevicesStatus = 'not-connected' | 'loading' | 'ready' | 'error';

export const useDevicesStore = defineStore('devices', {
  state: () => ({
    adapters: [] as DeviceRow[],
    status: 'not-connected' as DevicesStatus,
    error: '' as string,
  }),
  actions: {
    /**
     * TODO(typed-api): fetch through the typed API (the same `devices` call in Electron via the
     * preload and in web mode via the WebSocket) once it exists in common/. Until then the
     * panel says it is not connected rather than showing made-up adapters.
     */
    async load(): Promise<void> {
      this.status = 'not-connected';
    },
  },
});
