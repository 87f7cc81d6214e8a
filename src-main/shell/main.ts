// The Electron main process: one window, sandboxed, showing the built renderer (out/renderer)
// through the app:// scheme with a strict CSP on every response. No remote content: network
// requests from the renderer are cancelled, navigation and new windows are refused.
// It hosts the controller (the same ControllerService as `shardwise serve`) and serves the
// typed API to its window over IPC (ipc-api.ts): every message's sender is checked, every
// payload validated. The native menu runs File > New run / Runs / Export report (save dialogs,
// printToPDF) and Help > About.
import { app, BrowserWindow, dialog, ipcMain, Menu, net, protocol, session, shell } from 'electron';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { ControllerService } from '../controller/service.js';
import { INVOKE_CHANNELS } from './channels.js';
import { IpcApi } from './ipc-api.js';
import { type MenuCommand, menuTemplate, runIdOfUrl } from './menu.js';
import { exportRunReport, type ReportSource } from './report-export.js';
import { APP_HOST, APP_ORIGIN, APP_SCHEME, CONTENT_SECURITY_POLICY } from './security.js';

// electron-vite writes out/main/main.js, out/preload/preload.cjs and out/renderer/.
const outDir = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const rendererDir = path.join(outDir, 'renderer');
const preloadFile = path.join(outDir, 'preload', 'preload.cjs');
// The controller runs from dist/ (npm run build), not from this bundle: it finds the rank and
// tool entry points next to its own compiled files.
const distDir = path.join(path.dirname(outDir), 'dist');
/** development (electron-vite dev, or SHARDWISE_DEV=1): View gets reload and devtools */
const isDev = Boolean(process.env['ELECTRON_RENDERER_URL']) || process.env['SHARDWISE_DEV'] === '1';
/** --demo (`npm start` passes it): on an empty runs folder, launch the demo run and show it */
const demoWanted = process.argv.includes('--demo');
/** --runs DIR, like `shardwise serve --runs DIR`; default ./runs */
const runsArg = process.argv.indexOf('--runs');
const runsRoot = path.resolve(runsArg > 0 && process.argv[runsArg + 1] ? process.argv[runsArg + 1]! : 'runs');
const appWindows = new Set<number>();

protocol.registerSchemesAsPrivileged([{ scheme: APP_SCHEME, privileges: { standard: true, secure: true, supportFetchAPI: true } }]);

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

interface Controller {
  service: ControllerService;
  reports: ReportSource;
}

async function startController(): Promise<Controller> {
  const load = <T>(rel: string) => import(pathToFileURL(path.join(distDir, rel)).href) as Promise<T>;
  const [{ ControllerService: Service }, { exportReport }] = await Promise.all([
    load<typeof import('../controller/service.js')>('src-main/controller/service.js'),
    load<typeof import('../reports/export.js')>('src-main/reports/export.js'),
  ]);
  const service = new Service({ runsRoot, profileInBackground: (line) => process.stdout.write(`shardwise: ${line}\n`) });
  service.start();
  return { service, reports: { runDir: (id) => service.store.open(id).dir, exportReport } };
}

/** The first-start demo (src-main/controller/demo-run.ts); its run id, or null. */
async function startDemo(service: ControllerService): Promise<string | null> {
  try {
    const { startDemoIfFirst } = (await import(
      pathToFileURL(path.join(distDir, 'src-main/controller/demo-run.js')).href
    )) as typeof import('../controller/demo-run.js');
    const demo = await startDemoIfFirst(service, (line) => process.stdout.write(`${line}\n`));
    return demo?.runId ?? null;
  } catch (e) {
    process.stderr.write(`shardwise: the demo run could not start (${(e as Error).message}); the dashboard works without it\n`);
    return null;
  }
}

