// Web mode in a real browser: `shardwise serve` serves the built renderer (electron-vite ->
// out/renderer) under its CSP, and the page reaches the controller through the typed API over
// the WebSocket with the token from its URL. Headless Debian Chromium through playwright-core.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type Browser } from 'playwright-core';
import { CHROMIUM, launchChromium } from './chromium.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildRenderer } from './build-renderer.js';
import { type Serve, startServe, stopServe } from '../dist/helpers/serve.js';

describe.skipIf(!existsSync(CHROMIUM))('web mode: the dashboard in Chromium over shardwise serve', () => {
  let dir: string;
  let serve: Serve;
  let browser: Browser;

  beforeAll(async () => {
    await buildRenderer(); // once for all browser test files (they run in parallel)
    dir = mkdtempSync(path.join(tmpdir(), 'shardwise-web-'));
    serve = await startServe(path.join(dir, 'runs'));
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    if (serve) await stopServe(serve);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('with the printed URL the devices panel lists the SwiftShader adapter as software; CSP is not violated', async () => {
    const page = await browser.newPage();
    const violations: string[] = [];
    page.on('console', (m) => /Content Security Policy/i.test(m.text()) && violations.push(m.text()));
    await page.goto(serve.url);
    const row = page.locator('ul.devices li', { hasText: /swiftshader/i });
    await row.waitFor({ timeout: 60_000 });
    expect(await row.locator('.tag').textContent()).toBe('software');
    // the panel polls devices.live every 3 s: here no nvidia-smi, so it says there is no live source
    await expect
      .poll(() => page.locator('#devices-live').textContent(), { timeout: 15_000 })
      .toMatch(/no live utilisation source on this machine|live from nvidia-smi/i);
    expect(violations).toEqual([]);
    await page.close();
  });

  it('without the token the page says how to connect instead of going blank', async () => {
    const page = await browser.newPage();
    await page.goto(serve.url.replace(/#.*/, ''));
    await expect.poll(() => page.locator('#devices-reason').textContent(), { timeout: 30_000 }).toMatch(/no #token=/);
    await page.close();
    // a fresh page: changing only the fragment would not reload the app
    const wrong = await browser.newPage();
    await wrong.goto(serve.url.replace(/token=.*/, 'token=wrong'));
    await expect
      .poll(() => wrong.locator('#devices-title ~ .error').textContent(), { timeout: 30_000 })
      .toMatch(/closed \(4401: wrong token\)/);
    await wrong.close();
  });
});
