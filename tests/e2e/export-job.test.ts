// "Export as PyTorch job…" end to end, in Chromium over a real `shardwise serve` with real rank
// processes: a completed 20-step ddp 2 run of tiny (checkpoints at steps 10 and 20) is exported
// from its page: a layout that does not divide the batch outlines its field, the run's own layout
// writes the job into the runs folder's exports/, and the dialog shows the folder, the command and
// what does not map; the run's Advisor panel opens the same dialog with a picked row's layout.
// Then the job's `bash launch.sh` (PyTorch: skipped only where no Python has torch) writes its run
// folder beside the original: the runs list shows it, and Compare overlays both runs' losses on
// one chart, agreeing on steps 11-20 within 1e-4 relative. Screenshots go to test-artifacts/.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Serve, startServe, stopServe } from '../dist/helpers/serve.js';
import { NO_TORCH, torchPython } from '../dist/helpers/torch-export.js';
import { buildRenderer } from './build-renderer.js';
import { CHROMIUM, launchChromium } from './chromium.js';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const ARTIFACTS = path.join(ROOT, 'test-artifacts');
const torch = torchPython();
if (!torch) console.warn(`export-job: running the exported job skipped: ${NO_TORCH}`);

type Opt = { series: { name?: string; data?: [number, number][] }[]; yAxis: unknown[] };
function chartOption(page: Page, id: string): Promise<Opt | null> {
  return page.evaluate((chartId) => {
    const c = (window as unknown as { __shardwiseCharts?: Record<string, { getOption(): unknown }> }).__shardwiseCharts?.[chartId];
    return c ? (JSON.parse(JSON.stringify(c.getOption(), (_k, v) => (typeof v === 'function' ? undefined : v))) as never) : null;
  }, id);
}