/** One handler per invoke channel; the sender of each message must be the app's own window and page. */
function serveApi(api: IpcApi): void {
  for (const channel of INVOKE_CHANNELS) {
    ipcMain.handle(channel, (event, payload: unknown) => {
      const frame = event.senderFrame;
      return api.handle(
        channel,
        event.sender,
        {
          frameUrl: frame?.url,
          isMainFrame: frame !== null && frame === event.sender.mainFrame,
          fromAppWindow: appWindows.has(event.sender.id),
        },
        payload,
      );
    });
  }
}

function buildMenu(win: BrowserWindow, c: Controller): void {
  const run = async (cmd: MenuCommand) => {
    if (cmd.kind === 'go') return void win.loadURL(`${APP_ORIGIN}/index.html${cmd.hash}`);
    if (cmd.kind === 'about') {
      return void dialog.showMessageBox(win, {
        type: 'info',
        title: 'About Shardwise',
        message: `Shardwise ${app.getVersion()}`,
        detail: `Distributed WebGPU training dashboard.\nElectron ${process.versions.electron} · Chromium ${process.versions.chrome} · Node ${process.versions.node}\nRuns: ${runsRoot}`,
      });
    }
    const runId = runIdOfUrl(win.webContents.getURL());
    if (!runId)
      return void dialog.showMessageBox(win, {
        type: 'info',
        message: 'Open a run first',
        detail: 'File > Export exports the run this window shows.',
      });
    try {
      await exportRunReport(win, c.reports, runId, cmd.format);
    } catch (e) {
      dialog.showErrorBox('Export failed', (e as Error).message);
    }
  };
  const apply = () =>
    Menu.setApplicationMenu(
      Menu.buildFromTemplate(
        menuTemplate(
          { dev: isDev, platform: process.platform, runOpen: runIdOfUrl(win.webContents.getURL()) !== null },
          (cmd) => void run(cmd),
        ),
      ),
    );
  apply();
  // the export items follow the route (#/run/ID)
  win.webContents.on('did-navigate-in-page', apply);
  win.webContents.on('did-navigate', apply);
}

/** hash: the route the window opens on (#/run/ID), default the cluster view */
function createWindow(api: IpcApi, hash = ''): BrowserWindow {
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
  const id = win.webContents.id;
  appWindows.add(id);
  win.webContents.on('destroyed', () => {
    appWindows.delete(id);
    api.release(id);
  });
  // a reload drops the page's subscriptions with it
  win.webContents.on('did-start-navigation', (details) => {
    if (details.isMainFrame && !details.isSameDocument) api.release(id);
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
  void win.loadURL(`${APP_ORIGIN}/index.html${hash}`);
  return win;
}

app.enableSandbox();
let controller: Controller | null = null;
app.whenReady().then(async () => {
  protocol.handle(APP_SCHEME, serveRenderer);
  lockDownSession();
  try {
    controller = await startController();
  } catch (e) {
    dialog.showErrorBox(
      'Shardwise cannot start its controller',
      `${(e as Error).message}\nRun \`npm run build\` first (the controller runs from ${distDir}).`,
    );
    app.exit(1);
    return;
  }
  const c = controller;
  const api = new IpcApi(c.service);
  serveApi(api);
  const demo = demoWanted ? await startDemo(c.service) : null;
  buildMenu(createWindow(api, demo ? `#/run/${encodeURIComponent(demo)}` : ''), c);
  app.on('activate', () => {
    if (BrowserWindow.getAllWindows().length === 0) buildMenu(createWindow(api), c);
  });
});

app.on('window-all-closed', () => {
  if (process.platform !== 'darwin') app.quit();
});

// Ctrl-C in the terminal that ran `npm start`: quit as the window would, stopping live runs first
process.on('SIGINT', () => app.quit());
process.on('SIGTERM', () => app.quit());

// stop live runs (their rank processes) before quitting
let closing = false;
app.on('before-quit', (event) => {
  if (closing || !controller) return;
  closing = true;
  event.preventDefault();
  void controller.service.close().finally(() => app.quit());
});
