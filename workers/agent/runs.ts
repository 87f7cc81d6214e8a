// Rank processes the agent runs for its controllers. A launch is data (workers/protocol/agent.ts):
// the agent forks its own rank entry point, in a folder of its own per run, with the run's
// rendezvous address and secret; any path the job names must stay inside that folder. Each
// run belongs to the connection that launched it: when that controller goes away, its ranks are
// stopped (never left training as orphans), and the agent keeps serving. If the agent itself
// dies, each run's watchdog process SIGKILLs its ranks, stopped ones too (protocol/rank-watchdog.ts).
import { type ChildProcess, fork } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AgentEvent, LaunchRequest } from '../protocol/agent.js';
import { COMM_ENV } from '../protocol/comm.js';
import { RankWatchdog } from '../protocol/rank-watchdog.js';
import { STOP_GRACE_MS } from '../protocol/train.js';

const RANK_ENTRY = fileURLToPath(new URL('../train/rank-main.js', import.meta.url));
/** the controller is gone (or the agent shuts down): its ranks cannot finish a step without rank 0 */
const KILL_GRACE_MS = 3000;

export class LaunchRefused extends Error {
  override name = 'LaunchRefused';
}

interface Run {
  owner: object;
  dir: string;
  ranks: Map<number, ChildProcess>;
}

/** A path the controller named, resolved inside the run folder, or a refusal. */
export function insideRunDir(runDir: string, rel: string, what: string): string {
  if (path.isAbsolute(rel) || rel.split(/[\\/]/).includes('..'))
    throw new LaunchRefused(`${what} "${rel}" is not a path inside the run folder: the agent only reads and writes its own run folder`);
  const full = path.resolve(runDir, rel);
  if (full !== runDir && !full.startsWith(runDir + path.sep)) throw new LaunchRefused(`${what} "${rel}" leaves the run folder`);
  return full;
}

export class AgentRuns {
  private readonly runs = new Map<string, Run>();

  constructor(
    private readonly runsRoot: string,
    private readonly log: (line: string) => void,
  ) {}

  runDir(runId: string): string {
    return path.join(this.runsRoot, runId);
  }

  /** Start the ranks; events go to `emit` (the launching connection). */
  launch(
    req: LaunchRequest,
    owner: object,
    bindAddr: string,
    emit: (e: AgentEvent) => void,
  ): { ranks: { rank: number; pid: number }[]; runDir: string } {
    const existing = this.runs.get(req.runId);
    if (existing && [...existing.ranks.values()].some((c) => c.exitCode === null && c.signalCode === null))
      throw new LaunchRefused(`run ${req.runId} already has ranks running on this agent`);
    const job = req.job;
    const dir = this.runDir(req.runId);
    const dataset = job.data.dataset;
    const resolved = {
      ...job,
      run_dir: dir,
      data: { dataset: dataset.startsWith('builtin:') ? dataset : insideRunDir(dir, dataset, 'dataset') },
      ...(job.resume_from !== undefined ? { resume_from: insideRunDir(dir, job.resume_from, 'resume_from') } : {}),
    };
    for (const r of req.ranks)
      if (r.rank >= req.comm.worldSize) throw new LaunchRefused(`rank ${r.rank} is outside the world of ${req.comm.worldSize}`);
    mkdirSync(dir, { recursive: true });
    const run: Run = { owner, dir, ranks: new Map() };
    this.runs.set(req.runId, run);
    const out = [];
    const watchdog = RankWatchdog.start();
    let running = req.ranks.length;
    for (const r of req.ranks) {
      const env: NodeJS.ProcessEnv = {
        ...process.env,
        [COMM_ENV.rank]: String(r.rank),
        [COMM_ENV.worldSize]: String(req.comm.worldSize),
        [COMM_ENV.localRank]: String(r.localRank),
        [COMM_ENV.masterAddr]: req.comm.masterAddr,
        [COMM_ENV.masterPort]: String(req.comm.masterPort),
        [COMM_ENV.secret]: req.comm.secret,
        [COMM_ENV.bindAddr]: bindAddr,
        [COMM_ENV.advertiseAddr]: bindAddr,
      };
      if (req.comm.timeoutMs !== undefined) env[COMM_ENV.timeoutMs] = String(req.comm.timeoutMs);
      const child = fork(RANK_ENTRY, [], { cwd: dir, stdio: ['ignore', 'ignore', 'pipe', 'ipc'], serialization: 'json', env });
      run.ranks.set(r.rank, child);
      watchdog?.watch(child.pid);
      let buf = '';
      child.stderr!.on('data', (d: Buffer) => {
        buf += d.toString();
        let nl: number;
        while ((nl = buf.indexOf('\n')) >= 0) {
          emit({ event: 'rank-log', runId: req.runId, rank: r.rank, line: buf.slice(0, nl).slice(0, 4000) });
          buf = buf.slice(nl + 1);
        }
      });
      child.on('message', (message) => emit({ event: 'rank-message', runId: req.runId, rank: r.rank, message }));
      child.on('exit', (code, signal) => {
        this.log(`run ${req.runId}: rank ${r.rank} (pid ${child.pid}) exited ${signal ?? code}`);
        emit({ event: 'rank-exit', runId: req.runId, rank: r.rank, code, signal });
        if (--running === 0) watchdog?.end();
      });
      child.on('error', (e) => this.log(`run ${req.runId}: rank ${r.rank}: ${e.message}`));
      child.send({ type: 'job', job: { ...resolved, device: r.adapter !== undefined ? { adapter: r.adapter } : job.device } });
      out.push({ rank: r.rank, pid: child.pid ?? -1 });
      this.log(`run ${req.runId}: started rank ${r.rank} (pid ${child.pid})`);
    }
    return { ranks: out, runDir: dir };
  }

  /** One chunk of a run file; the file appears under its name only when complete. */
  putFile(runId: string, rel: string, offset: number, data: Buffer, end: boolean) {
    const dir = this.runDir(runId);
    const full = insideRunDir(dir, rel, 'file');
    const part = `${full}.part`;
    mkdirSync(path.dirname(full), { recursive: true });
    if (offset === 0) rmSync(part, { force: true });
    else if (!existsSync(part)) throw new LaunchRefused(`file ${rel}: chunk at offset ${offset} without the ones before it`);
    const fd = openSync(part, offset === 0 ? 'w' : 'r+');
    try {
      writeSync(fd, data, 0, data.length, offset);
    } finally {
      closeSync(fd);
    }
    if (end) renameSync(part, full);
  }

  /**
   * SIGTERM the run's ranks, SIGKILL what is left after graceMs. The controller's stop gives them
   * STOP_GRACE_MS to finish their step and write its checkpoint (workers/run-control/).
   */
  stop(runId: string, why: string, graceMs = STOP_GRACE_MS) {
    const run = this.runs.get(runId);
    if (!run) return false;
    const alive = [...run.ranks.values()].filter((c) => c.exitCode === null && c.signalCode === null);
    if (alive.length) this.log(`run ${runId}: stopping ${alive.length} rank(s): ${why}`);
    for (const c of alive) c.kill('SIGTERM');
    setTimeout(() => {
      for (const c of alive) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    }, graceMs).unref();
    return true;
  }

  /** The controller that launched these runs is gone. */
  stopOwnedBy(owner: object, why: string) {
    for (const [id, run] of this.runs) if (run.owner === owner) this.stop(id, why, KILL_GRACE_MS);
  }

  stopAll(why: string) {
    for (const id of this.runs.keys()) this.stop(id, why, KILL_GRACE_MS);
  }
}
