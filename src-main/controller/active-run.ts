// One run this controller drives: the run driver (src-main/launch/run-driver.ts, the same one
// `shardwise train` uses) records it in its folder; this adds the live stream to the dashboard
// (memory samples, step lines, spans, state) and the run's log (logs.jsonl: the controller's
// messages and what the ranks print). The terminal state event comes last: a subscriber that
// stops at it has seen the rest.
import path from 'node:path';
import type { RunEvent, RunStateView } from '../../common/api/index.js';
import type { TrainJob } from '../../workers/protocol/train.js';
import type { ConnectedPlacement } from '../launch/placement.js';
import type { RankLauncher } from '../launch/rank-launcher.js';
import { type Rejoin, RunSupervisor } from '../launch/elastic/supervisor.js';
import type { RunEnd } from '../launch/run-driver.js';
import type { RunFolder } from '../runs/run-folder.js';
import type { RunTelemetry } from './telemetry.js';

export class ActiveRun {
  private readonly driver: RunSupervisor;
  private stopping = false;
  /** resolves once the run ended and every rank process is gone */
  finished!: Promise<void>;

  constructor(
    readonly id: string,
    readonly folder: RunFolder,
    readonly job: TrainJob,
    private readonly telemetry: RunTelemetry,
    /** a resume: the checkpoint step it continues from */
    resumedFrom?: number,
  ) {
    const publish = (e: RunEvent) => this.telemetry.publish(e);
    this.driver = new RunSupervisor(
      folder,
      job,
      {
        memory: (rank, step, bytes) => publish({ type: 'memory', rank, step, time: Date.now(), bytes }),
        ready: (m, rank) => {
          if (rank !== 0) return;
          this.log(
            'info',
            `training on ${m.adapter.description}${m.adapter.isSoftware ? ' (software adapter)' : ''}: ${m.params} parameters, vocab ${m.vocab_size}`,
          );
        },
        step: (row) => publish({ type: 'step', row: { ...row } }),
        eval: (row) => publish({ type: 'eval', row }),
        checkpoint: ({ step, path }) => publish({ type: 'checkpoint', step, path }),
        spans: (spans, rank, step) => publish({ type: 'spans', rank, step, spans }),
        output: (rank, stream, line) => this.log(stream === 'stderr' ? 'error' : 'info', line, rank),
        state: (state) => publish({ type: 'state', state: state as RunStateView }),
        segment: (s) => {
          publish({ type: 'segment', row: { type: 'segment', step: s.from_step, segment: s } });
          if (s.reason === 'rank-lost' || s.reason === 'machine-lost')
            this.log(
              'error',
              `${s.detail ?? 'ranks were lost'}; continuing as ${s.strategy} x ${s.world} ranks from step ${s.from_step} (state from ${s.source}, ${s.lost_steps} steps lost)`,
            );
          for (const n of s.notes ?? []) this.log('info', `note: ${n}`);
        },
        end: (end) => this.ended(end),
      },
      resumedFrom,
    );
  }

  /** an elastic run placed on agents: how it reaches lost machines again (a scale-up) */
  rejoin(r: Rejoin) {
    this.driver.rejoin = r;
  }

  get world() {
    return this.driver.world;
  }

  get pids(): number[] {
    return this.driver.pids;
  }

  /** A log line: kept in the run folder's logs.jsonl and streamed. */
  private log(level: 'info' | 'error', message: string, rank?: number) {
    const e = { type: 'log' as const, level, time: Date.now(), message, ...(rank !== undefined ? { rank } : {}) };
    this.folder.appendLog({ time: e.time, level, message, ...(rank !== undefined ? { rank } : {}) });
    this.telemetry.publish(e);
  }

  /**
   * placement: ranks on agents, connected beforehand; its connections are closed when the run ends.
   * notes: what the run should tell its user (a resume in another layout: what changed, what was reset), logged and kept in the summary
   */
  start(launcher: RankLauncher, placement?: ConnectedPlacement, notes: readonly string[] = []) {
    this.driver.notes.push(...notes);
    for (const n of notes) this.log('info', `note: ${n}`);
    const strategy = this.job.parallel?.strategy ?? 'single';
    const remote = placement?.ranks.flatMap((p, rank) => (p.kind === 'agent' ? [`${rank} on ${p.machine}`] : [])) ?? [];
    this.log(
      'info',
      `launching ${this.world} rank${this.world > 1 ? 's' : ''} (${strategy}) for ${this.job.train.steps} steps${this.job.resume_from ? `, resuming from ${path.basename(this.job.resume_from)}` : ''}${remote.length ? `; rank ${remote.join(', rank ')}` : ''}`,
    );
    this.finished = this.driver.run(launcher, placement).then(() => undefined);
  }

  stop() {
    if (this.stopping) return;
    this.stopping = true;
    this.log('info', 'stop requested: every rank finishes the step it is in and writes its checkpoint');
    // whether it can be resumed is the folder's to say (runs.get's resumable), not this message's
    this.driver.stop('stopped', 'stopped by the user');
  }

  private ended(end: RunEnd) {
    if (end.status === 'completed') {
      this.telemetry.publish({ type: 'summary', summary: end.summary });
      this.log('info', `completed: ${String(end.summary.steps)} steps, final loss ${(end.summary.final_loss as number).toFixed(4)}`);
    } else if (end.status === 'failed') this.log('error', end.error, end.rank);
    else {
      const at = this.driver.stoppedAfter;
      this.log('info', `stopped${at !== null ? ` after step ${at}, its checkpoint written` : ''}: every rank process exited`);
    }
  }
}
