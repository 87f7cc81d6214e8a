// The runs list's search and filters: a query that matches a run's id, tags and note (every
// word somewhere, any case: "zero3 baseline" finds a ZeRO-3 run tagged baseline), and exact
// filters on strategy, status and precision, whose choices are the values the listed runs have.
import type { RunListItem } from '../../common/api/index.js';

export interface RunsFilter {
  query: string;
  strategy: string;
  status: string;
  precision: string;
}
export const NO_FILTER: RunsFilter = { query: '', strategy: '', status: '', precision: '' };

type Row = Pick<RunListItem, 'id' | 'strategy' | 'status' | 'precision' | 'tags' | 'note'>;

const haystack = (r: Row) => [r.id, ...(r.tags ?? []), r.note ?? ''].join('\n').toLowerCase();

export function filterRuns<R extends Row>(runs: readonly R[], f: RunsFilter): R[] {
  const words = f.query.toLowerCase().split(/\s+/).filter(Boolean);
  return runs.filter((r) => {
    if (f.strategy && r.strategy !== f.strategy) return false;
    if (f.status && r.status !== f.status) return false;
    if (f.precision && (r.precision ?? 'fp32') !== f.precision) return false;
    if (words.length === 0) return true;
    const text = haystack(r);
    return words.every((w) => text.includes(w));
  });
}

/** The values each filter can take: those the runs have, sorted. */
export function filterChoices(runs: readonly Row[]): { strategy: string[]; status: string[]; precision: string[] } {
  const of = (pick: (r: Row) => string) => [...new Set(runs.map(pick))].sort();
  return { strategy: of((r) => r.strategy), status: of((r) => r.status), precision: of((r) => r.precision ?? 'fp32') };
}

/** "a, b ,c" as the tag list ["a","b","c"] (empty pieces dropped). */
export const parseTagInput = (text: string): string[] =>
  text
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean);
