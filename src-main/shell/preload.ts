// The sandboxed preload (built as CommonJS: a sandboxed preload cannot be an ES module).
// It exposes the smallest surface the renderer needs on `window.shardwise`; its type is the
// contract the renderer restates in src-renderer/src/bridge.ts until the typed API in common/.
import { contextBridge, ipcRenderer } from 'electron';
import { CHANNEL_PREFIX } from './channels.js';

declare const __SHARDWISE_VERSION__: string;

export type ShardwiseChannel = `shardwise:${string}`;

const shardwise = {
  version: __SHARDWISE_VERSION__,
  api: {
    /** Forward one request to the main process; channels outside `shardwise:` never reach IPC. */
    invoke<T = unknown>(channel: ShardwiseChannel, payload?: unknown): Promise<T> {
      if (typeof channel !== 'string' || !channel.startsWith(CHANNEL_PREFIX)) {
        return Promise.reject(new Error(`shardwise: refused channel ${JSON.stringify(channel)}; only "${CHANNEL_PREFIX}*" channels are allowed`));
      }
      return ipcRenderer.invoke(channel, payload) as Promise<T>;
    },
  },
};

export type ShardwiseBridge = typeof shardwise;

contextBridge.exposeInMainWorld('shardwise', shardwise);
