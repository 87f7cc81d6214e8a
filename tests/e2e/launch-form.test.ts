// The launch form's training fields and its refusals before Launch, in Chromium over serve: the
// sequence length and the checkpoint interval reach the plan (the controller resolves them as a
// launch would); a sequence longer than the model's positions is refused on its own field; a
// model whose states cannot fit this machine is red before Launch, with the formula's line, on
// SwiftShader, whose device memory is unknown.
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildRenderer } from './build-renderer.js';
import { CHROMIUM, launchChromium } from './chromium.js';
import { type Serve, startServe, stopServe } from '../dist/helpers/serve.js';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const ARTIFACTS = path.join(ROOT, 'test-artifacts');
const shot = (page: Page, name: string) => page.screenshot({ path: path.join(ARTIFACTS, `launch-form-${name}.png`), fullPage: true });
const text = (page: Page, sel: string) =>
  page
    .locator(sel)
    .textContent()
    .catch(() => '');

describe.skipIf(!existsSync(CHROMIUM))('the launch form', () => {
  let dir: string;
  let serve: Serve;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    await buildRenderer();
    dir = mkdtempSync(path.join(tmpdir(), 'shardwise-launch-form-'));
    serve = await startServe(path.join(dir, 'runs'), { SHARDWISE_HOME: path.join(dir, 'home'), SHARDWISE_NO_MDNS: '1' });
    browser = await launchChromium();
    page = await browser.newPage();
    await page.goto(serve.url);
    await page.evaluate(() => (window.location.hash = '#/launch'));
    await page.locator('#plan-summary').waitFor({ timeout: 60_000 });
  });
  afterAll(async () => {
    await browser?.close();
    if (serve) await stopServe(serve);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('takes a sequence length and a checkpoint interval; the plan follows them; a sequence past block_size is refused on its field', async () => {
    // tiny: block_size 64, so 64 tokens unless set
    await expect.poll(() => text(page, '#plan-summary'), { timeout: 30_000 }).toMatch(/batch \d+ × 64 tokens/);
    await page.fill('input[name=seq_len]', '32');
    await page.fill('input[name=checkpoint_interval]', '5');
    await expect.poll(() => text(page, '#plan-summary'), { timeout: 30_000 }).toMatch(/batch \d+ × 32 tokens, a checkpoint every 5 steps/);
    await page.fill('input[name=seq_len]', '100');
    await expect
      .poll(() => text(page, '#launch-validation'), { timeout: 30_000 })
      .toMatch(/seq_len 100 is longer than the model's block_size 64/);
    expect(await page.locator('label:has(input[name=seq_len])').getAttribute('class')).toContain('invalid');
    expect(await page.locator('#launch-button').isDisabled()).toBe(true);
    await shot(page, 'seq-len-refused');
    await page.fill('input[name=seq_len]', '');
    await page.locator('#launch-validation').waitFor({ state: 'detached', timeout: 30_000 });
  });

  it('a model too large for this machine is red before Launch, with the formula', async () => {
    await page.check('input[name=custom-sizes]');
    await page.fill('input[name=n_layer]', '96');
    await page.fill('input[name=d_model]', '12288');
    await page.fill('input[name=n_head]', '96');
    await expect
      .poll(() => text(page, '#launch-validation'), { timeout: 30_000 })
      .toMatch(/model states need [\d.]+ [GT]iB per rank \(16Ψ with Ψ = [\d,]+ parameters .*\) but this machine has [\d.]+ GiB of memory/);
    expect(await page.locator('label:has(select[name=strategy])').getAttribute('class')).toContain('invalid');
    expect(await page.locator('#launch-button').isDisabled()).toBe(true);
    await shot(page, 'too-large');
  });
});
