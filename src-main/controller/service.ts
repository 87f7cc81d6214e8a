// The controller behind the typed API (common/api): devices, runs (launch, stop, resume,
// inspect, delete) and their live streams. Plain Node, no Electron: `shardwise serve` puts a
// WebSocket in front of it, the Electron shell will put IPC in front of the same object.
// `call` validates params on entry and results on exit, so every transport gets both checks.
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import {
  ApiError,
  API_METHODS,
  fieldError,
  type LaunchConfig,
  type MethodName,
  type MethodResult,
  parseParams,
  type RunStateView,
  type StepRow,
} from '../../common/api/index.js';
import type { TrainJob } from '../../workers/protocol/train.js';
import type { ResumeLayout } from '../../common/api/elastic.js';
import type { ExportParams } from '../../common/api/export-job.js';
import { type ConnectedPlacement, connectPlacementEntries } from '../launch/placement.js';
import { LocalRankLauncher, type RankLauncher } from '../launch/rank-launcher.js';
import { checkLaunchable, JobError, resolveJob } from '../launch/resolve-job.js';
import { relayoutJob } from '../launch/relayout.js';
import { prepareResume, ResumeError, type ResumePoint, rewindRun } from '../launch/resume.js';
import { RunFileError } from '../runs/folder-errors.js';
import { RunFolder } from '../runs/run-folder.js';
import { HostSampler, hostSources } from '../runs/host-sampler.js';
import { RunLock, RunLockedError } from '../runs/run-lock.js';
import type { AdviseRequest } from '../../common/advisor/types.js';
import { ActiveRun } from './active-run.js';
import { loadMachineProfile } from '../machine/profile-store.js';
import { FirstProfile } from './first-profile.js';
import { AdviceError, type AdviseDeps, adviseRequest } from './advise.js';
import { DeviceCache } from './device-cache.js';
import { LiveDevices } from './live-devices.js';
import { PeerRegistry } from './peers.js';
import { connectPlacementList, type PlacementList, placementView } from './api-placement.js';
import { planOf } from './plan.js';
import { RunExports } from './run-export.js';
import { RunStore } from './run-store.js';
import { pairedSince } from '../launch/elastic/newcomers.js';
import { predictRun } from './run-prediction.js';
import { RunTelemetry, type Subscription } from './telemetry.js';

export interface ControllerOptions {
  runsRoot: string;
  launcher?: RankLauncher;
  devices?: DeviceCache;
  /** this machine's stored machine profile for runs.advise (default: the one `shardwise profile` stored; none: the advisor's default speeds) */
  profile?: AdviseDeps['profile'];
  /** where no profile is stored, profile this machine in the background at start, saying so through this (serve, the desktop app) */
  profileInBackground?: (line: string) => void;
}

/** how long runs.launch waits for the advisor's prediction before it starts the ranks anyway */
const PREDICT_WAIT_MS = 2000;

export class ControllerService {
  readonly store: RunStore;
  private readonly exports: RunExports;
  readonly devices: DeviceCache;
  readonly peers = new PeerRegistry();
  private readonly live: LiveDevices;
  private readonly launcher: RankLauncher;
  private readonly active = new Map<string, ActiveRun>();
  private readonly hubs = new Map<string, RunTelemetry>();
  private readonly profile: AdviseDeps['profile'];
  private readonly firstProfile: FirstProfile | null;

  constructor(opts: ControllerOptions) {
    this.store = new RunStore(path.resolve(opts.runsRoot), (id) => this.active.has(id));
    this.exports = new RunExports(this.store);
    this.launcher = opts.launcher ?? new LocalRankLauncher();
    this.devices = opts.devices ?? new DeviceCache();
    this.live = new LiveDevices(() => this.devices.list());
    this.profile = opts.profile ?? (() => Promise.resolve(loadMachineProfile()));
    this.firstProfile = opts.profileInBackground ? new FirstProfile(opts.profileInBackground) : null;
  }

  /** Repair what a previous controller left (running -> interrupted) and start probing devices. */
  start() {
    this.store.list();
    this.devices.start();
    this.firstProfile?.start();
  }

