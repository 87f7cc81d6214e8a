// One run over one or more membership segments, for `shardwise train` and the controller alike:
// a RunDriver per segment. A run that is not elastic has one, and ends as its driver ends. An
// elastic run whose ranks are lost (a rank died on its own, an agent stopped answering) with
// restarts left and at least MIN ranks remaining is not ended: the change is recorded, the
// layout re-planned over the survivors (replan.ts: the same strategy where it fits, else the
// advisor's choice, through relayoutJob; global batch kept), the folder rewound to
// the newest state (the in-memory replica of the last step when it is the newest, else the
// newest checkpoint on disk, else the start) and the next segment launched, with no user
// action. Otherwise the run fails with a message naming why it could not go on. A stop or an
// interrupt goes to the segment in progress and ends the run.
import type { Recovery, Segment, SegmentReason } from '../../../common/api/elastic.js';
import type { TrainJob } from '../../../workers/protocol/train.js';
import type { RunFolder } from '../../runs/run-folder.js';
import type { LostRank } from '../local-ranks.js';
import type { ConnectedPlacement, PlacementEntry } from '../placement.js';
import type { RankLauncher } from '../rank-launcher.js';
import { checkpointSteps, rewindRun } from '../resume.js';
import { type RunEnd, RunDriver, type RunListener } from '../run-driver.js';
import { ReplicaStore } from './replicas.js';
import { replan } from './replan.js';
import { layoutOf, SegmentRecord } from './segments.js';

const checkpointName = (step: number) => `checkpoints/step-${String(step).padStart(6, '0')}`;

/** how often a run that lost machines tries to reach them again */
const REJOIN_EVERY_MS = 3000;

/**
 * Reaching machines for a scale-up: the run's placement entries (rank order), how to connect
 * some of them, and (newMachines) the machines paired since the run began, which may join it too.
 */
export interface Rejoin {
  entries: PlacementEntry[];
  connect(entries: PlacementEntry[]): Promise<ConnectedPlacement>;
  newMachines?(): PlacementEntry[];
}

/** what the next segment starts with, decided when the last one's ranks ended */
interface Restart {
  job: TrainJob;
  reason: SegmentReason;
  detail: string;
  noticedAt: number;
  /** the last step the lost segment recorded */
  lastStep: number;
  lostRanks: Set<number>;
  /** relayoutJob's notes on the new layout (the layout line, micro-batches changed, PowerSGD reset...) */
  notes: string[];
  /** when every rank of the lost segment had ended (the loss settled), and when the re-plan was done */
  settledAt: number;
  replannedAt: number;
}

/** the times of a restart so far, for the segment's recovery breakdown */
interface Recovering {
  noticedAt: number;
  settledAt: number;
  replannedAt: number;
  launchedAt: number;
  startedAt?: number;
  readyAt?: number;
}

export class RunSupervisor {
  private driver: RunDriver;
  private readonly record: SegmentRecord;
  private readonly replicas: ReplicaStore | null;
  /** the segment in progress runs this job (a re-plan changes its layout; the folder's config keeps the run's) */
  private job: TrainJob;
  private restart: Restart | null = null;
  /** the step the segment in progress continued from */
  private segmentFrom = 0;
  private restartsHere = 0;
  private ended = false;
  /** a stop or interrupt was asked: no restart after it */
  private stopping = false;
  /** the loss the segment in progress recovers from: its first step measures recovery_ms */
  private recovering: Recovering | null = null;
  /** where the segment in progress runs its ranks (absent: all here) */
  private placement: ConnectedPlacement | undefined;
  /** the placement entries of lost machines' ranks, while the run is smaller than MAX; tried again every few seconds */
  private lostEntries: PlacementEntry[] = [];
  /** the entry each rank of the segment in progress came from */
  private entries: PlacementEntry[] = [];
  /** lost machines reached again: the segment in progress stops at its step (with a checkpoint) and the next one adds them */
  private returning: ConnectedPlacement | null = null;
  private rejoinEntries: PlacementEntry[] = [];
  /** newly paired machines the layout could not grow onto: not tried again in this launch */
  private readonly cannotTake = new Set<string>();
  private rejoinTimer: NodeJS.Timeout | undefined;
  private readonly closers: (() => void)[] = [];
  /** a scale-up's reach for lost machines (set by a front end that placed ranks on agents) */
  rejoin: Rejoin | null = null;
  readonly notes: string[] = [];
  /** a step reached metrics.jsonl in any segment of this launch */
  recordedSteps = false;

