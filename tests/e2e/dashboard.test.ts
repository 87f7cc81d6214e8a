// The dashboard end to end: a real `shardwise serve` (controller, real rank processes on
// SwiftShader WebGPU) and Debian Chromium through playwright-core. Clicks through the launch
// form to start a 2-rank DDP run of the tiny preset, watches it live (loss points, memory per
// rank by category, communication spans overlapping backward on the timeline), exports the
// four report formats through the UI and checks each file, opens a past pipeline run and a
// failed one, compares and deletes, and checks the messages for an unknown run and a lost
// controller. Screenshots of each view go to test-artifacts/ (gitignored). Every wait is on a
// condition, never a fixed sleep.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type Browser, type BrowserContext, type Page } from 'playwright-core';
import { CHROMIUM, launchChromium } from './chromium.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildRenderer } from './build-renderer.js';
import { type AgentProcess, startAgent } from '../dist/agent-helpers.js';
import { connect, type Serve, startServe, stopServe } from '../dist/helpers/serve.js';
import { writeFailedRun, writePipelineRun } from './run-fixtures.js';
import { shmSupported } from '../../workers/comm/index.js';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const ARTIFACTS = path.join(ROOT, 'test-artifacts');

type ChartSeries = { name?: string; type?: string; data?: unknown[] };
/** getOption() of the chart with this id (EChart.vue lists every instance on window.__shardwiseCharts) */
function chartOption(
  page: Page,
  id: string,
): Promise<{ series: ChartSeries[]; title: { text?: string; subtext?: string }[]; yAxis: { data?: string[] }[] } | null> {
  return page.evaluate((chartId) => {
    const c = (window as unknown as { __shardwiseCharts?: Record<string, { getOption(): unknown }> }).__shardwiseCharts?.[chartId];
    return c ? (JSON.parse(JSON.stringify(c.getOption(), (_k, v) => (typeof v === 'function' ? undefined : v))) as never) : null;
  }, id);
}

const shot = (page: Page, name: string) => page.screenshot({ path: path.join(ARTIFACTS, `dashboard-${name}.png`), fullPage: true });

