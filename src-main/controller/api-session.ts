// One client's session with the controller, independent of the transport: takes requests
// ({id, method, params}), answers {id, result} or {id, error:{name, message}}, and pumps each
// subscribed run's events ({event:'run', runId, data}) from its bounded Subscription only while
// the transport says it can take more. The WebSocket (src-main/serve/ws-api.ts) and the
// Electron shell's IPC use the same session, so both transports behave alike.
import { ApiError, RunIdSchema, toErrorData } from '../../common/api/index.js';
import type { ControllerService } from './service.js';
import type { Subscription } from './telemetry.js';

export interface SessionTransport {
  send(message: object): void;
  /** false while the transport's outgoing buffer is full; the session retries shortly */
  canSend(): boolean;
  isOpen(): boolean;
}

/** What a session needs of the controller (ControllerService; tests may hand it a real one on a scratch folder). */
export type SessionService = Pick<ControllerService, 'call' | 'subscribe'>;

export class ApiSession {
  private readonly subs = new Map<string, Subscription>();

  constructor(
    private readonly service: SessionService,
    private readonly transport: SessionTransport,
  ) {}

  async request(id: number, method: string, params: unknown): Promise<void> {
    try {
      const result = await this.service.call(method, params);
      if (method === 'runs.subscribe' || method === 'runs.unsubscribe') {
        const runId = RunIdSchema.parse((params as { runId: string }).runId);
        this.subs.get(runId)?.close();
        this.subs.delete(runId);
        this.transport.send({ id, result });
        if (method === 'runs.subscribe') this.startPump(runId, this.service.subscribe(runId));
        return;
      }
      this.transport.send({ id, result });
    } catch (e) {
      this.transport.send({ id, error: e instanceof ApiError ? e.toJSON() : toErrorData(e) });
    }
  }

  private startPump(runId: string, sub: Subscription) {
    this.subs.set(runId, sub);
    let timer: NodeJS.Timeout | null = null;
    const pump = () => {
      if (!this.transport.isOpen() || this.subs.get(runId) !== sub) return;
      while (this.transport.canSend()) {
        const e = sub.take();
        if (!e) return;
        this.transport.send({ event: 'run', runId, data: e });
      }
      if (!timer) timer = setTimeout(() => ((timer = null), pump()), 20);
    };
    sub.onReady = pump;
    pump();
  }

  close() {
    for (const s of this.subs.values()) s.close();
    this.subs.clear();
  }
}
