// One run driver for `shardwise train` and the controller's runs.launch / runs.resume. It
// launches the ranks (through a RankLauncher) and turns their messages into the run folder:
// metrics.jsonl (one line per optimizer step over all ranks, evals, checkpoints), spans.jsonl,
// state.json (status, step, Ψ, where the ranks run) and summary.json. It ends the run as
// completed, failed (the rank and the reason) or stopped/interrupted, once every rank process is
// gone. A stop lets the ranks finish their step and checkpoint it (up to STOP_GRACE_MS), so a
// stopped run resumes from the step it stopped at. A front end adds its own output through RunListener, called after the folder holds the
// data: the CLI its progress bar and --json lines, the controller its event stream and log.
import path from 'node:path';
import type { Segment } from '../../common/api/elastic.js';
import { divergedWhat, divergenceVerdict, type StepNumbers } from '../../workers/protocol/divergence.js';
import { type RankMessage, STOP_GRACE_MS, type TrainJob } from '../../workers/protocol/train.js';
import { loadMachineProfile } from '../machine/profile-store.js';
import { bubbleMeterFor } from '../runs/bubble.js';
import type { RunFolder, RunState } from '../runs/run-folder.js';
import { runSummary } from '../runs/run-summary.js';
import { adapterPeakTflops, type RankTflops } from '../../common/advisor/rank-tflops.js';
import { StepAggregator, type StepLine } from '../runs/step-aggregator.js';
import type { LostRank, RankInfo } from './local-ranks.js';
import type { ConnectedPlacement } from './placement.js';
import type { LaunchedRanks, RankFailureInfo, RankLauncher } from './rank-launcher.js';

/** `p` relative to `dir` when it lies inside it ('/runs/a/checkpoints/step-2' -> 'checkpoints/step-2'), else as given */
function relativeTo(dir: string, p: string): string {
  const r = path.relative(path.resolve(dir), path.resolve(dir, p));
  return r && !r.startsWith('..') && !path.isAbsolute(r) ? r : p;
}

type Msg<T extends RankMessage['type']> = Extract<RankMessage, { type: T }>;
export type ReadyMessage = Msg<'ready'>;
export type EvalLine = { type: 'eval'; step: number; val_loss: number };
export type CheckpointLine = { type: 'checkpoint'; step: number; path: string };
/** one line of spans.jsonl: a rank's span of one step */
export type SpanLine = { rank: number; step: number } & Msg<'spans'>['spans'][number];

/** How a run ended; the run folder's state says the same. */
export type RunEnd =
  | { status: 'completed'; summary: Record<string, unknown> }
  | { status: 'failed'; error: string; rank?: number; lost?: LostRank[]; noticedAt?: number }
  | { status: 'stopped' | 'interrupted'; error: string };

/** What a front end adds to the run folder's record; every member optional. */
export interface RunListener {
  /** a rank built its model and is about to train (rank 0's Ψ and vocabulary are in state.json by then) */
  ready?(m: ReadyMessage, rank: number): void;
  /** one rank's bytes per memory category at a step (at `ready`: its start step) */
  memory?(rank: number, step: number, bytes: Record<string, number>): void;
  step?(line: StepLine): void;
  eval?(line: EvalLine): void;
  checkpoint?(line: CheckpointLine): void;
  /** an elastic run's newest whole state after `step`, a checkpoint folder in the controller machine's memory (absolute path) */
  replica?(step: number, path: string): void;
  spans?(lines: SpanLine[], rank: number, step: number): void;
  /** every rank, here and on agents, has started: where, and its process id there */
  ranksStarted?(ranks: RankInfo[]): void;
  /** each line a rank printed; without this listener, local ranks print to this process's own stdout and stderr */
  output?(rank: number, stream: 'stdout' | 'stderr', line: string): void;
  /** state.json changed status or where the ranks run (not at every step's counter) */
  state?(state: RunState): void;
  /** an elastic or resumed run's membership segment began (its line is in metrics.jsonl): the first, or a restart after a loss */
  segment?(segment: Segment): void;
  /** the run ended; called before the final state is written, so that state comes last */
  end?(end: RunEnd): void;
}

