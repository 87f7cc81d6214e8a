// The dashboard's one way to the controller. In the desktop app: the preload's IPC bridge
// (window.shardwise). Web mode (`shardwise serve`): the WebSocket of the page's own origin and
// the token from its #token=... fragment (kept in sessionStorage, so the hash can then carry
// the view: #/runs, #/run/ID). Both are the same ShardwiseApi: no view can tell which it has.
// `connection.lost` says why an open connection ended: the app shows it with a way back.
import { reactive } from 'vue';
import type { ShardwiseApi } from '../../../common/api/index.js';
import { electronBridge } from '../bridge';
import { IpcApiClient } from './ipc-client';
import { webModeEndpoint, WsApiClient } from './ws-client';

let pending: Promise<ShardwiseApi> | null = null;
const TOKEN_KEY = 'shardwise.token';

export const connection = reactive({ lost: null as string | null, epoch: 0 });

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

/** The API, connecting on first use; rejects with a message a person can act on. */
export function useApi(): Promise<ShardwiseApi> {
  if (pending) return pending;
  const bridge = electronBridge();
  if (bridge) return (pending = Promise.resolve(new IpcApiClient(bridge)));
  const token = pageToken();
  if (!token) {
    return Promise.reject(new NotConnectedError("this page's address has no #token=...: open the URL that 'shardwise serve' printed"));
  }
  const p = WsApiClient.connect(webModeEndpoint(window.location).url, token).then((c) => {
    c.onClose = (reason) => {
      pending = null; // the next call reconnects
      connection.lost = reason;
    };
    return c as ShardwiseApi;
  });
  pending = p;
  p.catch(() => {
    if (pending === p) pending = null;
  });
  return p;
}

/** Try again after a lost connection; on success every view reloads (epoch changes). */
export async function reconnect(): Promise<void> {
  try {
    await useApi();
    connection.lost = null;
    connection.epoch++;
  } catch (e) {
    connection.lost = `still cannot reach the controller: ${(e as Error).message}`;
  }
}
