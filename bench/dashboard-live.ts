// npm run bench:dashboard — how the live run view holds up under many ranks: `shardwise serve`
// runs a DDP job of the tiny preset at BENCH_WORLD ranks (default 8) while headless Chromium
// shows its run view; the page counts animation frames, long tasks (>50 ms main-thread blocks),
// chart redraws and the spans it keeps. Prints one JSON object. Not a test: numbers depend on
// the machine (on SwiftShader the ranks and the browser share the same cores).
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { CHROMIUM_ARGS } from '../src-main/reports/pdf.js';

// page functions run in the browser (this file is type-checked without DOM types)
declare const window: any, document: any, requestAnimationFrame: any;

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIN = path.join(ROOT, 'bin/shardwise.js');
const world = Number(process.env.BENCH_WORLD ?? 8);
const steps = Number(process.env.BENCH_STEPS ?? 12);
/** BENCH_VIEW=idle: a second page shows the runs list instead, the baseline of what the ranks' load alone costs the browser */
const idle = process.env.BENCH_VIEW === 'idle';
const root = mkdtempSync(path.join(tmpdir(), 'shardwise-bench-dash-'));

const b = spawnSync(
  process.execPath,
  [path.join(ROOT, 'node_modules/electron-vite/bin/electron-vite.js'), 'build', '--logLevel', 'error'],
  { cwd: ROOT, encoding: 'utf8', env: { ...process.env, ELECTRON_SKIP_BINARY_DOWNLOAD: '1' } },
);
if (b.status !== 0) throw new Error(`electron-vite build failed: ${b.stderr}`);
const serve = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--runs', path.join(root, 'runs')], {
  stdio: ['ignore', 'pipe', 'inherit'],
  env: { ...process.env, SHARDWISE_NO_MDNS: '1', SHARDWISE_HOME: path.join(root, 'home') },
});
let printed = '';
const url = await new Promise<string>((resolve, reject) => {
  serve.stdout.setEncoding('utf8').on('data', (d: string) => {
    printed += d;
    const m = /open (http\S+)/.exec(printed);
    if (m) resolve(m[1]!);
  });
  serve.on('exit', (c) => reject(new Error(`serve exited ${c}`)));
});
const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: CHROMIUM_ARGS,
});
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  await page.goto(url);
  await page.waitForFunction(() => window.location.hash === '#/cluster');
  await page.goto(url.replace(/#.*/, '#/launch'));
  await page.locator('#launch-prediction').waitFor({ timeout: 60_000 });
  await page.selectOption('select[name=strategy]', 'ddp');
  await page.fill('input[name=world]', String(world));
  await page.fill('input[name=batch_size]', String(world));
  await page.fill('input[name=steps]', String(steps));
  await page
    .locator('#launch-prediction tbody tr')
    .nth(world - 1)
    .waitFor({ timeout: 30_000 });
  await page.click('#launch-button');
  await page.waitForFunction(() => window.location.hash.startsWith('#/run/'));
  if (idle) await page.evaluate(() => (window.location.hash = '#/runs'));
  // count frames, long tasks and chart redraws from here to the end of the run
  await page.evaluate(() => {
    const w = window as unknown as { __bench: { frames: number; longTasks: number[]; redraws: number; maxSpans: number; t0: number } };
    w.__bench = { frames: 0, longTasks: [], redraws: 0, maxSpans: 0, t0: performance.now() };
    new PerformanceObserver((l) => l.getEntries().forEach((e) => w.__bench.longTasks.push(e.duration))).observe({
      type: 'longtask',
      buffered: false,
    } as never);
    const tick = () => {
      // sampled every 30th frame: getOption() deep-copies, the bench must not be the load it measures
      if (w.__bench.frames++ % 30 !== 0) return void requestAnimationFrame(tick);
      const charts =
        (window as unknown as { __shardwiseCharts?: Record<string, { getOption(): { series?: { data?: unknown[] }[] } }> })
          .__shardwiseCharts ?? {};
      const tl = charts.timeline;
      if (tl)
        w.__bench.maxSpans = Math.max(
          w.__bench.maxSpans,
          (tl.getOption().series ?? []).reduce((n, s) => n + (s.data?.length ?? 0), 0),
        );
      requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
  });
  await page.waitForFunction(
    (sel) => ['completed', 'failed', 'stopped'].includes(document.querySelector(sel)?.textContent ?? ''),
    idle ? '#runs-table tbody tr .status' : '#run-status',
    { timeout: 900_000, polling: 1000 },
  );
  const finalStatus = await page.evaluate(
    (sel) => document.querySelector(sel)?.textContent,
    idle ? '#runs-table tbody tr .status' : '#run-status',
  );
  const r = await page.evaluate(() => {
    const w = window as unknown as { __bench: { frames: number; longTasks: number[]; maxSpans: number; t0: number } };
    const s = (performance.now() - w.__bench.t0) / 1000;
    const lt = w.__bench.longTasks;
    return {
      seconds: s,
      fps: w.__bench.frames / s,
      long_tasks: lt.length,
      long_task_max_ms: lt.length ? Math.max(...lt) : 0,
      long_task_total_ms: lt.reduce((a, x) => a + x, 0),
      timeline_spans_max: w.__bench.maxSpans,
      error: document.querySelector('#run-failed')?.textContent?.trim() ?? null,
    };
  });
  process.stdout.write(
    `${JSON.stringify({ view: idle ? 'runs list (baseline)' : 'live run view', world, steps, status: finalStatus, ...r })}\n`,
  );
} finally {
  await browser.close();
  serve.kill('SIGTERM');
  await new Promise((res) => serve.once('exit', res));
  rmSync(root, { recursive: true, force: true });
}