describe.skipIf(!existsSync(CHROMIUM))('export a run as a PyTorch job from the dashboard', () => {
  let dir: string;
  let runs: string;
  let serve: Serve;
  let browser: Browser;
  let page: Page;
  let command = '';

  beforeAll(async () => {
    await buildRenderer();
    mkdirSync(ARTIFACTS, { recursive: true });
    dir = mkdtempSync(path.join(tmpdir(), 'shardwise-export-job-'));
    runs = path.join(dir, 'runs');
    process.env.SHARDWISE_HOME = path.join(dir, 'home');
    process.env.SHARDWISE_NO_MDNS = '1';
    serve = await startServe(runs);
    browser = await launchChromium();
    page = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
    const c = await connect(serve);
    await c.call('runs.launch', {
      config: { preset: 'tiny', strategy: 'ddp', world: 2, steps: 20, checkpoint_interval: 10, eval_interval: 0, seed: 3, name: 'ddp2' },
    });
    // (expect.poll belongs to tests, not hooks)
    for (const t0 = Date.now(); (await c.call('runs.get', { runId: 'ddp2' })).state.status !== 'completed';) {
      if (Date.now() - t0 > 240_000) throw new Error('the ddp 2 run did not complete in 240 s');
      await new Promise((r) => setTimeout(r, 500));
    }
    expect((await c.call('runs.get', { runId: 'ddp2' })).checkpoints).toEqual([10, 20]);
    c.close();
  }, 360_000);
  afterAll(async () => {
    await browser?.close();
    if (serve) await stopServe(serve);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('the run page writes the job into exports/: a refused layout outlines its field; the dialog shows folder, command and what does not map', async () => {
    await page.goto(serve.url);
    await page.evaluate(() => (window.location.hash = '#/run/ddp2'));
    await page.click('#export-job-open', { timeout: 60_000 });
    const dialog = page.locator('#export-job');
    expect(await dialog.locator('select[name=checkpoint]').inputValue()).toBe('10'); // step 20 leaves nothing to train
    expect(await dialog.locator('select[name=strategy]').inputValue()).toBe('ddp');
    expect(await dialog.locator('input[name=world]').inputValue()).toBe('2');

    // refused: 2 ranks x 3 micro-batches do not divide the batch of 8; nothing is written
    await dialog.locator('input[name=micro_batches]').fill('3');
    await dialog.locator('#export-job-go').click();
    await dialog.locator('#export-job-validation').waitFor({ timeout: 30_000 });
    expect(await dialog.locator('#export-job-validation').textContent()).toMatch(
      /batch size 8 is not divisible by world 2 x micro-batches 3/,
    );
    expect(await dialog.locator('label.invalid input[name=micro_batches]').count()).toBe(1);
    expect(existsSync(path.join(runs, 'exports'))).toBe(false);

    await dialog.locator('input[name=micro_batches]').fill('1');
    await dialog.locator('#export-job-go').click();
    await dialog.locator('#export-job-command').waitFor({ timeout: 60_000 });
    const job = path.join(runs, 'exports', 'ddp2-pytorch-1');
    expect(await dialog.locator('#export-job-dir').textContent()).toBe(job);
    command = (await dialog.locator('#export-job-command').textContent())!;
    expect(command).toBe(`bash ${job}/launch.sh`);
    for (const f of ['train.py', 'launch.sh', 'job.json', 'start/model.safetensors', 'start/optimizer.safetensors', 'README.md'])
      expect(existsSync(path.join(job, f)), f).toBe(true);
    const unmapped = await dialog.locator('#export-job-unmapped li').allTextContents();
    expect(unmapped.some((u) => /^first_bucket_mb 0\.0625: DistributedDataParallel sizes its first bucket itself/.test(u))).toBe(true);
    expect(unmapped.some((u) => /^Telemetry: PyTorch reports memory by tensor/.test(u))).toBe(true);
    await page.screenshot({ path: path.join(ARTIFACTS, 'export-job-dialog.png') });
    await dialog.locator('#export-job-close').click();
    await dialog.waitFor({ state: 'detached', timeout: 10_000 });

    // the run's Advisor panel: a picked row opens the dialog with its layout
    await page.click('#advisor summary');
    const row = page.locator('#advisor-table tbody tr:not(.over)').first();
    await row.waitFor({ timeout: 60_000 });
    const label = (await row.locator('td.layout').textContent())!;
    await row.click();
    await page.click('#advisor-export');
    expect(label).toMatch(
      new RegExp(
        `^${await dialog.locator('select[name=strategy]').inputValue()}\\b.*${await dialog.locator('input[name=world]').inputValue()}`,
      ),
    );
    await dialog.locator('button', { hasText: 'Cancel' }).click();
  }, 180_000);

  it.skipIf(!torch)(
    "the job's run appears in the runs list, and Compare overlays its steps 11-20 on the original's within 1e-4 relative",
    async () => {
      expect(command).not.toBe('');
      const r = spawnSync('bash', ['-c', command], {
        encoding: 'utf8',
        timeout: 300_000,
        env: { ...process.env, SHARDWISE_PYTHON: torch!.python },
      });
      expect(r.status, `${r.stdout}\n${r.stderr}`).toBe(0);
      expect(existsSync(path.join(runs, 'ddp2-pytorch-1', 'summary.json'))).toBe(true);

      await page.evaluate(() => (window.location.hash = '#/runs'));
      const row = page.locator('#runs-table tr[data-run-id="ddp2-pytorch-1"]');
      await row.waitFor({ timeout: 30_000 });
      expect(await row.textContent()).toMatch(/completed/);

      await page.evaluate(() => (window.location.hash = '#/compare/ddp2/ddp2-pytorch-1'));
      await expect
        .poll(async () => (await chartOption(page, 'overlay-loss'))?.series.map((s) => `${s.name}:${s.data?.length}`), { timeout: 60_000 })
        .toEqual(['ddp2:20', 'ddp2-pytorch-1:10']);
      const loss = (await chartOption(page, 'overlay-loss'))!;
      expect(loss.yAxis).toHaveLength(1);
      const shardwise = new Map(loss.series[0]!.data!.map(([s, l]) => [s, l]));
      const pytorch = loss.series[1]!.data!;
      expect(pytorch.map(([s]) => s)).toEqual([11, 12, 13, 14, 15, 16, 17, 18, 19, 20]);
      const worst = Math.max(...pytorch.map(([s, l]) => Math.abs(l - shardwise.get(s)!) / Math.abs(shardwise.get(s)!)));
      console.log(
        `export-job: PyTorch ${torch!.torch}, steps 11-20, largest relative loss difference on the chart ${worst.toExponential(2)}`,
      );
      expect(worst).toBeLessThan(1e-4);
      await page.locator('#compare-overlay').screenshot({ path: path.join(ARTIFACTS, 'export-job-compare.png') });
    },
    420_000,
  );
});
