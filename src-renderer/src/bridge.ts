// What the Electron preload exposes on `window.shardwise` (src-main/shell/preload.ts builds
// it). The renderer may not import src-main, so the shape is restated here; it is tiny on
// purpose and moves to common/ with the typed API.
// TODO(typed-api): expose common/api's ShardwiseApi here (the controller side is
// src-main/controller/api-session.ts); web mode already uses src-renderer/src/api/ws-client.ts.
export type ShardwiseChannel = `shardwise:${string}`;

export interface ShardwiseBridge {
  /** Shardwise's version, baked in at build time */
  readonly version: string;
  readonly api: {
    /** rejects any channel without the `shardwise:` prefix */
    invoke<T = unknown>(channel: ShardwiseChannel, payload?: unknown): Promise<T>;
  };
}

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
