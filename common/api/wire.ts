// The WebSocket transport of the typed API (`shardwise serve`). JSON text frames:
//   client -> server  {id, method, params}            the first one must be {id, method:'auth', params:{token}}
//   server -> client  {id, result} | {id, error:{name, message, field?}}
//                     {event:'run', runId, data: RunEvent}
// A connection whose first message is not the right token is closed with AUTH_CLOSE_CODE and
// a reason, and gets nothing else.
import { z } from 'zod';
import { ApiErrorSchema } from './errors.js';
import { RunEventSchema } from './events.js';

export const AUTH_CLOSE_CODE = 4401;
export const PROTOCOL_CLOSE_CODE = 4400;
/** the renderer reads its token from the page URL's fragment: http://host:port/#token=... */
export const TOKEN_FRAGMENT_KEY = 'token';

export const RequestSchema = z.strictObject({
  id: z.number().int().nonnegative(),
  method: z.string().min(1).max(64),
  params: z.unknown().optional(),
});
export type WireRequest = z.infer<typeof RequestSchema>;

export const AuthParamsSchema = z.strictObject({ token: z.string().min(1).max(256) });
export const AuthResultSchema = z.object({
  version: z.string(),
  runs_root: z.string(),
  /** new at every controller start: a reconnecting tab tells a restart from a dropped connection */
  instance: z.string().optional(),
  started_at: z.string().optional(),
});
export type AuthResult = z.infer<typeof AuthResultSchema>;

export const ResponseSchema = z.union([
  z.object({ id: z.number(), result: z.unknown() }),
  z.object({ id: z.number(), error: ApiErrorSchema }),
]);

export const EventMessageSchema = z.object({ event: z.literal('run'), runId: z.string(), data: RunEventSchema });
export type EventMessage = z.infer<typeof EventMessageSchema>;
