// The runs root as the API sees it: one folder per run (src-main/runs/run-folder.ts). Listing
// also repairs what a crash left behind: a run whose state says starting/running but whose
// writer is gone (src-main/runs/run-liveness.ts; and that no live controller here drives) is
// marked interrupted; its finished steps are already in metrics.jsonl. Each run says whether a
// resume would continue it, and if not why (the dashboard offers Resume only then).
import { createReadStream, existsSync, mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import {
  ApiError,
  type LogRow,
  LogRowSchema,
  type MetricRow,
  MetricRowSchema,
  type RunDetail,
  type RunListItem,
  type RunPrediction,
  RunPredictionSchema,
  type RunStateView,
  type SpanRow,
  SpanRowSchema,
  type StepRow,
} from '../../common/api/index.js';
import { checkpointSteps, resumability } from '../launch/resume.js';
import { RunFolder, type RunState } from '../runs/run-folder.js';
import { readRunMeta, writeRunMeta } from '../runs/run-meta.js';
import { precisionOrDefault } from '../../common/precision.js';
import type { RunMeta } from '../../common/api/annotations.js';
import { type HostRow, HostRowSchema } from '../../common/api/host.js';
import { HOST_FILE } from '../runs/host-sampler.js';
import { currentState, isLiveStatus } from '../runs/run-liveness.js';

export class RunStore {
  constructor(
    readonly root: string,
    /** is this run driven by this controller right now? */
    private readonly isActive: (id: string) => boolean,
  ) {
    mkdirSync(root, { recursive: true });
  }

  dir(id: string): string {
    return path.join(this.root, id);
  }

  exists(id: string): boolean {
    return existsSync(path.join(this.dir(id), 'state.json'));
  }

  open(id: string): RunFolder {
    if (!this.exists(id)) throw new ApiError('NotFound', `no run "${id}" in ${this.root}; runs.list shows the runs`);
    return RunFolder.open(this.dir(id));
  }

  /** The state, repaired if its controller died mid-run. */
  state(id: string, folder = this.open(id)): RunState {
    return currentState(folder, this.isActive(id));
  }

  /** Is the run live here or in another live process (a `shardwise train` in a terminal)? */
  isLive(id: string): boolean {
    return this.isActive(id) || isLiveStatus(this.state(id).status);
  }

  list(): RunListItem[] {
    const out: RunListItem[] = [];
    for (const name of readdirSync(this.root)) {
      if (!this.exists(name)) continue;
      try {
        out.push(this.item(name));
      } catch {
        // a folder being created or removed right now
      }
    }
    return out.sort((a, b) => (a.created_at < b.created_at ? 1 : a.created_at > b.created_at ? -1 : 0));
  }

  private item(id: string): RunListItem {
    const folder = this.open(id);
    const s = this.state(id, folder);
    const config = folder.readConfig<Record<string, any>>();
    const summary = this.summary(folder);
    let finalLoss = typeof summary?.final_loss === 'number' ? summary.final_loss : null;
    if (finalLoss === null) {
      const steps = this.metrics(id, 0).filter((m): m is StepRow => m.type === 'step');
      finalLoss = steps.length ? steps[steps.length - 1]!.loss : null;
    }
    return {
      id,
      dir: folder.dir,
      status: s.status,
      step: s.step,
      steps: s.steps,
      created_at: s.created_at,
      updated_at: s.updated_at,
      preset: config.model?.preset ?? null,
      strategy: config.parallel?.strategy ?? 'single',
      world: config.parallel?.world ?? 1,
      final_loss: finalLoss,
      ...(s.error ? { error: s.error } : {}),
      precision: precisionOrDefault(config.precision),
      ...readRunMeta(folder.dir),
      ...resumability(s, this.checkpoints(id)),
    };
  }

  private summary(folder: RunFolder): Record<string, unknown> | null {
    const p = path.join(folder.dir, 'summary.json');
    if (!existsSync(p)) return null;
    try {
      return JSON.parse(readFileSync(p, 'utf8')) as Record<string, unknown>;
    } catch {
      return null;
    }
  }

  checkpoints(id: string): number[] {
    return checkpointSteps(this.dir(id));
  }

  detail(id: string, pids: number[] | null): RunDetail {
    const folder = this.open(id);
    const state = this.state(id, folder);
    const completed = state.status === 'completed';
    const checkpoints = this.checkpoints(id);
    return {
      id,
      dir: folder.dir,
      config: folder.readConfig<Record<string, unknown>>(),
      state: state as RunStateView,
      summary: completed ? this.summary(folder) : null,
      checkpoints,
      live: pids ? { pids } : null,
      ...this.prediction(folder),
      ...resumability(state, checkpoints),
    };
  }

  /** prediction.json when it holds a valid prediction (an older or damaged one is left out, not fatal) */
  private prediction(folder: RunFolder): { prediction?: RunPrediction } {
    const r = RunPredictionSchema.safeParse(folder.readPrediction());
    return r.success ? { prediction: r.data } : {};
  }

  /** metrics.jsonl rows with step >= fromStep; lines that do not parse as a row are skipped */
  metrics(id: string, fromStep = 0): MetricRow[] {
    const out: MetricRow[] = [];
    for (const m of this.open(id).readMetrics()) {
      const r = MetricRowSchema.safeParse(m);
      if (r.success && r.data.step >= fromStep) out.push(r.data);
    }
    return out;
  }

  /** spans.jsonl rows in [fromStep, toStep], streamed so a big file is never held whole */
  async spans(id: string, fromStep = 0, toStep = Infinity, limit = 50_000): Promise<{ spans: SpanRow[]; truncated: boolean }> {
    const file = path.join(this.open(id).dir, 'spans.jsonl');
    const spans: SpanRow[] = [];
    if (!existsSync(file) || statSync(file).size === 0) return { spans, truncated: false };
    const rl = createInterface({ input: createReadStream(file, 'utf8'), crlfDelay: Infinity });
    let truncated = false;
    for await (const line of rl) {
      if (!line.trim()) continue;
      let raw: unknown;
      try {
        raw = JSON.parse(line);
      } catch {
        continue; // torn last line after a crash
      }
      const r = SpanRowSchema.safeParse(raw);
      if (!r.success || r.data.step < fromStep || r.data.step > toStep) continue;
      if (spans.length >= limit) {
        truncated = true;
        rl.close();
        break;
      }
      spans.push(r.data);
    }
    return { spans, truncated };
  }

  logs(id: string, limit = 1000): LogRow[] {
    const file = path.join(this.open(id).dir, 'logs.jsonl');
    if (!existsSync(file)) return [];
    const out: LogRow[] = [];
    for (const line of readFileSync(file, 'utf8')
      .split('\n')
      .slice(-limit - 1)) {
      if (!line.trim()) continue;
      try {
        const r = LogRowSchema.safeParse(JSON.parse(line));
        if (r.success) out.push(r.data);
      } catch {
        // torn last line after a crash
      }
    }
    return out.slice(-limit);
  }

  /** host.jsonl rows with time >= fromTime (a torn or foreign line is skipped) */
  host(id: string, fromTime = 0): HostRow[] {
    const file = path.join(this.open(id).dir, HOST_FILE);
    if (!existsSync(file)) return [];
    const out: HostRow[] = [];
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      if (!line.trim()) continue;
      try {
        const r = HostRowSchema.safeParse(JSON.parse(line));
        if (r.success && r.data.time >= fromTime) out.push(r.data);
      } catch {
        // torn last line
      }
    }
    return out;
  }

  /** runs.annotate: the run's tags and/or note into its meta.json */
  annotate(id: string, change: { tags?: string[]; note?: string }): RunMeta {
    return writeRunMeta(this.open(id).dir, change);
  }

  delete(id: string) {
    const folder = this.open(id);
    if (this.isLive(id)) throw new ApiError('Conflict', `run "${id}" is running; stop it (runs.stop) before deleting it`);
    folder.remove();
  }
}
