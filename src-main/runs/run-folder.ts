// One folder per run: config.json, state.json (status and progress, rewritten atomically),
// metrics.jsonl (one JSON object per line, appended; a torn last line is skipped by readers),
// summary.json, checkpoints/ (written by the rank), run.lock while a writer holds it
// (run-lock.ts). A run whose state is not 'completed' never looks complete. The folder is
// position-free: nothing in it names its own absolute path (config.json's run_dir is ".", the
// checkpoint lines' paths are relative), so a moved or copied folder reads and resumes as itself.
import { appendFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';
import type { ElasticSummary } from '../../common/api/elastic.js';
import { RunStateSchema } from '../../common/api/runs.js';
import { writeFileAtomic } from '../../workers/protocol/atomic-file.js';
import { type TrainJob, TrainJobSchema } from '../../workers/protocol/train.js';
import { checkFile, parseJsonFile, RunFileError } from './folder-errors.js';

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
  /** the machine `pid` runs on (a reader elsewhere cannot tell whether it is gone) */
  host?: string;
  /** Ψ and the vocabulary, once rank 0 built the model (runs launched by the controller) */
  params?: number;
  vocab_size?: number;
  /** the placement a run was launched with through the API (config.placement; reused by a resume) */
  placement?: { machine: string; device?: string }[];
  /** where each rank runs and its process id there, once every rank started */
  ranks?: { rank: number; machine: string; pid: number }[];
  /** an elastic run's bounds, restarts and membership segments (common/api/elastic.ts) */
  elastic?: ElasticSummary;
}

/** What config.json keeps of a job: everything but its own place (run_dir "." is the folder that holds it). */
function positionFree(config: unknown): unknown {
  if (!config || typeof config !== 'object' || !('run_dir' in config)) return config;
  return { ...config, run_dir: '.', resume_from: undefined, replica_dir: undefined };
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
    run.writeConfig(config);
    const now = new Date().toISOString();
    run.writeState({ status: 'starting', created_at: now, updated_at: now, step: 0, steps, pid: process.pid, host: hostname() });
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

  private readJson(file: string): unknown {
    let text: string;
    try {
      text = readFileSync(path.join(this.dir, file), 'utf8');
    } catch (e) {
      throw new RunFileError(`run folder ${this.dir}: ${file} cannot be read (${(e as Error).message})`, { cause: e });
    }
    return parseJsonFile(this.dir, file, text);
  }

  /** config.json as JSON, its run_dir this folder (an old folder's absolute run_dir is ignored: the folder read is the truth). */
  readConfig<T>(): T {
    const c = this.readJson('config.json');
    if (!c || typeof c !== 'object' || Array.isArray(c))
      throw new RunFileError(`run folder ${this.dir}: config.json: expected a JSON object`);
    return ('run_dir' in c ? { ...c, run_dir: path.resolve(this.dir) } : c) as T;
  }

  /** config.json as the run's job, every field checked (one line per problem); run_dir is this folder's real path. */
  readJob(): TrainJob {
    return checkFile(this.dir, 'config.json', TrainJobSchema, this.readConfig());
  }

  /** config.json without its own place: run_dir "." and no resume_from (a resume finds its checkpoint in the folder). */
  writeConfig(config: unknown) {
    writeFileAtomic(this.configPath, `${JSON.stringify(positionFree(config), null, 2)}\n`);
  }

  /** state.json, every field checked (one line per problem). */
  readState(): RunState {
    return checkFile(this.dir, 'state.json', RunStateSchema, this.readJson('state.json')) as RunState;
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
