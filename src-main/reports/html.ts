// The self-contained HTML report: one file that opens offline (file://, no network: a CSP of
// default-src 'none' forbids any fetch). It opens with a one-screen summary (the strategy, the
// layout of its ranks, the result; the PDF's first page), then the summary table, the config and
// every chart (an elastic or resumed run's Elastic section and its step charts banded by segment).
// ECharts' own dist bundle is inlined; the chart options are embedded as JSON, with the one
// function they hold (renderSpanBlock, the custom-series renderer) shipped as its source text.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { z } from 'zod';
import {
  bytesMovedPerRank,
  formatBytes,
  formatMsLabel,
  renderSpanBlock,
  runCharts,
  type RunChart,
  scalingFigures,
  scalingLine,
  scalingSteps,
  TOOLTIP_FORMATTERS,
} from '../../common/charts/index.js';
import { formatTflops, RankTflopsSchema } from '../../common/advisor/rank-tflops.js';
import { formatDuration, trainingMs, wallMs } from '../../common/run-time.js';
import { emulatedLabel } from '../../common/emulated-label.js';
import { lossScaleLine, precisionLabel } from '../../common/precision.js';
import { rankRoles, strategyLine } from '../../common/topology.js';
import type { RunData } from '../runs/read-run.js';
import { elasticSection, segmentsOfRun } from './elastic-section.js';
import { predictionSection } from './prediction-section.js';

/** Functions an option may hold, by name: the page gets their source. */
const OPTION_FUNCTIONS: Record<string, (...args: never[]) => unknown> = { renderSpanBlock, formatMsLabel, ...TOOLTIP_FORMATTERS };

let echartsSource: string | undefined;
function echartsBundle(): string {
  if (echartsSource === undefined) {
    // 'echarts' resolves (require condition) to dist/echarts.js; the minified build sits beside it
    const main = createRequire(import.meta.url).resolve('echarts');
    echartsSource = readFileSync(path.join(path.dirname(main), 'echarts.min.js'), 'utf8');
  }
  return echartsSource;
}

