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
