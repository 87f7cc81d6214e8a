// Run-event subscribers of one API client, fanned out from one subscription per run on the
// transport: the first subscriber of a run subscribes on the controller, the last one to leave
// unsubscribes. Both transports (WebSocket, Electron IPC) keep theirs here.
import type { RunEvent } from '../../../common/api/index.js';

export interface RunSubscription {
  /** subscribes this client to the run on the controller (throws if refused) */
  open(): Promise<void>;
  /** ends that subscription (once nobody here listens any more) */
  close(): Promise<void>;
}

export class RunListeners {
  private readonly byRun = new Map<string, Set<(e: RunEvent) => void>>();

  /** Adds a subscriber; resolves to its unsubscribe function once the run is subscribed. */
  async add(runId: string, onEvent: (e: RunEvent) => void, remote: RunSubscription): Promise<() => Promise<void>> {
    let set = this.byRun.get(runId);
    if (!set) this.byRun.set(runId, (set = new Set()));
    set.add(onEvent);
    if (set.size === 1) {
      try {
        await remote.open();
      } catch (e) {
        this.byRun.delete(runId);
        throw e;
      }
    }
    return async () => {
      const s = this.byRun.get(runId);
      s?.delete(onEvent);
      if (s && s.size === 0) {
        this.byRun.delete(runId);
        await remote.close();
      }
    };
  }

  /** Delivers an event (already checked) to the run's subscribers. */
  dispatch(runId: string, e: RunEvent): void {
    for (const fn of this.byRun.get(runId) ?? []) fn(e);
  }
}