  /** Stop every live run and wait until their processes are gone. */
  async close() {
    this.devices.stop();
    this.firstProfile?.stop();
    await this.peers.close();
    const runs = [...this.active.values()];
    for (const r of runs) r.stop();
    await Promise.all(runs.map((r) => r.finished));
  }

  async call<M extends MethodName>(method: string, rawParams: unknown): Promise<MethodResult<M>> {
    const { method: m, params } = parseParams<M>(method, rawParams);
    const result = await this.dispatch(m, params as Record<string, any>);
    return API_METHODS[m].result.parse(result) as MethodResult<M>;
  }

  private async dispatch(method: MethodName, p: Record<string, any>): Promise<unknown> {
    switch (method) {
      case 'devices.list':
        return this.devices.list();
      case 'devices.refresh':
        return this.devices.refresh();
      case 'devices.live':
        return this.live.read();
      case 'runs.list':
        return { runs: this.store.list() };
      case 'runs.get':
        return this.store.detail(p.runId, this.active.get(p.runId)?.pids ?? null);
      case 'runs.metrics':
        return { rows: this.store.metrics(p.runId, p.fromStep ?? 0) };
      case 'runs.spans':
        return this.store.spans(p.runId, p.fromStep ?? 0, p.toStep ?? Infinity, p.limit ?? 50_000);
      case 'runs.logs':
        return { lines: this.store.logs(p.runId, p.limit ?? 1000) };
      case 'runs.launch':
        return this.launch(p.config as LaunchConfig);
      case 'runs.stop':
        return this.stop(p.runId);
      case 'runs.resume':
        return this.resume(p.runId, p.steps, p.layout);
      case 'runs.host':
        return { rows: this.store.host(p.runId, p.fromTime ?? 0) };
      case 'runs.annotate':
        return this.store.annotate(p.runId, p);
      case 'runs.export':
        return this.exports.write(p as ExportParams);
      case 'runs.delete':
        this.store.delete(p.runId);
        this.hubs.delete(p.runId);
        return { ok: true };
      case 'runs.advise':
        return this.advise(p as AdviseRequest);
      case 'runs.plan':
        return this.plan(p.config as LaunchConfig);
      case 'peers.list':
        return { peers: this.peers.list() };
      case 'peers.add':
        return this.peers.add(p.address);
      case 'peers.inspect':
        return this.peers.inspect(p.address);
      case 'peers.pair':
        return this.peers.pair(p.address, p.code);
      case 'runs.subscribe':
      case 'runs.unsubscribe':
        // stream methods belong to a transport (it owns the subscriber); see subscribe()
        this.store.open(p.runId);
        return { ok: true };
    }
  }

  /** A bounded live stream of one run; its first event is a snapshot. */
  subscribe(runId: string): Subscription {
    this.store.open(runId);
    return this.hub(runId).subscribe();
  }

  private hub(id: string): RunTelemetry {
    let h = this.hubs.get(id);
    if (!h) {
      const recent = this.store.metrics(id, 0).filter((m): m is StepRow => m.type === 'step');
      h = new RunTelemetry(() => this.store.state(id) as RunStateView, recent);
      this.hubs.set(id, h);
    }
    return h;
  }