  constructor(
    readonly folder: RunFolder,
    job: TrainJob,
    private readonly listener: RunListener = {},
    /** a resume: the checkpoint step it continues from */
    private readonly resumedFrom?: number,
  ) {
    this.record = new SegmentRecord(folder, job.elastic, resumedFrom);
    this.replicas = job.elastic ? ReplicaStore.create() : null;
    this.job = this.replicas ? { ...job, replica_dir: this.replicas.dir } : job;
    this.driver = this.newDriver();
  }

  get world() {
    return this.driver.world;
  }

  get pids(): number[] {
    return this.driver.pids;
  }

  get stoppedAfter(): number | null {
    return this.driver.stoppedAfter;
  }

  stop(status: 'stopped' | 'interrupted', error: string, graceMs?: number) {
    this.stopping = true;
    this.driver.stop(status, error, graceMs);
  }

  interrupt(error: string) {
    this.stopping = true;
    this.driver.interrupt(error);
    this.replicas?.dispose();
  }

  private newDriver(): RunDriver {
    const l = this.listener;
    const driver = new RunDriver(this.folder, this.job, {
      ...l,
      step: (s) => {
        this.recordedSteps = true;
        if (this.recovering) {
          const now = Date.now();
          this.record.recovered(now - this.recovering.noticedAt, recoveryOf(this.recovering, now));
          this.recovering = null;
        }
        l.step?.(s);
      },
      ranksStarted: (ranks) => {
        if (this.recovering) this.recovering.startedAt ??= Date.now();
        l.ranksStarted?.(ranks);
      },
      ready: (m, rank) => {
        if (this.recovering && rank === 0) this.recovering.readyAt ??= Date.now();
        l.ready?.(m, rank);
      },
      replica: (step, at) => {
        this.replicas?.note(step, at);
        l.replica?.(step, at);
      },
    });
    driver.notes.push(...this.notes);
    driver.summaryExtra = () => {
      const elastic = this.record.closed(driver.lastStep);
      return elastic ? { elastic } : {};
    };
    driver.settle = (end) => this.settle(end, driver);
    return driver;
  }

  /** Launch the ranks, segment after segment; resolves with how the run ended once every rank process is gone. */
  async run(launcher: RankLauncher, placement?: ConnectedPlacement): Promise<RunEnd> {
    this.driver.notes.push(...this.notes.filter((n) => !this.driver.notes.includes(n)));
    this.placement = placement;
    if (placement) this.closers.push(() => placement.close());
    this.entries = this.rejoin?.entries.slice() ?? [];
    this.watchForReturns(); // newly paired machines may join from the start
    const from = this.resumedFrom ?? 0;
    if (this.job.elastic || this.resumedFrom !== undefined)
      this.begin({
        reason: this.resumedFrom !== undefined ? 'resume' : 'start',
        from_step: from,
        source: from > 0 ? 'disk' : 'init',
        lost_steps: 0,
      });
    try {
      for (;;) {
        // the agents' connections outlive a segment: closed once the run ends
        const end = await this.driver.run(launcher, this.placement && { ranks: this.placement.ranks, close: () => {} });
        const next = this.restart;
        this.restart = null;
        if (!next) return end;
        this.continueWith(next);
      }
    } finally {
      this.ended = true;
      clearInterval(this.rejoinTimer);
      for (const close of this.closers) close();
      this.replicas?.dispose();
    }
  }

