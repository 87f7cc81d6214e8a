// "Resume in another layout" end to end, in Chromium over a real `shardwise serve` with real rank
// processes: a 2-rank DDP run of the tiny preset is stopped (it checkpoints the step it was in);
// on its page the dialog lists the advisor's layouts for the devices present now and fills its
// fields with the first that fits; a layout the controller refuses says why and outlines the
// field it names; a layout of 1 rank resumes the run, which goes on from the step after its
// checkpoint with 1 rank. Screenshots go to test-artifacts/ (gitignored).
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Serve, startServe, stopServe } from '../dist/helpers/serve.js';
import { buildRenderer } from './build-renderer.js';
import { CHROMIUM, launchChromium } from './chromium.js';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const ARTIFACTS = path.join(ROOT, 'test-artifacts');

describe.skipIf(!existsSync(CHROMIUM))('resume in another layout', () => {
  let dir: string;
  let serve: Serve;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    await buildRenderer();
    mkdirSync(ARTIFACTS, { recursive: true });
    dir = mkdtempSync(path.join(tmpdir(), 'shardwise-relayout-'));
    process.env.SHARDWISE_HOME = path.join(dir, 'home');
    process.env.SHARDWISE_NO_MDNS = '1';
    serve = await startServe(path.join(dir, 'runs'));
    browser = await launchChromium();
    page = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
  }, 240_000);
  afterAll(async () => {
    await browser?.close();
    if (serve) await stopServe(serve);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('a stopped 2-rank run resumes with 1 rank from the dialog; a refused layout outlines its field', async () => {
    const c = await connect(serve);
    const { runId: id } = await c.call('runs.launch', {
      config: { preset: 'tiny', strategy: 'ddp', world: 2, steps: 300, eval_interval: 0, name: 'relayout' },
    });
    await expect
      .poll(async () => (await c.call('runs.get', { runId: id })).state.step, { timeout: 120_000, interval: 200 })
      .toBeGreaterThanOrEqual(2);
    await c.call('runs.stop', { runId: id });
    await expect.poll(async () => (await c.call('runs.get', { runId: id })).state.status, { timeout: 90_000 }).toBe('stopped');
    const stopped = await c.call('runs.get', { runId: id });
    const at = stopped.state.step;
    expect(stopped.checkpoints).toEqual([at]);

    await page.goto(serve.url);
    await page.evaluate((runId) => (window.location.hash = `#/run/${runId}`), id);
    await page.click('#resume-layout-open', { timeout: 60_000 });
    const dialog = page.locator('#resume-layout');
    // the advisor's layouts, the first fitting one in the fields
    await dialog.locator('#resume-layouts tbody tr').first().waitFor({ timeout: 60_000 });
    expect(await dialog.locator('#resume-layouts tbody tr').count()).toBeGreaterThan(1);
    await dialog.locator('select[name=strategy]').waitFor({ timeout: 10_000 });
    const picked = await dialog.locator('#resume-layouts tr.picked td.layout').textContent();
    expect(picked).toMatch(
      new RegExp(
        `^${await dialog.locator('select[name=strategy]').inputValue()} × ${await dialog.locator('input[name=world]').inputValue()}`,
      ),
    );
    await page.screenshot({ path: path.join(ARTIFACTS, 'resume-layout-dialog.png') });

    // refused: 3 micro-batches do not divide the global batch of 8
    await dialog.locator('select[name=strategy]').selectOption('ddp');
    await dialog.locator('input[name=world]').fill('2');
    await dialog.locator('input[name=micro_batches]').fill('3');
    await dialog.locator('#resume-layout-go').click();
    await dialog.locator('#resume-validation').waitFor({ timeout: 30_000 });
    expect(await dialog.locator('#resume-validation').textContent()).toMatch(/micro/);
    expect(await dialog.locator('label.invalid input[name=micro_batches]').count()).toBe(1);
    expect((await c.call('runs.get', { runId: id })).state.status).toBe('stopped'); // a refusal changes nothing
    await page.screenshot({ path: path.join(ARTIFACTS, 'resume-layout-refused.png') });

    // 1 rank: the run goes on from the step after its checkpoint
    await dialog.locator('select[name=strategy]').selectOption('single');
    await dialog.locator('input[name=world]').fill('1');
    await dialog.locator('input[name=micro_batches]').fill('1');
    await dialog.locator('#resume-layout-go').click();
    await dialog.waitFor({ state: 'detached', timeout: 60_000 });
    await expect.poll(() => page.locator('#run-status').textContent(), { timeout: 60_000 }).toMatch(/starting|running/);
    const stepsOnDisk = () =>
      readFileSync(path.join(dir, 'runs', id, 'metrics.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { type: string; step: number; memory?: Record<string, unknown> })
        .filter((m) => m.type === 'step');
    await expect.poll(() => stepsOnDisk().length, { timeout: 120_000, interval: 250 }).toBeGreaterThan(at + 1);
    const logs = (await c.call('runs.logs', { runId: id })).lines.map((l) => l.message);
    expect(logs.filter((l) => l.startsWith('launching')).at(-1)).toMatch(
      new RegExp(`^launching 1 rank \\(single\\) for 300 steps, resuming from step-0*${at}`),
    );
    const resumed = stepsOnDisk().filter((s) => s.step > at);
    expect(resumed[0]!.step).toBe(at + 1);
    expect(Object.keys(resumed[0]!.memory ?? {})).toEqual(['0']); // one rank now
    await page.click('#stop-run');
    await expect.poll(() => page.locator('#run-status').textContent(), { timeout: 90_000 }).toBe('stopped');
    await page.screenshot({ path: path.join(ARTIFACTS, 'resume-layout-resumed.png'), fullPage: true });
    c.close();
  }, 400_000);
});
