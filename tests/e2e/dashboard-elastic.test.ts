// The run view of a run whose membership changed, in Chromium at 1400 px over a real `shardwise
// serve`: a run folder written by tests/e2e/elastic-run-fixture.ts (a machine lost after step 12,
// back at 20, stopped and resumed at 24). Every step chart bands by segment with a labelled marker
// where each change began, no marker label overlapping any other text ECharts drew (title,
// legend, axes, the other markers); hovering a band names its layout, machines, reason and lost
// steps; the Membership table lists the segments; the topology panel says who is present now and
// greys a machine that left. The launch form's Elastic control writes LaunchConfig.elastic and is
// outlined when the controller refuses it. Screenshots go to test-artifacts/ (gitignored).
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Serve, startServe, stopServe } from '../dist/helpers/serve.js';
import { buildRenderer } from './build-renderer.js';
import { CHROMIUM, launchChromium } from './chromium.js';
import { AGENT_B, writeElasticRun } from './elastic-run-fixture.js';
import { chartText, overlap } from './text-boxes.js';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const ARTIFACTS = path.join(ROOT, 'test-artifacts');
const RUN = 'elastic-fixture';
const ALONE = 'elastic-alone-fixture';
const STEP_CHARTS = ['loss', 'tokens-per-s', 'grad-norm', 'learning-rate', 'memory-rank-0', 'memory-rank-1', 'scaling'];
const MARKERS = ['world 1 · machine-lost · 2 lost steps', 'world 2 · scale-up', 'world 2 · resume'];

