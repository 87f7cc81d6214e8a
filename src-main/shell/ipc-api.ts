// The typed API over Electron IPC, without Electron: the main process's handlers call
// `IpcApi.handle(channel, sender, payload)`, which checks the sender (only the app's own window
// and page), checks the channel and payload (channels.ts), and runs the request through an
// ApiSession per window, the same session web mode's WebSocket uses (params validated by the
// service, results on exit, a bounded event pump per subscribed run). Events go back to that
// window on `shardwise:event`. Tests drive it with a real ControllerService and a fake window.
import { ApiError, IPC_CHANNELS, type IpcReply, toErrorData } from '../../common/api/index.js';
import { ApiSession, type SessionService } from '../controller/api-session.js';
import { parseInvoke } from './channels.js';
import { type IpcSenderInfo, senderProblem } from './security.js';

/** The parts of a webContents the API uses. */
export interface IpcPeer {
  readonly id: number;
  send(channel: string, message: unknown): void;
  isDestroyed(): boolean;
}

export class IpcApi {
  private readonly sessions = new Map<number, { session: ApiSession; pending: Map<number, (reply: IpcReply) => void> }>();
  private nextId = 1;

  constructor(private readonly service: SessionService) {}

  async handle(channel: string, peer: IpcPeer, sender: IpcSenderInfo, payload: unknown): Promise<IpcReply> {
    const refused = senderProblem(sender);
    if (refused) return { ok: false, error: { name: 'Forbidden', message: refused } };
    let req;
    try {
      req = parseInvoke(channel, payload);
    } catch (e) {
      return { ok: false, error: e instanceof ApiError ? e.toJSON() : toErrorData(e) };
    }
    const s = this.sessionOf(peer);
    const id = this.nextId++;
    const reply = new Promise<IpcReply>((resolve) => s.pending.set(id, resolve));
    if (req.channel === IPC_CHANNELS.call) await s.session.request(id, req.method, req.params);
    else await s.session.request(id, req.channel === IPC_CHANNELS.subscribe ? 'runs.subscribe' : 'runs.unsubscribe', { runId: req.runId });
    return reply;
  }

  /** A window closed or reloaded: stop its streams. */
  release(peerId: number): void {
    this.sessions.get(peerId)?.session.close();
    this.sessions.delete(peerId);
  }

  private sessionOf(peer: IpcPeer) {
    let s = this.sessions.get(peer.id);
    if (!s) {
      const pending = new Map<number, (reply: IpcReply) => void>();
      const session = new ApiSession(this.service, {
        send: (message: object) => {
          if ('event' in message) {
            if (!peer.isDestroyed()) peer.send(IPC_CHANNELS.event, message);
            return;
          }
          const m = message as { id: number; result?: unknown; error?: { name: string; message: string } };
          const resolve = pending.get(m.id);
          pending.delete(m.id);
          resolve?.(m.error ? { ok: false, error: m.error } : { ok: true, result: m.result });
        },
        // IPC queues in the browser process: no backpressure to wait for
        canSend: () => !peer.isDestroyed(),
        isOpen: () => !peer.isDestroyed(),
      });
      s = { session, pending };
      this.sessions.set(peer.id, s);
    }
    return s;
  }
}
