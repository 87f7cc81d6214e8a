// The IPC channels of the desktop app and the bridge the sandboxed preload exposes. No
// imports, no zod: the preload bundles this file and a sandboxed preload cannot require
// packages. The payload schemas are in ipc.ts.
export const CHANNEL_PREFIX = 'shardwise:';
export const IPC_CHANNELS = {
  /** renderer -> main, invoke: {method, params} -> IpcReply with the method's result */
  call: 'shardwise:call',
  /** renderer -> main, invoke: {runId} -> IpcReply; the run's events then arrive on `event` */
  subscribe: 'shardwise:subscribe',
  /** renderer -> main, invoke: {runId} -> IpcReply */
  unsubscribe: 'shardwise:unsubscribe',
  /** main -> renderer: {event:'run', runId, data} (data: a RunEvent) */
  event: 'shardwise:event',
} as const;
export type IpcChannel = (typeof IPC_CHANNELS)[keyof typeof IPC_CHANNELS];
/** the channels a renderer may invoke */
export const INVOKE_CHANNELS: readonly IpcChannel[] = [IPC_CHANNELS.call, IPC_CHANNELS.subscribe, IPC_CHANNELS.unsubscribe];

/** What every invoke resolves to (IpcReplySchema in ipc.ts checks it). */
export type IpcReply = { ok: true; result: unknown } | { ok: false; error: { name: string; message: string; field?: string } };

/** `window.shardwise` in the desktop app (absent in web mode). */
export interface ShardwiseBridge {
  /** Shardwise's version, baked in at build time */
  readonly version: string;
  /** one API call; the reply carries the result or the controller's {name, message} */
  call(method: string, params: unknown): Promise<IpcReply>;
  /** start the run's event stream; `onEvent` gets each event's data (a RunEvent, checked by the renderer) */
  subscribe(runId: string, onEvent: (data: unknown) => void): Promise<IpcReply>;
  unsubscribe(runId: string): Promise<IpcReply>;
}
