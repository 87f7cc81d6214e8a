// The desktop app through Playwright's _electron: opens the real Electron build (npm run
// build:app -> out/main/main.js) and checks its window shows the dashboard. Where the Electron
// binary is not installed (ELECTRON_SKIP_BINARY_DOWNLOAD, as on the CI machines here) the test
// reports itself skipped with that reason: it never counts as passing there.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { _electron as electron } from 'playwright-core';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');

/** The binary's path, or why there is none (the same test as src-main/shell/launch.ts). */
function electronBinary(): { path: string } | { missing: string } {
  try {
    const bin = createRequire(import.meta.url)('electron') as unknown;
    if (typeof bin !== 'string') return { missing: 'the electron package did not name a binary' };
    return existsSync(bin) ? { path: bin } : { missing: `the Electron binary is not installed at ${bin}` };
  } catch (e) {
    return { missing: `the Electron binary was never downloaded (${(e as Error).message.split('\n')[0]})` };
  }
}

describe('desktop app (Electron)', () => {
  it('opens one sandboxed window showing the dashboard', async (ctx) => {
    const found = electronBinary();
    if ('missing' in found) {
      process.stderr.write(`electron-app.test: skipped: ${found.missing}\n`);
      ctx.skip(`Electron binary missing: ${found.missing}`);
      return;
    }
    const b = spawnSync(
      process.execPath,
      [path.join(ROOT, 'node_modules/electron-vite/bin/electron-vite.js'), 'build', '--logLevel', 'error'],
      { cwd: ROOT, encoding: 'utf8' },
    );
    if (b.status !== 0) throw new Error(`electron-vite build failed: ${b.stderr}`);
    const app = await electron.launch({ executablePath: found.path, args: [path.join(ROOT, 'out/main/main.js')], cwd: ROOT });
    try {
      const win = await app.firstWindow();
      await win.locator('.topbar h1').waitFor({ timeout: 60_000 });
      expect(await win.locator('.topbar h1').textContent()).toBe('Shardwise');
      expect(await win.locator('#app-mode').textContent()).toMatch(/^desktop · v\d/);
      // the renderer has no Node: the preload's bridge is all it gets
      expect(await win.evaluate(() => typeof (globalThis as { require?: unknown }).require)).toBe('undefined');
      expect(app.windows().length).toBe(1);
    } finally {
      await app.close();
    }
  }, 120_000);
});