describe.skipIf(!existsSync(CHROMIUM))('the run view of a run whose membership changed', () => {
  let dir: string;
  let serve: Serve;
  let browser: Browser;
  let page: Page;

  const open = async (run: string) => {
    await page.evaluate((r) => (window.location.hash = `#/run/${r}`), run);
    await page.waitForFunction(
      (ids) => {
        const c = (window as unknown as { __shardwiseCharts?: Record<string, { getOption(): any }> }).__shardwiseCharts ?? {};
        return ids.every((id) => c[id]?.getOption().series.some((s: { name?: string }) => s.name === 'membership'));
      },
      STEP_CHARTS.slice(0, 5),
      { timeout: 60_000 },
    );
  };

  beforeAll(async () => {
    await buildRenderer();
    mkdirSync(ARTIFACTS, { recursive: true });
    dir = mkdtempSync(path.join(tmpdir(), 'shardwise-dash-elastic-'));
    writeElasticRun(path.join(dir, 'runs', RUN));
    writeElasticRun(path.join(dir, 'runs', ALONE), 2);
    process.env.SHARDWISE_HOME = path.join(dir, 'home');
    process.env.SHARDWISE_NO_MDNS = '1';
    serve = await startServe(path.join(dir, 'runs'));
    browser = await launchChromium();
    page = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
    await page.goto(serve.url);
    await open(RUN);
  }, 240_000);
  afterAll(async () => {
    await browser?.close();
    if (serve) await stopServe(serve);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('every step chart (and the step-time bars) draws the three change markers, none overlapping a title, legend, axis label or another marker', async () => {
    for (const id of STEP_CHARTS) {
      const { boxes } = await chartText(page, id);
      const markers = boxes.filter((b) => MARKERS.includes(b.name));
      expect(
        markers.map((m) => m.name),
        `${id}: ${boxes.map((b) => b.name).join(' | ')}`,
      ).toEqual(MARKERS);
      const chart = (await page.locator(`[data-chart-id="${id}"]`).boundingBox())!;
      for (const m of markers) {
        expect(m.x, `${id}: ${m.name} inside the chart`).toBeGreaterThanOrEqual(chart.x);
        expect(m.y + m.height, `${id}: ${m.name} inside the chart`).toBeLessThanOrEqual(chart.y + chart.height);
        // runs along its line: taller than wide
        expect(m.height, `${id}: ${m.name} vertical`).toBeGreaterThan(m.width);
        const hits = boxes.filter((b) => b !== m && overlap(m, b)).map((b) => b.name);
        expect(hits, `${id}: ${m.name} overlaps`).toEqual([]);
      }
    }
    // the lost steps' first rows are replaced by the rows trained again: the line never goes back
    const xs = await page.evaluate(() => {
      const c = (window as unknown as { __shardwiseCharts: Record<string, any> }).__shardwiseCharts['loss'];
      return (c.getOption().series[0].data as [number, number][]).map((p) => p[0]);
    });
    expect(xs).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
    await page.locator('[data-section="training"]').screenshot({ path: path.join(ARTIFACTS, 'dashboard-elastic-training.png') });
    await page.locator('[data-section="memory"]').screenshot({ path: path.join(ARTIFACTS, 'dashboard-elastic-memory.png') });
    await page.locator('[data-chart-id="scaling"]').screenshot({ path: path.join(ARTIFACTS, 'dashboard-elastic-step-time.png') });
  });

  it('hovering a band names the segment whole: layout, machines, reason, lost steps', async () => {
    // the pointer must land inside the viewport: bring the chart into it first
    await page.locator('[data-chart-id="loss"]').scrollIntoViewIfNeeded();
    const at = await page.evaluate(() => {
      const c = (window as unknown as { __shardwiseCharts: Record<string, any> }).__shardwiseCharts['loss'];
      const dom = c.getDom().getBoundingClientRect();
      // inside segment 2 (steps 11-20), halfway up the plot
      const [x] = c.convertToPixel({ gridIndex: 0 }, [16, 0]) as [number, number];
      const grid = c.getModel().getComponent('grid').coordinateSystem.getRect();
      return { x: dom.x + x, y: dom.y + grid.y + grid.height * 0.8 };
    });
    await page.mouse.move(at.x, at.y);
    // the innermost visible div with the text: the tooltip (its ancestors, the chart's wrappers, hold it too)
    const tooltip = page.locator('[data-chart-id="loss"] div', { hasText: 'segment 2: steps 11–20' }).filter({ visible: true }).last();
    await tooltip.waitFor({ timeout: 10_000 });
    const text = (await tooltip.textContent()) ?? '';
    expect(text).toContain('layout ddp × 1');
    expect(text).toContain('machines this machine (rank 0)');
    expect(text).toContain('reason machine-lost: agent b (10.0.0.2:7420) stopped answering');
    expect(text).toContain('2 lost steps');
    const chart = (await page.locator('[data-chart-id="loss"]').boundingBox())!;
    await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard-elastic-tooltip.png'), clip: chart });
    await page.mouse.move(5, 5);
  });

  it('the Membership table lists the four segments: steps, layout, machines, reason, lost steps, recovery', async () => {
    const rows = page.locator('#membership tbody tr');
    await expect.poll(() => rows.count(), { timeout: 10_000 }).toBe(4);
    expect(await page.locator('#membership h3').textContent()).toMatch(/Membership\s+4 segments · 2 restarts · 2 lost steps/);
    const cells = (i: number) =>
      page
        .locator(`#membership tr[data-segment="${i}"]`)
        .evaluate((tr) => Array.from(tr.querySelectorAll('td')).map((td) => td.textContent!.trim()));
    expect(await cells(2)).toEqual([
      '2',
      '11–20',
      'ddp × 1',
      'this machine (rank 0)',
      'machine-lost: agent b (10.0.0.2:7420) stopped answering',
      '2',
      'state from the checkpoint on disk, back in 2.3 s',
    ]);
    expect((await cells(4))[4]).toBe('resume');
    expect(await page.locator('#topology-presence').textContent()).toMatch(
      /Present now: this machine \(rank 0\), b \(10\.0\.0\.2:7420\) \(rank 1\)$/,
    );
    await page.locator('#membership').screenshot({ path: path.join(ARTIFACTS, 'dashboard-elastic-membership.png') });
    await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard-elastic.png'), fullPage: true });
  });

  it('a run that ended alone: the topology says who is present now and greys the machine that left', async () => {
    await open(ALONE);
    await page.locator('#topology-presence .gone').waitFor({ timeout: 30_000 });
    expect(await page.locator('#topology-presence .present').textContent()).toBe('this machine (rank 0)');
    expect(await page.locator('#topology-presence .gone').textContent()).toBe(`${AGENT_B} (after step 12)`);
    expect(await page.locator('#topology tr[data-rank="1"]').getAttribute('class')).toContain('gone');
    expect(await page.locator('#topology tr[data-rank="0"]').getAttribute('class')).not.toContain('gone');
    await page.locator('#topology').screenshot({ path: path.join(ARTIFACTS, 'dashboard-elastic-topology.png') });
  });

  it("the launch form's Elastic control is off by default and, on, outlined when the controller refuses MIN above MAX", async () => {
    await page.evaluate(() => (window.location.hash = '#/launch'));
    const box = page.locator('#launch-elastic input[name=elastic]');
    await box.waitFor({ timeout: 30_000 });
    expect(await box.isChecked()).toBe(false);
    expect(await page.locator('#launch-elastic input[name=elastic_min]').count()).toBe(0);
    await box.check();
    expect(await page.locator('#launch-elastic input[name=elastic_max]').inputValue()).toBe('2');
    expect(await page.locator('#launch-elastic input[name=elastic_max_restarts]').inputValue()).toBe('3');
    await page.fill('#launch-elastic input[name=elastic_min]', '3');
    await page.locator('#launch-validation', { hasText: 'elastic' }).waitFor({ timeout: 30_000 });
    expect(await page.locator('#launch-validation').textContent()).toMatch(/elastic\.min must be at most elastic\.max/);
    expect(await page.locator('#launch-elastic label.invalid').count()).toBe(3);
    await page.locator('#launch-elastic').screenshot({ path: path.join(ARTIFACTS, 'dashboard-elastic-launch.png') });
    await page.fill('#launch-elastic input[name=elastic_min]', '1');
    await expect.poll(() => page.locator('#launch-validation').count(), { timeout: 30_000 }).toBe(0);
  });
});
