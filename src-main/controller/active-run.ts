// One run this controller drives: its ranks (through a RankLauncher), its folder, and its
// live stream. Turns rank messages into metric lines (one per optimizer step, over all ranks),
// memory samples, spans and logs; writes them to the run folder first, then publishes them.
// Ends the run as completed (summary.json), stopped (a user asked), or failed (the rank and
// the reason), and only after every rank process is gone.
import path from 'node:path';
import type { RunEvent, RunStateView } from '../../common/api/index.js';
import type { RankMessage, TrainJob } from '../../workers/protocol/train.js';
import { type BubbleMeter, bubbleMeterFor } from '../cli/bubble.js';
import { runSummary } from '../cli/run-summary.js';
import { StepAggregator } from '../cli/step-aggregator.js';
import type { RunFolder, RunState } from '../runs/run-folder.js';
import type { ConnectedPlacement } from '../launch/placement.js';
import type { LaunchedRanks, RankLauncher } from './rank-launcher.js';
import type { RunTelemetry } from './telemetry.js';

type DoneMsg = Extract<RankMessage, { type: 'done' }>;

export class ActiveRun {
  private ranks!: LaunchedRanks;
  private stopping = false;
  private readonly done = new Map<number, DoneMsg>();
  private readonly steps: StepAggregator;
  private readonly tokensPerS: number[] = [];
  private lastVal: number | undefined;
  /** pipeline runs: idle time per stage, from the spans */
  private readonly bubble: BubbleMeter | null;
  /** where each rank runs, once all started (state.json's `ranks`, the summary's too) */
  private placed: { rank: number; machine: string; pid: number }[] | null = null;
  /** resolves once the run ended and every rank process is gone */
  finished!: Promise<void>;

  constructor(
    readonly id: string,
    readonly folder: RunFolder,
    readonly job: TrainJob,
    private readonly telemetry: RunTelemetry,
  ) {
    this.steps = new StepAggregator(this.world);
    this.bubble = bubbleMeterFor(job.parallel);
  }

  get world() {
    return this.job.parallel?.world ?? 1;
  }

  get pids(): number[] {
    return this.ranks?.pids ?? [];
  }

  private state(patch: Partial<RunState>) {
    this.folder.updateState(patch);
    this.telemetry.publish({ type: 'state', state: this.folder.readState() as RunStateView });
  }

  /** A log line: kept in the run folder's logs.jsonl and streamed. */
  private log(level: 'info' | 'error', message: string, rank?: number) {
    const e = { type: 'log' as const, level, time: Date.now(), message, ...(rank !== undefined ? { rank } : {}) };
    this.folder.appendLog({ time: e.time, level, message, ...(rank !== undefined ? { rank } : {}) });
    this.telemetry.publish(e);
  }

  /** placement: ranks on agents, connected beforehand; its connections are closed when the run ends */
  start(launcher: RankLauncher, placement?: ConnectedPlacement) {
    const strategy = this.job.parallel?.strategy ?? 'single';
    const remote = placement?.ranks.flatMap((p, rank) => (p.kind === 'agent' ? [`${rank} on ${p.machine}`] : [])) ?? [];
    this.log(
      'info',
      `launching ${this.world} rank${this.world > 1 ? 's' : ''} (${strategy}) for ${this.job.train.steps} steps${this.job.resume_from ? `, resuming from ${path.basename(this.job.resume_from)}` : ''}${remote.length ? `; rank ${remote.join(', rank ')}` : ''}`,
    );
    this.ranks = launcher.launch(
      this.job,
      (m, rank) => this.onMessage(m, rank),
      (rank, stream, line) => this.log(stream === 'stderr' ? 'error' : 'info', line, rank),
      {
        ...(placement ? { placement: placement.ranks } : {}),
        onRanksStarted: (ranks) => {
          this.placed = ranks.map((r) => ({ rank: r.rank, machine: r.machine, pid: r.pid }));
          this.state({ ranks: this.placed });
        },
      },
    );
    this.finished = this.ranks.result.then((failure) => {
      placement?.close();
      this.end(failure);
    });
  }

  stop() {
    if (this.stopping) return;
    this.stopping = true;
    this.log('info', 'stop requested: stopping every rank');
    this.ranks.stop();
  }

  private publish(e: RunEvent) {
    this.telemetry.publish(e);
  }

  private onMessage(m: RankMessage, rank: number) {
    switch (m.type) {
      case 'ready':
        this.publish({ type: 'memory', rank, step: m.start_step, time: Date.now(), bytes: m.memory });
        if (rank === 0) {
          this.state({ status: 'running', params: m.params, vocab_size: m.vocab_size }); // the dashboard's formula line needs Ψ while running
          this.log(
            'info',
            `training on ${m.adapter.description}${m.adapter.isSoftware ? ' (software adapter)' : ''}: ${m.params} parameters, vocab ${m.vocab_size}`,
          );
        }
        break;
      case 'step': {
        this.publish({ type: 'memory', rank, step: m.step, time: Date.now(), bytes: m.memory });
        const s = this.steps.add(rank, m);
        if (!s) break;
        this.tokensPerS.push(s.tokens_per_s);
        this.folder.appendMetric(s);
        this.folder.updateState({ step: s.step });
        this.publish({ type: 'step', row: { ...s } });
        break;
      }
      case 'eval': {
        this.lastVal = m.val_loss;
        const row = { type: 'eval' as const, step: m.step, val_loss: m.val_loss };
        this.folder.appendMetric(row);
        this.publish({ type: 'eval', row });
        break;
      }
      case 'checkpoint':
        this.folder.appendMetric({ type: 'checkpoint', step: m.step, path: m.path });
        this.publish({ type: 'checkpoint', step: m.step, path: m.path });
        break;
      case 'spans': {
        this.bubble?.add(m.step, rank, m.spans);
        const rows = m.spans.map((s) => ({ rank, step: m.step, ...s }));
        this.folder.appendSpans(rows);
        this.publish({ type: 'spans', rank, step: m.step, spans: rows });
        break;
      }
      case 'done':
        this.done.set(rank, m);
        break;
      default:
        break;
    }
  }

  // the terminal state event comes last: a subscriber that stops at it has seen the rest
  private end(failure: { rank: number; message: string } | null) {
    if (this.stopping) {
      this.log('info', 'stopped: every rank process exited');
      this.state({ status: 'stopped', error: 'stopped by the user; resume it to continue from its latest checkpoint' });
      return;
    }
    if (failure || this.done.size !== this.world) {
      const reason = failure?.message ?? `only ${this.done.size} of ${this.world} ranks finished`;
      this.log('error', reason, failure?.rank);
      this.state({ status: 'failed', error: reason, ...(failure ? { failed_rank: failure.rank } : {}) });
      return;
    }
    const summary = this.summary();
    this.folder.writeSummary(summary);
    this.publish({ type: 'summary', summary });
    this.log('info', `completed: ${String(summary.steps)} steps, final loss ${this.steps.lastLoss.toFixed(4)}`);
    this.state({ status: 'completed', step: summary.steps as number });
  }

  /** The same keys as `train --json`'s summary line (one builder for both). */
  private summary(): Record<string, unknown> {
    const summary = runSummary({
      job: this.job,
      runDir: this.folder.dir,
      done: this.done,
      tokensPerS: this.tokensPerS,
      lastLoss: this.steps.lastLoss,
      lastVal: this.lastVal,
      bubble: this.bubble,
    });
    return this.placed ? { ...summary, ranks: this.placed.map(({ rank, machine }) => ({ rank, machine })) } : summary;
  }
}
