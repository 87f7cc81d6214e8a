// The report's "Predicted vs measured" tables, for a run with prediction.json: the step's parts
// (median step after the first) and every rank's memory categories, each predicted beside
// measured with the error, above the section's charts (common/charts/advisor-compare.ts makes
// both from the same rows).
import {
  formatBytes,
  formatError,
  measuredStepTime,
  memoryComparison,
  stepTimeComparison,
  type ComparisonRow,
} from '../../common/charts/index.js';
import { MEMORY_CATEGORIES } from '../../common/memory-categories.js';
import { strategyOf } from '../../common/strategies.js';
import type { RunData } from '../runs/read-run.js';

type Escape = (s: string) => string;

const ms = (v: number | null) => (v === null ? '—' : `${v.toFixed(1)} ms`);
const bytes = (v: number | null) => (v === null ? '—' : formatBytes(v));

/** The tables' HTML, '' for a run without a prediction or without steps. */
export function predictionSection(run: RunData, esc: Escape): string {
  const p = run.prediction;
  if (!p || run.steps.length === 0) return '';
  const pipelined = strategyOf(run.config.parallel?.strategy ?? 'single')?.pipelined ?? false;
  const measured = measuredStepTime(run.steps, run.spans, pipelined);
  const cell = (r: ComparisonRow, f: (v: number | null) => string) =>
    `<td>${esc(f(r.predicted))}</td><td>${esc(f(r.measured))}</td><td>${esc(formatError(r.error))}</td>`;
  const time = stepTimeComparison(p.plan, measured)
    .map((r) => `<tr data-part="${esc(r.key)}"><th>${esc(r.label)}</th>${cell(r, ms)}</tr>`)
    .join('');
  const keys = [...MEMORY_CATEGORIES, 'total'];
  const memHead = `<tr><th>rank</th><th>device</th>${keys.map((k) => `<th>${esc(k)}<br>predicted · measured</th>`).join('')}</tr>`;
  const memBody = memoryComparison(p.plan, run.summary, run.steps)
    .map(
      (r) =>
        `<tr data-rank="${r.rank}"><td>${r.rank}</td><td>${esc(r.device)}</td>${r.rows
          // the pair on one line, the error under it (a pair broken over lines reads as three numbers)
          .map((c) => `<td>${esc(bytes(c.predicted))} · ${esc(bytes(c.measured))}<br>(${esc(formatError(c.error))})</td>`)
          .join('')}</tr>`,
    )
    .join('');
  const source =
    p.profile.source === 'measured'
      ? `this machine's profile measured ${p.profile.measured_at ?? ''}`
      : p.profile.source === 'defaults'
        ? 'default speeds (no profile of this machine was stored)'
        : 'a what-if machine';
  const notes = p.notes.length ? `<ul>${p.notes.map((n) => `<li>${esc(n)}</li>`).join('')}</ul>` : '';
  return `<section id="prediction">
<h2>Predicted vs measured</h2>
<p>The advisor's prediction for this layout (${esc(p.plan.reason)}), from ${esc(source)}. Error = (measured − predicted) / measured.</p>${notes}
<h3>Step time${measured ? ` (median of ${measured.steps} steps after the first)` : ''}</h3>
<table class="grid" id="prediction-time"><tr><th>part</th><th>predicted</th><th>measured</th><th>error</th></tr>${time}</table>
<h3>Peak memory per rank</h3>
<table class="grid" id="prediction-memory">${memHead}${memBody}</table>
</section>`;
}
