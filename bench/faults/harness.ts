// The fault matrix's one case: a real run of `shardwise train` (or of `shardwise serve`, for
// runs.stop) on tiny, a fault injected mid-run, the process table and /dev/shm checked, the run
// resumed, and its per-step losses compared bit for bit with an uninterrupted run's. Used by
// `npm run bench:faults` (every strategy × every fault, JSON) and by the suite's representative
// subset (tests/dist/fault-matrix.test.ts). dist/ must be built; Linux (/proc, /dev/shm).
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { WebSocket } from 'ws';

/** bin/shardwise.js of this checkout: from dist/bench/faults/ (the bench) or bench/faults/ (the suite, from source) */
export const BIN = (() => {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!existsSync(path.join(dir, 'bin/shardwise.js'))) {
    const up = path.dirname(dir);
    if (up === dir) throw new Error('bench/faults: no bin/shardwise.js above this file');
    dir = up;
  }
  return path.join(dir, 'bin/shardwise.js');
})();
const SHM = '/dev/shm';

export const FAULTS = ['kill-rank', 'stop-rank', 'kill-controller', 'sigint', 'runs-stop'] as const;
export type Fault = (typeof FAULTS)[number];

/** a layout of the matrix: its `train` flags and its world size */
export interface Layout {
  name: string;
  flags: string[];
  world: number;
}

export const LAYOUTS: Layout[] = [
  { name: 'ddp 2', flags: ['--strategy', 'ddp', '--world', '2'], world: 2 },
  { name: 'zero3 2', flags: ['--strategy', 'zero3', '--world', '2'], world: 2 },
  { name: 'pp 2 1f1b', flags: ['--strategy', 'pp', '--pp', '2', '--schedule', '1f1b', '--micro-batches', '4'], world: 2 },
  {
    name: '3d 2x2x2',
    flags: ['--strategy', '3d', '--dp', '2', '--tp', '2', '--pp', '2', '--schedule', '1f1b', '--micro-batches', '2'],
    world: 8,
  },
];

export interface MatrixOptions {
  steps: number;
  checkpointInterval: number;
  /** the fault comes once this many steps are on record */
  faultAfter: number;
}

export const DEFAULT_OPTIONS: MatrixOptions = { steps: 60, checkpointInterval: 10, faultAfter: 25 };

