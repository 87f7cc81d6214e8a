// The real 8-rank 3d run kept in tests/e2e/fixtures (D 2 x T 2 x P 2, tiny, 4 steps), read as
// the chart builders and the topology read a run folder.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Span, StepMetric } from '../../common/charts/index.js';

const DIR = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../e2e/fixtures/run-3d-2x2x2');
const json = (f: string) => JSON.parse(readFileSync(path.join(DIR, f), 'utf8')) as Record<string, any>;
const jsonl = (f: string) =>
  readFileSync(path.join(DIR, f), 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as Record<string, any>);

export function threeDRun() {
  return {
    config: json('config.json'),
    state: json('state.json'),
    summary: json('summary.json'),
    steps: jsonl('metrics.jsonl').filter((r) => r.type === 'step') as StepMetric[],
    evals: [],
    spans: jsonl('spans.jsonl') as Span[],
  };
}
