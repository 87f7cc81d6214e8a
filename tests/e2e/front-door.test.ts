// `npm start` as a new user meets it, where the Electron binary is missing: the command after
// its build steps (node out/main/launch.js) in an empty folder, in its own process group as a
// terminal would run it, with no display. It must say in one line why it is web mode, print the
// URL, start the demo run (tiny, ddp, world 2) and open the dashboard on it; the live charts
// update in Chromium; the end prints the run's HTML report path. A Ctrl-C (SIGINT to the whole
// group) with a run still live leaves no process behind and the run resumable: a second start
// (no demo: the folder has runs) resumes it. The demo's length comes from SHARDWISE_DEMO_STEPS.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type Browser, type Page } from 'playwright-core';
import { CHROMIUM, launchChromium } from './chromium.js';
import { WebSocket } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type WebSocketCtor, WsApiClient } from '../../src-renderer/src/api/ws-client.js';
import { buildRenderer } from './build-renderer.js';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const LAUNCHER = 'node out/main/launch.js';
/** the run folders of a runs root (serve keeps its token there too, as .serve-token) */
const runFolders = (root: string) => readdirSync(root).filter((n) => !n.startsWith('.'));
const DEMO_STEPS = 12;

interface Started {
  proc: ChildProcess;
  output: () => string;
  url: string;
  port: number;
  token: string;
  exited: Promise<number | null>;
}

