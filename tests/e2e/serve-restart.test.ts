// `shardwise serve` restarted under an open tab. The token is kept beside the runs, so the tab
// reconnects by itself with no manual step, and says what happened to the run that was live in
// it: the killed controller's ranks died with it, and the new controller found the run
// interrupted (its state.json says so), never "runs keep going". A rotated token stops the
// retries and asks for the new URL; pasting it reconnects.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildRenderer } from './build-renderer.js';
import { CHROMIUM, launchChromium } from './chromium.js';
import { connect, type Serve, startServe, stopServe } from '../dist/helpers/serve.js';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const ARTIFACTS = path.join(ROOT, 'test-artifacts');
const shot = (page: Page, name: string) => page.screenshot({ path: path.join(ARTIFACTS, `serve-restart-${name}.png`), fullPage: true });

function freePort(): Promise<number> {
  const s = createServer();
  return new Promise((resolve) =>
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    }),
  );
}

describe.skipIf(!existsSync(CHROMIUM))('a tab open while shardwise serve restarts', () => {
  let dir: string;
  let runs: string;
  let port: number;
  let serve: Serve;
  let browser: Browser;

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    await buildRenderer();
    dir = mkdtempSync(path.join(tmpdir(), 'shardwise-restart-'));
    runs = path.join(dir, 'runs');
    port = await freePort();
    serve = await startServe(runs, {}, { port });
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    if (serve) await stopServe(serve);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('reconnects by itself after a kill -9 and a restart, and says the live run was interrupted', async () => {
    const c = await connect(serve);
    const { runId } = await c.call('runs.launch', {
      config: { preset: 'tiny', strategy: 'ddp', world: 2, steps: 300, eval_interval: 0, name: 'cut-short' },
    });
    c.close();
    const page = await browser.newPage();
    await page.goto(serve.url);
    await page.evaluate((id) => (window.location.hash = `#/run/${id}`), runId);
    await expect.poll(() => page.locator('#run-status').textContent(), { timeout: 120_000 }).toBe('running');

    await stopServe(serve, 'SIGKILL');
    await expect
      .poll(
        () =>
          page
            .locator('#connection-lost')
            .textContent()
            .catch(() => ''),
        { timeout: 30_000 },
      )
      .toMatch(/Lost the connection/);
    const lost = (await page.locator('#connection-lost').textContent()) ?? '';
    expect(lost).toMatch(/Reconnecting by itself/);
    expect(lost).toMatch(/If the controller stopped, the runs it drove stopped with it/);
    expect(lost).not.toMatch(/runs keep going on the controller/);
    await shot(page, 'lost');

    // the same address and runs folder, the token from <runs>/.serve-token
    serve = await startServe(runs, {}, { port });
    expect(serve.token).toBe(readFileSync(path.join(runs, '.serve-token'), 'utf8').trim());
    await expect
      .poll(
        () =>
          page
            .locator('#connection-notice')
            .textContent()
            .catch(() => ''),
        { timeout: 30_000 },
      )
      .toMatch(/restarted/);
    expect(await page.locator('#connection-lost').count()).toBe(0);
    const notice = (await page.locator('#connection-notice').textContent()) ?? '';
    expect(notice).toMatch(
      new RegExp(
        `The controller restarted, and runs do not outlive it\\. The run that was live: ${runId}: interrupted at step \\d+ of 300`,
      ),
    );
    // the run view reloaded on its own and shows the folder's truth
    await expect.poll(() => page.locator('#run-status').textContent(), { timeout: 30_000 }).toBe('interrupted');
    const state = JSON.parse(readFileSync(path.join(runs, runId, 'state.json'), 'utf8')) as { status: string };
    expect(state.status).toBe('interrupted');
    await shot(page, 'reconnected');
    await page.close();
  }, 300_000);

  it('after --rotate-token the tab says its token was replaced; pasting the new URL reconnects', async () => {
    const page = await browser.newPage();
    await page.goto(serve.url);
    await page.evaluate(() => (window.location.hash = '#/runs'));
    await page.locator('#runs-table, #runs-empty').first().waitFor({ timeout: 30_000 });
    const old = serve.token;
    await stopServe(serve);
    serve = await startServe(runs, {}, { port, args: ['--rotate-token'] });
    expect(serve.token).not.toBe(old);
    await expect
      .poll(
        () =>
          page
            .locator('#connection-lost')
            .textContent()
            .catch(() => ''),
        { timeout: 30_000 },
      )
      .toMatch(/refused this tab's token .*shardwise serve --rotate-token/);
    await shot(page, 'token-rotated');
    await page.fill('#new-url', serve.url);
    await page.click('#use-new-url');
    await expect.poll(() => page.locator('#connection-lost').count(), { timeout: 30_000 }).toBe(0);
    await page.locator('#runs-table, #runs-empty').first().waitFor({ timeout: 30_000 });
    await page.close();
  }, 120_000);
});
