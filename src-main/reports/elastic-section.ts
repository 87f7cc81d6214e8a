// The report's "Elastic" section, for a run whose membership changed (a lost rank or machine, a
// scale-up, a resume): restarts and lost steps (summary.json's elastic, else state.json's, else
// counted from the segments) and one table row per segment: its steps, layout, machines, the
// reason and what changed, the steps trained again and how its state came back. The segments
// come from metrics.jsonl's segment rows, else the elastic block; the charts band by the same.
import { ElasticSummarySchema, type ElasticSummary, type Segment } from '../../common/api/elastic.js';
import {
  mergeSegments,
  segmentLayout,
  segmentMachines,
  segmentRecovery,
  segmentStretches,
  segmentsOfRows,
  showsSegments,
} from '../../common/charts/index.js';
import type { RunData } from '../runs/read-run.js';

type Escape = (s: string) => string;

/** summary.json's elastic block, else state.json's; null when neither has a valid one. */
export function elasticOf(run: Pick<RunData, 'summary' | 'state'>): ElasticSummary | null {
  for (const v of [run.summary?.elastic, (run.state as { elastic?: unknown }).elastic]) {
    const r = ElasticSummarySchema.safeParse(v);
    if (r.success) return r.data;
  }
  return null;
}

/** The run's segments: metrics.jsonl's rows with the elastic block's (up to date: last steps, recovery) laid over them. */
export function segmentsOfRun(run: Pick<RunData, 'metrics' | 'summary' | 'state'>): Segment[] {
  return mergeSegments(segmentsOfRows(run.metrics), elasticOf(run)?.segments);
}

/** The section's HTML; '' for a run that was not elastic and never changed membership. */
export function elasticSection(run: RunData, esc: Escape): string {
  const elastic = elasticOf(run);
  const segments = segmentsOfRun(run);
  if (!elastic && !showsSegments(segments)) return '';
  const restarts = elastic?.restarts ?? segments.filter((s) => s.reason !== 'start' && s.reason !== 'resume').length;
  const lost = elastic?.lost_steps ?? segments.reduce((a, s) => a + s.lost_steps, 0);
  const lastStep = run.steps.reduce((m, s) => Math.max(m, s.step), 0);
  const bounds = elastic ? `${elastic.min}–${elastic.max} ranks, at most ${elastic.max_restarts} restarts` : 'not elastic (resumed)';
  const figures: [string, string][] = [
    ['restarts', String(restarts)],
    ['lost steps', String(lost)],
    ['segments', String(segments.length)],
    ['bounds', bounds],
  ];
  const rows = segmentStretches(segments, lastStep)
    .map((st) => {
      const s = st.segment;
      const cells = [
        String(st.index),
        `${st.from + 1}–${st.to}`,
        segmentLayout(s),
        segmentMachines(s),
        s.reason + (s.detail ? `: ${s.detail}` : ''),
        String(s.lost_steps),
        st.index === 1 && s.reason === 'start' ? '—' : segmentRecovery(s),
      ];
      return `<tr data-segment="${st.index}">${cells.map((c) => `<td>${esc(c)}</td>`).join('')}</tr>`;
    })
    .join('');
  const head = ['#', 'steps', 'layout', 'machines', 'reason', 'lost steps', 'recovery'].map((h) => `<th>${h}</th>`).join('');
  return `<section id="elastic"><h2>Elastic</h2>
<div class="figures" id="elastic-figures">${figures.map(([k, v]) => `<div class="figure"><span>${esc(k)}</span><strong>${esc(v)}</strong></div>`).join('')}</div>
<table class="grid" id="elastic-segments"><tr>${head}</tr>${rows}</table>
<p>The step charts below band by these segments; a dashed line marks where each change began.</p>
</section>`;
}
