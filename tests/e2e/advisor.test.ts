// The Advisor end to end: a real `shardwise serve` and Debian Chromium. Opens the
// Advisor panel of the launch view, which lists the layouts of the tiny preset on two ranks
// ranked by the cost model (runs.advise) with memory bars per rank and the stacked step time;
// picks the first choice, which fills the form; launches it (2 steps: the first compiles, the second is
// measured) and sees predicted beside measured in the run view: the step's parts and every
// rank's memory categories, and the section's charts. Every wait is on a condition.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunPredictionSchema } from '../../common/api/index.js';
import { type Serve, startServe, stopServe } from '../dist/helpers/serve.js';
import { buildRenderer } from './build-renderer.js';
import { CHROMIUM, launchChromium } from './chromium.js';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const ARTIFACTS = path.join(ROOT, 'test-artifacts');

type Series = { name?: string; data?: unknown[] };
function chartOption(
  page: Page,
  id: string,
): Promise<{ series: Series[]; xAxis: { data?: string[] }[]; yAxis: { data?: string[] }[] } | null> {
  return page.evaluate((chartId) => {
    const c = (window as unknown as { __shardwiseCharts?: Record<string, { getOption(): unknown }> }).__shardwiseCharts?.[chartId];
    return c ? (JSON.parse(JSON.stringify(c.getOption(), (_k, v) => (typeof v === 'function' ? undefined : v))) as never) : null;
  }, id);
}
const text = (page: Page, sel: string) =>
  page
    .locator(sel)
    .first()
    .textContent()
    .then((t) => (t ?? '').trim())
    .catch(() => '');