describe.skipIf(!existsSync(CHROMIUM))('dashboard in Chromium over shardwise serve', () => {
  let dir: string;
  let serve: Serve;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let runId = '';
  let agent: AgentProcess | undefined;
  const cspViolations: string[] = [];

  beforeAll(async () => {
    await buildRenderer(); // once for all browser test files (they run in parallel)
    mkdirSync(ARTIFACTS, { recursive: true });
    dir = mkdtempSync(path.join(tmpdir(), 'shardwise-dash-'));
    writePipelineRun(path.join(dir, 'runs', 'pp-fixture'));
    writeFailedRun(path.join(dir, 'runs', 'failed-fixture'));
    // the controller's pairing keys in a scratch home; no mDNS on the test machine
    process.env.SHARDWISE_HOME = path.join(dir, 'home');
    process.env.SHARDWISE_NO_MDNS = '1';
    serve = await startServe(path.join(dir, 'runs'));
    browser = await launchChromium();
    context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1400, height: 900 } });
    page = await context.newPage();
    page.on('console', (m) => /Content Security Policy/i.test(m.text()) && cspViolations.push(m.text()));
  }, 180_000);
  afterAll(async () => {
    await browser?.close();
    await agent?.stop();
    if (serve) await stopServe(serve);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("cluster view: this machine's SwiftShader adapter marked software; adding a peer by address lists it as not paired; a wrong pairing says why", async () => {
    await page.goto(serve.url);
    await page.locator('#adapters li', { hasText: /swiftshader/i }).waitFor({ timeout: 60_000 });
    expect(await page.locator('#adapters li .tag').first().textContent()).toBe('software');
    expect(await page.evaluate(() => window.location.hash)).toBe('#/cluster'); // the token left the address bar
    await page.fill('#add-peer input[name=address]', '127.0.0.1:9');
    await page.click('#add-peer button');
    const peer = page.locator('#peers-list li[data-address="127.0.0.1:9"]');
    await peer.waitFor({ timeout: 30_000 });
    expect(await peer.locator('.tag').textContent()).toBe('not paired');
    await page.fill('#pair-peer input[name=code]', 'ABCDE-FGHJK');
    await page.click('#pair-peer button');
    await expect
      .poll(
        () =>
          page
            .locator('#peers-error')
            .textContent()
            .catch(() => ''),
        { timeout: 30_000 },
      )
      .toMatch(/cannot reach agent at 127\.0\.0\.1:9/);
    await shot(page, 'cluster');
  });

  it('pairing a real agent on loopback with the code it printed shows it paired, with its machine and its software adapter', async () => {
    agent = await startAgent(['--port', '0', '--mdns', 'off', '--name', 'bench-b']);
    const address = `127.0.0.1:${agent.port}`;
    await agent.waitFor(/pairing code: [0-9A-Z]{5}-[0-9A-Z]{5}/);
    await page.fill('#pair-peer input[name=pair-address]', address);
    await page.fill('#pair-peer input[name=code]', agent.codes.at(-1)!);
    await page.click('#pair-peer button');
    await expect
      .poll(
        () =>
          page
            .locator('#peers-note')
            .textContent()
            .catch(() => ''),
        { timeout: 60_000 },
      )
      .toBe('paired with bench-b');
    const peer = page.locator(`#peers-list li[data-address="${address}"]`);
    await expect.poll(() => peer.locator('.tag').first().textContent(), { timeout: 30_000 }).toBe('paired');
    const adapter = peer.locator('.peer-adapters li', { hasText: /swiftshader/i });
    await adapter.waitFor({ timeout: 90_000 });
    expect(await adapter.locator('.tag').textContent()).toBe('software');
    expect(await peer.locator('.peer-detail').textContent()).toMatch(/\d+ CPUs · [\d.]+ GiB · clock offset -?[\d.]+ ms/);
    await shot(page, 'cluster-paired');
  }, 150_000);

  it('launch form: a batch that does not split over the ranks is named inline; then a 2-rank DDP tiny run launches in one click with 2 predicted ranks', async () => {
    await page.click('nav a[href="#/launch"]');
    await page.locator('#launch-prediction').waitFor({ timeout: 30_000 });
    await page.selectOption('select[name=strategy]', 'ddp');
    await page.fill('input[name=world]', '2');
    await page.fill('input[name=micro_batches]', '3');
    await expect
      .poll(
        () =>
          page
            .locator('#launch-validation')
            .textContent()
            .catch(() => ''),
        { timeout: 30_000 },
      )
      .toMatch(/batch size 8 is not divisible by world 2 x micro-batches 3/);
    expect(await page.locator('label:has(input[name=micro_batches])').getAttribute('class')).toContain('invalid');
    expect(await page.locator('#launch-button').isDisabled()).toBe(true);
    await page.fill('input[name=micro_batches]', '1');
    await page.fill('input[name=steps]', '6');
    await page.locator('#launch-validation').waitFor({ state: 'detached', timeout: 30_000 });
    // gradient compression: PowerSGD (rank and start shown) is ddp's; on zero1 the resolver refuses it and the select is highlighted
    await page.selectOption('select[name=grad_compression]', 'powersgd');
    await page.locator('input[name=powersgd_rank]').waitFor({ timeout: 10_000 });
    await page.selectOption('select[name=strategy]', 'zero1');
    await expect
      .poll(
        () =>
          page
            .locator('#launch-validation')
            .textContent()
            .catch(() => ''),
        { timeout: 30_000 },
      )
      .toMatch(/grad_compression powersgd does not apply to strategy zero1: .*use fp16 or bf16 with zero1, or strategy ddp for PowerSGD/);
    expect(await page.locator('label:has(select[name=grad_compression])').getAttribute('class')).toContain('invalid');
    expect(await page.locator('#launch-button').isDisabled()).toBe(true);
    await page.selectOption('select[name=grad_compression]', 'fp16');
    await page.locator('#launch-validation').waitFor({ state: 'detached', timeout: 30_000 });
    await page.selectOption('select[name=strategy]', 'ddp');
    await page.selectOption('select[name=grad_compression]', 'none');
    await expect.poll(() => page.locator('#launch-prediction tbody tr').count(), { timeout: 30_000 }).toBe(2);
    // DDP: every rank holds params + grads + 2 moments = 16 bytes per parameter
    expect(await page.locator('#launch-prediction tbody tr[data-rank="1"] .total').textContent()).toMatch(/KiB|MiB/);
    await shot(page, 'launch');
    await page.click('#launch-button');
    await page.waitForFunction(() => window.location.hash.startsWith('#/run/'), undefined, { timeout: 30_000 });
    runId = decodeURIComponent((await page.evaluate(() => window.location.hash)).slice('#/run/'.length));
    expect(runId).toMatch(/tiny-ddp/);
  });

  it('live run view: loss points arrive, memory per rank is stacked by category, communication overlaps backward on the timeline; the run completes', async () => {
    await expect
      .poll(async () => (await chartOption(page, 'loss'))?.series[0]?.data?.length ?? 0, { timeout: 150_000, interval: 250 })
      .toBeGreaterThanOrEqual(2);
    for (const rank of [0, 1]) {
      const mem = await chartOption(page, `memory-rank-${rank}`);
      expect(mem, `memory chart of rank ${rank}`).not.toBeNull();
      const names = mem!.series.map((s) => s.name);
      expect(names).toEqual(expect.arrayContaining(['params', 'grads', 'optimizer', 'activations', 'comm', 'workspace', 'total']));
      const params = mem!.series.find((s) => s.name === 'params')!.data as [number, number][];
      expect(params.at(-1)![1]).toBeGreaterThan(0);
    }
    await shot(page, 'run-live');
    await expect.poll(() => page.locator('#run-status').textContent(), { timeout: 150_000, interval: 500 }).toBe('completed');
    // the timeline: lanes rank r compute (2r) and comm (2r+1); some all-reduce runs while the same rank's backward does
    // (polled: a chart out of view catches up within seconds)
    type V = { value: [number, number, number, number, number] };
    const overlaps = async () => {
      const o = await chartOption(page, 'timeline');
      if (!o || !o.series.some((s) => s.name === 'backward')) return -1;
      const backward = (o.series.find((s) => s.name === 'backward')!.data as V[]).map((d) => d.value);
      const comm = o.series
        .filter((s) => !['forward', 'backward', 'optimizer'].includes(s.name!))
        .flatMap((s) => (s.data as V[]).map((d) => d.value));
      return comm.filter(([lane, a, b, step]) => backward.some(([l, c, d, st]) => l === lane - 1 && st === step && c < b && a < d)).length;
    };
    await expect
      .poll(overlaps, { timeout: 30_000, message: 'comm spans overlapping a backward span of the same rank and step' })
      .toBeGreaterThan(0);
    const tl = await chartOption(page, 'timeline');
    expect(tl!.yAxis[0]!.data).toEqual(['rank 0 compute', 'rank 0 comm', 'rank 1 compute', 'rank 1 comm']);
    expect(tl!.title[0]!.subtext).toMatch(/overlap: \d+(\.\d)?% of gradient communication hidden under backward/);
    // two ranks of this machine: their gradients went through the shared-memory rings (where
    // the machine has them; else none did)
    const share = shmSupported() ? '(9\\d|100)' : '0';
    expect(await page.locator('#bytes-moved').textContent()).toMatch(
      new RegExp(
        `^Bytes moved per step: rank 0: [\\d.]+ KiB \\(${share}% via shared memory\\) · rank 1: [\\d.]+ KiB \\(${share}% via shared memory\\)$`,
      ),
    );
    await shot(page, 'run-completed');
  }, 320_000);

  it('exports HTML, PDF, trace JSON and CSV through the UI; each file holds the run', async () => {
    const files: Record<string, string> = {};
    for (const f of ['html', 'pdf', 'trace', 'csv']) {
      const [download] = await Promise.all([page.waitForEvent('download', { timeout: 120_000 }), page.click(`#export-${f}`)]);
      const saved = path.join(dir, `export.${f}`);
      await download.saveAs(saved);
      expect(download.suggestedFilename()).toBe(
        `${runId}-${{ html: 'report.html', pdf: 'report.pdf', trace: 'trace.json', csv: 'metrics.csv' }[f]}`,
      );
      files[f] = saved;
    }
    expect(readFileSync(files.pdf!).subarray(0, 5).toString('latin1')).toBe('%PDF-');
    const trace = JSON.parse(readFileSync(files.trace!, 'utf8')) as {
      traceEvents: { ph: string; pid: number; name: string; args?: { name?: string } }[];
    };
    const pids = new Set(trace.traceEvents.filter((e) => e.ph === 'X').map((e) => e.pid));
    expect([...pids].sort()).toEqual([1, 2]);
    expect(
      trace.traceEvents
        .filter((e) => e.name === 'process_name')
        .map((e) => e.args?.name)
        .sort(),
    ).toEqual(['rank 0', 'rank 1']);
    const csv = readFileSync(files.csv!, 'utf8').trim().split('\n');
    expect(csv[0]).toMatch(/^step,/);
    expect(csv.length - 1, 'one CSV row per step').toBe(6);
    // the HTML report opens offline (every request refused) and draws its charts
    const offline = await browser.newContext({ offline: true });
    const rp = await offline.newPage();
    await rp.route('**/*', (r) => (r.request().url().startsWith('file:') ? r.continue() : r.abort()));
    await rp.goto(`file://${files.html}`);
    await rp.waitForFunction(() => document.documentElement.hasAttribute('data-charts-ready'), undefined, { timeout: 60_000 });
    expect(Number(await rp.evaluate(() => document.documentElement.getAttribute('data-charts-ready')))).toBeGreaterThanOrEqual(7);
    expect(await rp.locator('canvas').count()).toBeGreaterThanOrEqual(7);
    await rp.screenshot({ path: path.join(ARTIFACTS, 'dashboard-report-html.png'), fullPage: true });
    await offline.close();
  }, 240_000);

  it('a past pipeline run shows the pipeline chart with its measured bubble beside (p-1)/(m+p-1)', async () => {
    await page.goto(`${serve.url.replace(/#.*/, '')}#/run/pp-fixture`);
    await expect
      .poll(async () => (await chartOption(page, 'pipeline'))?.title[0]?.text ?? '', { timeout: 30_000 })
      .toBe('Pipeline: 2 stages x 4 micro-batches');
    const pp = (await chartOption(page, 'pipeline'))!;
    expect(pp.title[0]!.subtext).toMatch(/theory \(p-1\)\/\(m\+p-1\) = 1\/5 = 20\.0%/);
    expect(pp.title[0]!.subtext).toMatch(/bubble measured: stage 0 \d+\.\d% · stage 1 \d+\.\d%/);
    expect(pp.series.find((s) => s.name === 'forward')!.data!.length).toBe(2 * 4 * 3);
    expect(pp.series.find((s) => s.name === 'bubble (idle)')!.data!.length).toBeGreaterThan(0);
    await shot(page, 'run-pipeline');
  });

  it('launch form: a GPipe pipeline (pp 2, 4 micro-batches) launched by clicking shows its live pipeline chart, measured bubble beside (p-1)/(m+p-1) = 20%', async () => {
    await page.goto(`${serve.url.replace(/#.*/, '')}#/launch`);
    await page.locator('#launch-prediction').waitFor({ timeout: 30_000 });
    await page.selectOption('select[name=strategy]', 'pp');
    // only the pipeline's knobs: stages and schedule, no world, no tensor-parallel ranks
    await page.locator('input[name=pp]').waitFor({ timeout: 10_000 });
    expect(await page.locator('input[name=world]').count()).toBe(0);
    expect(await page.locator('input[name=tp]').count()).toBe(0);
    expect(await page.locator('select[name=grad_compression]').count()).toBe(0);
    await page.fill('input[name=pp]', '2');
    await page.selectOption('select[name=schedule]', 'gpipe');
    await page.fill('input[name=micro_batches]', '4');
    await page.fill('input[name=steps]', '4');
    await page.selectOption('select[name=preset]', 'tiny');
    expect(await page.locator('#theory-bubble').textContent()).toMatch(/\(p-1\)\/\(m\+p-1\) = 0\.200/);
    // one placement row per stage, every rank here by default; the paired agent is a machine to choose
    await expect.poll(() => page.locator('#launch-ranks tbody tr').count(), { timeout: 30_000 }).toBe(2);
    expect(await page.locator('#launch-ranks tr[data-rank="1"] .role').textContent()).toBe('stage 1 of 2');
    expect(await page.locator('select[name=machine-1]').inputValue()).toBe('local');
    expect(await page.locator('select[name=machine-1] option').allTextContents()).toEqual(
      expect.arrayContaining([expect.stringMatching(/bench-b \(127\.0\.0\.1:\d+\)/)]),
    );
    // the plan answers this form (pp × 2, GPipe, 4 micro-batches, 4 steps)
    await expect
      .poll(
        () =>
          page
            .locator('#plan-summary')
            .textContent()
            .catch(() => ''),
        { timeout: 30_000 },
      )
      .toMatch(/pp × 2 \(D 1 × T 1 × P 2, gpipe, 4 micro-batches\).*4 steps/s);
    expect(await page.locator('#launch-validation').count()).toBe(0);
    // each stage holds its own blocks, the first also wpe, the last ln_f: two different predictions, both in bytes
    await expect
      .poll(
        () =>
          page
            .locator('#launch-ranks tr[data-rank="1"] .total')
            .textContent()
            .catch(() => ''),
        { timeout: 30_000 },
      )
      .toMatch(/KiB|MiB/);
    const stageParams = await page.locator('#launch-ranks tbody tr td:nth-child(5)').allTextContents();
    expect(stageParams).toHaveLength(2);
    expect(stageParams[0], 'stage 0 (embeddings) and stage 1 (head) hold different bytes').not.toBe(stageParams[1]);
    await shot(page, 'launch-pipeline');
    await page.click('#launch-button');
    await page.waitForFunction(() => window.location.hash.startsWith('#/run/'), undefined, { timeout: 30_000 });
    const ppRun = decodeURIComponent((await page.evaluate(() => window.location.hash)).slice('#/run/'.length));
    expect(ppRun).toMatch(/tiny-pp/);
    // the live view draws the pipeline from the streamed spans: 2 stages x 4 micro-batches, forward and backward blocks
    await expect
      .poll(async () => (await chartOption(page, 'pipeline'))?.title[0]?.text ?? '', { timeout: 150_000, interval: 500 })
      .toBe('Pipeline: 2 stages x 4 micro-batches');
    await expect.poll(() => page.locator('#run-status').textContent(), { timeout: 150_000, interval: 500 }).toBe('completed');
    const pp = (await chartOption(page, 'pipeline'))!;
    expect(pp.title[0]!.subtext).toMatch(/theory \(p-1\)\/\(m\+p-1\) = 1\/5 = 20\.0%/);
    const measured = /bubble measured: stage 0 (\d+\.\d)% · stage 1 (\d+\.\d)%/.exec(pp.title[0]!.subtext ?? '');
    expect(measured, pp.title[0]!.subtext).not.toBeNull();
    for (const m of measured!.slice(1)) expect(Number(m)).toBeLessThan(100);
    expect(
      pp.series.find((s) => s.name === 'forward')!.data!.length,
      'a forward block per stage, micro-batch and step',
    ).toBeGreaterThanOrEqual(2 * 4);
    expect(pp.series.find((s) => s.name === 'backward')!.data!.length).toBeGreaterThanOrEqual(2 * 4);
    expect(pp.series.find((s) => s.name === 'bubble (idle)')!.data!.length).toBeGreaterThan(0);
    // each stage's memory chart carries its own formula line: Ψ of its tensors x 16 bytes (vocabulary 27)
    //   stage 0: wte 27x64 + wpe 64x64 + block 0 = 55 808 -> 872 KiB · stage 1: wte copy + block 1 + ln_f = 51 840 -> 810 KiB
    await expect
      .poll(async () => (await chartOption(page, 'memory-rank-0'))?.title[0]?.subtext ?? '', { timeout: 30_000 })
      .toMatch(/formula 872 KiB/);
    expect((await chartOption(page, 'memory-rank-1'))!.title[0]!.subtext).toMatch(/formula 810 KiB/);
    await shot(page, 'run-pipeline-live');
  }, 240_000);

  it('runs history lists every run; two compare side by side; a failed run says why with a way back; delete takes two clicks', async () => {
    await page.click('nav a[href="#/runs"]');
    const row = (id: string) => page.locator(`#runs-table tr[data-run-id="${id}"]`);
    await row(runId).waitFor({ timeout: 30_000 });
    expect(await row(runId).locator('.status').textContent()).toBe('completed');
    expect(await row(runId).locator('td').nth(3).textContent()).toBe('ddp × 2');
    expect(await row('pp-fixture').locator('td').nth(6).textContent()).toBe('3.3000');
    await shot(page, 'runs');
    await row(runId).locator('input[type=checkbox]').check();
    await row('pp-fixture').locator('input[type=checkbox]').check();
    await page.click('#compare-runs');
    await page.locator('#compare-table').waitFor({ timeout: 30_000 });
    await expect
      .poll(() => page.locator('#compare-table tr', { hasText: 'strategy' }).textContent(), { timeout: 30_000 })
      .toMatch(/ddp × 2.*pp × 2/);
    // the ddp run's scaling figures (estimated from its spans, which load after the run's detail: the other run is no
    // world-1 baseline), both on real devices
    await expect
      .poll(() => page.locator('#compare-table tr', { hasText: 'scaling' }).textContent(), { timeout: 30_000 })
      .toMatch(/scaling efficiency \d+% at 2 ranks \(estimated from spans\)/);
    expect(await page.locator('#compare-table tr', { hasText: 'device' }).textContent()).toMatch(/real\s*real/);
    await expect.poll(async () => (await chartOption(page, 'b-pipeline')) !== null, { timeout: 30_000 }).toBe(true);
    await shot(page, 'compare');

    await page.goto(`${serve.url.replace(/#.*/, '')}#/run/failed-fixture`);
    await expect
      .poll(() => page.locator('#run-failed').textContent(), { timeout: 30_000 })
      .toMatch(/This run failed: rank 1 exited with code 137/); // the error names its rank: not twice
    expect(await page.locator('#run-failed a[href="#/runs"]').count()).toBe(1);
    await shot(page, 'run-failed');

    await page.click('#run-failed a[href="#/runs"]');
    await row('failed-fixture').waitFor({ timeout: 30_000 });
    await row('failed-fixture').locator('button.delete').click();
    expect(await row('failed-fixture').locator('button.delete').textContent()).toMatch(/Really delete\?/);
    await row('failed-fixture').locator('button.delete').click();
    await row('failed-fixture').waitFor({ state: 'detached', timeout: 30_000 });
    expect(existsSync(path.join(dir, 'runs', 'failed-fixture'))).toBe(false);
  });

  it('Stop at step 3 of a 300-step run (its first interval checkpoint at 150) checkpoints that step; Resume continues from it: the next step line is the one after, each step once in metrics.jsonl', async () => {
    const c = await connect(serve);
    const { runId: id } = await c.call('runs.launch', {
      config: { preset: 'tiny', strategy: 'ddp', world: 2, steps: 300, eval_interval: 0, name: 'stop-me' },
    });
    // through the address with the token, so that this case also runs on its own (-t)
    await page.goto(serve.url);
    await page.evaluate((runId) => (window.location.hash = `#/run/${runId}`), id);
    await expect
      .poll(async () => Number(/step (\d+)/.exec((await page.locator('#run-progress').textContent()) ?? '')?.[1] ?? 0), {
        timeout: 120_000,
        interval: 100,
      })
      .toBeGreaterThanOrEqual(3);
    expect(await page.locator('#run-eta').textContent()).toMatch(/^ETA \d/);
    await page.click('#stop-run');
    await expect.poll(() => page.locator('#run-status').textContent(), { timeout: 90_000 }).toBe('stopped');
    expect(await page.locator('#run-halted').textContent()).toMatch(/stopped by the user/);
    // the ranks finished the step they were in and checkpointed it (no interval checkpoint before 150)
    const stopped = await c.call('runs.get', { runId: id });
    const at = stopped.state.step;
    expect(at).toBeGreaterThanOrEqual(3);
    expect(at).toBeLessThan(10);
    expect(stopped.checkpoints).toEqual([at]);
    await expect.poll(() => page.locator('#run-progress').textContent(), { timeout: 30_000 }).toBe(`step ${at} / 300`);
    await page.click('#resume-run');
    await expect.poll(() => page.locator('#run-status').textContent(), { timeout: 60_000 }).toMatch(/starting|running/);
    const stepsOnDisk = () =>
      readFileSync(path.join(dir, 'runs', id, 'metrics.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { type: string; step: number })
        .filter((m) => m.type === 'step')
        .map((m) => m.step);
    await expect.poll(() => stepsOnDisk().length, { timeout: 120_000, interval: 250 }).toBeGreaterThan(at);
    const logs = (await c.call('runs.logs', { runId: id })).lines.map((l) => l.message);
    expect(logs.filter((l) => l.startsWith('launching')).at(-1)).toBe(
      `launching 2 ranks (ddp) for 300 steps, resuming from step-${String(at).padStart(6, '0')}`,
    );
    await page.locator('#stop-run').click();
    await expect.poll(() => page.locator('#run-status').textContent(), { timeout: 90_000 }).toBe('stopped');
    // the resumed run's first step line was at + 1: every step is in metrics.jsonl once, in order
    const steps = stepsOnDisk();
    expect(steps.length).toBeGreaterThan(at);
    expect(steps).toEqual(Array.from({ length: steps.length }, (_, i) => i + 1));
    expect((await c.call('runs.get', { runId: id })).checkpoints).toEqual([at, steps.length]);
    c.close();
    await shot(page, 'run-stopped');
  }, 300_000);

  it('an unknown run and an unknown address say so with a way back; a lost controller shows a banner with reconnect', async () => {
    await page.goto(`${serve.url.replace(/#.*/, '')}#/run/no-such-run`);
    await expect.poll(() => page.locator('#run-error').textContent(), { timeout: 30_000 }).toMatch(/No run named “no-such-run”/);
    expect(await page.locator('#run-error a[href="#/runs"]').count()).toBe(1);
    await shot(page, 'unknown-run');
    await page.evaluate(() => (window.location.hash = '#/nowhere'));
    await expect.poll(() => page.locator('#unknown-route').textContent(), { timeout: 10_000 }).toMatch(/not a view of this dashboard/);

    await page.evaluate(() => (window.location.hash = '#/runs'));
    await page.locator('#runs-table').waitFor({ timeout: 30_000 });
    await stopServe(serve);
    await expect
      .poll(
        () =>
          page
            .locator('#connection-lost')
            .textContent()
            .catch(() => ''),
        { timeout: 30_000 },
      )
      .toMatch(/Lost the connection to the controller/);
    await page.click('#reconnect');
    await expect
      .poll(() => page.locator('#connection-lost').textContent(), { timeout: 30_000 })
      .toMatch(/still cannot reach the controller/);
    expect(await page.locator('#runs-table').count(), 'the last view stays, not a blank page').toBe(1);
    await shot(page, 'connection-lost');
    expect(cspViolations, 'no view broke the Content-Security-Policy').toEqual([]);
  });
});
