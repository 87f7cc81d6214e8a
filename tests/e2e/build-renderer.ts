// Builds the dashboard (electron-vite -> out/renderer, and out/main) once for the browser tests.
// Test files run in parallel (vitest forks): a second build would rewrite out/renderer while
// another file's serve is serving it. So the build holds a lock folder, and is skipped while
// out/renderer is newer than every renderer, common/, shell and build-config source.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmdirSync, statSync } from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const LOCK = path.join(ROOT, 'out', '.renderer-build.lock');
const STALE_LOCK_MS = 180_000;

function newest(p: string): number {
  const s = statSync(p);
  if (!s.isDirectory()) return s.mtimeMs;
  let t = 0;
  for (const n of readdirSync(p)) if (n !== 'node_modules') t = Math.max(t, newest(path.join(p, n)));
  return t;
}

function upToDate(): boolean {
  const index = path.join(ROOT, 'out/renderer/index.html');
  if (!existsSync(index)) return false;
  // the same build writes out/main (launch.js: what `npm start` runs) from src-main/shell
  const sources = Math.max(
    ...['src-renderer', 'common', 'src-main/shell', 'electron.vite.config.ts', 'package.json'].map((p) => newest(path.join(ROOT, p))),
  );
  return statSync(index).mtimeMs > sources && existsSync(path.join(ROOT, 'out/main/launch.js'));
}

export async function buildRenderer(): Promise<void> {
  mkdirSync(path.dirname(LOCK), { recursive: true });
  const t0 = Date.now();
  for (;;) {
    try {
      mkdirSync(LOCK);
      break;
    } catch {
      // another test file is building: wait for it (a lock older than any build is stale)
      if (existsSync(LOCK) && Date.now() - statSync(LOCK).mtimeMs > STALE_LOCK_MS) rmdirSync(LOCK);
      if (Date.now() - t0 > 2 * STALE_LOCK_MS) throw new Error(`the renderer build lock ${LOCK} was held too long`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  try {
    if (upToDate()) return;
    const b = spawnSync(
      process.execPath,
      [path.join(ROOT, 'node_modules/electron-vite/bin/electron-vite.js'), 'build', '--logLevel', 'error'],
      { cwd: ROOT, encoding: 'utf8', env: { ...process.env, ELECTRON_SKIP_BINARY_DOWNLOAD: '1' } },
    );
    if (b.status !== 0) throw new Error(`electron-vite build failed: ${b.stderr}`);
  } finally {
    rmdirSync(LOCK);
  }
}
