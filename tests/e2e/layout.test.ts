// Layout of the run view and the PDF report, in Chromium over a real `shardwise serve`, for real
// 8-rank runs (tests/e2e/fixtures: ddp, pp 1F1B over 8 stages, 3d 2 x 2 x 2) and a failed run.
// Run view at 1400 px: in every chart, no text ECharts drew (titles, subtitles, legends, axis
// names and labels, marker and formula labels) overlaps another or leaves the chart or is cut by
// a clip; the DOM text of the page (header, panels, tables, the failed-run box, the Advisor's
// notes) neither overlaps nor is cut. PDF (A4 landscape, as `shardwise report --format pdf`
// prints it): on every page no word overlaps another or crosses into the margins (poppler's
// pdftotext -bbox-layout reads the words' boxes; the charts print as SVG, so their text is in
// them), and no zoom slider is printed. Screenshots of each view and each PDF page go to
// test-artifacts/ (gitignored).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reportHtml } from '../../src-main/reports/html.js';
import { loadForPrint, PDF_OPTIONS, PRINT_VIEWPORT } from '../../src-main/reports/pdf.js';
import { readRun } from '../../src-main/runs/read-run.js';
import { type Serve, startServe, stopServe } from '../dist/helpers/serve.js';
import { buildRenderer } from './build-renderer.js';
import { CHROMIUM, launchChromium } from './chromium.js';
import { copyRecordedRun, type RecordedRun, writeFailedRun } from './run-fixtures.js';
import { type Box, chartTextProblems, domTextProblems, linesOf, outside, overlapping } from './text-boxes.js';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const ARTIFACTS = path.join(ROOT, 'test-artifacts');
const RUNS: Record<string, RecordedRun> = { 'ddp-8': 'run-ddp-8', 'pp-8': 'run-pp-8', '3d-2x2x2': 'run-3d-2x2x2' };
const FAILED = 'failed-ddp-2';
const havePoppler = spawnSync('pdftotext', ['-v']).status === 0;

type Registry = Record<string, { getOption(): { series: unknown[] } }>;

/** Opens a run and waits until every chart element on the page has drawn its series. */
async function openRun(page: Page, run: string) {
  await page.evaluate((r) => (window.location.hash = `#/run/${r}`), run);
  await page.locator('[data-section="training"] [data-chart-id="loss"]').waitFor({ timeout: 60_000 });
  await page.waitForFunction(
    () => {
      const reg = (window as unknown as { __shardwiseCharts?: Registry }).__shardwiseCharts ?? {};
      const ids = Array.from(document.querySelectorAll('[data-chart-id]')).map((e) => e.getAttribute('data-chart-id')!);
      return ids.length > 0 && ids.every((id) => (reg[id]?.getOption().series.length ?? 0) > 0);
    },
    undefined,
    { timeout: 60_000 },
  );
  // every chart laid out at its final width: a resize lands on the next frames
  await page.evaluate(() => new Promise((r) => setTimeout(r, 500)));
}

/** Text problems of every chart on the page and of the DOM text outside the charts. */
async function viewProblems(page: Page): Promise<string[]> {
  const ids = await page.locator('[data-chart-id]').evaluateAll((els) => els.map((e) => e.getAttribute('data-chart-id')!));
  const out: string[] = [];
  for (const id of ids) out.push(...(await chartTextProblems(page, id)));
  out.push(...(await domTextProblems(page, '.run-view')));
  return out;
}

