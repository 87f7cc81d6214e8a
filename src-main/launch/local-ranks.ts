// Rank processes of one run, on this machine and on paired LAN agents. Rank 0 always runs here:
// it starts first and hosts the rendezvous store on an ephemeral port (it reports the port),
// then ranks 1..N-1 start with it — forked here, or launched by their agent from a data
// description. Every message is schema-checked; a rank that fails, sends garbage or exits
// early, an agent that stops answering heartbeats or drops its link, fails the run with the rank
// and machine named: the others are stopped (SIGTERM, then SIGKILL; remote ones through their
// agent) so no process is left behind, and a watchdog process ends the local ranks if this one
// dies (workers/protocol/rank-watchdog.ts). A user's stop is a SIGTERM too, with a longer grace:
// the ranks finish their step, checkpoint it and exit 0.
import { type ChildProcess, fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { TABLE } from '../../common/strategies.js';
import { COMM_ENV } from '../../workers/protocol/comm.js';
import { coordsOf } from '../../workers/protocol/grid.js';
import { RankWatchdog } from '../../workers/protocol/rank-watchdog.js';
import { type RankMessage, RankMessageSchema, type TrainJob } from '../../workers/protocol/train.js';
import type { AgentSession } from '../cluster/agent-client.js';
import { clockOffset, shipRunFiles } from './remote-files.js';

const RANK_ENTRY = fileURLToPath(new URL('../../workers/train/rank-main.js', import.meta.url));
export const HEARTBEAT_MS = 1000;
export const HEARTBEAT_MISSES = 5;
/** a failed run's other ranks: SIGTERM, then SIGKILL this much later */
const FAILED_RUN_GRACE_MS = 3000;

export interface RankFailure {
  rank: number;
  message: string;
  /** ranks that died on their own or whose machine was lost (not ones stopped because a peer failed): an elastic run's membership change */
  lost?: LostRank[];
  /** Date.now() when the first failure was noticed */
  noticedAt?: number;
}

/** a rank gone from the run: its process died (`rank`) or its machine's agent was lost (`machine`) */
export interface LostRank {
  rank: number;
  machine: string;
  why: 'rank' | 'machine';
}

/** where a rank runs: here, or on a paired agent; adapter: which device there (index or name) */
export type RankPlacement = ({ kind: 'local' } | { kind: 'agent'; session: AgentSession; machine: string }) & { adapter?: string };

export interface RankInfo {
  rank: number;
  machine: string;
  pid: number;
}

export interface LocalRanksOptions {
  /** where each rank runs (default: all here) */
  placement?: RankPlacement[];
  /** every rank, here and remote, has started */
  onRanksStarted?: (ranks: RankInfo[]) => void;
  /** each line a local rank prints (stdout and stderr) or a remote one logs; without it local ranks inherit ours */
  onOutput?: (rank: number, stream: 'stdout' | 'stderr', line: string) => void;
}

export class LocalRanks {
  private readonly children: (ChildProcess | null)[];
  private readonly exited: boolean[];
  private readonly started: boolean[];
  private failure: RankFailure | null = null;
  private stopAt: number | null = null;
  /** when stop()'s SIGKILL falls due */
  private killAt: number | null = null;
  private killTimer: NodeJS.Timeout | undefined;
  /** ranks that died on their own (not stopped by us): the root cause a peer's error may hide */
  private readonly deaths: string[] = [];
  /** the same ranks, and those on a lost machine, for an elastic run's re-plan */
  private readonly lost: LostRank[] = [];
  private finished = 0;
  /** every rank is gone and the result settled: an agent's later events belong to another launch (an elastic run's next segment) */
  private over = false;
  private settle!: (f: RankFailure | null) => void;
  private readonly placement: RankPlacement[];
  private readonly runId: string;
  /** this machine's address as the remote ranks reach it (loopback when all ranks are local) */
  private readonly hostAddr: string;
  /** SIGKILLs the local ranks if this process dies, even stopped ones (rank-watchdog.ts) */
  private readonly watchdog = RankWatchdog.start();
  readonly ranks: RankInfo[] = [];
  /** resolves with null when every rank exited 0, or with the first failure */
  readonly result: Promise<RankFailure | null>;

  constructor(
    private readonly job: TrainJob,
    private readonly onMessage: (m: RankMessage & { rank?: number }, rank: number) => void,
    private readonly commTimeoutMs?: number,
    private readonly opts: LocalRanksOptions = {},
  ) {
    const n = job.parallel?.world ?? 1;
    this.placement = opts.placement ?? Array.from({ length: n }, () => ({ kind: 'local' as const }));
    if (this.placement.length !== n) throw new Error(`the placement names ${this.placement.length} ranks, the run has ${n}`);
    if (this.placement[0]!.kind !== 'local') throw new Error("rank 0 runs on this machine: it hosts the run's rendezvous");
    const remote = this.placement.find((p): p is Extract<RankPlacement, { kind: 'agent' }> => p.kind === 'agent');
    this.hostAddr = remote ? remote.session.localAddress : '127.0.0.1';
    this.runId =
      path
        .basename(job.run_dir)
        .replace(/[^A-Za-z0-9._-]/g, '_')
        .replace(/^[._-]+/, '') || 'run';
    this.children = new Array(n).fill(null);
    this.exited = new Array(n).fill(false);
    this.started = new Array(n).fill(false);
    this.result = new Promise(
      (resolve) =>
        (this.settle = (f) => {
          this.over = true;
          resolve(f);
        }),
    );
    void this.result.then(() => this.watchdog?.end());
    const secret = randomBytes(24).toString('hex');
    this.startLocal(0, secret, 0);
  }

  get world() {
    return this.children.length;
  }

  /** process ids of the local ranks started so far and not yet exited */
  get pids(): number[] {
    return this.children.flatMap((c, i) => (c?.pid !== undefined && !this.exited[i] ? [c.pid] : []));
  }

  private machineOf(rank: number): string {
    const p = this.placement[rank]!;
    return p.kind === 'local' ? 'this machine' : p.machine;
  }

  /** "rank 1", with its place in the pipeline / 3D grid (withStage) and its machine when ranks run on several */
  private where(rank: number, withStage = false): string {
    const par = this.job.parallel;
    const s = par ? TABLE[par.strategy] : undefined;
    const g = par && s?.pipelined && withStage ? s.grid(par) : null;
    const c = g ? coordsOf(g, rank) : null;
    // a pipeline of one rank per stage names the stage; a 3d grid names all three coordinates
    const stage = !c
      ? ''
      : s!.knobs.has('dp')
        ? ` (pipeline stage ${c.pp}, data-parallel ${c.dp}, tensor-parallel ${c.tp})`
        : ` (pipeline stage ${c.pp})`;
    return this.placement.some((p) => p.kind === 'agent') ? `rank ${rank}${stage} on ${this.machineOf(rank)}` : `rank ${rank}${stage}`;
  }

  private commEnv(rank: number, secret: string, port: number): NodeJS.ProcessEnv {
    const env: NodeJS.ProcessEnv = {
      [COMM_ENV.rank]: String(rank),
      [COMM_ENV.worldSize]: String(this.world),
      [COMM_ENV.localRank]: String(rank),
      [COMM_ENV.masterAddr]: this.hostAddr,
      [COMM_ENV.masterPort]: String(port),
      [COMM_ENV.secret]: secret,
      [COMM_ENV.bindAddr]: this.hostAddr,
      [COMM_ENV.advertiseAddr]: this.hostAddr,
    };
    if (this.commTimeoutMs !== undefined) env[COMM_ENV.timeoutMs] = String(this.commTimeoutMs);
    return env;
  }

  private startLocal(rank: number, secret: string, port: number) {
    const out = this.opts.onOutput ? 'pipe' : 'inherit';
    const child = fork(RANK_ENTRY, [], {
      stdio: ['ignore', out, out, 'ipc'],
      serialization: 'json',
      env: { ...process.env, ...this.commEnv(rank, secret, port) },
    });
    this.children[rank] = child;
    this.watchdog?.watch(child.pid);
    if (this.opts.onOutput) for (const stream of ['stdout', 'stderr'] as const) this.forwardLines(rank, stream, child[stream]);
    this.started[rank] = true;
    this.ranks.push({ rank, machine: 'this machine', pid: child.pid ?? -1 });
    child.on('message', (raw) => this.received(rank, raw, secret));
    child.on('error', (e) => this.fail(rank, `could not start rank ${rank}: ${e.message}`));
    child.on('exit', (code, signal) => this.exitedWith(rank, code, signal));
    const adapter = this.placement[rank]!.adapter;
    child.send({ type: 'job', job: adapter !== undefined ? { ...this.job, device: { adapter } } : this.job });
  }

  /** offsetMs: the rank's machine clock minus ours; its spans are moved onto our clock */
  private received(rank: number, raw: unknown, secret: string, offsetMs = 0) {
    const r = RankMessageSchema.safeParse(raw);
    if (!r.success) {
      this.fail(rank, `${this.where(rank)} sent a malformed message (${r.error.issues[0]?.message})`);
      return;
    }
    const m = r.data;
    if (m.type === 'spans' && offsetMs !== 0)
      for (const s of m.spans) {
        s.start -= offsetMs;
        s.end -= offsetMs;
      }
    if (m.type === 'store' && rank === 0) {
      // a stop that raced rank 0's rendezvous must not start the others after it
      if (this.stopAt === null) this.startOthers(secret, m.port);
      return;
    }
    if (m.type === 'error') {
      this.fail(rank, this.world > 1 ? `${this.where(rank)}: ${m.message}` : m.message);
      return;
    }
    this.onMessage(m, rank);
  }

  private startOthers(secret: string, port: number) {
    const remote = new Map<AgentSession, { machine: string; ranks: number[] }>();
    for (let k = 1; k < this.world; k++) {
      const p = this.placement[k]!;
      if (p.kind === 'local') this.startLocal(k, secret, port);
      else {
        const g = remote.get(p.session) ?? { machine: p.machine, ranks: [] };
        g.ranks.push(k);
        remote.set(p.session, g);
      }
    }
    const launches = [...remote].map(async ([session, g]) => {
      const clock = await clockOffset(session);
      const job = await shipRunFiles(session, this.runId, this.job);
      session.onEvent((e) => {
        if (this.over || e.runId !== this.runId || !g.ranks.includes(e.rank)) return;
        if (e.event === 'rank-message') this.received(e.rank, e.message, secret, clock.offsetMs);
        else if (e.event === 'rank-exit') this.exitedWith(e.rank, e.code, e.signal);
        else if (this.opts.onOutput) this.opts.onOutput(e.rank, 'stderr', e.line);
        else process.stderr.write(`[${g.machine} rank ${e.rank}] ${e.line}\n`);
      });
      session.heartbeat(HEARTBEAT_MS, HEARTBEAT_MISSES, (why) => {
        if (this.over) return;
        for (const k of g.ranks) {
          this.exited[k] = true;
          this.lost.push({ rank: k, machine: g.machine, why: 'machine' });
        }
        this.fail(g.ranks[0]!, `ranks ${g.ranks.join(', ')} on ${g.machine} are lost: ${why}`);
      });
      const env = this.commEnv(0, secret, port);
      const res = await session.launch({
        runId: this.runId,
        job,
        ranks: g.ranks.map((rank, i) => {
          const adapter = this.placement[rank]!.adapter;
          return { rank, localRank: i, ...(adapter !== undefined ? { adapter } : {}) };
        }),
        comm: {
          worldSize: this.world,
          masterAddr: env[COMM_ENV.masterAddr]!,
          masterPort: port,
          secret,
          ...(this.commTimeoutMs !== undefined ? { timeoutMs: this.commTimeoutMs } : {}),
        },
      });
      for (const r of res.ranks) {
        this.started[r.rank] = true;
        this.ranks.push({ rank: r.rank, machine: g.machine, pid: r.pid });
      }
    });
    const groups = [...remote.values()];
    const gone = (e: Error, g: { machine: string; ranks: number[] }) => {
      // the machine went away before its ranks started (one just reached for an elastic run's
      // scale-up can go again at once): its ranks are lost with it, as when its heartbeats stop
      if (!this.over && /closed the connection|connection to agent .* closed/.test(e.message))
        for (const k of g.ranks) if (!this.lost.some((l) => l.rank === k)) this.lost.push({ rank: k, machine: g.machine, why: 'machine' });
      throw e;
    };
    Promise.all(launches.map((l, i) => l.catch((e: Error) => gone(e, groups[i]!)))).then(
      () => this.opts.onRanksStarted?.([...this.ranks].sort((a, b) => a.rank - b.rank)),
      (e: Error) => this.fail(1, `could not launch the remote ranks: ${e.message}`),
    );
  }

  private exitedWith(rank: number, code: number | null, signal: string | null) {
    if (this.exited[rank]) return;
    this.exited[rank] = true;
    if (code === 0) {
      this.finished++;
      if (this.finished === this.world) this.settle(this.failure);
    } else {
      const what = `${this.where(rank, true)} ${signal ? `was killed by ${signal}` : `exited with code ${code}`} before finishing`;
      // after stop(): SIGTERM is ours, and so is a SIGKILL from its grace on (ours or the agent's escalation)
      const ours =
        this.stopAt !== null &&
        (signal === null || signal === 'SIGTERM' || (signal === 'SIGKILL' && Date.now() >= (this.killAt ?? Infinity) - 500));
      if (!ours) this.deaths.push(what);
      // gone from the run: died before the failure was noticed, or killed from outside (SIGKILL not ours) at any time; a
      // survivor that crashes while its world aborts (a SIGSEGV in teardown) is not lost: its device is still there
      if (!ours && (this.stopAt === null || signal === 'SIGKILL') && !this.lost.some((l) => l.rank === rank))
        this.lost.push({ rank, machine: this.machineOf(rank), why: 'rank' });
      this.fail(rank, what);
    }
    this.settleIfAllGone();
  }

  private settleIfAllGone() {
    if (!this.failure || !this.exited.every((e, i) => e || !this.started[i])) return;
    // a survivor's "lost rank 1" may have arrived first: name every rank that died on its own too
    const extra = this.deaths.filter((d) => !this.failure!.message.includes(d));
    const failure = extra.length ? { ...this.failure, message: `${this.failure.message} (${extra.join('; ')})` } : this.failure;
    this.settle(this.lost.length ? { ...failure, lost: [...this.lost] } : failure);
  }

  private forwardLines(rank: number, stream: 'stdout' | 'stderr', from: NodeJS.ReadableStream | null) {
    if (!from) return;
    let partial = '';
    from.setEncoding('utf8');
    from.on('data', (d: string) => {
      const lines = (partial + d).split('\n');
      partial = lines.pop()!.slice(-4096); // a line without its end is bounded too
      for (const l of lines) if (l.trim()) this.opts.onOutput!(rank, stream, l.slice(0, 4096));
    });
    from.on('end', () => partial.trim() && this.opts.onOutput!(rank, stream, partial));
  }

  private fail(rank: number, message: string) {
    if (!this.failure) this.failure = { rank, message, noticedAt: Date.now() };
    this.stop();
    this.settleIfAllGone();
  }

  /**
   * Stop every rank: SIGTERM now, SIGKILL to whatever is still alive `graceMs` later (0: at once);
   * remote ones through their agent. A rank that gets SIGTERM while training finishes its step and
   * checkpoints it (workers/run-control/): a user's stop gives it STOP_GRACE_MS to do so, a failed
   * run's survivors (whose peers are gone) get 3 s. A second call may only shorten the grace.
   */
  stop(graceMs = FAILED_RUN_GRACE_MS) {
    this.stopAt ??= Date.now();
    if (this.killAt !== null && this.killAt <= Date.now() + graceMs) return;
    this.killAt = Date.now() + graceMs;
    for (const [i, c] of this.children.entries()) if (c && !this.exited[i]) c.kill(graceMs === 0 ? 'SIGKILL' : 'SIGTERM');
    const sessions = new Set(this.placement.flatMap((p) => (p.kind === 'agent' ? [p.session] : [])));
    for (const s of sessions) s.stopRun(this.runId).catch(() => {});
    if (graceMs === 0) return;
    clearTimeout(this.killTimer);
    this.killTimer = setTimeout(() => {
      for (const [i, c] of this.children.entries()) if (c && !this.exited[i]) c.kill('SIGKILL');
    }, graceMs);
    this.killTimer.unref();
  }
}
