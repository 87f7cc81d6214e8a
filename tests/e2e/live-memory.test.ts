// The live memory chart keeps up with the run: while a run trains, each rank's memory chart holds
// a sample for every step the progress line shows (stacked areas from the second), within the
// redraw delay of a chart scrolled out of view, not one sample at step 9.
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildRenderer } from './build-renderer.js';
import { CHROMIUM, launchChromium } from './chromium.js';
import { connect, type Serve, startServe, stopServe } from '../dist/helpers/serve.js';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const ARTIFACTS = path.join(ROOT, 'test-artifacts');

/** steps of the first series (a stacked category) of a chart, and whether it draws areas */
function memorySeries(page: Page, id: string): Promise<{ steps: number[]; areas: boolean } | null> {
  return page.evaluate((chartId) => {
    const c = (window as unknown as { __shardwiseCharts?: Record<string, { getOption(): unknown }> }).__shardwiseCharts?.[chartId];
    if (!c) return null;
    const o = c.getOption() as { series: { data?: [number, number][]; areaStyle?: unknown }[] };
    const s = o.series[0];
    return { steps: (s?.data ?? []).map((p) => p[0]), areas: s?.areaStyle !== undefined };
  }, id);
}

describe.skipIf(!existsSync(CHROMIUM))('the live memory chart', () => {
  let dir: string;
  let serve: Serve;
  let browser: Browser;

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    await buildRenderer();
    dir = mkdtempSync(path.join(tmpdir(), 'shardwise-live-memory-'));
    serve = await startServe(path.join(dir, 'runs'), { SHARDWISE_HOME: path.join(dir, 'home'), SHARDWISE_NO_MDNS: '1' });
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    if (serve) await stopServe(serve);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('holds a sample for each step shown while the run trains', async () => {
    const c = await connect(serve);
    const { runId } = await c.call('runs.launch', {
      config: { preset: 'tiny', strategy: 'ddp', world: 2, steps: 300, eval_interval: 0, name: 'live-memory' },
    });
    const page = await browser.newPage();
    await page.goto(serve.url);
    await page.evaluate((id) => (window.location.hash = `#/run/${id}`), runId);
    const progress = async () => Number(/step (\d+)/.exec((await page.locator('#run-progress').textContent()) ?? '')?.[1] ?? 0);
    await expect.poll(progress, { timeout: 180_000, interval: 100 }).toBeGreaterThanOrEqual(9);
    const shown = await progress();
    // a chart out of view redraws every 2 s: by then it holds every step the progress line showed
    await expect
      .poll(async () => (await memorySeries(page, 'memory-rank-0'))?.steps.filter((s) => s >= 1 && s <= shown).length ?? 0, {
        timeout: 5_000,
        interval: 100,
      })
      .toBe(shown);
    expect((await memorySeries(page, 'memory-rank-0'))?.areas).toBe(true);
    await page.locator('[data-chart-id="memory-rank-0"]').scrollIntoViewIfNeeded();
    await page.screenshot({ path: path.join(ARTIFACTS, 'live-memory.png'), fullPage: true });
    await c.call('runs.stop', { runId });
    c.close();
    await page.close();
  }, 300_000);
});