describe.skipIf(!existsSync(CHROMIUM))('Advisor panel in Chromium over shardwise serve', () => {
  let dir: string;
  let serve: Serve;
  let browser: Browser;
  let page: Page;
  const consoleLines: string[] = [];

  beforeAll(async () => {
    await buildRenderer();
    mkdirSync(ARTIFACTS, { recursive: true });
    dir = mkdtempSync(path.join(tmpdir(), 'shardwise-advisor-'));
    serve = await startServe(path.join(dir, 'runs'), { SHARDWISE_HOME: path.join(dir, 'home'), SHARDWISE_NO_MDNS: '1' });
    browser = await launchChromium();
    page = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
    page.on('console', (m) => consoleLines.push(`${m.type()}: ${m.text()}`));
    page.on('pageerror', (e) => consoleLines.push(`pageerror: ${e.message}`));
  }, 180_000);
  afterAll(async () => {
    await browser?.close();
    if (serve) await stopServe(serve);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('open the panel, pick the first choice, launch it: the run view shows predicted beside measured', async () => {
    await page.goto(serve.url);
    await page.click('nav a[href="#/launch"]');
    await page.locator('#launch-prediction').waitFor({ timeout: 30_000 });

    // the panel: ranked layouts of 1 and 2 ranks, each with a memory bar per rank and a stacked step
    await page.click('#advisor summary');
    const rows = page.locator('#advisor-table tbody tr');
    await expect.poll(() => rows.count(), { timeout: 60_000 }).toBeGreaterThan(4);
    const labels = await page.locator('#advisor-table td.layout').allTextContents();
    expect(labels).toEqual(expect.arrayContaining(['single × 1', 'ddp × 2', 'zero2 × 2']));
    const first = page.locator('#advisor-table tbody tr[data-order="0"]');
    expect(await first.getAttribute('class')).not.toContain('over');
    const label = (await first.locator('td.layout').textContent())!.trim();
    const world = await first.locator('.membar').count();
    expect(world).toBeGreaterThanOrEqual(1);
    expect(await first.locator('.membar span').count()).toBeGreaterThanOrEqual(3); // params, grads, optimizer at least
    expect(await first.locator('.timebar span[data-part="compute_ms"]').count()).toBe(1);
    expect(await first.locator('td.reason').textContent()).toMatch(/fastest layout that fits/);
    const overview = await chartOption(page, 'advisor-step-time');
    expect(overview?.series.map((s) => s.name)).toEqual(['compute', 'communication (exposed)', 'pipeline bubble', 'host copies']);

    // picking fills the form with the layout, then one click launches it
    await first.locator('button.use').click();
    await page.locator('#advisor-picked').waitFor({ timeout: 10_000 });
    // the full-page screenshot resizes the page for a moment: taken here, well before the Launch
    // click (a click right after one could land where the button was not yet back, and miss)
    await page.screenshot({ path: path.join(ARTIFACTS, 'advisor-panel.png'), fullPage: true });
    const strategy = label.split(' ')[0]!;
    expect(await page.locator('select[name=strategy]').inputValue()).toBe(strategy);
    await page.fill('input[name=steps]', '2');
    await expect.poll(() => page.locator('#launch-prediction tbody tr').count(), { timeout: 30_000 }).toBe(world);
    await page.locator('#launch-validation').waitFor({ state: 'detached', timeout: 30_000 });
    await page.click('#launch-button');
    // the controller answers with the run (the view moves to it) or with a refusal the form shows;
    // the answer waits up to 2 s for the prediction, longer on a loaded machine
    await page
      .waitForFunction(
        () => window.location.hash.startsWith('#/run/') || document.querySelector('#launch-error, #launch-validation') !== null,
        undefined,
        { timeout: 90_000 },
      )
      .catch(async (e: Error) => {
        const button = await text(page, '#launch-button');
        const invalid = await page.evaluate(() =>
          Array.from((document.querySelector('#launch-form') as HTMLFormElement).elements)
            .filter((el) => !(el as HTMLInputElement).checkValidity())
            .map(
              (el) => `${(el as HTMLInputElement).name}=${(el as HTMLInputElement).value}: ${(el as HTMLInputElement).validationMessage}`,
            )
            .join('; '),
        );
        const runs = existsSync(path.join(dir, 'runs')) ? readdirSync(path.join(dir, 'runs')).join(', ') : '(no runs folder)';
        throw new Error(
          `${e.message}\nlaunch button: "${button}"; fields the browser refuses: ${invalid || 'none'}; run folders: ${runs}\npage console: ${consoleLines.slice(-20).join('\n')}\nserve: ${serve.output().slice(-3000)}`,
        );
      });
    expect(`${await text(page, '#launch-error')}${await text(page, '#launch-validation')}`, 'the launch was refused').toBe('');
    const runId = decodeURIComponent((await page.evaluate(() => window.location.hash)).slice('#/run/'.length));

    // the controller kept the advisor's plan of this layout in the run folder
    const saved = RunPredictionSchema.parse(JSON.parse(readFileSync(path.join(dir, 'runs', runId, 'prediction.json'), 'utf8')));
    expect(saved.plan.rank_order).toBeGreaterThanOrEqual(0);
    expect(saved.plan.layout.strategy).toBe(strategy);
    expect(saved.plan.ranks.length).toBe(world);

    // predicted beside measured: the step (after a second step) and every rank's categories
    await expect.poll(() => text(page, '#run-status'), { timeout: 240_000, interval: 500 }).toBe('completed');
    await page.locator('#prediction').waitFor({ timeout: 30_000 });
    const step = page.locator('#prediction-time tr[data-part="step_ms"]');
    expect(await step.locator('td.predicted').textContent()).toMatch(/^\d+\.\d ms$/);
    expect(await step.locator('td.measured').textContent()).toMatch(/^\d+\.\d ms$/);
    expect(await page.locator('#prediction-time tr[data-part="compute_ms"] td.measured').textContent()).toMatch(/^\d+\.\d ms$/);
    expect(await page.locator('#prediction-memory tbody tr').count()).toBe(world);
    const params = page.locator('#prediction-memory tbody tr[data-rank="0"] td[data-category="params"]');
    expect(await params.locator('.predicted').textContent()).toMatch(/KiB|MiB/);
    expect(await params.locator('.measured').textContent()).toMatch(/KiB|MiB/);
    const time = await chartOption(page, 'prediction-time');
    expect(time?.series.map((s) => s.name)).toEqual(['predicted', 'measured']);
    // the measured step: the chart redraws once per animation frame, so it may trail the table by one
    const measuredStep = async () => ((await chartOption(page, 'prediction-time'))?.series[1]?.data as (number | null)[]).at(-1) ?? 0;
    await expect.poll(measuredStep, { timeout: 30_000 }).toBeGreaterThan(0);
    const mem = await chartOption(page, 'prediction-memory-rank-0');
    expect(mem?.xAxis[0]?.data).toEqual(['params', 'grads', 'optimizer', 'activations', 'comm', 'workspace', 'total']);
    await page.screenshot({ path: path.join(ARTIFACTS, 'advisor-run.png'), fullPage: true });
  }, 400_000);
});
