// Everything a run folder says, read for a report or the dashboard's "open a past run":
// config.json, state.json, summary.json (absent until the run ends), metrics.jsonl and
// spans.jsonl. A run that crashed may end a .jsonl in the middle of a line: unparseable lines
// are skipped and counted, never fatal (the last line of a crashed run is usually torn).
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { RunPredictionSchema, type RunPrediction } from '../../common/api/prediction.js';
import type { EvalMetric, Span, StepMetric } from '../../common/charts/types.js';
import { parseJsonFile } from './folder-errors.js';
import { RunFolder, type RunState } from './run-folder.js';
import { currentState } from './run-liveness.js';

export interface SkippedLine {
  file: string;
  /** 1-based line number */
  line: number;
  /** the file's last line without its newline: torn by a crash mid-write */
  torn: boolean;
}

export interface RunData {
  dir: string;
  config: Record<string, any>;
  state: RunState;
  /** summary.json; null while running or after a crash */
  summary: Record<string, any> | null;
  /** every metrics.jsonl line, in order */
  metrics: Record<string, unknown>[];
  /** step lines, one per step (a later line for the same step wins) */
  steps: StepMetric[];
  /** validation points, one per step */
  evals: EvalMetric[];
  spans: Span[];
  skipped: SkippedLine[];
  /** prediction.json (the advisor's prediction for the run's layout), null when the run has none or it is not valid */
  prediction: RunPrediction | null;
}

/** JSON objects of a .jsonl file, skipping lines that do not parse; [] when the file is absent. */
export function readJsonLines(file: string, skipped: SkippedLine[] = []): Record<string, unknown>[] {
  if (!existsSync(file)) return [];
  const text = readFileSync(file, 'utf8');
  const lines = text.split('\n');
  const out: Record<string, unknown>[] = [];
  lines.forEach((line, i) => {
    if (!line.trim()) return;
    try {
      const v = JSON.parse(line) as unknown;
      if (v && typeof v === 'object' && !Array.isArray(v)) out.push(v as Record<string, unknown>);
      else skipped.push({ file: path.basename(file), line: i + 1, torn: false });
    } catch {
      skipped.push({ file: path.basename(file), line: i + 1, torn: i === lines.length - 1 });
    }
  });
  return out;
}

function readJson(dir: string, file: string): Record<string, any> {
  return parseJsonFile(dir, file, readFileSync(path.join(dir, file), 'utf8')) as Record<string, any>;
}

const num = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

function predictionOf(run: RunFolder): RunPrediction | null {
  const r = RunPredictionSchema.safeParse(run.readPrediction());
  return r.success ? r.data : null;
}

export function readRun(dir: string): RunData {
  if (!existsSync(dir)) throw new Error(`run folder ${dir} does not exist; give the folder a 'shardwise train --out DIR' run wrote`);
  if (!statSync(dir).isDirectory())
    throw new Error(`${dir} is a file, not a run folder; give the folder a 'shardwise train --out DIR' run wrote`);
  const run = RunFolder.open(dir); // throws when config.json or state.json is missing
  // every file's problems named whole (folder, file, field); config's run_dir is this folder, whatever an old one recorded
  const config = run.readConfig<Record<string, any>>();
  // a run whose writer is gone (kill -9) reads, and is recorded, as interrupted
  const state: RunState = currentState(run);
  const summaryPath = path.join(dir, 'summary.json');
  const summary = existsSync(summaryPath) ? { ...readJson(dir, 'summary.json'), run_dir: path.resolve(dir) } : null;
  const skipped: SkippedLine[] = [];
  const metrics = readJsonLines(run.metricsPath, skipped);
  const steps = new Map<number, StepMetric>();
  const evals = new Map<number, EvalMetric>();
  for (const m of metrics) {
    if (m.type === 'step' && num(m.step) && num(m.loss)) steps.set(m.step, m as unknown as StepMetric);
    else if (m.type === 'eval' && num(m.step) && num(m.val_loss)) evals.set(m.step, { step: m.step, val_loss: m.val_loss });
  }
  const spans = readJsonLines(path.join(dir, 'spans.jsonl'), skipped).filter(
    (s): s is Record<string, unknown> & Span =>
      num(s.rank) && num(s.step) && num(s.start) && num(s.end) && typeof s.kind === 'string' && typeof s.name === 'string',
  );
  return {
    dir,
    config,
    state,
    summary,
    metrics,
    steps: [...steps.values()].sort((a, b) => a.step - b.step),
    evals: [...evals.values()].sort((a, b) => a.step - b.step),
    spans,
    skipped,
    prediction: predictionOf(run),
  };
}
