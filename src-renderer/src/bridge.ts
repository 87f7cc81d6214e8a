// What the Electron preload exposes on `window.shardwise` (src-main/shell/preload.ts builds it;
// common/api/ipc.ts is its type): the typed API's IPC transport. Absent in web mode.
import type { ShardwiseBridge } from '../../common/api/index.js';

export type { ShardwiseBridge };

declare global {
  interface Window {
    /** present in the Electron shell; absent in web mode (a browser) */
    shardwise?: ShardwiseBridge;
  }
}

/** The preload's bridge, or undefined in web mode. */
export function electronBridge(): ShardwiseBridge | undefined {
  return window.shardwise;
}