export interface CaseResult {
  layout: string;
  fault: Fault;
  /** how the faulted process ended (exit code, or the signal) */
  ended: string;
  /** the status state.json holds before the resume */
  status_before_resume: string;
  /** the step the resume continued from (its first replayed step minus one) */
  resumed_from: number;
  /** ms from the fault until the run ended (the controller exited, or the API said stopped) */
  ended_ms: number;
  /** ms from the run's end until no rank process was left */
  ranks_gone_ms: number;
  /** rank processes still alive 5 s after the run ended */
  ranks_left: number[];
  /** ring files of the run left on /dev/shm 5 s after the run ended */
  shm_left: string[];
  /** steps whose loss differs from the uninterrupted run's (bitwise) or is missing */
  loss_mismatches: number[];
  /** step lines in metrics.jsonl after the resume (each step once: equals `steps`) */
  step_lines: number;
  ms: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function baseFlags(layout: Layout, o: MatrixOptions): string[] {
  return [
    '--preset',
    'tiny',
    ...layout.flags,
    '--steps',
    String(o.steps),
    '--checkpoint-interval',
    String(o.checkpointInterval),
    '--eval-interval',
    '0',
    '--seed',
    '7',
  ];
}

/** step -> loss of a run folder's metrics.jsonl, and how many step lines it holds */
export function stepLosses(runDir: string): { losses: Map<number, number>; lines: number } {
  const losses = new Map<number, number>();
  let lines = 0;
  for (const l of readFileSync(path.join(runDir, 'metrics.jsonl'), 'utf8').split('\n')) {
    if (!l.includes('"type":"step"')) continue;
    const m = JSON.parse(l) as { step: number; loss: number };
    lines++;
    losses.set(m.step, m.loss);
  }
  return { losses, lines };
}

/** The uninterrupted run: step -> loss. */
export function referenceRun(layout: Layout, o: MatrixOptions, dir: string): Map<number, number> {
  const out = path.join(dir, 'reference');
  const r = spawnSync(process.execPath, [BIN, 'train', ...baseFlags(layout, o), '--out', out, '--json'], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${layout.name}: the uninterrupted run failed: ${r.stderr}`);
  return stepLosses(out).losses;
}

/** the rank processes (pid by RANK) whose parent is `parent` */
export function rankPids(parent: number): Map<number, number> {
  const out = new Map<number, number>();
  const r = spawnSync('pgrep', ['-P', String(parent)], { encoding: 'utf8' });
  for (const line of r.stdout.trim().split('\n').filter(Boolean)) {
    try {
      const rank = readFileSync(`/proc/${line}/environ`, 'utf8')
        .split('\0')
        .find((e) => e.startsWith('RANK='));
      if (rank) out.set(Number(rank.slice(5)), Number(line));
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

/** Running (stopped counts as running): a zombie waiting to be reaped has exited. */
export function alive(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]![0] !== 'Z';
  } catch {
    return false;
  }
}

/** ring files on /dev/shm that the run's rank processes created (a ring's name carries its creator's pid) */
function lingeringRings(pids: number[]): string[] {
  if (!existsSync(SHM)) return [];
  return readdirSync(SHM).filter((n) => {
    const m = /^shardwise-(\d+)-/.exec(n);
    return m !== null && pids.includes(Number(m[1]));
  });
}

/** A process whose stdout is JSON lines; `steps()` counts its step lines. */
class Watched {
  stdout = '';
  stderr = '';
  readonly exit: Promise<string>;
  constructor(readonly proc: ChildProcess) {
    proc.stdout?.setEncoding('utf8').on('data', (d: string) => (this.stdout += d));
    proc.stderr?.setEncoding('utf8').on('data', (d: string) => (this.stderr += d));
    this.exit = new Promise((resolve) => proc.on('exit', (code, signal) => resolve(signal ?? `exit ${code}`)));
  }
  steps() {
    return (this.stdout.match(/"type":"step"/g) ?? []).length;
  }
}

async function until(cond: () => boolean, ms: number, what: string) {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > ms) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(100);
  }
}

/** A minimal client of `shardwise serve`'s WebSocket API (the wire of common/api). */
class ServeClient {
  private nextId = 0;
  private readonly pending = new Map<number, (m: { result?: unknown; error?: unknown }) => void>();
  readonly events: { runId?: string; data: { type: string; row?: { step: number }; state?: { status: string } } }[] = [];
  private constructor(private readonly ws: WebSocket) {
    ws.on('message', (d) => {
      const m = JSON.parse(String(d)) as { id?: number; event?: string; runId?: string; data?: any; result?: unknown; error?: unknown };
      if (m.event) this.events.push({ runId: m.runId, data: m.data });
      else this.pending.get(m.id!)?.(m);
    });
  }
  static async open(port: number, token: string): Promise<ServeClient> {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/api`);
    await new Promise((r, j) => (ws.once('open', r), ws.once('error', j)));
    const c = new ServeClient(ws);
    await c.call('auth', { token });
    return c;
  }
  call(method: string, params: unknown): Promise<any> {
    return new Promise((resolve, reject) => {
      const id = this.nextId++;
      this.pending.set(id, (m) => (m.error ? reject(new Error(`${method}: ${JSON.stringify(m.error)}`)) : resolve(m.result)));
      this.ws.send(JSON.stringify({ id, method, params }));
    });
  }
  close() {
    this.ws.close();
  }
}