export class RunDriver {
  private ranks: LaunchedRanks | null = null;
  private stopping: Extract<RunEnd, { status: 'stopped' | 'interrupted' }> | null = null;
  private readonly done = new Map<number, Msg<'done'>>();
  private readonly steps: StepAggregator;
  private readonly tokensPerS: number[] = [];
  private readonly tflops: Record<string, RankTflops>[] = [];
  private lastVal: number | undefined;
  /** pipeline runs: idle time per stage, from the spans */
  private readonly bubble;
  /** where each rank runs, once all started (state.json's `ranks`, the summary's too) */
  private placed: RankInfo[] | null = null;
  /** what the job's resolution told the user (config keys ignored, with why): the summary keeps them */
  readonly notes: string[] = [];
  /** a step line reached metrics.jsonl since this launch */
  recordedSteps = false;
  /** the last step recorded in metrics.jsonl by this launch (null: none yet) */
  lastStep: number | null = null;
  /** keys the summary adds when the run completes (an elastic run's `elastic`) */
  summaryExtra: () => Record<string, unknown> = () => ({});
  /**
   * An elastic run's supervisor (launch/elastic/): sees how the ranks ended before the folder and
   * the listener do; null: it restarts the run, so this launch's end is not the run's (no end
   * state, no listener end); else the end to record (possibly reworded).
   */
  settle: ((end: RunEnd) => RunEnd | null) | null = null;
  /** the last step line's loss (finite: a diverged step is never recorded) */
  private lastFinite: { loss: number; step: number } | null = null;
  /** the run diverged: the verdict it ends with, whatever the ranks report after it */
  private diverged: { error: string; rank: number } | null = null;
  /** the step the ranks stopped after, their checkpoint of it written (a stop they finished) */
  stoppedAfter: number | null = null;
  /** the ranks that received a SIGTERM themselves (not from this driver: a `kill` of one rank) */
  private readonly sigtermed: number[] = [];

  constructor(
    readonly folder: RunFolder,
    readonly job: TrainJob,
    private readonly listener: RunListener = {},
  ) {
    this.steps = new StepAggregator(this.world);
    this.bubble = bubbleMeterFor(job.parallel);
  }

  get world() {
    return this.job.parallel?.world ?? 1;
  }

  /** local rank processes still alive */
  get pids(): number[] {
    return this.ranks?.pids ?? [];
  }

  /**
   * Launch the ranks (placement: on agents, connected beforehand; closed when the run ends).
   * Resolves with how the run ended, once every rank process is gone and the folder says so.
   */
  run(launcher: RankLauncher, placement?: ConnectedPlacement): Promise<RunEnd> {
    const output = this.listener.output;
    this.ranks = launcher.launch(this.job, (m, rank) => this.onMessage(m, rank), {
      ...(placement ? { placement: placement.ranks } : {}),
      ...(output ? { onOutput: (rank, stream, line) => output(rank, stream, line) } : {}),
      onRanksStarted: (ranks) => {
        this.placed = ranks;
        this.setState({ ranks: ranks.map(({ rank, machine, pid }) => ({ rank, machine, pid })) });
        this.listener.ranksStarted?.(ranks);
      },
    });
    return this.ranks.result.then((failure) => {
      placement?.close();
      return this.end(failure);
    });
  }

  /**
   * Stop every rank; once they are gone the run ends as `status` with `error` as the reason. The
   * ranks finish their step and checkpoint it; what is still alive after `graceMs` is killed.
   */
  stop(status: 'stopped' | 'interrupted', error: string, graceMs = STOP_GRACE_MS) {
    if (this.stopping) return;
    this.stopping = { status, error };
    this.ranks?.stop(graceMs);
  }

  /** This process is about to exit (a second Ctrl-C): kill the ranks now, no checkpoint, and mark the run interrupted now, not once they are gone. */
  interrupt(error: string) {
    this.stopping ??= { status: 'interrupted', error };
    this.ranks?.stop(0);
    this.setState({ status: 'interrupted', error });
  }

  /** the rank's adapter peak, for MFU: its device class, else this machine's stored profile (a damaged one only costs the MFU) */
  private notePeak(rank: number, adapter: string) {
    let profile = null;
    try {
      profile = loadMachineProfile();
    } catch {
      // `shardwise profile --refresh` rewrites it; the run goes on without the profile's peak
    }
    const peak = adapterPeakTflops(adapter, profile);
    if (peak) this.steps.peaks.set(rank, peak);
  }

  private setState(patch: Partial<RunState>) {
    this.folder.updateState(patch);
    this.listener.state?.(this.folder.readState());
  }

