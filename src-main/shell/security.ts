// The shell's security policy in one place: the Content-Security-Policy every response gets,
// and the webPreferences every window gets. Pure data (no electron import) so the launcher
// and tests can read it without an Electron runtime.

/** Local code only: no remote scripts, no eval, no inline script or style, no plugins, no framing. */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
  "object-src 'none'",
].join('; ');

/** The renderer is served from this privileged custom scheme, never from file:// or the network. */
export const APP_SCHEME = 'app';
export const APP_HOST = 'shardwise';
export const APP_ORIGIN = `${APP_SCHEME}://${APP_HOST}`;

/** Whether a URL is one of the app's own pages (app://shardwise/...), not a look-alike host or scheme. */
export function isAppUrl(url: string | undefined | null): boolean {
  if (!url) return false;
  try {
    const u = new URL(url);
    return u.protocol === `${APP_SCHEME}:` && u.host === APP_HOST && u.username === '' && u.password === '' && u.port === '';
  } catch {
    return false;
  }
}

/** What the main process knows about the sender of an IPC message. */
export interface IpcSenderInfo {
  /** the sending frame's URL (event.senderFrame.url); undefined when the frame is gone */
  frameUrl: string | undefined;
  /** the frame is its page's main frame, not an iframe */
  isMainFrame: boolean;
  /** the sending webContents belongs to a window this app created */
  fromAppWindow: boolean;
}

/** Why a message is refused, or null when its sender is the app's own window and page. */
export function senderProblem(s: IpcSenderInfo): string | null {
  if (!s.fromAppWindow) return 'refused: the message did not come from a Shardwise window';
  if (!s.isMainFrame) return 'refused: the message came from a sub-frame, not the Shardwise page';
  if (!isAppUrl(s.frameUrl)) return `refused: the sending page ${JSON.stringify(s.frameUrl ?? '(gone)')} is not ${APP_ORIGIN}/`;
  return null;
}