/** Words of each page of a PDF with their boxes (pt), from pdftotext -bbox-layout. */
function pdfPages(file: string): { width: number; height: number; words: Box[] }[] {
  const r = spawnSync('pdftotext', ['-bbox-layout', file, '-'], { encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.status !== 0) throw new Error(`pdftotext failed: ${r.stderr}`);
  const unescape = (s: string) =>
    s
      .replace(/&lt;/g, '<')
      .replace(/&gt;/g, '>')
      .replace(/&quot;/g, '"')
      .replace(/&apos;/g, "'")
      .replace(/&amp;/g, '&');
  return r.stdout
    .split('<page ')
    .slice(1)
    .map((p) => {
      const [, w, h] = /^width="([\d.]+)" height="([\d.]+)"/.exec(p)!;
      const words = [...p.matchAll(/<word xMin="([\d.-]+)" yMin="([\d.-]+)" xMax="([\d.-]+)" yMax="([\d.-]+)">([^<]*)<\/word>/g)].map(
        ([, x0, y0, x1, y1, t]) => ({ name: unescape(t!), x: +x0!, y: +y0!, width: +x1! - +x0!, height: +y1! - +y0! }),
      );
      // a label with a halo (a white text border) prints twice, stroke and fill: one word
      const unique: Box[] = [];
      for (const b of words)
        if (!unique.some((u) => u.name === b.name && Math.abs(u.x - b.x) < 2 && Math.abs(u.y - b.y) < 2)) unique.push(b);
      return { width: +w!, height: +h!, words: unique };
    });
}

describe.skipIf(!existsSync(CHROMIUM))(
  'layout: the run view (1400 px) and the PDF report of 8-rank runs have no overlapping or cut text',
  () => {
    let dir: string;
    let serve: Serve;
    let browser: Browser;
    let page: Page;

    beforeAll(async () => {
      await buildRenderer();
      mkdirSync(ARTIFACTS, { recursive: true });
      dir = mkdtempSync(path.join(tmpdir(), 'shardwise-layout-'));
      for (const [name, fixture] of Object.entries(RUNS)) copyRecordedRun(fixture, path.join(dir, 'runs', name));
      writeFailedRun(path.join(dir, 'runs', FAILED));
      serve = await startServe(path.join(dir, 'runs'), { SHARDWISE_HOME: path.join(dir, 'home'), SHARDWISE_NO_MDNS: '1' });
      browser = await launchChromium();
      page = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
      await page.goto(serve.url); // the token travels in the first address only
    }, 240_000);
    afterAll(async () => {
      await browser?.close();
      if (serve) await stopServe(serve);
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    for (const run of Object.keys(RUNS)) {
      it(`run view of ${run}: every chart's text and the page's text inside their boxes, none over another`, async () => {
        await openRun(page, run);
        const problems = await viewProblems(page);
        await page.screenshot({ path: path.join(ARTIFACTS, `layout-${run}.png`), fullPage: true });
        for (const section of await page.locator('[data-section]').evaluateAll((els) => els.map((e) => e.getAttribute('data-section')!)))
          await page.locator(`[data-section="${section}"]`).screenshot({ path: path.join(ARTIFACTS, `layout-${run}-${section}.png`) });
        expect(problems.join('\n')).toBe('');
        if (await page.locator('#prediction-memory').count()) {
          // a cell: its two figures on one line, the error under them; never a pair broken over lines
          const lines = await linesOf(page, '#prediction-memory td[data-category]');
          expect(lines.length).toBeGreaterThan(0);
          expect(Math.max(...lines), 'lines in a predicted-vs-measured cell').toBeLessThanOrEqual(2);
          await page.locator('#prediction').screenshot({ path: path.join(ARTIFACTS, `layout-${run}-prediction-panel.png`) });
        }
      }, 120_000);
    }

    it("the failed-run box: the rank named once, every sentence apart; the 2-rank view's full-size charts clear too", async () => {
      await openRun(page, FAILED);
      // the full-size charts of a 2-rank run (the 8-rank views above draw their small multiples)
      const problems = await viewProblems(page);
      await page.screenshot({ path: path.join(ARTIFACTS, 'layout-failed-ddp-2.png'), fullPage: true });
      expect(problems.join('\n')).toBe('');
      const box = page.locator('#run-failed');
      await box.waitFor({ timeout: 30_000 });
      const text = (await box.innerText()).replace(/\s+/g, ' ');
      expect(text).toMatch(/^This run failed: rank 1 exited with code 137 \(killed\) /);
      // each sentence apart from the next and from the links ("then.Back to runs" before)
      expect(text).toMatch(
        /until then\. It cannot be resumed: failed at step 2 before its first checkpoint\. Back to runs · Launch another$/,
      );
      expect(await domTextProblems(page, '#run-failed')).toEqual([]);
    });

    it("the Advisor's notes, one sentence after another", async () => {
      await page.evaluate(() => (window.location.hash = '#/launch'));
      await page.locator('#advisor summary').click();
      await page.locator('#advisor-table tbody tr').first().waitFor({ timeout: 60_000 });
      const source = (await page.locator('#advisor-source').innerText()).replace(/\s+/g, ' ');
      // sentences end with a period and a space, never run into the next ("machine.2 ranks")
      expect(source).not.toMatch(/[a-z)]\.[A-Z0-9]/);
      expect(await domTextProblems(page, '#advisor')).toEqual([]);
      await page.waitForFunction(() => {
        const c = (window as unknown as { __shardwiseCharts?: Registry }).__shardwiseCharts?.['advisor-step-time'];
        return (c?.getOption().series.length ?? 0) > 0;
      });
      expect((await chartTextProblems(page, 'advisor-step-time')).join('\n')).toBe('');
      await page.locator('#advisor').screenshot({ path: path.join(ARTIFACTS, 'layout-advisor.png') });
    }, 90_000);

    describe.skipIf(!havePoppler)('the PDF report (pdftotext -bbox-layout)', () => {
      for (const [run] of Object.entries(RUNS)) {
        it(`PDF of ${run}: on every page no word over another or in the margins; no zoom slider printed`, async () => {
          const html = reportHtml(readRun(path.join(dir, 'runs', run)));
          const print = await browser.newPage({ viewport: PRINT_VIEWPORT });
          try {
            await loadForPrint(print, html);
            const sliders = await print.evaluate(() =>
              Object.entries(
                (window as unknown as { __shardwiseReportCharts: Record<string, { getOption(): any }> }).__shardwiseReportCharts,
              )
                .filter(([, c]) => (c.getOption().dataZoom ?? []).some((z: { type: string }) => z.type === 'slider'))
                .map(([id]) => id),
            );
            expect(sliders, 'charts printing a zoom slider').toEqual([]);
            // the charts as printed (the page's width), each one's text inside it and apart
            const ids = await print.evaluate(() =>
              Object.keys((window as unknown as { __shardwiseReportCharts: object }).__shardwiseReportCharts),
            );
            const chartProblems: string[] = [];
            for (const id of ids) chartProblems.push(...(await chartTextProblems(print, id, '__shardwiseReportCharts')));
            // the page's own text as printed (tables, the summary, the prediction's notes)
            chartProblems.push(...(await domTextProblems(print, 'main')));
            if (await print.locator('#prediction-memory').count()) {
              const lines = await linesOf(print, '#prediction-memory td:nth-child(n+3)');
              expect(Math.max(...lines), 'lines in a predicted-vs-measured cell of the report').toBe(2);
            }
            const file = path.join(dir, `${run}.pdf`);
            writeFileSync(file, await print.pdf(PDF_OPTIONS));
            for (const f of readdirSync(ARTIFACTS)) if (f.startsWith(`layout-${run}-pdf-`)) rmSync(path.join(ARTIFACTS, f));
            spawnSync('pdftoppm', ['-r', '60', '-png', file, path.join(ARTIFACTS, `layout-${run}-pdf`)]);
            const problems: string[] = [];
            const pages = pdfPages(file);
            pages.forEach((p, i) => {
              const margin = (10 / 25.4) * 72; // 10 mm in pt
              const area = { x: margin, y: margin, width: p.width - 2 * margin, height: p.height - 2 * margin };
              problems.push(...overlapping(p.words, 0.5).map((o) => `page ${i + 1}: overlap ${o}`));
              problems.push(...outside(p.words, area, 1).map((o) => `page ${i + 1}: ${o}`));
            });
            expect(pages.length).toBeGreaterThan(1);
            expect([...chartProblems, ...problems].join('\n')).toBe('');
          } finally {
            await print.close();
          }
        }, 120_000);
      }
    });
  },
);
