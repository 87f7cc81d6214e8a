// What a W&B or TensorBoard user looks for in the dashboard, in Chromium over a real `shardwise
// serve` of run folders (no training): two runs compared on one chart with one y axis, an x-axis
// toggle and the config keys that differ; tags and notes on runs that survive a serve restart,
// with search and filters; a run's log tail by rank with a search, following a live run; a
// chart saved as PNG and SVG; zoom shared by a run's step charts; host CPU and RAM charts.
// Screenshots go to test-artifacts/history-*.png.
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Serve, startServe, stopServe } from '../dist/helpers/serve.js';
import { buildRenderer } from './build-renderer.js';
import { CHROMIUM, launchChromium } from './chromium.js';
import { copyThreeDRun, writeFailedRun, writePipelineRun } from './run-fixtures.js';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const ARTIFACTS = path.join(ROOT, 'test-artifacts');
const shot = (page: Page, name: string) => page.screenshot({ path: path.join(ARTIFACTS, `history-${name}.png`), fullPage: true });

type Opt = {
  series: { name?: string; data?: unknown[] }[];
  yAxis: unknown[];
  xAxis: { name?: string; min?: unknown }[];
  dataZoom?: { startValue?: number; endValue?: number; start?: number; end?: number }[];
};
function chartOption(page: Page, id: string): Promise<Opt | null> {
  return page.evaluate((chartId) => {
    const c = (window as unknown as { __shardwiseCharts?: Record<string, { getOption(): unknown }> }).__shardwiseCharts?.[chartId];
    return c ? (JSON.parse(JSON.stringify(c.getOption(), (_k, v) => (typeof v === 'function' ? undefined : v))) as never) : null;
  }, id);
}

const line = (rank: number | undefined, message: string, time: number, level = 'info') =>
  `${JSON.stringify({ time, level, message, ...(rank !== undefined ? { rank } : {}) })}\n`;