  private begin(s: Pick<Segment, 'reason' | 'from_step' | 'source' | 'lost_steps'> & Partial<Segment>) {
    const names =
      this.placement?.ranks.map((p) => (p.kind === 'local' ? 'this machine' : p.machine)) ??
      Array.from({ length: this.world }, () => 'this machine');
    this.segmentFrom = s.from_step;
    const segment: Segment = { ...layoutOf(this.job), placement: names, ...s };
    this.record.begin(segment);
    this.listener.segment?.(segment);
  }

  /**
   * How the segment's ranks ended, before the folder records it: null to go on in a new segment
   * (this.restart says how), else the run's end (a failure that could not be recovered says why).
   */
  private settle(end: RunEnd, driver: RunDriver): RunEnd | null {
    const bounds = this.job.elastic;
    if (end.status === 'interrupted' && this.returning && !this.stopping && !this.ended) return this.scaleUp(driver);
    if (end.status !== 'failed' || !bounds || !end.lost?.length || this.stopping || this.ended) return end;
    // a loss while growing: the machines reached are let go and tried again after the re-plan
    this.returning?.close();
    this.returning = null;
    const lostRanks = new Set(end.lost.map((l) => l.rank));
    const world = driver.world;
    const survivors = Math.min(world - lostRanks.size, bounds.max);
    const fail = (why: string): RunEnd => ({ ...end, error: `${end.error}; ${why}` });
    if (this.restartsHere >= bounds.max_restarts)
      return fail(
        `the elastic run already restarted ${this.restartsHere} time${this.restartsHere === 1 ? '' : 's'}, its maximum (--max-restarts ${bounds.max_restarts}), so it ends here; resume it to continue`,
      );
    if (survivors < bounds.min)
      return fail(
        `${survivors} rank${survivors === 1 ? '' : 's'} remain${survivors === 1 ? 's' : ''}, fewer than the elastic run's minimum of ${bounds.min} (--elastic ${bounds.min}:${bounds.max}), so it ends here; resume it once enough devices are back`,
      );
    const settledAt = Date.now();
    const machines = this.machineNames(driver.world)
      .filter((_, rank) => !lostRanks.has(rank))
      .slice(0, survivors);
    const planned = replan({ job: this.job, machines, min: bounds.min, ...this.memoryCheck() });
    if ('why' in planned) return fail(`it cannot continue on the ranks that remain: ${planned.why}`);
    this.restartsHere++;
    // a lost machine's entries: tried again while the run is below MAX (a scale-up)
    const machineRanks = end.lost.filter((l) => l.why === 'machine').map((l) => l.rank);
    this.lostEntries.push(...machineRanks.flatMap((rank) => (this.entries[rank] ? [this.entries[rank]] : [])));
    this.entries = this.entries.filter((_, rank) => !lostRanks.has(rank));
    this.restart = {
      job: planned.job,
      reason: end.lost.some((l) => l.why === 'machine') ? 'machine-lost' : 'rank-lost',
      detail: lostDetail(end.lost, end.error),
      noticedAt: end.noticedAt ?? Date.now(),
      lastStep: driver.lastStep ?? this.segmentFrom,
      lostRanks,
      notes: planned.notes,
      settledAt,
      replannedAt: Date.now(),
    };
    return null;
  }

  /** where each rank of the segment in progress runs, as segments name it ("this machine", an agent's name and address) */
  private machineNames(world: number): string[] {
    return this.placement?.ranks.map((p) => (p.kind === 'local' ? 'this machine' : p.machine)) ?? Array<string>(world).fill('this machine');
  }

  /** relayoutJob checks the model states against this machine's memory only where every rank runs here */
  private memoryCheck(): { machineMemory?: null } {
    return this.placement?.ranks.some((p) => p.kind !== 'local') ? { machineMemory: null } : {};
  }