  private newRunId(c: LaunchConfig): string {
    const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\..*/, '').replace('T', '-');
    return `${stamp}-${c.preset ?? 'tiny'}-${c.strategy ?? 'single'}-${randomBytes(3).toString('hex')}`;
  }

  private async launch(config: LaunchConfig) {
    const runId = config.name ?? this.newRunId(config);
    const dir = this.store.dir(runId);
    if (this.store.exists(runId)) throw new ApiError('Conflict', `a run named "${runId}" already exists; choose another name or delete it`);
    const job = this.resolveLaunch('runs.launch', config, dir, true);
    // agents are reached (and adapters checked) before anything is written
    const placement = config.placement ? await this.connectPlacement('runs.launch', config.placement, job) : undefined;
    let folder: RunFolder;
    let lock: RunLock;
    try {
      folder = RunFolder.create(dir, job, job.train.steps);
      lock = RunLock.acquire(dir); // one writer per run folder, until the run ends
    } catch (e) {
      placement?.close();
      throw new ApiError('Conflict', `${runId}: ${(e as Error).message}`);
    }
    if (config.placement) folder.updateState({ placement: config.placement });
    // the run view reads prediction.json when it opens: wait for it a little (the first device
    // probe may still be running), never long; a later answer is still written
    await Promise.race([this.predict(folder, job, config.placement), new Promise((r) => setTimeout(r, PREDICT_WAIT_MS).unref())]);
    this.run(runId, folder, job, lock, placement);
    return { runId, dir };
  }

  /** runs.advise: the ranked layouts of this machine's devices (or the request's placement or what-if machine) */
  private async advise(r: AdviseRequest) {
    try {
      return await adviseRequest(r, {
        devices: () => this.devices.list(),
        profile: this.profile,
        profilingNote: () => this.firstProfile?.note() ?? null,
      });
    } catch (e) {
      if (e instanceof AdviceError) throw fieldError('ValidationError', 'runs.advise params', e.field, e.message);
      throw e;
    }
  }

  /** prediction.json: the advisor's plan of the run's layout, beside which the run view and the report set what it measures */
  private async predict(folder: RunFolder, job: TrainJob, placement: LaunchConfig['placement']) {
    // a prediction is an extra: nothing here fails the run (its folder may even be gone by the answer)
    try {
      const r = await predictRun(job, placement, (req) => this.call<'runs.advise'>('runs.advise', req));
      if ('prediction' in r) folder.writePrediction(r.prediction);
      else folder.appendLog({ time: Date.now(), level: 'info', message: r.why });
    } catch (e) {
      try {
        folder.appendLog({ time: Date.now(), level: 'info', message: `no prediction for this run: ${(e as Error).message}` });
      } catch {
        // the run was deleted meanwhile
      }
    }
  }

  /** runs.plan: the resolved job; with a placement, every check launching would make (agents answer, adapters exist) */
  private async plan(config: LaunchConfig) {
    const job = this.resolveLaunch('runs.plan', config, this.store.dir('plan'));
    if (!config.placement) return planOf(job);
    const placement = await this.connectPlacement('runs.plan', config.placement, job);
    placement.close();
    return { ...planOf(job), placement: placementView(placement) };
  }

  private connectPlacement(method: string, list: PlacementList, job: TrainJob): Promise<ConnectedPlacement> {
    return connectPlacementList(method, list, job.parallel?.world ?? 1, this.peers, async () => (await this.devices.list()).adapters);
  }

  /** The job a launch config resolves to: the resolver `train` uses, its refusal tagged with the config field. */
  private resolveLaunch(method: string, config: LaunchConfig, dir: string, launching = false): TrainJob {
    try {
      const job = resolveJob(config, { runDir: dir }); // its name and placement are the controller's
      if (launching) checkLaunchable(job);
      return job;
    } catch (e) {
      if (e instanceof JobError) throw fieldError('ValidationError', `${method} params`, `config.${e.field}`, e.message);
      throw e;
    }
  }

  /** lock: the folder's writer lock, released once the run ended and its ranks are gone */
  private run(
    runId: string,
    folder: RunFolder,
    job: TrainJob,
    lock: RunLock,
    placement?: ConnectedPlacement,
    notes: string[] = [],
    resumedFrom?: number,
  ) {
    const run = new ActiveRun(runId, folder, job, this.hub(runId), resumedFrom);
    // an elastic run grows (up to MAX) when a lost machine answers again or a machine is paired while it runs
    const list = folder.readState().placement;
    if (job.elastic) {
      const since = Date.now();
      const world = job.parallel?.world ?? 1;
      run.rejoin({
        entries:
          placement && list
            ? list.map((p) => ({ where: p.machine, ...(p.device !== undefined ? { adapter: p.device } : {}) }))
            : Array.from({ length: world }, () => ({ where: 'local' })),
        connect: (entries) => connectPlacementEntries(entries, this.peers.me()),
        newMachines: () => pairedSince(since),
      });
    }
    this.active.set(runId, run);
    try {
      run.start(this.launcher, placement, notes);
    } catch (e) {
      this.active.delete(runId);
      lock.release();
      throw e;
    }
    // the CPU and RAM of the run's machines beside its device memory, while it goes
    const host = new HostSampler(folder.dir, hostSources(placement?.ranks)).start();
    void run.finished.finally(() => {
      host.stop();
      lock.release();
      if (this.active.get(runId) === run) this.active.delete(runId);
    });
  }

  private async stop(runId: string) {
    const run = this.active.get(runId);
    if (!run) {
      const s = this.store.state(runId);
      throw new ApiError('Conflict', `run "${runId}" is not running here (it is ${s.status})`);
    }
    run.stop();
    await run.finished;
    return { ok: true as const };
  }

  private async resume(runId: string, steps?: number, layout?: ResumeLayout) {
    if (this.active.has(runId)) throw new ApiError('Conflict', `run "${runId}" is already running`);
    const folder = this.store.open(runId);
    // every check before anything is written (config, state, lock, checkpoint, steps, layout): a refused resume leaves the folder as it was
    let point: ResumePoint;
    try {
      point = prepareResume(folder.dir, steps, { flag: 'steps', activeHere: false });
    } catch (e) {
      if (e instanceof ResumeError && e.field) throw fieldError('ValidationError', 'runs.resume params', e.field, e.message);
      if (e instanceof ResumeError || e instanceof RunLockedError) throw new ApiError('Conflict', e.message);
      if (e instanceof RunFileError) throw new ApiError('InvalidRun', e.message);
      throw e;
    }
    const { lock } = point;
    const state = this.store.state(runId, folder);
    let relaid: { notes: string[]; placementList?: PlacementList };
    try {
      relaid = this.resumeLayout(point, state.placement, layout);
    } catch (e) {
      lock.release();
      throw e;
    }
    const { notes, placementList } = relaid;
    const { job, fromStep } = point;
    // on the same machines as before (they are checked and connected again), or the layout's
    let placement: ConnectedPlacement | undefined;
    try {
      placement = placementList ? await this.connectPlacement('runs.resume', placementList, job) : undefined;
    } catch (e) {
      lock.release();
      throw e;
    }
    if (this.active.has(runId)) {
      placement?.close();
      lock.release();
      throw new ApiError('Conflict', `run "${runId}" is already running`);
    }
    // the run continues from its checkpoint: what came after it is replayed (as `train --resume` does)
    rewindRun(point, { status: 'starting', placement: placementList });
    this.run(runId, point.folder, job, lock, placement, notes, fromStep);
    return { runId, fromStep };
  }

  /**
   * A resume's layout (relayout.ts), applied to the point's job; refusals tagged `layout.FIELD`
   * for the form. The placement: the layout's, else the run's own while it has as many ranks
   * (a run placed here alone resumes here at any size).
   */
  private resumeLayout(
    point: ResumePoint,
    saved: PlacementList | undefined,
    layout: ResumeLayout | undefined,
  ): { notes: string[]; placementList?: PlacementList } {
    const { placement: given, ...fields } = layout ?? {};
    let notes: string[] = [];
    if (Object.keys(fields).length) {
      const elsewhere = (given ?? saved)?.some((p) => p.machine !== 'local');
      try {
        ({ job: point.job, notes } = relayoutJob(point.job, fields, elsewhere ? { machineMemory: null } : {}));
      } catch (e) {
        if (e instanceof JobError) throw fieldError('ValidationError', 'runs.resume params', `layout.${e.field}`, e.message);
        throw e;
      }
    }
    const world = point.job.parallel?.world ?? 1;
    if (given) return { notes, placementList: given };
    if (!saved || saved.length === world) return { notes, placementList: saved };
    if (saved.every((p) => p.machine === 'local' && p.device === undefined)) return { notes };
    throw fieldError(
      'ValidationError',
      'runs.resume params',
      'layout.placement',
      `the run was placed on ${saved.length} ranks (${saved.map((p) => p.machine).join(', ')}) and the new layout has ${world}: give layout.placement, one entry per rank`,
    );
  }
}
