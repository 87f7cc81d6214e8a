// `shardwise report` on a real 2-rank DDP run folder (made once by the CLI): the Chrome trace
// (one pid per rank, compute and comm threads), the CSV (one row per step, the logged losses),
// the HTML report opened offline in Chromium (charts drawn, no request, no console error), the
// PDF, a crashed run's torn lines, a pipeline run's spans, and bad input.
import { spawnSync } from 'node:child_process';
import { appendFileSync, cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { type Browser } from 'playwright-core';
import { launchChromium } from '../e2e/chromium.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, shardwise, tempDir } from './helpers.js';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
// screenshots of the report: test artifacts, gitignored (test-artifacts/), never committed
const ARTIFACTS = path.join(ROOT, 'test-artifacts/report');
const STEPS = 4;

interface TraceEvent {
  name: string;
  ph: string;
  pid: number;
  tid: number;
  ts?: number;
  dur?: number;
  cat?: string;
  args?: Record<string, unknown>;
}

const lines = (file: string) =>
  readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as Record<string, any>);

/** Copy a run folder so a test can damage or extend it. */
function copyRun(from: string, to: string): string {
  cpSync(from, to, { recursive: true, filter: (src) => !src.includes(`${path.sep}checkpoints`) });
  return to;
}

/** Open an HTML report from file:// with every other request aborted; what the page did. */
async function openReport(browser: Browser, file: string, screenshot?: string) {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const url = pathToFileURL(file).href;
  const requests: string[] = [];
  const errors: string[] = [];
  page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
  page.on('pageerror', (e) => errors.push(e.message));
  await page.route('**/*', (route) => {
    if (route.request().url() === url) return route.continue();
    requests.push(route.request().url());
    return route.abort();
  });
  await page.goto(url);
  await page.waitForSelector('[data-charts-ready]', { timeout: 30_000 });
  // per chart: its series names and whether its canvas holds non-blank pixels
  const charts = (await page.evaluate(`(window.shardwiseCharts || []).map(function (c) {
    var canvas = c.getDom().querySelector('canvas');
    var ctx = canvas && canvas.getContext('2d');
    var px = ctx ? ctx.getImageData(0, 0, canvas.width, canvas.height).data : [];
    var inked = 0;
    for (var i = 0; i < px.length; i += 4) if (px[i + 3] > 0 && (px[i] < 240 || px[i + 1] < 240 || px[i + 2] < 240)) inked++;
    return { id: c.getDom().id, series: c.getOption().series.map(function (s) { return s.name; }), inked: inked, w: canvas ? canvas.width : 0 };
  })`)) as { id: string; series: string[]; inked: number; w: number }[];
  const summary = await page.locator('#summary').innerText();
  const config = await page.locator('#config').innerText();
  const pwned = await page.evaluate('window.pwned');
  if (screenshot) await page.screenshot({ path: screenshot, fullPage: true });
  await page.close();
  return { requests, errors, charts, summary, config, pwned };
}

