// scripts/setup.sh on a machine whose network cannot reach Electron's downloads. The script runs
// as written, from a copy of the repo's layout: npm and apt-get are stand-ins that only log
// their arguments (npm ci and the build are tested elsewhere), Electron's own installer is the
// real one (a copy of node_modules/electron/install.js, so nothing is written into the shared
// node_modules), and its download goes to a local mirror that refuses or never answers.
// Nothing here contacts a real network address.
import { spawn } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { tempDir } from './helpers.js';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const MODULES = path.join(ROOT, 'node_modules');

/** A folder laid out like the repo for setup.sh, with the Electron package not installed. */
function fixture(): string {
  const dir = tempDir('setup');
  mkdirSync(path.join(dir, 'scripts'));
  copyFileSync(path.join(ROOT, 'scripts/setup.sh'), path.join(dir, 'scripts/setup.sh'));
  const electron = path.join(dir, 'node_modules/electron');
  mkdirSync(electron, { recursive: true });
  for (const f of ['install.js', 'index.js', 'package.json', 'checksums.json'])
    copyFileSync(path.join(MODULES, 'electron', f), path.join(electron, f));
  symlinkSync(path.join(MODULES, '@electron'), path.join(dir, 'node_modules/@electron'));
  symlinkSync(path.join(MODULES, 'extract-zip'), path.join(dir, 'node_modules/extract-zip'));
  // the lockfile is older than the install: setup skips npm ci, as on a machine set up before
  writeFileSync(path.join(dir, 'package-lock.json'), '{}\n');
  utimesSync(path.join(dir, 'package-lock.json'), new Date(2000, 0, 1), new Date(2000, 0, 1));
  writeFileSync(path.join(dir, 'node_modules/.package-lock.json'), '{}\n');
  mkdirSync(path.join(dir, 'stub'));
  for (const cmd of ['npm', 'apt-get']) {
    writeFileSync(path.join(dir, 'stub', cmd), `#!/bin/sh\necho "${cmd} $*" >> "${path.join(dir, 'calls.log')}"\n`);
    chmodSync(path.join(dir, 'stub', cmd), 0o755);
  }
  return dir;
}

/** Runs the fixture's setup.sh; env replaces the Electron variables of this process's env. */
function setup(dir: string, env: NodeJS.ProcessEnv): Promise<{ code: number | null; output: string; seconds: number }> {
  const base = { ...process.env };
  for (const k of Object.keys(base)) if (/^(ELECTRON_|electron_|npm_config_electron|https?_proxy|HTTPS?_PROXY)/.test(k)) delete base[k];
  const t0 = Date.now();
  const child = spawn('bash', [path.join(dir, 'scripts/setup.sh')], {
    cwd: dir,
    env: { ...base, PATH: `${path.join(dir, 'stub')}:${process.env.PATH}`, electron_config_cache: path.join(dir, 'cache'), ...env },
  });
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (output += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (output += d));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, output, seconds: (Date.now() - t0) / 1000 })));
}

function listen(server: Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)));
}

/** A loopback port nothing listens on: bound once by the OS, then released. */
async function closedPort(): Promise<number> {
  const s = createServer();
  const port = await listen(s);
  await new Promise((r) => s.close(r));
  return port;
}

const electronLines = (output: string) => output.split('\n').filter((l) => /electron/i.test(l));
/** npm's calls (apt-get is called too where chromium or the Vulkan loader is missing) */
const calls = (dir: string) =>
  readFileSync(path.join(dir, 'calls.log'), 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('npm '));

describe('scripts/setup.sh where Electron cannot be downloaded', () => {
  const dirs: string[] = [];
  const servers: Server[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  it('a refused download: one line naming the error, the build still runs, exit code 0', async () => {
    const dir = fixture();
    dirs.push(dir);
    const r = await setup(dir, { ELECTRON_MIRROR: `http://127.0.0.1:${await closedPort()}/` });
    expect(r.code, r.output).toBe(0);
    expect(electronLines(r.output), r.output).toEqual([
      expect.stringMatching(
        /^setup: could not install the Electron binary \(.*ECONNREFUSED.*\); npm start opens web mode in the browser instead$/,
      ),
    ]);
    expect(calls(dir)).toEqual(['npm run --silent build']);
    expect(existsSync(path.join(dir, 'node_modules/electron/path.txt'))).toBe(false);
  });

  it('a download that never answers is cut at SHARDWISE_ELECTRON_INSTALL_TIMEOUT (2 s): one line, exit code 0', async () => {
    const dir = fixture();
    dirs.push(dir);
    const held: Socket[] = [];
    const silent = createServer((s) => held.push(s)); // accepts, reads the request, never answers
    silent.on('close', () => held.forEach((s) => s.destroy()));
    servers.push(silent);
    const port = await listen(silent);
    const r = await setup(dir, { ELECTRON_MIRROR: `http://127.0.0.1:${port}/`, SHARDWISE_ELECTRON_INSTALL_TIMEOUT: '2' });
    for (const s of held) s.destroy();
    expect(r.code, r.output).toBe(0);
    expect(held.length, 'the installer reached the stand-in mirror').toBeGreaterThan(0);
    expect(electronLines(r.output), r.output).toEqual([
      'setup: could not install the Electron binary (no answer within 2 s (SHARDWISE_ELECTRON_INSTALL_TIMEOUT=SECONDS allows longer)); npm start opens web mode in the browser instead',
    ]);
    expect(r.seconds).toBeLessThan(30);
    expect(calls(dir)).toEqual(['npm run --silent build']);
  });

  it('with ELECTRON_SKIP_BINARY_DOWNLOAD=1 set by the caller (CI) it does not try: one line, exit code 0', async () => {
    const dir = fixture();
    dirs.push(dir);
    let contacted = false;
    const watcher = createServer((s) => {
      contacted = true;
      s.destroy();
    });
    servers.push(watcher);
    const port = await listen(watcher);
    const r = await setup(dir, { ELECTRON_SKIP_BINARY_DOWNLOAD: '1', ELECTRON_MIRROR: `http://127.0.0.1:${port}/` });
    expect(r.code, r.output).toBe(0);
    expect(contacted).toBe(false);
    expect(electronLines(r.output)).toEqual([
      'setup: ELECTRON_SKIP_BINARY_DOWNLOAD is set, so the Electron binary is not installed; npm start opens web mode in the browser',
    ]);
    expect(calls(dir)).toEqual(['npm run --silent build']);
  });
});