/** Every process whose process group is `pgid` (the launcher, serve, the ranks), from /proc. */
function groupMembers(pgid: number): number[] {
  const out: number[] = [];
  for (const n of readdirSync('/proc')) {
    if (!/^\d+$/.test(n)) continue;
    try {
      const stat = readFileSync(`/proc/${n}/stat`, 'utf8');
      const [, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(pgrp) === pgid) out.push(Number(n));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** The launcher in `cwd`, as `npm start` runs it after building; resolves once it printed its URL. */
function start(cwd: string, extraArgs: string[] = [], env: NodeJS.ProcessEnv = {}): Promise<Started> {
  const base = { ...process.env };
  delete base.DISPLAY; // no display: the launcher must not try to open a browser
  delete base.WAYLAND_DISPLAY;
  delete base.SHARDWISE_NO_DEMO;
  const proc = spawn(process.execPath, [path.join(ROOT, 'out/main/launch.js'), '--port', '0', ...extraArgs], {
    cwd,
    detached: true, // its own process group, like a terminal's foreground job
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...base,
      // stands in for a machine without the binary, wherever this test runs
      ELECTRON_OVERRIDE_DIST_PATH: path.join(cwd, 'no-electron-here'),
      SHARDWISE_DEMO_STEPS: String(DEMO_STEPS),
      SHARDWISE_HOME: path.join(cwd, 'home'),
      SHARDWISE_NO_MDNS: '1',
      SHARDWISE_DEBUG: '',
      ...env,
    },
  });
  let out = '';
  proc.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
  proc.stderr!.setEncoding('utf8').on('data', (d: string) => (out += d));
  const exited = new Promise<number | null>((r) => proc.on('exit', (code) => r(code)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no URL printed within 120 s: ${out}`)), 120_000);
    proc.stdout!.on('data', () => {
      const m = /open (http:\/\/127\.0\.0\.1:(\d+)\/#token=([A-Za-z0-9_-]+)\S*)/.exec(out);
      if (!m) return;
      clearTimeout(timer);
      resolve({ proc, output: () => out, url: m[1]!, port: Number(m[2]), token: m[3]!, exited });
    });
    void exited.then((code) => reject(new Error(`the launcher exited with ${code} before printing its URL: ${out}`)));
  });
}

/** Ctrl-C in the terminal: SIGINT to every process of the group. Resolves with the exit code once the group is empty. */
async function ctrlC(s: Started): Promise<number | null> {
  const pgid = s.proc.pid!;
  process.kill(-pgid, 'SIGINT');
  const code = await s.exited;
  const t0 = Date.now();
  while (groupMembers(pgid).length > 0 && Date.now() - t0 < 15_000) await new Promise((r) => setTimeout(r, 100));
  expect(groupMembers(pgid), `processes left after Ctrl-C: ${s.output()}`).toEqual([]);
  return code;
}

const api = (s: Started) => WsApiClient.connect(`ws://127.0.0.1:${s.port}/api`, s.token, WebSocket as unknown as WebSocketCtor);
const stepShown = async (page: Page) => Number(/step (\d+)/.exec((await page.locator('#run-progress').textContent()) ?? '')?.[1] ?? 0);
const chartPoints = (page: Page, id: string) =>
  page.evaluate((chartId) => {
    const c = (window as unknown as { __shardwiseCharts?: Record<string, { getOption(): { series: { data?: unknown[] }[] } }> })
      .__shardwiseCharts?.[chartId];
    return c ? c.getOption().series.reduce((n, s) => n + (s.data?.length ?? 0), 0) : -1;
  }, id);

describe.skipIf(!existsSync(CHROMIUM))('npm start on an empty runs folder, web mode (no Electron binary)', () => {
  let dir: string;
  let browser: Browser;
  const running: Started[] = [];

  beforeAll(async () => {
    await buildRenderer(); // out/renderer and out/main/launch.js, what npm start's electron-vite step builds
    dir = mkdtempSync(path.join(tmpdir(), 'shardwise-start-'));
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    for (const s of running) if (s.proc.exitCode === null && s.proc.signalCode === null) process.kill(-s.proc.pid!, 'SIGKILL');
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it(`npm start builds (the dashboard and the app's main process too, where stale), then runs ${LAUNCHER}`, () => {
    const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(pkg.scripts.start).toBe(`npm run --silent build && ${LAUNCHER}`);
  });

  it('first start: one line on why web mode, the demo (tiny, ddp, world 2) live in Chromium, its report path at the end; Ctrl-C stops a live run resumably and leaves no process', async () => {
    const first = await start(dir);
    running.push(first);
    const lines = first.output().split('\n');
    expect(
      lines.filter((l) => /desktop app/.test(l)),
      first.output(),
    ).toEqual([
      expect.stringMatching(
        /^shardwise: cannot start the desktop app: the Electron binary is not installed at .*; opening web mode in your browser instead/,
      ),
    ]);
    expect(first.output()).toMatch(
      new RegExp(`^shardwise: first start, so a demo run: tiny GPT, ddp on 2 ranks, ${DEMO_STEPS} steps \\(`, 'm'),
    );
    const runs = runFolders(path.join(dir, 'runs'));
    expect(runs).toHaveLength(1);
    const demoId = runs[0]!;
    expect(first.url).toContain(`&view=${encodeURIComponent(`/run/${demoId}`)}`);
    // the URL goes to loopback only, and with no display nothing tried to open a browser
    expect(first.url.startsWith('http://127.0.0.1:')).toBe(true);
    await expect.poll(() => first.output(), { timeout: 10_000 }).toMatch(/no display here .*open the URL above in a browser/);

    // the printed URL opens the demo's run view, whose charts update while it trains
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    await page.goto(first.url);
    await page.waitForFunction((id) => window.location.hash === `#/run/${encodeURIComponent(id)}`, demoId, { timeout: 30_000 });
    await expect.poll(() => stepShown(page), { timeout: 180_000, interval: 250 }).toBeGreaterThanOrEqual(1);
    const seen = await stepShown(page);
    const lossPoints = await chartPoints(page, 'loss');
    await expect.poll(() => stepShown(page), { timeout: 120_000, interval: 250 }).toBeGreaterThan(seen);
    expect(await chartPoints(page, 'loss')).toBeGreaterThan(lossPoints);
    for (const id of ['memory-rank-0', 'memory-rank-1', 'timeline']) expect(await chartPoints(page, id), `chart ${id}`).toBeGreaterThan(0);
    await expect
      .poll(() => page.locator('#bytes-moved').textContent(), { timeout: 60_000 })
      .toMatch(/^Bytes moved per step: rank 0: .* · rank 1: /);

    // the terminal: progress lines, then the report path when the demo completes
    const reportLine = new RegExp(`^shardwise: the demo run completed; its report: (.*${demoId}/report\\.html)$`, 'm');
    await expect.poll(() => first.output(), { timeout: 300_000, interval: 500 }).toMatch(reportLine);
    expect(first.output()).toMatch(new RegExp(`^step ${DEMO_STEPS}/${DEMO_STEPS} \\[#+\\] loss \\d`, 'm'));
    const report = reportLine.exec(first.output())![1]!;
    expect(readFileSync(report, 'utf8')).toMatch(/^<!doctype html>/i);
    await expect.poll(() => page.locator('#run-status').textContent(), { timeout: 30_000 }).toBe('completed');
    await page.close();

    // a run still live at Ctrl-C: launched as the dashboard would, stopped once it has steps
    const c = await api(first);
    const { runId } = await c.call('runs.launch', {
      config: { preset: 'tiny', strategy: 'ddp', world: 2, steps: 400, checkpoint_interval: 1, eval_interval: 0, name: 'live-at-ctrl-c' },
    });
    await expect
      .poll(async () => (await c.call('runs.get', { runId })).state.step, { timeout: 180_000, interval: 500 })
      .toBeGreaterThanOrEqual(2);
    const rankPids = (await c.call('runs.get', { runId })).live?.pids ?? [];
    expect(rankPids).toHaveLength(2);
    c.close();
    expect(await ctrlC(first), first.output()).toBe(0);
    for (const pid of rankPids) expect(existsSync(`/proc/${pid}`), `rank process ${pid}`).toBe(false);
    const state = JSON.parse(readFileSync(path.join(dir, 'runs', runId, 'state.json'), 'utf8')) as { status: string; step: number };
    expect(state.status).toBe('stopped');
    expect(state.step).toBeGreaterThanOrEqual(2);

    // the next start: the folder has runs, so no demo; the stopped run resumes from its checkpoint
    const second = await start(dir);
    running.push(second);
    expect(second.output()).not.toMatch(/demo run/);
    expect(second.url).not.toContain('view=');
    expect(runFolders(path.join(dir, 'runs')).sort()).toEqual([demoId, runId].sort());
    const c2 = await api(second);
    const resumed = await c2.call('runs.resume', { runId });
    expect(resumed.fromStep).toBeGreaterThanOrEqual(1);
    await expect
      .poll(async () => (await c2.call('runs.get', { runId })).state.step, { timeout: 180_000, interval: 500 })
      .toBeGreaterThan(resumed.fromStep);
    c2.close();
    expect(await ctrlC(second), second.output()).toBe(0);
    expect((JSON.parse(readFileSync(path.join(dir, 'runs', runId, 'state.json'), 'utf8')) as { status: string }).status).toBe('stopped');
  }, 900_000);

  it('--no-demo and SHARDWISE_NO_DEMO=1 start no demo on an empty runs folder', async () => {
    for (const [args, env] of [
      [['--no-demo'], {}],
      [[], { SHARDWISE_NO_DEMO: '1' }],
    ] as const) {
      const empty = mkdtempSync(path.join(dir, 'empty-'));
      const s = await start(empty, [...args], env);
      running.push(s);
      expect(s.output()).not.toMatch(/demo run/);
      expect(s.url).not.toContain('view=');
      expect(existsSync(path.join(empty, 'runs')) ? runFolders(path.join(empty, 'runs')) : []).toEqual([]);
      expect(await ctrlC(s)).toBe(0);
    }
  }, 240_000);
});
