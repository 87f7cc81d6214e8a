// The dashboard's one way to the controller. In the desktop app: the preload's IPC bridge
// (window.shardwise). Web mode (`shardwise serve`): the WebSocket of the page's own origin and
// the token from its #token=... fragment (kept in sessionStorage, so the hash can then carry
// the view: #/runs, #/run/ID). Both are the same ShardwiseApi: no view can tell which it has.
// A lost connection is retried by itself (the token survives a serve restart); `connection`
// says why it ended, whether it is retrying, and once back what happened to the runs that were
// live in this tab (restart-report.ts). A refused token stops the retries and asks for the URL.
import { reactive } from 'vue';
import { ApiError, type MethodName, type MethodParams, type MethodResult, type ShardwiseApi } from '../../../common/api/index.js';
import { electronBridge } from '../bridge';
import { IpcApiClient } from './ipc-client';
import { LiveRuns, restartNotice } from './restart-report';
import { webModeEndpoint, WsApiClient } from './ws-client';

let pending: Promise<ShardwiseApi> | null = null;
const TOKEN_KEY = 'shardwise.token';
const RETRY_MS = [500, 1000, 2000, 3000, 5000];

export const connection = reactive({
  /** why the open connection ended; null while connected */
  lost: null as string | null,
  /** retrying by itself */
  reconnecting: false,
  /** the controller refused this tab's token (rotated): only a new URL or token helps */
  tokenRefused: false,
  /** after a reconnect: what happened (a restart and the runs that were live, or a dropped connection) */
  notice: null as string | null,
  epoch: 0,
});

export class NotConnectedError extends Error {
  override name = 'NotConnected';
}

/** The serve token: from the page's #token=... (then remembered for this tab), or remembered. */
export function pageToken(): string | null {
  const { token } = webModeEndpoint(window.location);
  if (token) {
    sessionStorage.setItem(TOKEN_KEY, token);
    return token;
  }
  return sessionStorage.getItem(TOKEN_KEY);
}

/** A new token for this tab: a pasted URL with #token=... or the bare token. */
export function useToken(input: string): boolean {
  const m = /[#&]token=([A-Za-z0-9_-]+)/.exec(input) ?? /^\s*([A-Za-z0-9_-]{16,256})\s*$/.exec(input);
  if (!m) return false;
  sessionStorage.setItem(TOKEN_KEY, m[1]!);
  return true;
}

const liveRuns = new LiveRuns();
let instance: string | undefined;
let lostAt: number | null = null;

/** The client with its results watched for which runs are live (what a restart notice names). */
function observed(c: WsApiClient): ShardwiseApi {
  return {
    async call<M extends MethodName>(method: M, params: MethodParams<M>): Promise<MethodResult<M>> {
      const r = await c.call(method, params);
      const any = r as Record<string, any>;
      if (method === 'runs.list') for (const run of any.runs) liveRuns.see(run.id, run.status);
      else if (method === 'runs.get') liveRuns.see(any.id, any.state.status);
      else if (method === 'runs.launch' || method === 'runs.resume') liveRuns.launched(any.runId ?? (params as { runId: string }).runId);
      return r;
    },
    subscribe: (runId, onEvent) =>
      c.subscribe(runId, (e) => {
        if (e.type === 'state') liveRuns.see(runId, e.state.status);
        onEvent(e);
      }),
  };
}

/** The API, connecting on first use; rejects with a message a person can act on. */
export function useApi(): Promise<ShardwiseApi> {
  if (pending) return pending;
  const bridge = electronBridge();
  if (bridge) return (pending = Promise.resolve(new IpcApiClient(bridge)));
  const token = pageToken();
  if (!token) {
    return Promise.reject(new NotConnectedError("this page's address has no #token=...: open the URL that 'shardwise serve' printed"));
  }
  const p = WsApiClient.connect(webModeEndpoint(window.location).url, token).then(async (c) => {
    c.onClose = (reason) => {
      pending = null; // the next call reconnects
      connection.lost = reason;
      connection.notice = null;
      lostAt = Date.now();
      void retry();
    };
    const api = observed(c);
    const before = instance;
    instance = c.hello?.instance;
    if (lostAt !== null) {
      lostAt = null;
      const wereLive = liveRuns.list();
      const runs = wereLive.length ? (await api.call('runs.list', {})).runs : [];
      connection.notice = restartNotice(before, instance, wereLive, runs).text;
    }
    return api;
  });
  pending = p;
  p.catch(() => {
    if (pending === p) pending = null;
  });
  return p;
}

let retrying = false;

/** Reconnects with a growing pause until it works or the token is refused. */
async function retry() {
  if (retrying) return;
  retrying = true;
  connection.reconnecting = true;
  try {
    for (let i = 0; connection.lost && !connection.tokenRefused; i++) {
      await new Promise((r) => setTimeout(r, RETRY_MS[Math.min(i, RETRY_MS.length - 1)]));
      if (connection.lost) await reconnect();
    }
  } finally {
    retrying = false;
    connection.reconnecting = false;
  }
}

/** Try again now (also what the retries call); on success every view reloads (epoch changes). */
export async function reconnect(): Promise<void> {
  try {
    await useApi();
    connection.lost = null;
    connection.tokenRefused = false;
    connection.epoch++;
  } catch (e) {
    const refused = e instanceof ApiError && e.name === 'Unauthorized';
    connection.tokenRefused = refused;
    connection.lost = refused
      ? `the controller refused this tab's token (${(e as Error).message}): its token was replaced (shardwise serve --rotate-token); open the URL it printed, or paste it below`
      : `still cannot reach the controller: ${(e as Error).message}`;
  }
}

/** A pasted URL or token: use it and try again. */
export async function reauthenticate(input: string): Promise<boolean> {
  if (!useToken(input)) return false;
  connection.tokenRefused = false;
  await reconnect();
  if (connection.lost) void retry();
  return true;
}