async function startServe(runs: string): Promise<{ w: Watched; port: number; token: string }> {
  const w = new Watched(spawn(process.execPath, [BIN, 'serve', '--port', '0', '--runs', runs], { stdio: ['ignore', 'pipe', 'pipe'] }));
  await until(() => /open http:\/\/127\.0\.0\.1:\d+\/#token=/.test(w.stdout), 60_000, 'serve to listen');
  const m = /open http:\/\/127\.0\.0\.1:(\d+)\/#token=([A-Za-z0-9_-]+)/.exec(w.stdout)!;
  return { w, port: Number(m[1]), token: m[2]! };
}

/** the config runs.launch takes for a layout (the same resolution as its train flags) */
function launchConfig(layout: Layout, o: MatrixOptions): Record<string, unknown> {
  const cfg: Record<string, unknown> = {
    preset: 'tiny',
    steps: o.steps,
    checkpoint_interval: o.checkpointInterval,
    eval_interval: 0,
    seed: 7,
  };
  for (let i = 0; i < layout.flags.length; i += 2) {
    const key = layout.flags[i]!.slice(2).replace(/-/g, '_');
    const v = layout.flags[i + 1]!;
    cfg[key] = /^\d+$/.test(v) ? Number(v) : v;
  }
  return cfg;
}

/**
 * One case: run, fault after `faultAfter` steps, check what is left 5 s later, resume (CLI, or
 * runs.resume for runs.stop), and compare every step's loss with `reference`.
 */
export async function faultCase(
  layout: Layout,
  fault: Fault,
  reference: Map<number, number>,
  o: MatrixOptions,
  dir: string,
): Promise<CaseResult> {
  const t0 = Date.now();
  const env = { ...process.env, SHARDWISE_COMM_TIMEOUT_MS: '5000', SHARDWISE_DEBUG: '' };
  let runDir: string;
  let controller: Watched;
  let client: ServeClient | null = null;
  let runId = '';
  if (fault === 'runs-stop') {
    const s = await startServe(path.join(dir, 'runs'));
    controller = s.w;
    client = await ServeClient.open(s.port, s.token);
    ({ runId } = (await client.call('runs.launch', { config: { ...launchConfig(layout, o), name: 'fault' } })) as { runId: string });
    await client.call('runs.subscribe', { runId });
    runDir = path.join(dir, 'runs', runId);
    await until(() => client!.events.filter((e) => e.data.type === 'step').length >= o.faultAfter, 300_000, `${o.faultAfter} steps`);
  } else {
    runDir = path.join(dir, 'run');
    controller = new Watched(
      spawn(process.execPath, [BIN, 'train', ...baseFlags(layout, o), '--out', runDir, '--json'], {
        env,
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    );
    await until(() => controller.steps() >= o.faultAfter || controller.proc.exitCode !== null, 300_000, `${o.faultAfter} steps`);
    if (controller.proc.exitCode !== null) throw new Error(`${layout.name}: the run ended before the fault: ${controller.stderr}`);
  }
  const ranks = rankPids(controller.proc.pid!);
  if (ranks.size !== layout.world) throw new Error(`${layout.name}: ${ranks.size} rank processes found, expected ${layout.world}`);
  const victim = ranks.get(1)!;
  const faultAt = Date.now();
  let ended = '';
  switch (fault) {
    case 'kill-rank':
      process.kill(victim, 'SIGKILL');
      ended = await controller.exit;
      break;
    case 'stop-rank':
      process.kill(victim, 'SIGSTOP');
      ended = await controller.exit;
      break;
    case 'kill-controller':
      controller.proc.kill('SIGKILL');
      ended = await controller.exit;
      break;
    case 'sigint':
      controller.proc.kill('SIGINT');
      ended = await controller.exit;
      break;
    case 'runs-stop':
      await client!.call('runs.stop', { runId });
      await until(
        () => client!.events.some((e) => e.data.type === 'state' && ['stopped', 'failed', 'completed'].includes(e.data.state!.status)),
        120_000,
        'the stopped state',
      );
      ended = 'stopped';
      break;
  }
  const endedAt = Date.now();
  const pids = [...ranks.values()];
  const goneBy = endedAt + 5000;
  while (pids.some(alive) && Date.now() < goneBy) await sleep(50);
  const ranksGoneMs = Date.now() - endedAt;
  const ranksLeft = pids.filter(alive);
  for (const p of ranksLeft) process.kill(p, 'SIGKILL'); // the matrix reports them; the next case must not inherit them
  const shmLeft = lingeringRings(pids);
  const statusBefore = (JSON.parse(readFileSync(path.join(runDir, 'state.json'), 'utf8')) as { status: string }).status;

  let resumedFrom: number;
  if (fault === 'runs-stop') {
    const before = client!.events.length;
    await client!.call('runs.resume', { runId });
    await until(
      () => client!.events.slice(before).some((e) => e.data.type === 'state' && ['completed', 'failed'].includes(e.data.state!.status)),
      600_000,
      'the resumed run to end',
    );
    const first = client!.events.slice(before).find((e) => e.data.type === 'step');
    resumedFrom = first ? first.data.row!.step - 1 : -1;
    client!.close();
    controller.proc.kill('SIGTERM');
    await controller.exit;
  } else {
    const r = spawnSync(process.execPath, [BIN, 'train', '--resume', runDir, '--json'], { encoding: 'utf8', env });
    if (r.status !== 0) throw new Error(`${layout.name} ${fault}: the resume failed (${r.status}): ${r.stderr}`);
    const first = r.stdout.split('\n').find((l) => l.includes('"type":"step"'));
    resumedFrom = first ? (JSON.parse(first) as { step: number }).step - 1 : -1;
  }
  const { losses, lines } = stepLosses(runDir);
  const mismatches: number[] = [];
  for (let s = 1; s <= o.steps; s++) if (losses.get(s) !== reference.get(s)) mismatches.push(s);
  return {
    layout: layout.name,
    fault,
    ended,
    status_before_resume: statusBefore,
    resumed_from: resumedFrom,
    ended_ms: endedAt - faultAt,
    ranks_gone_ms: ranksGoneMs,
    ranks_left: ranksLeft,
    shm_left: shmLeft,
    loss_mismatches: mismatches,
    step_lines: lines,
    ms: Date.now() - t0,
  };
}

/** a fresh temporary folder for one case */
export const caseDir = (label: string) => mkdtempSync(path.join(tmpdir(), `shardwise-fault-${label.replace(/\W+/g, '-')}-`));