export const escapeHtml = (s: string): string => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** JSON that is safe inside <script>: no '<' (so no '</script>' or '<!--'), no '>' or '&', no JS line separators. */
export function jsonForScript(value: unknown): string {
  const json = JSON.stringify(value, (_k, v: unknown) => {
    if (typeof v !== 'function') return v;
    const name = Object.entries(OPTION_FUNCTIONS).find(([, f]) => f === v)?.[0];
    if (!name)
      throw new Error(
        `a chart option holds a function the report cannot ship (${(v as { name?: string }).name || 'anonymous'}); add it to OPTION_FUNCTIONS`,
      );
    return { $fn: name };
  });
  return json.replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** Script text that cannot end its <script> element early. */
const scriptSafe = (js: string): string => js.replace(/<\/(script)/gi, '<\\/$1').replace(/<!--/g, '<\\!--');

const fmt = (v: unknown, digits = 4): string =>
  typeof v === 'number'
    ? Number.isInteger(v)
      ? v.toLocaleString('en-US')
      : v.toPrecision(digits)
    : v === undefined || v === null
      ? '—'
      : String(v);

function meanOf(xs: (number | undefined)[]): number | undefined {
  const v = xs.filter((x): x is number => typeof x === 'number' && Number.isFinite(x));
  return v.length ? v.reduce((a, b) => a + b, 0) / v.length : undefined;
}

function summaryRows(run: RunData): [string, string][] {
  const s = run.summary ?? {};
  const par = run.config.parallel ?? {};
  const last = run.steps.at(-1);
  const rows: [string, unknown][] = [
    ['status', run.state.status + (run.state.error ? ` (${run.state.error})` : '')],
    ['strategy', `${par.strategy ?? 'single'}${par.world > 1 ? ` x ${par.world} ranks` : ''}`],
    [
      'model',
      run.config.model
        ? `${run.config.model.preset ?? 'custom'}: ${run.config.model.n_layer} layers, ${run.config.model.n_head} heads, d_model ${run.config.model.d_model}`
        : undefined,
    ],
    ['parameters', s.params],
    ['steps', `${run.state.step ?? last?.step ?? 0} / ${run.state.steps ?? run.config.train?.steps ?? '?'}`],
    ['final loss', s.final_loss ?? last?.loss],
    ['validation loss', s.val_loss ?? run.evals.at(-1)?.val_loss],
    ['tokens/s', s.tokens_per_s ?? meanOf(run.steps.map((m) => m.tokens_per_s))],
    ['training time', run.steps.length ? formatDuration(trainingMs(run.steps)) : undefined],
    ['wall time (pauses included)', formatDuration(wallMs(run.state))],
  ];
  const emulated = emulatedLabel(run.config);
  if (emulated) rows.push(['device', emulated]);
  rows.push(['precision', precisionLabel(run.config)]);
  const scale = lossScaleLine(typeof s.loss_scale === 'number' || typeof s.skipped_steps === 'number' ? s : last);
  if (scale) rows.push(['fp16 loss scaling', scale]);
  const scaling = scalingFigures(par.world ?? 1, scalingSteps(run.steps, run.spans));
  if (scaling) rows.push(['scaling', scalingLine(scaling)]);
  const tflops = z.record(z.string(), RankTflopsSchema).safeParse(s.tflops);
  if (tflops.success) rows.push(['achieved TFLOP/s (model FLOPs; MFU where the peak is known)', formatTflops(tflops.data)]);
  if (typeof s.overlap_pct === 'number') rows.push(['overlap (comm hidden under backward)', `${s.overlap_pct.toFixed(1)}%`]);
  if (typeof s.buckets === 'number') rows.push(['gradient buckets', s.buckets]);
  if (s.bubble) {
    // the summary's bubble may be fractions (all <= 1) or percents: read either
    const b = s.bubble as { measured?: unknown; theory?: unknown };
    const all = [...(Array.isArray(b.measured) ? b.measured : []), b.theory].filter((x): x is number => typeof x === 'number');
    const pct = (x: number) => `${(all.every((v) => v <= 1) ? 100 * x : x).toFixed(1)}%`;
    const measured = Array.isArray(b.measured)
      ? b.measured.map((x, i) => `stage ${i} ${typeof x === 'number' ? pct(x) : String(x)}`).join(', ')
      : undefined;
    rows.push([
      'pipeline bubble',
      measured && typeof b.theory === 'number' ? `measured ${measured}; theory ${pct(b.theory)}` : JSON.stringify(b),
    ]);
  }
  const moved = bytesMovedPerRank(s);
  if (moved) rows.push(['bytes moved per step', moved.join(', ')]);
  if (run.skipped.length)
    rows.push(['unreadable lines skipped', run.skipped.map((l) => `${l.file}:${l.line}${l.torn ? ' (torn last line)' : ''}`).join(', ')]);
  return rows.map(([k, v]) => [k, fmt(v)]);
}

/** The result in a few figures: what a reader looks for first. */
function resultFigures(run: RunData): [string, string][] {
  const s = run.summary ?? {};
  const last = run.steps.at(-1);
  const loss = s.final_loss ?? last?.loss;
  const tokens = s.tokens_per_s ?? meanOf(run.steps.map((m) => m.tokens_per_s));
  const roles = rankRoles({ ...run, summary: run.summary });
  const peaks = roles.map((r) => r.peakBytes).filter((b): b is number => b !== null);
  const out: [string, string][] = [
    ['status', run.state.status],
    ['steps', `${run.state.step ?? last?.step ?? 0} / ${run.state.steps ?? '?'}`],
    ['final loss', typeof loss === 'number' ? loss.toFixed(4) : '—'],
    ['tokens/s', typeof tokens === 'number' ? Math.round(tokens).toLocaleString('en-US') : '—'],
    [
      'largest peak memory',
      peaks.length ? `${formatBytes(Math.max(...peaks))} (rank ${roles[peaks.indexOf(Math.max(...peaks))]!.rank})` : '—',
    ],
  ];
  if (typeof s.overlap_pct === 'number') out.push(['comm hidden under backward', `${s.overlap_pct.toFixed(1)}%`]);
  const moved = s.bytes_moved_per_step as Record<string, number> | undefined;
  if (moved && Object.keys(moved).length) {
    const mean = Object.values(moved).reduce((a, b) => a + b, 0) / Object.keys(moved).length;
    out.push(['bytes moved per step', `${formatBytes(mean)} per rank (mean)`]);
  }
  return out;
}

/** The one-screen summary: the strategy, every rank's place in the layout, the result. */
function atAGlance(run: RunData): string {
  const m = run.config.model;
  const model = m ? `${m.preset ?? 'custom'} model: ${m.n_layer} layers, ${m.n_head} heads, d_model ${m.d_model}` : '';
  const params = typeof run.summary?.params === 'number' ? `, ${run.summary.params.toLocaleString('en-US')} parameters` : '';
  const roles = rankRoles({ ...run, summary: run.summary });
  const emulated = emulatedLabel(run.config);
  const cell = (v: number | null) => (v === null ? '—' : String(v));
  const layout = roles
    .map(
      (r) =>
        `<tr data-rank="${r.rank}"><td>${r.rank}</td><td>${escapeHtml(r.machine)}</td><td>${escapeHtml(r.device)}</td><td>${cell(r.stage)}</td><td>${cell(r.tp)}</td><td>${cell(r.dp)}</td><td>${escapeHtml(r.layers)}</td><td>${r.peakBytes === null ? '—' : escapeHtml(formatBytes(r.peakBytes))}</td></tr>`,
    )
    .join('');
  const figures = resultFigures(run)
    .map(([k, v]) => `<div class="figure"><span>${escapeHtml(k)}</span><strong>${escapeHtml(v)}</strong></div>`)
    .join('');
  return `<section id="at-a-glance">
<h2>Strategy</h2><p id="glance-strategy"><strong>${escapeHtml(strategyLine(run.config.parallel))}</strong>${model ? ` · ${escapeHtml(model + params)}` : ''}${emulated ? ` · <strong class="emulated" id="glance-emulated">${escapeHtml(emulated)}</strong>` : ''}</p>
<h2>Result</h2><div class="figures" id="glance-result">${figures}</div>
<h2>Layout</h2><table class="grid" id="glance-layout"><tr><th>rank</th><th>machine</th><th>device</th><th>stage</th><th>TP shard</th><th>DP replica</th><th>layers held</th><th>peak memory</th></tr>${layout}</table>
</section>`;
}

function peakTable(run: RunData): string {
  const peak = run.summary?.peak_bytes as Record<string, Record<string, number>> | undefined;
  if (!peak) return '';
  const cats = [...new Set(Object.values(peak).flatMap((p) => Object.keys(p)))];
  const head = `<tr><th>rank</th>${cats.map((c) => `<th>${escapeHtml(c)}</th>`).join('')}</tr>`;
  const body = Object.entries(peak)
    .map(
      ([r, p]) =>
        `<tr><td>${escapeHtml(r)}</td>${cats.map((c) => `<td>${p[c] === undefined ? '—' : escapeHtml(formatBytes(p[c]!))}</td>`).join('')}</tr>`,
    )
    .join('');
  return `<h3>Peak bytes per rank</h3><table class="grid">${head}${body}</table>`;
}

const SECTION_TITLES: Record<RunChart['section'], string> = {
  training: 'Training',
  memory: 'Device memory per rank',
  prediction: 'Predicted vs measured (charts)',
  timeline: 'Compute and communication',
  pipeline: 'Pipeline',
  communication: 'Communication volume',
};

const CSS = `
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1f1f1f;background:#fff}
header{padding:16px 24px;background:#1f3b99;color:#fff}header h1{margin:0;font-size:20px}header p{margin:4px 0 0;opacity:.85}
main{padding:8px 24px 24px}h2{font-size:16px;margin:24px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
table.grid{border-collapse:collapse;margin:8px 0}table.grid td,table.grid th{border:1px solid #ddd;padding:3px 8px;text-align:left}
table.grid th{background:#f5f5f5}pre{background:#f7f7f7;padding:8px;overflow:auto;font-size:12px;max-height:320px}
.charts{display:flex;flex-wrap:wrap;gap:8px}.chart{flex:1 1 100%;min-width:0;border:1px solid #eee}.chart.cols-2{flex:1 1 calc(50% - 8px)}.chart.cols-4{flex:0 1 calc(25% - 8px)}
.cols{display:flex;gap:24px;flex-wrap:wrap}.cols>div{flex:1 1 420px;min-width:0}
.figures{display:flex;flex-wrap:wrap;gap:8px}.figure{border:1px solid #ddd;border-radius:4px;padding:6px 12px;min-width:140px}
.figure span{display:block;font-size:12px;color:#595959}.figure strong{font-size:18px}
#at-a-glance table.grid td,#at-a-glance table.grid th{padding:2px 8px;font-size:13px}
#elastic-segments td:nth-child(2),#elastic-segments td:nth-child(3){white-space:nowrap}
#prediction-memory td,#prediction-memory th{font-size:11px}#prediction-memory td:nth-child(n+3){white-space:nowrap}
@media print{pre{max-height:none}.chart,table{break-inside:avoid}h2,h3{break-after:avoid}#at-a-glance{break-after:page}}
`;

/** The whole report page for a run. */
export function reportHtml(run: RunData, generatedAt = new Date()): string {
  const charts = runCharts({ ...run, segments: segmentsOfRun(run) });
  const title = `Shardwise run ${path.basename(path.resolve(run.dir))}`;
  const sections = (Object.keys(SECTION_TITLES) as RunChart['section'][])
    .map((sec) => {
      const cs = charts.filter((c) => c.section === sec);
      if (!cs.length) return '';
      const divs = cs.map((c) => `<div class="chart cols-${c.columns}" id="chart-${c.id}" style="height:${c.height}px"></div>`).join('');
      return `<h2>${SECTION_TITLES[sec]}</h2><div class="charts">${divs}</div>`;
    })
    .join('\n');
  const rows = summaryRows(run)
    .map(([k, v]) => `<tr><th>${escapeHtml(k)}</th><td>${escapeHtml(v)}</td></tr>`)
    .join('');
  const fnSources = Object.entries(OPTION_FUNCTIONS)
    .map(([name, f]) => `${JSON.stringify(name)}: ${f.toString()}`)
    .join(',\n');
  const data = { charts: charts.map((c) => ({ id: c.id, option: c.option })) };
  const boot = `(function () {
  var FNS = {${fnSources}};
  var data = JSON.parse(document.getElementById('shardwise-report-data').textContent, function (k, v) {
    return v && typeof v === 'object' && typeof v.$fn === 'string' ? FNS[v.$fn] : v;
  });
  // ready once every chart has finished its first render (large series render progressively)
  var pending = data.charts.length;
  function done() { if (--pending === 0) document.documentElement.setAttribute('data-charts-ready', String(data.charts.length)); }
  // by id, as the dashboard lists its own (tests and the console read what a chart drew)
  var byId = {};
  function draw(c, renderer, onFirst) {
    var chart = echarts.init(document.getElementById('chart-' + c.id), null, { renderer: renderer });
    var first = true;
    chart.on('finished', function () { if (first) { first = false; onFirst(); } });
    chart.setOption(c.option);
    byId[c.id] = chart;
    return chart;
  }
  var charts = data.charts.map(function (c) { c.option.animation = false; return draw(c, 'canvas', done); });
  if (data.charts.length === 0) document.documentElement.setAttribute('data-charts-ready', '0');
  function resize() { charts.forEach(function (c) { c.resize(); }); }
  window.addEventListener('resize', resize);
  window.addEventListener('beforeprint', resize);
  window.shardwiseCharts = charts;
  window.__shardwiseReportCharts = byId;
  // For the PDF: every chart drawn again as SVG (its text stays text, sharp at any zoom) and a
  // zoom slider turned into an inside zoom that keeps its window (a printed slider is ink nobody
  // can drag). Resolves once every chart has drawn.
  var PRINT_MAX_HEIGHT = 660;
  window.shardwisePrintCharts = function () {
    return new Promise(function (resolve) {
      var left = data.charts.length;
      if (left === 0) return resolve(0);
      charts = data.charts.map(function (c, i) {
        charts[i].dispose();
        // no taller than a page (A4 landscape less margins: 718 px): a chart split over two pages prints its axis on the second
        var el = document.getElementById('chart-' + c.id);
        if (el.offsetHeight > PRINT_MAX_HEIGHT) el.style.height = PRINT_MAX_HEIGHT + 'px';
        var zooms = [].concat(c.option.dataZoom || []);
        if (zooms.length) {
          var kept = zooms.filter(function (z) { return z.type === 'slider' || z.startValue !== undefined || z.start !== undefined; });
          c.option.dataZoom = kept.map(function (z) { return { type: 'inside', xAxisIndex: z.xAxisIndex, filterMode: z.filterMode, startValue: z.startValue, endValue: z.endValue, start: z.start, end: z.end }; });
          if (c.option.grid && typeof c.option.grid.bottom === 'number') c.option.grid.bottom = Math.min(c.option.grid.bottom, 44);
        }
        return draw(c, 'svg', function () { if (--left === 0) resolve(data.charts.length); });
      });
      window.shardwiseCharts = charts;
    });
  };
})();`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data: blob:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<style>${CSS}</style>
</head>
<body>
<header><h1>${escapeHtml(title)}</h1><p>${escapeHtml(path.resolve(run.dir))} · report generated ${escapeHtml(generatedAt.toISOString())}</p></header>
<main>
${atAGlance(run)}
<div class="cols">
<div><h2>Summary</h2><table class="grid" id="summary">${rows}</table></div>
<div><h2>Config</h2><pre id="config">${escapeHtml(JSON.stringify(run.config, null, 2))}</pre></div>
</div>
${peakTable(run)}
${predictionSection(run, escapeHtml)}
${elasticSection(run, escapeHtml)}
${sections}
</main>
<script type="application/json" id="shardwise-report-data">${jsonForScript(data)}</script>
<script>${scriptSafe(echartsBundle())}</script>
<script>${scriptSafe(boot)}</script>
</body>
</html>
`;
}
