// The sandboxed preload (built as CommonJS: a sandboxed preload cannot be an ES module). It
// exposes the typed API's transport on `window.shardwise` and nothing else: `call`, `subscribe`,
// `unsubscribe` and the version (common/api/ipc.ts's ShardwiseBridge is its type). Only the
// `shardwise:` channels are ever used; the main process checks the sender and every payload.
import { contextBridge, ipcRenderer } from 'electron';
import { IPC_CHANNELS, type IpcReply, type ShardwiseBridge } from '../../common/api/ipc-channels.js';

declare const __SHARDWISE_VERSION__: string;

/** each subscribed run's listener (the renderer keeps one per run and fans out itself) */
const listeners = new Map<string, (data: unknown) => void>();
ipcRenderer.on(IPC_CHANNELS.event, (_event, message: unknown) => {
  const m = message as { event?: unknown; runId?: unknown; data?: unknown } | null;
  if (!m || m.event !== 'run' || typeof m.runId !== 'string') return;
  listeners.get(m.runId)?.(m.data);
});

const shardwise: ShardwiseBridge = {
  version: __SHARDWISE_VERSION__,
  call: (method, params) => ipcRenderer.invoke(IPC_CHANNELS.call, { method, params }) as Promise<IpcReply>,
  async subscribe(runId, onEvent) {
    listeners.set(runId, onEvent);
    const reply = (await ipcRenderer.invoke(IPC_CHANNELS.subscribe, { runId })) as IpcReply;
    if (!reply.ok) listeners.delete(runId);
    return reply;
  },
  async unsubscribe(runId) {
    listeners.delete(runId);
    return (await ipcRenderer.invoke(IPC_CHANNELS.unsubscribe, { runId })) as IpcReply;
  },
};

contextBridge.exposeInMainWorld('shardwise', shardwise);
