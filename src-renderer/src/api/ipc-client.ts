// The typed API (common/api) over the Electron preload's bridge: the desktop app's transport.
// Like the WebSocket client, requests are checked before they leave and results and events on
// arrival; an error arrives as an ApiError with the controller's {name, message, field?}. One bridge
// listener per run, fanned out to every subscriber of that run (run-listeners.ts).
import {
  ApiError,
  type IpcReply,
  type MethodName,
  type MethodParams,
  type MethodResult,
  parseEvent,
  parseParams,
  parseResult,
  type RunEvent,
  type ShardwiseApi,
  type ShardwiseBridge,
} from '../../../common/api/index.js';
import { RunListeners } from './run-listeners.js';

function unwrap(reply: IpcReply): unknown {
  if (!reply.ok) throw new ApiError(reply.error.name, reply.error.message, reply.error.field);
  return reply.result;
}

export class IpcApiClient implements ShardwiseApi {
  private readonly listeners = new RunListeners();

  constructor(private readonly bridge: ShardwiseBridge) {}

  async call<M extends MethodName>(method: M, params: MethodParams<M>): Promise<MethodResult<M>> {
    parseParams(method, params); // a bad request fails here, naming the field, before it is sent
    return parseResult(method, unwrap(await this.bridge.call(method, params)));
  }

  subscribe(runId: string, onEvent: (e: RunEvent) => void): Promise<() => Promise<void>> {
    return this.listeners.add(runId, onEvent, {
      open: async () => void unwrap(await this.bridge.subscribe(runId, (data) => this.dispatch(runId, data))),
      close: async () => void unwrap(await this.bridge.unsubscribe(runId)),
    });
  }

  private dispatch(runId: string, data: unknown) {
    let e: RunEvent;
    try {
      e = parseEvent(data);
    } catch {
      return; // a malformed event is dropped, never half-applied
    }
    this.listeners.dispatch(runId, e);
  }
}
