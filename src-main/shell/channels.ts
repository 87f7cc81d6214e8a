// The shell's IPC channels (their payloads are in common/api/ipc.ts, shared with the renderer):
// which channel a message may use and what it must carry. Pure: no electron import, so the
// checks are unit-tested without the binary (tests/unit/shell-ipc.test.ts).
import {
  ApiError,
  CHANNEL_PREFIX,
  describeZodError,
  INVOKE_CHANNELS,
  IPC_CHANNELS,
  IpcCallSchema,
  type IpcChannel,
  IpcRunSchema,
} from '../../common/api/index.js';

export { CHANNEL_PREFIX, INVOKE_CHANNELS, IPC_CHANNELS };

export type InvokeRequest =
  | { channel: typeof IPC_CHANNELS.call; method: string; params: unknown }
  | { channel: typeof IPC_CHANNELS.subscribe | typeof IPC_CHANNELS.unsubscribe; runId: string };

/** A renderer's invoke as a request, or a ValidationError naming the channel and the field. */
export function parseInvoke(channel: string, payload: unknown): InvokeRequest {
  if (!INVOKE_CHANNELS.includes(channel as IpcChannel)) {
    throw new ApiError(
      'ValidationError',
      `unknown channel ${JSON.stringify(channel)}; a renderer may invoke ${INVOKE_CHANNELS.join(', ')}`,
    );
  }
  if (channel === IPC_CHANNELS.call) {
    const r = IpcCallSchema.safeParse(payload);
    if (!r.success) throw new ApiError('ValidationError', describeZodError(channel, r.error));
    if (r.data.method === 'runs.subscribe' || r.data.method === 'runs.unsubscribe') {
      throw new ApiError(
        'ValidationError',
        `${r.data.method} is a stream: use the ${IPC_CHANNELS.subscribe} / ${IPC_CHANNELS.unsubscribe} channels`,
      );
    }
    return { channel: IPC_CHANNELS.call, method: r.data.method, params: r.data.params };
  }
  const r = IpcRunSchema.safeParse(payload);
  if (!r.success) throw new ApiError('ValidationError', describeZodError(channel, r.error));
  return { channel: channel as typeof IPC_CHANNELS.subscribe, runId: r.data.runId };
}
