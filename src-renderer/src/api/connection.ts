// The dashboard's one way to the controller. Web mode (`shardwise serve`): the WebSocket of the
// page's own origin and the token from its #token=... fragment. The Electron shell will expose
// the same ShardwiseApi through its preload; until it does, the desktop says "not connected".
import type { ShardwiseApi } from '../../../common/api/index.js';
import { electronBridge } from '../bridge';
import { webModeEndpoint, WsApiClient } from './ws-client';

let connection: Promise<ShardwiseApi> | null = null;

export class NotConnectedError extends Error {
  override name = 'NotConnected';
}

/** The API, connecting on first use; rejects with a message a person can act on. */
export function useApi(): Promise<ShardwiseApi> {
  if (connection) return connection;
  if (electronBridge()) return Promise.reject(new NotConnectedError('the desktop shell does not expose the controller API yet'));
  const { url, token } = webModeEndpoint(window.location);
  if (!token) {
    return Promise.reject(new NotConnectedError("this page's address has no #token=...: open the URL that 'shardwise serve' printed"));
  }
  connection = WsApiClient.connect(url, token).then((c) => {
    c.onClose = () => (connection = null); // the next call reconnects
    return c;
  });
  connection.catch(() => (connection = null));
  return connection;
}
