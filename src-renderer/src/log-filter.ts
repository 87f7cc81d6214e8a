// The run view's log tail: logs.jsonl lines narrowed to one source (the controller's own lines,
// or one rank's output) and to those containing every word of a search, any case.
import type { LogRow } from '../../common/api/index.js';

/** 'all', 'controller' (lines with no rank) or a rank number as text */
export type LogSource = string;

export function filterLogs(lines: readonly LogRow[], source: LogSource, query: string): LogRow[] {
  const words = query.toLowerCase().split(/\s+/).filter(Boolean);
  return lines.filter((l) => {
    if (source === 'controller' && l.rank !== undefined) return false;
    if (source !== 'all' && source !== 'controller' && l.rank !== Number(source)) return false;
    const m = l.message.toLowerCase();
    return words.every((w) => m.includes(w));
  });
}

/** The ranks that printed something, ascending. */
export const logRanks = (lines: readonly LogRow[]): number[] =>
  [...new Set(lines.flatMap((l) => (l.rank === undefined ? [] : [l.rank])))].sort((a, b) => a - b);
