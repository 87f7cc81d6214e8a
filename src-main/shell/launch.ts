// `npm start` (and `npm run app`): start the desktop app when the Electron binary is installed;
// otherwise say so in one line and fall back to web mode. Either way, on an empty runs folder a
// demo run starts first (launch-options.ts: unless --no-demo or SHARDWISE_NO_DEMO=1). Plain Node
// (no electron import): the `electron` package's index only resolves the binary's path, and
// throws when the download never ran.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { browserOpener, launchOptions } from './launch-options.js';

/** Path of the Electron binary, or why there is none. */
export function findElectronBinary(): { path: string } | { missing: string } {
  try {
    const require = createRequire(import.meta.url);
    const bin = require('electron') as unknown;
    if (typeof bin !== 'string') return { missing: 'the electron package did not name a binary' };
    if (!existsSync(bin)) return { missing: `the Electron binary is not installed at ${bin}` };
    return { path: bin };
  } catch (e) {
    const why =
      e instanceof Error && /failed to install correctly/.test(e.message)
        ? 'the Electron binary was never downloaded (ELECTRON_SKIP_BINARY_DOWNLOAD or an offline install)'
        : `the electron package could not be loaded (${e instanceof Error ? e.message : String(e)})`;
    return { missing: why };
  }
}

/**
 * Web mode: the controller and dashboard served to a browser (`shardwise serve` on loopback),
 * opened in the system's browser (xdg-open / open / start) once it prints its URL, where there
 * is a display. Runs until Ctrl-C, which serve turns into stopping its live runs.
 */
export async function startWebMode(reason: string, args: string[]): Promise<number> {
  process.stdout.write(`shardwise: cannot start the desktop app: ${reason}; opening web mode in your browser instead (shardwise serve).\n`);
  const bin = fileURLToPath(new URL('../../bin/shardwise.js', import.meta.url)); // out/main/launch.js -> bin/
  const child = spawn(process.execPath, [bin, 'serve', ...args], { stdio: ['inherit', 'pipe', 'inherit'] });
  let out = '';
  let opened = false;
  child.stdout!.setEncoding('utf8').on('data', (d: string) => {
    process.stdout.write(d);
    out += d;
    const url = /open (http:\/\/\S+)/.exec(out)?.[1];
    if (url && !opened) {
      opened = true;
      const opener = browserOpener(url, process.platform, process.env);
      if (!opener) {
        process.stdout.write('shardwise: no display here (DISPLAY and WAYLAND_DISPLAY are unset): open the URL above in a browser\n');
        return;
      }
      const o = spawn(opener[0], opener[1], { stdio: 'ignore', detached: true });
      o.on('error', () => process.stdout.write(`shardwise: no browser opener found; open ${url} yourself\n`));
      o.unref();
    }
  });
  const forward = (sig: NodeJS.Signals) => child.kill(sig);
  process.on('SIGINT', forward);
  process.on('SIGTERM', forward);
  return new Promise((resolve) => child.on('exit', (code, signal) => resolve(code ?? (signal ? 0 : 1))));
}

export async function startDesktop(electronBinary: string, args: string[]): Promise<number> {
  // out/main/launch.js sits beside out/main/main.js, the Electron entry.
  const mainEntry = fileURLToPath(new URL('./main.js', import.meta.url));
  const env = { ...process.env };
  delete env.ELECTRON_RUN_AS_NODE; // set, it would turn the app into a plain Node process
  const child = spawn(electronBinary, [mainEntry, ...args], { stdio: 'inherit', env });
  // the app stops its live runs on SIGINT/SIGTERM, then quits: wait for it rather than leave it
  const forward = (sig: NodeJS.Signals) => child.kill(sig);
  process.on('SIGINT', forward);
  process.on('SIGTERM', forward);
  return new Promise((resolve) => {
    child.on('error', (e) => {
      process.stderr.write(`shardwise: could not start Electron at ${electronBinary}: ${e.message}\n`);
      resolve(1);
    });
    child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
}

export async function launch(): Promise<number> {
  const { args } = launchOptions(process.argv.slice(2), process.env);
  const found = findElectronBinary();
  return 'path' in found ? startDesktop(found.path, args) : startWebMode(found.missing, args);
}

process.exitCode = await launch();
