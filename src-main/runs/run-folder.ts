// One folder per run: config.json, state.json (status and progress, rewritten atomically),
// metrics.jsonl (one JSON object per line, appended; a torn last line is skipped by readers),
// summary.json, checkpoints/ (written by the rank). A run whose state is not 'completed' never
// looks complete.
import { appendFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { writeFileAtomic } from '../../workers/protocol/atomic-file.js';

// stopped: by a user through the controller's API (resumable, like interrupted)
export type RunStatus = 'starting' | 'running' | 'completed' | 'failed' | 'stopped' | 'interrupted';

export interface RunState {
  status: RunStatus;
  created_at: string;
  updated_at: string;
  step: number;
  steps: number;
  error?: string;
  /** the rank whose death or error failed the run */
  failed_rank?: number;
  pid?: number;
  /** Ψ and the vocabulary, once rank 0 built the model (runs launched by the controller) */
  params?: number;
  vocab_size?: number;
  /** the placement a run was launched with through the API (config.placement; reused by a resume) */
  placement?: { machine: string; device?: string }[];
  /** where each rank runs and its process id there, once every rank started */
  ranks?: { rank: number; machine: string; pid: number }[];
}

export class RunFolder {
  constructor(readonly dir: string) {}

  get configPath() {
    return path.join(this.dir, 'config.json');
  }
  get statePath() {
    return path.join(this.dir, 'state.json');
  }
  get metricsPath() {
    return path.join(this.dir, 'metrics.jsonl');
  }

  /** Create a new run folder; refuses to reuse a folder that holds anything. */
  static create(dir: string, config: unknown, steps: number): RunFolder {
    if (existsSync(dir)) {
      const entries = readdirSync(dir);
      if (entries.length > 0) {
        throw new Error(
          `output folder ${dir} is not empty${entries.includes('state.json') ? ' (it holds a run: continue it with --resume ' + dir + ')' : ''}; choose another --out`,
        );
      }
    }
    mkdirSync(dir, { recursive: true });
    const run = new RunFolder(dir);
    writeFileAtomic(run.configPath, `${JSON.stringify(config, null, 2)}\n`);
    const now = new Date().toISOString();
    run.writeState({ status: 'starting', created_at: now, updated_at: now, step: 0, steps, pid: process.pid });
    writeFileSync(run.metricsPath, '');
    return run;
  }

  static open(dir: string): RunFolder {
    const run = new RunFolder(dir);
    if (!existsSync(run.configPath) || !existsSync(run.statePath)) {
      throw new Error(
        `${dir} is not a Shardwise run folder (no config.json and state.json); give the folder a 'shardwise train' run wrote`,
      );
    }
    return run;
  }

  readConfig<T>(): T {
    return JSON.parse(readFileSync(this.configPath, 'utf8')) as T;
  }

  writeConfig(config: unknown) {
    writeFileAtomic(this.configPath, `${JSON.stringify(config, null, 2)}\n`);
  }

  readState(): RunState {
    return JSON.parse(readFileSync(this.statePath, 'utf8')) as RunState;
  }

  writeState(s: RunState) {
    writeFileAtomic(this.statePath, `${JSON.stringify(s, null, 2)}\n`);
  }

  updateState(patch: Partial<RunState>) {
    this.writeState({ ...this.readState(), ...patch, updated_at: new Date().toISOString() });
  }

  appendMetric(m: object) {
    appendFileSync(this.metricsPath, `${JSON.stringify(m)}\n`);
  }

  /** Metric lines, skipping a torn last line. */
  readMetrics(): Record<string, unknown>[] {
    if (!existsSync(this.metricsPath)) return [];
    const out: Record<string, unknown>[] = [];
    for (const line of readFileSync(this.metricsPath, 'utf8').split('\n')) {
      if (!line.trim()) continue;
      try {
        out.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        // torn write at a crash
      }
    }
    return out;
  }

  /** Keep metrics up to `step` (resume from a checkpoint rewinds the log). */
  truncateMetrics(step: number) {
    const kept = this.readMetrics().filter((m) => typeof m.step !== 'number' || (m.step as number) <= step);
    writeFileAtomic(this.metricsPath, kept.map((m) => `${JSON.stringify(m)}\n`).join(''));
  }

  /** Spans (compute and communication, per rank) as JSON lines, appended. */
  appendSpans(spans: object[]) {
    if (spans.length === 0) return;
    appendFileSync(path.join(this.dir, 'spans.jsonl'), spans.map((s) => `${JSON.stringify(s)}\n`).join(''));
  }

  /** The run's log: the controller's messages and what the ranks printed, one JSON line each ({time, level, message, rank?}). */
  appendLog(entry: object) {
    appendFileSync(path.join(this.dir, 'logs.jsonl'), `${JSON.stringify(entry)}\n`);
  }

  get predictionPath() {
    return path.join(this.dir, 'prediction.json');
  }

  /** The advisor's prediction for this run's layout (common/api/prediction.ts), written once at launch. */
  writePrediction(p: object) {
    writeFileAtomic(this.predictionPath, `${JSON.stringify(p, null, 2)}\n`);
  }

  /** prediction.json as parsed JSON, null when the run has none or it does not parse */
  readPrediction(): unknown {
    if (!existsSync(this.predictionPath)) return null;
    try {
      return JSON.parse(readFileSync(this.predictionPath, 'utf8')) as unknown;
    } catch {
      return null;
    }
  }

  writeSummary(s: object) {
    writeFileAtomic(path.join(this.dir, 'summary.json'), `${JSON.stringify(s, null, 2)}\n`);
  }

  remove() {
    rmSync(this.dir, { recursive: true, force: true });
  }
}
