// The run view at 8 ranks, in Chromium at 1400 px wide over a real `shardwise serve`: the files
// of a real 3d run (D 2 x T 2 x P 2, tests/e2e/fixtures) in the runs folder. Every rank's memory
// chart and every timeline lane is on screen without overlapping another (DOM boxes for the
// charts, ECharts' drawn label boxes for the lanes), the memory charts share one scale, the time
// axis reads rounded times, and the topology panel lists the 8 ranks with their roles.
// Screenshots go to test-artifacts/ (gitignored).
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type Browser, type Page } from 'playwright-core';
import { CHROMIUM, launchChromium } from './chromium.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildRenderer } from './build-renderer.js';
import { copyThreeDRun } from './run-fixtures.js';
import { type Box, chartText, overlapping } from './text-boxes.js';
import { type Serve, startServe, stopServe } from '../dist/helpers/serve.js';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const ARTIFACTS = path.join(ROOT, 'test-artifacts');
const RUN = '3d-2x2x2';

type Registry = Record<string, { getOption(): any; getZr(): any; getDom(): HTMLElement }>;

/** The boxes (viewport coordinates, as Playwright's boundingBox) of the lane labels ECharts drew on the timeline's y axis, top to bottom. */
async function laneLabelBoxes(page: Page): Promise<Box[]> {
  const lanes = new Set(
    await page.evaluate(
      () => (window as unknown as { __shardwiseCharts: Registry }).__shardwiseCharts['timeline']!.getOption().yAxis[0].data as string[],
    ),
  );
  return (await chartText(page, 'timeline')).boxes.filter((b) => lanes.has(b.name)).sort((a, b) => a.y - b.y);
}