describe('shardwise report on a 2-rank DDP run (tiny, 4 steps)', () => {
  const root = tempDir('report');
  const run = path.join(root, 'ddp');
  let browser: Browser;

  beforeAll(async () => {
    const r = shardwise([
      'train',
      '--preset',
      'tiny',
      '--steps',
      String(STEPS),
      '--strategy',
      'ddp',
      '--world',
      '2',
      '--eval-interval',
      '2',
      '--checkpoint-interval',
      '0',
      '--out',
      run,
      '--json',
    ]);
    expect(r.code, r.stderr).toBe(0);
    mkdirSync(ARTIFACTS, { recursive: true });
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    rmSync(root, { recursive: true, force: true });
  });

  it('trace: Trace Event JSON, one pid per rank (process_name), compute and comm threads, one X event per span in µs', () => {
    const out = path.join(root, 'trace.json');
    const r = shardwise(['report', run, '--format', 'trace', '--out', out]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe(out);
    const trace = JSON.parse(readFileSync(out, 'utf8')) as { traceEvents: TraceEvent[] };
    const events = trace.traceEvents;
    const spans = lines(path.join(run, 'spans.jsonl'));
    const complete = events.filter((e) => e.ph === 'X');
    expect(complete).toHaveLength(spans.length);
    for (const e of complete) {
      expect(Number.isFinite(e.ts) && e.ts! >= 0 && Number.isFinite(e.dur) && e.dur! >= 0, JSON.stringify(e)).toBe(true);
    }
    // one pid per rank, named
    const procs = events.filter((e) => e.ph === 'M' && e.name === 'process_name');
    expect(procs.map((e) => e.args!.name).sort()).toEqual(['rank 0', 'rank 1']);
    expect(new Set(complete.map((e) => e.pid))).toEqual(new Set(procs.map((e) => e.pid)));
    expect(new Set(procs.map((e) => e.pid)).size).toBe(2);
    // each rank: a compute thread with forward/backward and a comm thread with the bucket all-reduces
    for (const p of procs) {
      const threads = new Map(
        events.filter((e) => e.ph === 'M' && e.name === 'thread_name' && e.pid === p.pid).map((e) => [e.tid, e.args!.name as string]),
      );
      const cats = (track: string) =>
        new Set(complete.filter((e) => e.pid === p.pid && threads.get(e.tid)?.startsWith(track)).map((e) => e.cat));
      expect([...cats('compute')].sort()).toEqual(['backward', 'forward']);
      expect([...cats('comm')]).toEqual(['comm']);
      expect(complete.filter((e) => e.pid === p.pid && e.cat === 'comm').length).toBe(
        spans.filter((s) => s.rank === p.pid - 1 && s.kind === 'comm').length,
      );
    }
    // events of one thread never partially overlap (the viewers need them nested)
    const byThread = new Map<string, TraceEvent[]>();
    for (const e of complete) byThread.set(`${e.pid}:${e.tid}`, [...(byThread.get(`${e.pid}:${e.tid}`) ?? []), e]);
    for (const es of byThread.values()) {
      es.sort((a, b) => a.ts! - b.ts!);
      for (let i = 1; i < es.length; i++)
        expect(es[i]!.ts! >= es[i - 1]!.ts! + es[i - 1]!.dur! - 1e-3 || es[i]!.ts! + es[i]!.dur! <= es[i - 1]!.ts! + es[i - 1]!.dur!).toBe(
          true,
        );
    }
    // device memory per category as a counter track per rank, one sample per step
    const counters = events.filter((e) => e.ph === 'C');
    expect(counters).toHaveLength(2 * STEPS);
    const steps = lines(path.join(run, 'metrics.jsonl')).filter((m) => m.type === 'step');
    expect(counters.find((e) => e.pid === 2)!.args).toEqual(
      Object.fromEntries(['params', 'grads', 'optimizer', 'activations', 'comm', 'workspace'].map((c) => [c, steps[0]!.memory['1'][c]])),
    );
    // µs: a span of d ms lasts 1000*d
    const first = spans.find((s) => s.kind === 'comm')!;
    const ev = complete.find(
      (e) => e.cat === 'comm' && e.pid === first.rank + 1 && Math.abs(e.dur! - 1000 * (first.end - first.start)) < 0.01,
    );
    expect(ev).toBeDefined();
  });

  it(`csv: a header and ${STEPS} rows, the losses of metrics.jsonl, validation loss at steps 2 and 4`, () => {
    const r = shardwise(['report', run, '--format', 'csv']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe(path.resolve(run, 'metrics.csv'));
    const [header, ...rows] = readFileSync(path.join(run, 'metrics.csv'), 'utf8').trim().split('\n');
    const cols = header!.split(',');
    expect(cols.slice(0, 2)).toEqual(['step', 'loss']);
    for (const c of ['lr', 'grad_norm', 'tokens_per_s', 'step_ms', 'memory.0.params', 'memory.1.activations', 'val_loss'])
      expect(cols).toContain(c);
    const logged = lines(path.join(run, 'metrics.jsonl'));
    const steps = logged.filter((m) => m.type === 'step');
    expect(rows).toHaveLength(STEPS);
    const cell = (row: string, col: string) => row.split(',')[cols.indexOf(col)]!;
    rows.forEach((row, i) => {
      expect(Number(cell(row, 'step'))).toBe(i + 1);
      expect(Number(cell(row, 'loss'))).toBe(steps[i]!.loss); // exact: written with full precision
      expect(Number(cell(row, 'memory.1.params'))).toBe(steps[i]!.memory['1'].params);
    });
    const evals = logged.filter((m) => m.type === 'eval');
    expect(Number(cell(rows[1]!, 'val_loss'))).toBe(evals.find((e) => e.step === 2)!.val_loss);
    expect(cell(rows[0]!, 'val_loss')).toBe('');
  });

  it('html: one file that opens offline in Chromium and draws every chart (no request, no console error)', async () => {
    const out = path.join(root, 'report.html');
    const r = shardwise(['report', run, '--format', 'html', '--out', out]);
    expect(r.code, r.stderr).toBe(0);
    const html = readFileSync(out, 'utf8');
    expect(html).not.toMatch(/<script[^>]+src=|<link[^>]+href=|https?:\/\/(?!www\.w3\.org)[^"'\s]*\.(js|css)/i);
    const page = await openReport(browser, out, path.join(ARTIFACTS, 'ddp-report.png'));
    expect(page.requests).toEqual([]);
    expect(page.errors).toEqual([]);
    expect(page.charts.map((c) => c.id)).toEqual([
      'chart-loss',
      'chart-tokens-per-s',
      'chart-grad-norm',
      'chart-learning-rate',
      'chart-memory-rank-0',
      'chart-memory-rank-1',
      'chart-timeline',
      'chart-comm-bytes',
      'chart-scaling',
    ]);
    for (const c of page.charts) expect(c.inked, `${c.id} drew nothing`).toBeGreaterThan(500);
    const byId = Object.fromEntries(page.charts.map((c) => [c.id, c.series]));
    expect(byId['chart-loss']).toEqual(['loss', 'loss (EMA 0.6)', 'validation loss']);
    expect(byId['chart-memory-rank-0']).toEqual(['params', 'grads', 'optimizer', 'activations', 'comm', 'workspace', 'total']);
    expect(byId['chart-timeline']).toEqual(expect.arrayContaining(['forward', 'backward', 'allReduce']));
    expect(byId['chart-scaling']).toEqual(['rest of the step', 'exposed communication', 'efficiency estimate']);
    const summary = JSON.parse(readFileSync(path.join(run, 'summary.json'), 'utf8'));
    expect(page.summary).toContain('ddp x 2 ranks');
    expect(page.summary).toContain(`${summary.overlap_pct.toFixed(1)}%`);
    expect(page.summary).toMatch(/scaling efficiency \d+% at 2 ranks \(estimated from spans\)/);
  });

  it('pdf: printed by Chromium, starts with %PDF and has pages', () => {
    const out = path.join(root, 'report.pdf');
    const r = shardwise(['report', run, '--format', 'pdf', '--out', out]);
    expect(r.code, r.stderr).toBe(0);
    const pdf = readFileSync(out);
    expect(pdf.subarray(0, 5).toString('latin1')).toBe('%PDF-');
    const pages = pdf.toString('latin1').match(/\/Type\s*\/Page(?!s)/g) ?? [];
    expect(pages.length).toBeGreaterThan(0);
  });

  it('a crashed run (torn last lines, no summary) still reports: the torn lines are skipped and named', async () => {
    const crashed = copyRun(run, path.join(root, 'crashed'));
    rmSync(path.join(crashed, 'summary.json'));
    appendFileSync(path.join(crashed, 'metrics.jsonl'), '{"type":"step","step":5,"loss":2.9,"lr"');
    appendFileSync(path.join(crashed, 'spans.jsonl'), '{"rank":1,"step":5,"kind":"forw');
    const csv = shardwise(['report', crashed, '--format', 'csv']);
    expect(csv.code, csv.stderr).toBe(0);
    expect(readFileSync(path.join(crashed, 'metrics.csv'), 'utf8').trim().split('\n')).toHaveLength(1 + STEPS);
    const html = shardwise(['report', crashed, '--format', 'html']);
    expect(html.code, html.stderr).toBe(0);
    const page = await openReport(browser, path.join(crashed, 'report.html'));
    expect(page.errors).toEqual([]);
    const tornMetricsLine = lines(path.join(run, 'metrics.jsonl')).length + 1;
    expect(page.summary).toContain(`metrics.jsonl:${tornMetricsLine} (torn last line)`);
    expect(page.summary).toContain(`spans.jsonl:${lines(path.join(run, 'spans.jsonl')).length + 1} (torn last line)`);
  });

  it('spans with stage and micro (a pipeline run) get the pipeline chart with its bubble figure and stage threads in the trace', async () => {
    const pp = copyRun(run, path.join(root, 'pipeline'));
    // GPipe, 2 stages x 4 micro-batches, unit blocks of 2 ms after the last real span: bubble 1/5 in theory and measured
    const t0 = Math.max(...lines(path.join(run, 'spans.jsonl')).map((s) => s.end)) + 10;
    const synthetic: object[] = [];
    for (let s = 0; s < 2; s++)
      for (let i = 0; i < 4; i++) {
        synthetic.push({
          rank: s,
          step: STEPS + 1,
          kind: 'forward',
          name: `block.${s}`,
          stage: s,
          micro: i,
          start: t0 + 2 * (s + i),
          end: t0 + 2 * (s + i + 1),
        });
        const b = 4 + 1 + (1 - s) + i;
        synthetic.push({
          rank: s,
          step: STEPS + 1,
          kind: 'backward',
          name: `block.${s}`,
          stage: s,
          micro: i,
          start: t0 + 2 * b,
          end: t0 + 2 * (b + 1),
        });
      }
    // names from files are data: a '</script>' in a layer name or the config must not end a script
    const evil = '</script><script>window.pwned = 1</script><!--';
    (synthetic[0] as { name: string }).name = `block.0${evil}`;
    writeFileSync(path.join(pp, 'spans.jsonl'), synthetic.map((x) => `${JSON.stringify(x)}\n`).join(''));
    const config = JSON.parse(readFileSync(path.join(pp, 'config.json'), 'utf8'));
    config.data.dataset = evil;
    writeFileSync(path.join(pp, 'config.json'), JSON.stringify(config));
    expect(shardwise(['report', pp, '--format', 'html']).code).toBe(0);
    const page = await openReport(browser, path.join(pp, 'report.html'), path.join(ARTIFACTS, 'pipeline-report.png'));
    expect(page.errors).toEqual([]);
    expect(page.pwned).toBeUndefined();
    expect(page.config).toContain(evil); // shown as text
    const chart = page.charts.find((c) => c.id === 'chart-pipeline');
    expect(chart?.series).toEqual(['forward', 'backward', 'bubble (idle)']);
    expect(chart!.inked).toBeGreaterThan(500);
    expect(readFileSync(path.join(pp, 'report.html'), 'utf8')).toContain('theory (p-1)/(m+p-1) = 1/5 = 20.0%');
    expect(shardwise(['report', pp, '--format', 'trace']).code).toBe(0);
    const trace = JSON.parse(readFileSync(path.join(pp, 'trace.json'), 'utf8')) as { traceEvents: TraceEvent[] };
    const names = trace.traceEvents.filter((e) => e.name === 'thread_name').map((e) => `${e.pid}:${e.args!.name}`);
    expect(names).toEqual(expect.arrayContaining(['1:pipeline stage 0', '2:pipeline stage 1']));
  });

  describe('bad input: one line on stderr, non-zero exit', () => {
    const oneLine = (r: { code: number; stderr: string }, pattern: RegExp) => {
      expect(r.code).not.toBe(0);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr).toMatch(pattern);
    };
    it('a missing run folder', () =>
      oneLine(shardwise(['report', path.join(root, 'nope'), '--format', 'html']), /run folder .*nope does not exist/));
    it('a folder that is not a run', () => {
      const empty = tempDir('not-a-run');
      oneLine(shardwise(['report', empty, '--format', 'csv']), /is not a Shardwise run folder/);
      rmSync(empty, { recursive: true });
    });
    it('an unknown or missing format, a missing folder argument', () => {
      oneLine(shardwise(['report', run, '--format', 'docx']), /unknown --format "docx"; use html, pdf, trace or csv/);
      oneLine(shardwise(['report', run]), /--format is required/);
      oneLine(shardwise(['report', '--format', 'html']), /report needs the run folder/);
    });
    it('pdf without Chromium says so', () => {
      const r = spawnSync(process.execPath, [BIN, 'report', run, '--format', 'pdf', '--out', path.join(root, 'x.pdf')], {
        encoding: 'utf8',
        env: { ...process.env, SHARDWISE_CHROMIUM: path.join(root, 'no-chromium'), SHARDWISE_DEBUG: '' },
      });
      oneLine({ code: r.status ?? -1, stderr: r.stderr }, /SHARDWISE_CHROMIUM=.*no-chromium does not exist/);
      expect(existsSync(path.join(root, 'x.pdf'))).toBe(false);
    });
  });
});