  /**
   * Try the lost machines, and those paired since the run began, every few seconds while the run
   * is below MAX, each machine on its own (one still away does not hold back another); once some
   * answer, stop this segment at its step (it checkpoints it).
   */
  private watchForReturns() {
    clearInterval(this.rejoinTimer);
    const bounds = this.job.elastic;
    if (!this.rejoin || !bounds || (this.lostEntries.length === 0 && !this.rejoin.newMachines)) return;
    let trying = false;
    this.rejoinTimer = setInterval(() => {
      if (trying || this.returning || this.stopping || this.ended || this.world >= bounds.max) return;
      // lost machines first, then newly paired ones that are not in the run
      const known = new Set([...this.entries, ...this.lostEntries].map((e) => e.where));
      const newcomers = (this.rejoin!.newMachines?.() ?? []).filter((e) => !known.has(e.where) && !this.cannotTake.has(e.where));
      const wanted = [...this.lostEntries, ...newcomers].slice(0, bounds.max - this.world);
      if (wanted.length === 0) return;
      trying = true;
      const machines = [...new Set(wanted.map((e) => e.where))].map((where) => wanted.filter((e) => e.where === where));
      void Promise.allSettled(machines.map((entries) => this.rejoin!.connect(entries))).then((tried) => {
        trying = false;
        const answered = tried.flatMap((t, i) => (t.status === 'fulfilled' ? [{ entries: machines[i]!, placement: t.value }] : []));
        if (answered.length === 0) return; // still away: tried again later
        const back: ConnectedPlacement = {
          ranks: answered.flatMap((a) => a.placement.ranks),
          close: () => answered.forEach((a) => a.placement.close()),
        };
        // the segment ended meanwhile (a loss: this.restart), or the run did: tried again later
        if (this.stopping || this.ended || this.returning || this.restart) return back.close();
        this.closers.push(() => back.close());
        this.returning = back;
        this.rejoinEntries = answered.flatMap((a) => a.entries);
        clearInterval(this.rejoinTimer);
        this.driver.stop('interrupted', 'scale-up');
      });
    }, REJOIN_EVERY_MS);
    this.rejoinTimer.unref();
  }

  /** Machines reached again: the next segment runs on the current ranks and theirs, up to MAX, from the stop's checkpoint. */
  private scaleUp(driver: RunDriver): RunEnd | null {
    const back = this.returning!;
    const wanted = this.rejoinEntries;
    this.returning = null;
    const started = Date.now();
    const world = driver.world + back.ranks.length;
    const machines = [...this.machineNames(driver.world), ...back.ranks.map((p) => (p.kind === 'local' ? 'this machine' : p.machine))];
    // back to the run's own layout where it fits (a pp run that went single returns to pp), else the segment's
    const prefer = [this.folder.readJob().parallel, this.job.parallel].flatMap((p) => (p ? [p] : []));
    const planned = replan({ job: this.job, machines, min: world, prefer, machineMemory: null });
    if ('why' in planned) {
      // it cannot take them: it goes on as it was, from the stop's checkpoint; a new machine is not tried again
      back.close();
      for (const e of wanted) if (!this.lostEntries.includes(e)) this.cannotTake.add(e.where);
      this.restart = {
        job: this.job,
        reason: 'resume',
        detail: `machines answered but the layout cannot grow to ${world} ranks: ${planned.why}`,
        noticedAt: started,
        lastStep: driver.lastStep ?? this.segmentFrom,
        lostRanks: new Set(),
        notes: [],
        settledAt: started,
        replannedAt: Date.now(),
      };
      return null;
    }
    // a run placed all here by default: its ranks are local ones
    const here = this.placement ?? { ranks: Array.from({ length: driver.world }, () => ({ kind: 'local' as const })), close: () => {} };
    this.placement = { ranks: [...here.ranks, ...back.ranks], close: here.close };
    this.entries.push(...wanted);
    const machinesThat = (lost: boolean) => [
      ...new Set(back.ranks.flatMap((r, i) => (r.kind === 'agent' && this.lostEntries.includes(wanted[i]!) === lost ? [r.machine] : []))),
    ];
    const [returned, joined] = [machinesThat(true), machinesThat(false)];
    this.lostEntries = this.lostEntries.filter((e) => !wanted.includes(e));
    this.restart = {
      job: planned.job,
      reason: 'scale-up',
      detail: [
        ...(returned.length ? [`${returned.join(', ')} came back`] : []),
        ...(joined.length ? [`${joined.join(', ')} joined (paired since the run began)`] : []),
      ].join('; '),
      noticedAt: started,
      lastStep: driver.lastStep ?? this.segmentFrom,
      lostRanks: new Set(),
      notes: planned.notes,
      settledAt: started,
      replannedAt: Date.now(),
    };
    return null;
  }

