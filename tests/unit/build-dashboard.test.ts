// `npm run build` (which setup and every bench script run) builds the dashboard that `shardwise
// serve` serves whenever out/renderer is missing or older than a source, and skips it otherwise.
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { dashboardUpToDate } from '../../scripts/build-dashboard.mjs';

describe("npm run build's dashboard step", () => {
  let dir = '';
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('is due without out/renderer, after a renderer source changed, and not when the build is newer', () => {
    dir = mkdtempSync(path.join(tmpdir(), 'shardwise-dash-'));
    const file = (rel: string, t: number) => {
      mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
      writeFileSync(path.join(dir, rel), 'x');
      utimesSync(path.join(dir, rel), t, t);
    };
    for (const f of ['src-renderer/src/App.vue', 'common/a.ts', 'src-main/shell/main.ts', 'electron.vite.config.ts', 'package.json'])
      file(f, 1000);
    expect(dashboardUpToDate(dir)).toBe(false);
    file('out/main/launch.js', 2000);
    file('out/renderer/index.html', 2000);
    expect(dashboardUpToDate(dir)).toBe(true);
    file('src-renderer/src/App.vue', 3000);
    expect(dashboardUpToDate(dir)).toBe(false);
  });
});