describe.skipIf(!existsSync(CHROMIUM))('the run view of an 8-rank 3d run (D 2 x T 2 x P 2) at 1400 px', () => {
  let dir: string;
  let serve: Serve;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    await buildRenderer();
    mkdirSync(ARTIFACTS, { recursive: true });
    dir = mkdtempSync(path.join(tmpdir(), 'shardwise-dash8-'));
    copyThreeDRun(path.join(dir, 'runs', RUN));
    process.env.SHARDWISE_HOME = path.join(dir, 'home');
    process.env.SHARDWISE_NO_MDNS = '1';
    serve = await startServe(path.join(dir, 'runs'));
    browser = await launchChromium();
    page = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
    await page.goto(serve.url); // the token travels in the first address only
    await page.evaluate((run) => (window.location.hash = `#/run/${run}`), RUN);
    // every chart drawn: 8 memory charts and the timeline registered with their data
    await page.waitForFunction(
      () => {
        const c = (window as unknown as { __shardwiseCharts?: Registry }).__shardwiseCharts ?? {};
        return [0, 1, 2, 3, 4, 5, 6, 7].every((r) => c[`memory-rank-${r}`]) && c['timeline']?.getOption().series.length > 0;
      },
      undefined,
      { timeout: 60_000 },
    );
  }, 240_000);
  afterAll(async () => {
    await browser?.close();
    if (serve) await stopServe(serve);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('the topology panel lists the 8 ranks with machine, device, stage, TP shard, DP replica and the layers each holds', async () => {
    const rows = page.locator('#topology tbody tr');
    await expect.poll(() => rows.count(), { timeout: 30_000 }).toBe(8);
    expect(await page.locator('#topology h3').textContent()).toMatch(/3d: DP 2 × TP 2 × PP 2 · 1f1b, 2 micro-batches · 8 ranks/);
    const cells = async (rank: number) =>
      page
        .locator(`#topology tr[data-rank="${rank}"]`)
        .evaluate((tr) => Array.from(tr.querySelectorAll('td')).map((td) => td.textContent!.trim()));
    // Megatron's order: TP ranks adjacent, then DP, then PP
    const roles = [];
    for (let r = 0; r < 8; r++) roles.push((await cells(r)).slice(3, 6).join(' '));
    expect(roles).toEqual(['0 0 0', '0 1 0', '0 0 1', '0 1 1', '1 0 0', '1 1 0', '1 0 1', '1 1 1']);
    const rank6 = await cells(6);
    expect(rank6.slice(0, 3)).toEqual(['6', 'this machine', 'default adapter']);
    expect(rank6[6]).toBe('block 1, ln_f + LM head · heads 0 of 2, 1/2 of the MLP and vocabulary');
    expect(rank6[7]).toMatch(/^1010 KiB · 1010 KiB · device size not reported$/);
    expect((await cells(1))[6]).toBe('embedding, block 0 · heads 1 of 2, 1/2 of the MLP and vocabulary');
    await page.locator('#topology').screenshot({ path: path.join(ARTIFACTS, 'dashboard-8-ranks-topology.png') });
  });

  it("every rank's memory chart is on screen, inside 1400 px, none overlapping another, all on one scale", async () => {
    const boxes: Box[] = [];
    for (let r = 0; r < 8; r++) {
      const b = await page.locator(`[data-chart-id="memory-rank-${r}"]`).boundingBox();
      expect(b, `memory chart of rank ${r}`).not.toBeNull();
      boxes.push({ name: `memory-rank-${r}`, ...b! });
    }
    for (const b of boxes) {
      expect(b.width, b.name).toBeGreaterThan(200);
      expect(b.height, b.name).toBeGreaterThan(200);
      expect(b.x + b.width, `${b.name} ends inside the 1400 px window`).toBeLessThanOrEqual(1400);
    }
    expect(overlapping(boxes)).toEqual([]);
    // four to a row: two rows
    expect(new Set(boxes.map((b) => Math.round(b.y))).size).toBe(2);
    const scale = await page.evaluate(() => {
      const c = (window as unknown as { __shardwiseCharts: Registry }).__shardwiseCharts;
      return [0, 1, 2, 3, 4, 5, 6, 7].map((r) => {
        const y = c[`memory-rank-${r}`]!.getOption().yAxis[0];
        return `${y.max} ${y.name}`;
      });
    });
    expect(new Set(scale)).toEqual(new Set(['1.7 MiB']));
    await page.locator('[data-section="memory"]').screenshot({ path: path.join(ARTIFACTS, 'dashboard-8-ranks-memory.png') });
  });

  it('the timeline draws all 16 lanes (compute and comm of each rank), stage by stage, their labels not overlapping; time labels rounded', async () => {
    const lanes = await laneLabelBoxes(page);
    expect(lanes.map((l) => l.name)).toEqual(
      [0, 1, 2, 3, 4, 5, 6, 7].flatMap((r) => [`rank ${r} (stage ${r < 4 ? 0 : 1}) compute`, `rank ${r} (stage ${r < 4 ? 0 : 1}) comm`]),
    );
    expect(overlapping(lanes)).toEqual([]);
    const chart = (await page.locator('[data-chart-id="timeline"]').boundingBox())!;
    for (const l of lanes) {
      expect(l.width, l.name).toBeGreaterThan(50);
      expect(l.x, `${l.name} starts inside the chart`).toBeGreaterThanOrEqual(chart.x);
      expect(l.y + l.height, `${l.name} ends inside the chart`).toBeLessThanOrEqual(chart.y + chart.height);
    }
    // every lane its own band, top to bottom, 20 px or more apart (the chart grows 36 px a lane)
    const centres = lanes.map((l) => l.y + l.height / 2);
    for (let i = 1; i < centres.length; i++) expect(centres[i]! - centres[i - 1]!, lanes[i]!.name).toBeGreaterThanOrEqual(20);
    const axisLabels = (await chartText(page, 'timeline')).boxes.map((b) => b.name).filter((t) => /\d (ms|s)$/.test(t));
    expect(axisLabels.length).toBeGreaterThan(3);
    for (const t of axisLabels) expect(t).toMatch(/^\d+(\.\d{1,2})? (ms|s)$/);
    await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard-8-ranks.png'), fullPage: true });
  });
});