  /** The folder rewound to the newest state, the next segment recorded and its driver made. */
  private continueWith(r: Restart) {
    const disk = checkpointSteps(this.folder.dir).at(-1) ?? null;
    const memory = this.replicas?.step ?? null;
    let from = 0;
    let source: Segment['source'] = 'init';
    let resumeFrom: string | undefined;
    if (memory !== null && (disk === null || memory > disk)) {
      resumeFrom = this.replicas!.materialize(this.folder.dir);
      [from, source] = [memory, 'memory'];
    } else if (disk !== null) {
      resumeFrom = `${this.folder.dir}/${checkpointName(disk)}`;
      [from, source] = [disk, 'disk'];
    }
    const base = this.folder.readJob();
    rewindRun(
      { folder: this.folder, job: { ...base, train: { ...base.train, steps: this.job.train.steps } }, fromStep: from },
      { status: 'running' },
    );
    if (source === 'memory') this.folder.appendMetric({ type: 'checkpoint', step: from, path: checkpointName(from) });
    if (resumeFrom) this.listener.checkpoint?.({ type: 'checkpoint', step: from, path: checkpointName(from) });
    this.job = { ...r.job, ...(resumeFrom ? { resume_from: resumeFrom } : { resume_from: undefined }) };
    // the surviving ranks keep their places, in rank order (a lost machine's ranks are gone)
    if (this.placement) {
      const kept = this.placement.ranks.filter((_, rank) => !r.lostRanks.has(rank)).slice(0, this.job.parallel?.world ?? 1);
      this.placement = { ranks: kept, close: this.placement.close };
    }
    // what the new layout changed, kept in the summary's notes too (said once, with the step it began at)
    this.notes.push(...r.notes.map((n) => `step ${from}, ${r.reason}: ${n}`));
    this.driver = this.newDriver();
    this.watchForReturns();
    this.begin({
      reason: r.reason,
      from_step: from,
      source,
      lost_steps: Math.max(0, r.lastStep - from),
      detail: r.detail,
      ...(r.notes.length ? { notes: r.notes } : {}),
    });
    const { noticedAt, settledAt, replannedAt } = r;
    this.recovering = { noticedAt, settledAt, replannedAt, launchedAt: Date.now() };
  }
}

/** "rank 2 on this machine was lost (...)": what changed, in words */
function lostDetail(lost: LostRank[], error: string): string {
  const machines = [...new Set(lost.filter((l) => l.why === 'machine').map((l) => l.machine))];
  const ranks = lost.filter((l) => l.why === 'rank').map((l) => `rank ${l.rank} on ${l.machine}`);
  const parts = [...machines.map((m) => `machine ${m} was lost`), ...(ranks.length ? [`${ranks.join(', ')} died`] : [])];
  return `${parts.join('; ')}: ${error}`;
}

/** A restart's ms, phase by phase, once its first step came (phases not seen are 0); back to back, they add up to the recovery. */
function recoveryOf(r: Recovering, firstStepAt: number): Recovery {
  const started = r.startedAt ?? r.launchedAt;
  const ready = r.readyAt ?? started;
  return {
    settle_ms: Math.max(0, r.settledAt - r.noticedAt),
    replan_ms: r.replannedAt - r.settledAt,
    state_ms: r.launchedAt - r.replannedAt,
    launch_ms: Math.max(0, started - r.launchedAt),
    join_ms: Math.max(0, ready - started),
    first_step_ms: Math.max(0, firstStepAt - ready),
  };
}
