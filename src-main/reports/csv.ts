// A run's metrics as CSV: one row per optimizer step, one column per metric key present in
// metrics.jsonl (nested objects flattened with dots: memory.0.params), the step's validation
// loss where one was measured, and for a run whose membership changed the segment that recorded
// the step (1-based, as the report's Elastic table numbers them). RFC 4180 quoting.
import { segmentStretches, showsSegments } from '../../common/charts/index.js';
import type { RunData } from '../runs/read-run.js';
import { segmentsOfRun } from './elastic-section.js';

function flatten(prefix: string, v: unknown, out: Map<string, unknown>) {
  if (v && typeof v === 'object' && !Array.isArray(v)) {
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) flatten(prefix ? `${prefix}.${k}` : k, x, out);
  } else out.set(prefix, v);
}

function cell(v: unknown): string {
  if (v === undefined || v === null) return '';
  const s = typeof v === 'string' ? v : typeof v === 'number' || typeof v === 'boolean' ? String(v) : JSON.stringify(v);
  return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

export function metricsCsv(run: RunData): string {
  const evalAt = new Map(run.evals.map((e) => [e.step, e.val_loss]));
  const segments = segmentsOfRun(run);
  const stretches = showsSegments(segments) ? segmentStretches(segments, run.steps.at(-1)?.step ?? 0) : [];
  // a lost step's row is the one its later segment trained: the last stretch that holds it
  const segmentAt = (step: number) => stretches.filter((st) => st.from < step).at(-1)?.index;
  const columns: string[] = stretches.length ? ['step', 'segment', 'loss'] : ['step', 'loss'];
  const seen = new Set(columns);
  const rows = run.steps.map((s) => {
    const flat = new Map<string, unknown>();
    flatten('', s, flat);
    flat.delete('type');
    if (evalAt.has(s.step)) flat.set('val_loss', evalAt.get(s.step));
    if (stretches.length) flat.set('segment', segmentAt(s.step));
    for (const k of flat.keys())
      if (!seen.has(k)) {
        seen.add(k);
        columns.push(k);
      }
    return flat;
  });
  const lines = [columns.map(cell).join(','), ...rows.map((r) => columns.map((c) => cell(r.get(c))).join(','))];
  return `${lines.join('\n')}\n`;
}
