// The machines a run's ranks can be placed on, for the launch form's placement table: this
// machine ("local", its adapters from devices.list, with the system GPU's memory where known)
// and every paired agent (HOST:PORT from peers.list; its adapters from peers.inspect, asked once
// per address: the agent must prove its key to answer).
import { defineStore } from 'pinia';
import type { DevicesView, Peer, PeerDetail } from '../../../common/api/index.js';
import { useApi } from '../api/connection';
import { LOCAL } from '../launch-form';

export interface MachineAdapter {
  index: number;
  description: string;
  isSoftware: boolean;
  /** device memory in bytes where the system reports it (null: unknown, e.g. a software adapter) */
  memoryBytes: number | null;
}

export interface MachineView {
  /** "local" or HOST:PORT */
  id: string;
  label: string;
  adapters: MachineAdapter[];
  /** why its adapters are unknown ('' when known or still loading) */
  error: string;
  loading: boolean;
}

export const useMachinesStore = defineStore('machines', {
  state: () => ({
    local: null as DevicesView | null,
    localError: '',
    peers: [] as Peer[],
    details: {} as Record<string, PeerDetail | { error: string } | 'loading'>,
  }),
  getters: {
    machines(state): MachineView[] {
      const local: MachineView = {
        id: LOCAL,
        label: 'this machine (local)',
        adapters: (state.local?.adapters ?? []).map((a) => {
          const gpu = a.systemGpu !== null ? state.local?.system.controllers[a.systemGpu] : undefined;
          const mib = gpu?.memoryTotalMiB ?? gpu?.vramMiB ?? null;
          return {
            index: a.index,
            description: a.description || a.device,
            isSoftware: a.isSoftware,
            memoryBytes: mib ? mib * 2 ** 20 : null,
          };
        }),
        error: state.localError,
        loading: state.local === null && !state.localError,
      };
      const remote = state.peers
        .filter((p) => p.state === 'paired')
        .map((p): MachineView => {
          const d = state.details[p.address];
          const detail = d && d !== 'loading' && !('error' in d) ? d : null;
          return {
            id: p.address,
            label: `${p.name ?? detail?.machine.hostname ?? 'agent'} (${p.address})`,
            adapters: (detail?.adapters ?? []).map((a) => ({
              index: a.index,
              description: a.description,
              isSoftware: a.isSoftware,
              memoryBytes: null,
            })),
            error: d && d !== 'loading' && 'error' in d ? d.error : '',
            loading: d === undefined || d === 'loading',
          };
        });
      return [local, ...remote];
    },
  },
  actions: {
    async load(): Promise<void> {
      const api = await useApi();
      await Promise.all([
        api
          .call('devices.list', {})
          .then((d) => (this.local = d))
          .catch((e: Error) => (this.localError = e.message)),
        api
          .call('peers.list', {})
          .then((r) => {
            this.peers = r.peers;
            for (const p of r.peers) if (p.state === 'paired' && !(p.address in this.details)) void this.inspect(p.address);
          })
          .catch(() => undefined),
      ]);
    },
    async inspect(address: string): Promise<void> {
      this.details[address] = 'loading';
      try {
        this.details[address] = await (await useApi()).call('peers.inspect', { address });
      } catch (e) {
        this.details[address] = { error: (e as Error).message };
      }
    },
  },
});
