// The typed API over Electron IPC: what the sandboxed preload exposes on `window.shardwise` and
// the messages on its channels. The preload (src-main/shell/preload.ts) implements
// ShardwiseBridge; the renderer programs against it (src-renderer/src/api/ipc-client.ts); the
// main process serves it from the same ControllerService and ApiSession as web mode's WebSocket
// (src-main/shell/ipc-api.ts). Every channel starts with `shardwise:`; payloads are checked in
// the main process, and `call` params again by the service.
import { z } from 'zod';
import { ApiErrorSchema } from './errors.js';
import { RunIdSchema } from './launch-config.js';

export * from './ipc-channels.js';

export const IpcCallSchema = z.strictObject({ method: z.string().min(1).max(64), params: z.unknown() });
export const IpcRunSchema = z.strictObject({ runId: RunIdSchema });

/**
 * What every invoke resolves to. Errors travel as data: Electron rewrites an error thrown by a
 * handler into "Error invoking remote method ...", losing its name (ValidationError, NotFound).
 */
export const IpcReplySchema = z.union([
  z.object({ ok: z.literal(true), result: z.unknown() }),
  z.object({ ok: z.literal(false), error: ApiErrorSchema }),
]);
