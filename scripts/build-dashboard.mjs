// The dashboard (electron-vite -> out/renderer and out/main) as part of `npm run build`, which
// setup and every bench script run: `shardwise serve` serves out/renderer, and a build that left
// it missing or older than its sources made serve answer "not built yet". Skipped while
// out/renderer is newer than every renderer, common/, shell and build-config source; it holds
// the lock folder the browser tests' build takes (tests/e2e/build-renderer.ts), so the two
// never write out/renderer at once.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmdirSync, statSync } from 'node:fs';
import path from 'node:path';

const STALE_LOCK_MS = 180_000;
const SOURCES = ['src-renderer', 'common', 'src-main/shell', 'electron.vite.config.ts', 'package.json'];

function newest(p) {
  const s = statSync(p);
  if (!s.isDirectory()) return s.mtimeMs;
  let t = 0;
  for (const n of readdirSync(p)) if (n !== 'node_modules') t = Math.max(t, newest(path.join(p, n)));
  return t;
}

export function dashboardUpToDate(root) {
  const index = path.join(root, 'out/renderer/index.html');
  if (!existsSync(index) || !existsSync(path.join(root, 'out/main/launch.js'))) return false;
  return statSync(index).mtimeMs > Math.max(...SOURCES.map((p) => newest(path.join(root, p))));
}

/** Builds the dashboard unless it is up to date; returns whether it built. Throws with the build's errors. */
export async function buildDashboard(root) {
  const lock = path.join(root, 'out', '.renderer-build.lock');
  mkdirSync(path.dirname(lock), { recursive: true });
  const t0 = Date.now();
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      if (existsSync(lock) && Date.now() - statSync(lock).mtimeMs > STALE_LOCK_MS) rmdirSync(lock);
      if (Date.now() - t0 > 2 * STALE_LOCK_MS) throw new Error(`the dashboard build lock ${lock} was held too long`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  try {
    if (dashboardUpToDate(root)) return false;
    // the build needs no Electron binary (setup may have gone on without one)
    const b = spawnSync(
      process.execPath,
      [path.join(root, 'node_modules/electron-vite/bin/electron-vite.js'), 'build', '--logLevel', 'error'],
      {
        cwd: root,
        encoding: 'utf8',
        env: { ...process.env, ELECTRON_SKIP_BINARY_DOWNLOAD: '1' },
      },
    );
    if (b.status !== 0) throw new Error(`the dashboard build (electron-vite build) failed:\n${b.stderr}${b.stdout}`);
    return true;
  } finally {
    rmdirSync(lock);
  }
}
