// The Electron main process: one window, sandboxed, showing the built renderer (out/renderer)
// through the app:// scheme with a strict CSP on every response. No remote content: network
// requests from the renderer are cancelled, navigation and new windows are refused.
import { app, BrowserWindow, net, protocol, session, shell } from 'electron';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { APP_HOST, APP_ORIGIN, APP_SCHEME, CONTENT_SECURITY_POLICY } from './security.js';

// electron-vite writes out/main/main.js, out/preload/preload.cjs and out/renderer/.
const outDir = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const rendererDir = path.join(outDir, 'renderer');
const preloadFile = path.join(outDir, 'preload', 'preload.cjs');

protocol.registerSchemesAsPrivileged([
  { scheme: APP_SCHEME, privileges: { standard: true, secure: true, supportFetchAPI: true } },
]);

/** Serve files under out/renderer only; anything that escapes it is a 404. */
function serveRenderer(request: Request): Promise<Response> | Response {
  const url = new URL(request.url);
  let rel: string;
  try {
    rel = decodeURIComponent(url.pathname === '/' ? '/index.html' : url.pathname);
  } catch {
    return new Response('bad path', { status: 400 });
  }
  const file = path.normalize(path.join(rendererDir, rel));
  if (url.host !== APP_HOST || !file.startsWith(rendererDir + path.sep)) {
    return new Response('not found', { status: 404 });
  }
  return net.fetch(pathToFileURL(file).href).then((res) => {
    const headers = new Headers(res.headers);
    headers.set('Content-Security-Policy', CONTENT_SECURITY_POLICY);
    headers.set('X-Content-Type-Options', 'nosniff');
    return new Response(res.body, { status: res.status, headers });
  });
}

function lockDownSession(): void {
  const ses = session.defaultSession;
  // Belt and braces: whatever else answers (devtools, future schemes) carries the same CSP.
  ses.webRequest.onHeadersReceived((details, callback) => {
    callback({ responseHeaders: { ...details.responseHeaders, 'Content-Security-Policy': [CONTENT_SECURITY_POLICY] } });
  });
  ses.webRequest.onBeforeRequest({ urls: ['http://*/*', 'https://*/*', 'ws://*/*', 'wss://*/*'] }, (_details, callback) => {
    callback({ cancel: true });
  });
  ses.setPermissionRequestHandler((_wc, _permission, callback) => callback(false));
}

function createWindow(): BrowserWindow {
  const win = new BrowserWindow({
    width: 1200,
    height: 800,
    title: 'Shardwise',
    show: false,
    webPreferences: {
      preload: preloadFile,
      contextIsolation: true,
      sandbox: true,
      nodeIntegration: false,
      webviewTag: false,
      spellcheck: false,
    },
  });
  win.once('ready-to-show', () => win.show());
  win.webContents.setWindowOpenHandler(({ url }) => {
    // Links to docs open in the user's browser, never inside the app.
    if (url.startsWith('https://')) void shell.openExternal(url);
    return { action: 'deny' };
  });
  win.webContents.on('will-navigate', (event, url) => {
    if (!url.startsWith(APP_ORIGIN + '/')) event.preventDefault();
  });
  void win.loadURL(`${APP_ORIGIN}/index.html`);
  return win;
}

app.enableSandbox();
app.whenReady().then(() => {
  protocol.handle(APP_SCHEME, serveRenderer);
  lockDownSession();
  createWindow();
  app.on('activate', () => {
    if (BrowserWindow.getAllWindows().length === 0) createWindow();
  });
});

app.on('window-all-closed', () => {
  if (process.platform !== 'darwin') app.quit();
});