  private onMessage(m: RankMessage, rank: number) {
    const l = this.listener;
    switch (m.type) {
      case 'ready':
        l.memory?.(rank, m.start_step, m.memory);
        this.notePeak(rank, m.adapter.description);
        // the dashboard's formula line needs Ψ while the run is going
        if (rank === 0) this.setState({ status: 'running', params: m.params, vocab_size: m.vocab_size });
        l.ready?.(m, rank);
        break;
      case 'step': {
        if (this.divergedAt(rank, m.step, m)) break;
        l.memory?.(rank, m.step, m.memory);
        const s = this.steps.add(rank, m);
        if (!s) break;
        this.recordedSteps = true;
        this.lastStep = s.step;
        this.lastFinite = { loss: s.loss, step: s.step };
        this.tokensPerS.push(s.tokens_per_s);
        if (s.tflops) this.tflops.push(s.tflops);
        this.folder.appendMetric(s);
        this.folder.updateState({ step: s.step });
        l.step?.(s);
        break;
      }
      case 'eval': {
        if (this.divergedAt(rank, m.step, m)) break;
        this.lastVal = m.val_loss;
        const line: EvalLine = { type: 'eval', step: m.step, val_loss: m.val_loss };
        this.folder.appendMetric(line);
        l.eval?.(line);
        break;
      }
      case 'checkpoint': {
        // relative to the run folder (position-free: a moved or copied folder still finds it)
        const line: CheckpointLine = { type: 'checkpoint', step: m.step, path: relativeTo(this.folder.dir, m.path) };
        this.folder.appendMetric(line);
        l.checkpoint?.(line);
        break;
      }
      case 'replica':
        l.replica?.(m.step, m.path);
        break;
      case 'spans': {
        this.bubble?.add(m.step, rank, m.spans);
        const lines: SpanLine[] = m.spans.map((s) => ({ rank, step: m.step, ...s }));
        this.folder.appendSpans(lines);
        l.spans?.(lines, rank, m.step);
        break;
      }
      case 'done':
        this.done.set(rank, m);
        break;
      case 'stopped':
        this.stoppedAfter = m.step;
        if (m.requested) this.sigtermed.push(rank);
        // a SIGTERM that did not come from this driver (a `kill` of one rank): the ranks agreed to stop at this step
        this.stopping ??= { status: 'interrupted', error: '' };
        break;
      default:
        break;
    }
  }

  /** A rank's loss or gradient norm stopped being finite: the run's verdict (the rank stops itself after this message). */
  private divergedAt(rank: number, step: number, numbers: StepNumbers): boolean {
    const what = divergedWhat(numbers);
    if (what) this.diverged ??= { rank, error: divergenceVerdict(this.job, what, step, this.lastFinite) };
    return what !== null;
  }

  private end(failure: RankFailureInfo | null): RunEnd {
    let end: RunEnd;
    if (this.diverged) end = { status: 'failed', ...this.diverged };
    else if (this.stopping?.error === '') {
      const who = this.sigtermed.length ? `rank ${this.sigtermed.sort((a, b) => a - b).join(', ')} was sent SIGTERM` : 'a rank was stopped';
      end = {
        ...this.stopping,
        error: `${who}: every rank stopped after step ${this.stoppedAfter} and wrote its checkpoint; resume it to continue`,
      };
    } else if (this.stopping) end = this.stopping;
    else if (failure || this.done.size !== this.world) {
      end = {
        status: 'failed',
        error: failure?.message ?? `only ${this.done.size} of ${this.world} ranks finished`,
        ...(failure ? { rank: failure.rank } : {}),
        ...(failure?.lost ? { lost: failure.lost } : {}),
        ...(failure?.noticedAt !== undefined ? { noticedAt: failure.noticedAt } : {}),
      };
    } else {
      end = { status: 'completed', summary: this.summary() };
      this.folder.writeSummary({ ...end.summary, run_dir: '.' }); // position-free on disk; front ends print the real path
    }
    const settled = end.status === 'completed' || !this.settle ? end : this.settle(end);
    if (!settled) return end;
    end = settled;
    this.listener.end?.(end);
    if (end.status === 'completed') this.setState({ status: 'completed', step: end.summary.steps as number });
    else if (end.status === 'failed')
      this.setState({ status: 'failed', error: end.error, ...(end.rank !== undefined ? { failed_rank: end.rank } : {}) });
    else this.setState({ status: end.status, error: end.error });
    return end;
  }

  /** summary.json, and `train --json`'s last line: the same keys whichever front end drove the run */
  private summary(): Record<string, unknown> {
    const summary = runSummary({
      job: this.job,
      runDir: this.folder.dir,
      done: this.done,
      tokensPerS: this.tokensPerS,
      tflops: this.tflops,
      lastLoss: this.steps.lastLoss,
      lastVal: this.lastVal,
      bubble: this.bubble,
      notes: this.notes,
    });
    const withRanks = this.placed ? { ...summary, ranks: this.placed.map(({ rank, machine }) => ({ rank, machine })) } : summary;
    return { ...withRanks, ...this.summaryExtra() };
  }
}