describe.skipIf(!existsSync(CHROMIUM))('run history views in Chromium over shardwise serve', () => {
  let dir: string;
  let runs: string;
  let serve: Serve;
  let browser: Browser;
  let page: Page;

  let loaded = '';
  /** the page at `hash`; loaded from the serve's address (the token travels in the first one only) once per serve */
  async function open(hash: string) {
    if (loaded !== serve.url) {
      await page.goto(serve.url);
      loaded = serve.url;
    }
    await page.evaluate((h) => (window.location.hash = h), hash);
  }

  beforeAll(async () => {
    await buildRenderer();
    mkdirSync(ARTIFACTS, { recursive: true });
    dir = mkdtempSync(path.join(tmpdir(), 'shardwise-history-'));
    runs = path.join(dir, 'runs');
    writePipelineRun(path.join(runs, 'pp-fixture'));
    writeFailedRun(path.join(runs, 'failed-fixture'));
    copyThreeDRun(path.join(runs, 'run-3d'));
    const t0 = Date.parse('2026-01-02T03:04:05Z');
    writeFileSync(
      path.join(runs, 'failed-fixture', 'logs.jsonl'),
      line(undefined, 'launching 2 ranks (ddp) for 10 steps', t0) +
        line(0, 'rank 0: joined the world', t0 + 1) +
        line(1, 'rank 1: joined the world', t0 + 2) +
        line(1, 'GPUDevice lost: out of memory allocating activations', t0 + 3, 'error') +
        line(undefined, 'rank 1 exited with code 137 (killed)', t0 + 4, 'error'),
    );
    // host samples of the pipeline run: two machines, 3 s
    writeFileSync(
      path.join(runs, 'pp-fixture', 'host.jsonl'),
      [0, 1, 2]
        .flatMap((i) => [
          { time: t0 + i * 1000, machine: 'gpu-a', cpu_pct: 30 + i, mem_used: (4 + i) * 2 ** 30, mem_total: 16 * 2 ** 30 },
          { time: t0 + i * 1000 + 3, machine: 'gpu-b', cpu_pct: 80, mem_used: 6 * 2 ** 30, mem_total: 8 * 2 ** 30 },
        ])
        .map((r) => `${JSON.stringify(r)}\n`)
        .join(''),
    );
    process.env.SHARDWISE_HOME = path.join(dir, 'home');
    process.env.SHARDWISE_NO_MDNS = '1';
    serve = await startServe(runs);
    browser = await launchChromium();
    page = await (await browser.newContext({ acceptDownloads: true, viewport: { width: 1400, height: 900 } })).newPage();
  }, 240_000);
  afterAll(async () => {
    await browser?.close();
    if (serve) await stopServe(serve);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('compare: both runs’ loss on one chart with one shared y axis, an x-axis toggle, and a table of the config keys that differ', async () => {
    await open('#/compare/run-3d/pp-fixture');
    await expect
      .poll(async () => (await chartOption(page, 'overlay-loss'))?.series.map((s) => `${s.name}:${s.data?.length}`), { timeout: 60_000 })
      .toEqual(['run-3d:4', 'pp-fixture:3']);
    const loss = (await chartOption(page, 'overlay-loss'))!;
    expect(loss.yAxis).toHaveLength(1); // one scale for both runs
    expect(loss.xAxis[0]!.name).toBe('step');
    const ppSteps = readFileSync(path.join(runs, 'pp-fixture', 'metrics.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { step: number; loss: number });
    expect(loss.series[1]!.data).toEqual(ppSteps.map((r) => [r.step, r.loss]));
    // the config keys that differ, each run's value in its column
    const cells = (key: string) =>
      page.locator(`#config-diff tr[data-key="${key}"] td`).evaluateAll((tds) => tds.map((td) => td.textContent!.trim()));
    expect(await cells('parallel.strategy')).toEqual(['"3d"', '"pp"']);
    expect(await cells('parallel.world')).toEqual(['8', '2']);
    expect(await cells('train.weight_decay')).toEqual(['0.1', '(not set)']);
    expect(await page.locator('#config-diff tr[data-key="train.batch_size"]').count()).toBe(0); // the same in both
    await shot(page, 'compare');
    await page.locator('#compare-overlay').screenshot({ path: path.join(ARTIFACTS, 'history-compare-overlay.png') });
    // tokens seen on the x axis: the 3d run's 4 steps of 8 x 64 tokens end at 2048
    await page.check('#overlay-axis-tokens');
    await expect.poll(async () => (await chartOption(page, 'overlay-loss'))?.xAxis[0]!.name).toBe('tokens seen');
    expect(((await chartOption(page, 'overlay-loss'))!.series[0]!.data as number[][]).map((p) => p[0])).toEqual([512, 1024, 1536, 2048]);
    await page.check('#overlay-axis-time');
    await expect.poll(async () => (await chartOption(page, 'overlay-loss'))?.xAxis[0]!.name).toBe('training time (s)');
  }, 120_000);

  it('runs list: tags and a note saved on a run show in the list, survive a serve restart, and search and filters find it', async () => {
    await open('#/runs');
    const row = page.locator('#runs-table tr[data-run-id="pp-fixture"]');
    await row.waitFor({ timeout: 30_000 });
    await row.locator('.edit-meta').click();
    // a refused tag says why, and nothing is saved
    await row.locator('input[name=tags]').fill('baseline, <b>');
    await row.locator('button[type=submit]').click();
    await expect.poll(() => row.locator('.meta-error').textContent(), { timeout: 15_000 }).toMatch(/tags\.1: a tag is letters, digits/);
    await row.locator('input[name=tags]').fill('baseline, gpipe');
    await row.locator('textarea[name=note]').fill('2 stages, 4 micro-batches: the bubble run');
    await row.locator('button[type=submit]').click();
    await expect.poll(() => row.locator('.run-tag').allTextContents(), { timeout: 15_000 }).toEqual(['baseline', 'gpipe']);
    expect(JSON.parse(readFileSync(path.join(runs, 'pp-fixture', 'meta.json'), 'utf8'))).toEqual({
      tags: ['baseline', 'gpipe'],
      note: '2 stages, 4 micro-batches: the bubble run',
    });

    // a new controller over the same runs folder reads them back
    await stopServe(serve);
    serve = await startServe(runs);
    await open('#/runs');
    const again = page.locator('#runs-table tr[data-run-id="pp-fixture"]');
    await expect.poll(() => again.locator('.run-tag').allTextContents(), { timeout: 30_000 }).toEqual(['baseline', 'gpipe']);
    expect(await again.locator('.run-note').textContent()).toBe('2 stages, 4 micro-batches: the bubble run');

    const shown = () => page.locator('#runs-table tbody tr').evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-run-id')));
    await page.fill('input[name=run-search]', 'bubble');
    await expect.poll(shown).toEqual(['pp-fixture']);
    await page.fill('input[name=run-search]', 'GPIPE');
    await expect.poll(shown).toEqual(['pp-fixture']);
    await page.fill('input[name=run-search]', 'run-3d');
    await expect.poll(shown).toEqual(['run-3d']);
    await page.fill('input[name=run-search]', '');
    await page.selectOption('select[name=filter-status]', 'failed');
    await expect.poll(shown).toEqual(['failed-fixture']);
    await page.selectOption('select[name=filter-status]', '');
    await page.selectOption('select[name=filter-strategy]', '3d');
    await expect.poll(shown).toEqual(['run-3d']);
    expect(await page.locator('#runs-shown').textContent()).toBe('1 of 3');
    await page.selectOption('select[name=filter-strategy]', '');
    expect(await page.locator('select[name=filter-precision] option').allTextContents()).toEqual(['any precision', 'fp32']);
    await page.selectOption('select[name=filter-precision]', 'fp32');
    await expect.poll(async () => (await shown()).length).toBe(3);
    await shot(page, 'runs-list');
  }, 120_000);

  it("log tail: one rank's lines, a search, and a live run's new lines as they come", async () => {
    await open('#/run/failed-fixture');
    const lines = () => page.locator('#run-logs span').allTextContents();
    await expect.poll(async () => (await lines()).length, { timeout: 30_000 }).toBe(5);
    await page.selectOption('select[name=log-rank]', '1');
    await expect
      .poll(lines)
      .toEqual([expect.stringMatching(/\[rank 1\] rank 1: joined the world$/), expect.stringMatching(/\[rank 1\] GPUDevice lost/)]);
    await page.fill('input[name=log-search]', 'OUT OF memory');
    await expect.poll(async () => (await lines()).length).toBe(1);
    await page.selectOption('select[name=log-rank]', 'controller');
    await page.fill('input[name=log-search]', 'exited');
    await expect.poll(lines).toEqual([expect.stringMatching(/rank 1 exited with code 137 \(killed\)$/)]);
    await page.locator('#run-log-tail').screenshot({ path: path.join(ARTIFACTS, 'history-log-tail.png') });

    // a live run (its writer, this test process, holds it): lines appended to logs.jsonl show up
    const live = path.join(runs, 'live-run');
    writeFailedRun(live);
    const state = JSON.parse(readFileSync(path.join(live, 'state.json'), 'utf8')) as Record<string, unknown>;
    writeFileSync(
      path.join(live, 'state.json'),
      JSON.stringify({ ...state, status: 'running', error: undefined, failed_rank: undefined, pid: process.pid }),
    );
    writeFileSync(path.join(live, 'logs.jsonl'), line(undefined, 'launching 2 ranks', Date.now()));
    await open('#/run/live-run');
    await expect.poll(() => page.locator('#run-status').textContent(), { timeout: 30_000 }).toBe('running');
    await page.selectOption('select[name=log-rank]', 'all');
    await expect.poll(async () => (await lines()).length, { timeout: 15_000 }).toBe(1);
    appendFileSync(path.join(live, 'logs.jsonl'), line(1, 'step 3: loss 3.71', Date.now()));
    await expect
      .poll(async () => await page.locator('select[name=log-rank] option').allTextContents(), { timeout: 15_000 })
      .toContain('rank 1');
    await page.selectOption('select[name=log-rank]', '1');
    await expect.poll(lines, { timeout: 15_000 }).toEqual([expect.stringMatching(/\[rank 1\] step 3: loss 3\.71$/)]);
  }, 120_000);

  it('charts: saved as PNG and as SVG from their menu; zooming one step chart zooms the others; host CPU and RAM beside device memory', async () => {
    await open('#/run/pp-fixture');
    await page.waitForFunction(
      () => {
        const c = (window as unknown as { __shardwiseCharts?: Record<string, unknown> }).__shardwiseCharts ?? {};
        return c['loss'] && c['memory-rank-0'] && c['host-cpu'] && c['host-ram'];
      },
      undefined,
      { timeout: 60_000 },
    );
    // the host charts sit in the memory section with the device memory charts
    const memorySection = page.locator('section[data-section="memory"]');
    expect(await memorySection.locator('[data-chart-id="host-cpu"]').count()).toBe(1);
    expect((await chartOption(page, 'host-cpu'))!.series.map((s) => s.name)).toEqual(['gpu-a', 'gpu-b']);
    expect((await chartOption(page, 'host-ram'))!.series.map((s) => s.name)).toEqual(['gpu-a', 'gpu-a total', 'gpu-b', 'gpu-b total']);

    const frame = page.locator('[data-chart-id="loss"]').locator('..');
    await frame.locator('.chart-menu-button').click();
    const [png] = await Promise.all([page.waitForEvent('download'), frame.locator('button[data-format="png"]').click()]);
    expect(png.suggestedFilename()).toBe('pp-fixture-loss.png');
    const pngBytes = readFileSync((await png.path())!);
    expect([...pngBytes.subarray(0, 8)]).toEqual([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    expect(pngBytes.length).toBeGreaterThan(5000);
    await frame.locator('.chart-menu-button').click();
    const [svg] = await Promise.all([page.waitForEvent('download'), frame.locator('button[data-format="svg"]').click()]);
    expect(svg.suggestedFilename()).toBe('pp-fixture-loss.svg');
    const svgText = readFileSync((await svg.path())!, 'utf8');
    expect(svgText).toMatch(/^<svg[\s\S]*<\/svg>$/);
    expect(svgText).toContain('Loss'); // the title, as text
    expect(svgText).toMatch(/<path[^>]+d="M/); // the curves, as vector paths

    // zoom the loss chart to steps 2..3: the throughput and memory charts follow
    await page.evaluate(() => {
      const c = (window as unknown as { __shardwiseCharts: Record<string, { dispatchAction(a: object): void }> }).__shardwiseCharts;
      c['loss']!.dispatchAction({ type: 'dataZoom', dataZoomId: 'step-zoom', startValue: 2, endValue: 3 });
    });
    for (const id of ['tokens-per-s', 'memory-rank-0', 'memory-rank-1']) {
      await expect
        .poll(
          async () => {
            const z = (await chartOption(page, id))?.dataZoom?.[0];
            return z ? [z.startValue, z.endValue] : null;
          },
          { timeout: 15_000 },
        )
        .toEqual([2, 3]);
    }
    await shot(page, 'run-charts');
    await memorySection.screenshot({ path: path.join(ARTIFACTS, 'history-memory-and-host.png') });
  }, 120_000);
});
