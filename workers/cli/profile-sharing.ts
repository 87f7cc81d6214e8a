// How much of one adapter's throughput k processes get together when each runs the same work on
// it at once, against one process alone: what the advisor's time model divides a shared device's
// busy time by (common/advisor/time.ts). A GPU time-slices its processes (about 1x); a software
// adapter need not: one process can leave cores idle that a second one fills (above 1), or two
// can fight over the same cores and caches (below 1), and differently by size. So it is measured,
// two ways:
//   step    the work is one rank's whole training step (profile-step.ts: a step's launches, its
//           readbacks and update) at the micro-batches layouts of k ranks run (B/k, B/4k): the
//           gaps one process leaves (encoding, host round trips) count, as they do in training.
//           Each also notes one process's step at the whole batch B alone (whole_batch_ms): how
//           much faster k ranks sharing the adapter split a batch than one rank runs it, and what
//           a micro-batch's step alone is compared with (the time model's microBatchScale)
//   kernel  each distinct matmul size of a training step and one memory-bound op (GELU forward,
//           the widest elementwise launch), launched back to back: the per-op figures, for a
//           profile whose step figures were cut by the deadline
// The step sequences go first: they are what the time model prefers.
//
// This process is the timer; k - 1 peers (this file's peer side, started by profile.ts with
// --share-peer ADAPTER, the same adapter opened there) run the same work when told. Per work:
//   alone   this process runs rounds (a step, or `reps` launches and a sync: a round ~roundMs) for
//           at least windowMs, before the shared window and again after it (the mean of the two
//           rates)
//   shared  the peers loop on the work; once each has finished a round this process runs the same
//           rounds again (its window), then stops them. A peer's rounds in the window count by the
//           part of each inside it (processes on one machine share a clock: performance.timeOrigin
//           + now())
//   speedup (rounds of all k in the window / window) / (rounds alone / their time)
// The calibration's deadline may cut the list short: the kernel cases go in an order that spans
// the sizes first (measuringOrder).
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { type SharedTiming, STEP_SHARE_OP } from '../../common/advisor/profile.js';
import { openDevice } from '../gpu/device.js';
import { type Dispatch, Runtime } from '../gpu/runtime.js';
import type { ProfileShape } from '../protocol/profile-shape.js';
import { type Case, type KernelShape, prepareCase, stepCases } from './profile-kernels.js';
import { prepareStep, stepBatches } from './profile-step.js';

export interface SharePlan {
  /** processes on the adapter at once */
  k: number;
  /** launches per round are grown until a round takes this long */
  roundMs: number;
  /** each measurement (alone, shared) runs at least this long and at least minRounds rounds */
  windowMs: number;
  minRounds: number;
}

/** The cases measured at one model's sizes: one matmul per distinct size (within 10%), then GELU forward. */
export function sharingCases(s: KernelShape): Case[] {
  const all = stepCases(s);
  const matmuls = all.filter((c) => c.op === 'matmul').sort((a, b) => a.flops - b.flops);
  const distinct: Case[] = [];
  for (const c of matmuls) if (distinct.length === 0 || c.flops > 1.1 * distinct.at(-1)!.flops) distinct.push(c);
  const gelu = all.find((c) => c.op === 'gelu' && c.shape.startsWith('forward'));
  return [...distinct, ...(gelu ? [gelu] : [])];
}

/**
 * Which case of which shape to measure first, so that a calibration cut short by its deadline
 * still spans the sizes: every shape's largest matmul and its GELU, then every shape's smallest
 * matmul, then the sizes between.
 */
export function measuringOrder<S extends KernelShape>(shapes: readonly S[]): { shape: S; s: number; i: number }[] {
  const ranked = shapes.map((shape, s) => {
    const n = sharingCases(shape).length; // matmuls ascending, then GELU
    const order = [n - 2, n - 1, 0, ...Array.from({ length: Math.max(0, n - 3) }, (_, j) => j + 1)].filter(
      (i, j, all) => i >= 0 && all.indexOf(i) === j,
    );
    return order.map((i) => ({ shape, s, i }));
  });
  const out: { shape: S; s: number; i: number }[] = [];
  for (let r = 0; r < Math.max(0, ...ranked.map((x) => x.length)); r++) for (const x of ranked) if (x[r]) out.push(x[r]);
  return out;
}

const epochMs = () => performance.timeOrigin + performance.now();

/** What one process repeats: a round is one step, or `reps` launches of a case and a sync. */
interface MeasuredWork {
  round(): Promise<void>;
  free(): void;
}

/** A sharing case's launch, `reps` times back to back, then a sync. */
function kernelWork(rt: Runtime, prepared: { dispatches: Dispatch[]; free(): void }, reps: number): MeasuredWork {
  return {
    async round() {
      for (let i = 0; i < reps; i++) rt.run(prepared.dispatches);
      await rt.sync();
    },
    free: prepared.free,
  };
}

/** What the timer and the peers are told to prepare: a step sequence, or a sharing case. */
type WorkSpec = { kind: 'step'; shape: KernelShape; b: number } | { kind: 'kernel'; shape: KernelShape; case: number };

/** Rounds until both minimums are met; the window they took, epoch ms. */
async function runRounds(w: MeasuredWork, plan: SharePlan) {
  const t0 = epochMs();
  let rounds = 0;
  while (rounds < plan.minRounds || epochMs() - t0 < plan.windowMs) {
    await w.round();
    rounds++;
  }
  return { rounds, from: t0, to: epochMs() };
}

/** launches of a peer's rounds that fall inside [from, to], each round's share by its overlap */
export function launchesInWindow(rounds: readonly [number, number][], reps: number, from: number, to: number): number {
  let n = 0;
  for (const [a, b] of rounds) {
    const inside = Math.min(b, to) - Math.max(a, from);
    if (inside > 0) n += b > a ? (reps * inside) / (b - a) : reps;
  }
  return n;
}

/** One peer process: JSON lines both ways. */
class Peer {
  private readonly lines: string[] = [];
  private waiting: ((line: string) => void) | null = null;
  private stderr = '';
  private exited: string | null = null;
  readonly done: Promise<void>;

  constructor(private readonly child: ChildProcess) {
    createInterface({ input: child.stdout! }).on('line', (l) => {
      if (this.waiting) {
        const w = this.waiting;
        this.waiting = null;
        w(l);
      } else this.lines.push(l);
    });
    child.stderr!.on('data', (d) => (this.stderr += String(d)));
    this.done = new Promise((resolve) =>
      child.once('exit', (code) => {
        this.exited = `exit code ${code}${this.stderr ? `: ${this.stderr.trim().split('\n').at(-1)}` : ''}`;
        this.waiting?.('');
        resolve();
      }),
    );
  }

  send(msg: object): void {
    this.child.stdin!.write(`${JSON.stringify(msg)}\n`);
  }

  /** the next line, parsed; the peer's death is an error that says why */
  async next<T>(): Promise<T> {
    const line = this.lines.shift() ?? (this.exited === null ? await new Promise<string>((r) => (this.waiting = r)) : '');
    if (line === '') throw new Error(`the sharing peer stopped (${this.exited ?? 'closed its output'})`);
    return JSON.parse(line) as T;
  }

  async close(): Promise<void> {
    if (this.exited === null) this.child.stdin!.end();
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5_000);
    await this.done;
    clearTimeout(timer);
  }
}

/** One work's figures: the aggregate speedup, one round alone and one process's round among k, ms. */
interface Shared {
  speedup: number;
  alone_ms: number;
  shared_ms: number;
}

/** The work alone, then with every peer running it too, then alone again (prepared here and in the peers already). */
async function measure(w: MeasuredWork, peers: readonly Peer[], plan: SharePlan, reps: number): Promise<Shared> {
  const alone = await runRounds(w, plan);
  for (const p of peers) p.send({ cmd: 'run', reps });
  await Promise.all(peers.map((p) => p.next())); // each has finished a round: they all run
  const mine = await runRounds(w, plan);
  for (const p of peers) p.send({ cmd: 'stop' });
  const theirs = await Promise.all(peers.map((p) => p.next<{ rounds: [number, number][] }>()));
  const window = mine.to - mine.from;
  const together = mine.rounds + theirs.reduce((n, t) => n + launchesInWindow(t.rounds, 1, mine.from, mine.to), 0);
  // alone again after: the mean of the rates before and after cancels a drift of the machine's speed
  const after = await runRounds(w, plan);
  const aloneRate = (alone.rounds / (alone.to - alone.from) + after.rounds / (after.to - after.from)) / 2;
  const speedup = together / window / aloneRate;
  if (!(Number.isFinite(speedup) && speedup > 0)) throw new Error(`no rounds were timed (alone ${alone.rounds}, together ${together})`);
  return { speedup, alone_ms: 1 / aloneRate, shared_ms: (window * (peers.length + 1)) / together };
}

/**
 * The aggregate speedup of plan.k processes on rt's adapter (index `adapter`): each shape's step
 * sequences at the micro-batches k ranks run, then each sharing case of each shape; past
 * `deadline` (epoch ms) the remaining ones are left out.
 */
export async function profileSharing(
  rt: Runtime,
  adapter: number,
  shapes: readonly ProfileShape[],
  plan: SharePlan,
  peerEntry: string,
  deadline?: number,
  /** ms one step of a shape's whole batch takes, roughly (its kernels' times): a shape with no time left for it is skipped before compiling */
  stepEstimateMs: (shape: ProfileShape) => number = () => 0,
): Promise<SharedTiming[]> {
  // nothing to measure, or no time left (a loaded machine spent it on the kernels): no peer to start
  const late = () => deadline !== undefined && Date.now() > deadline;
  if (plan.k < 2 || late()) return [];
  const peers = Array.from(
    { length: plan.k - 1 },
    () => new Peer(spawn(process.execPath, [peerEntry, '--share-peer', String(adapter)], { stdio: ['pipe', 'pipe', 'pipe'] })),
  );
  /** tell every peer to prepare the work; wait until each has run it once (compiled, first touched) */
  const prepareInPeers = (spec: WorkSpec) => {
    for (const p of peers) p.send({ cmd: 'prepare', spec });
    const ready = Promise.all(peers.map((p) => p.next()));
    ready.catch(() => {}); // awaited after this process's own preparation; a failure there is the error reported
    return ready;
  };
  const steps: SharedTiming[] = [];
  const kernels: (SharedTiming & { order: [number, number] })[] = [];
  try {
    await Promise.all(peers.map((p) => p.next()));
    /** whether `rounds` more rounds of `ms` each (at least a window) would end past the deadline: a step cannot be cut short */
    const noTimeFor = (rounds: number, ms: number) =>
      deadline !== undefined && Date.now() + rounds * Math.max(plan.minRounds * ms, plan.windowMs) > deadline;
    for (const shape of shapes) {
      // one process's step at the whole batch, alone: what k ranks splitting it are compared with, and what the time model
      // compares a micro-batch's step alone with (time.ts microBatchScale). Skipped before compiling when its rounds
      // (estimated from its kernels' times) would pass the deadline, after its first round (an upper bound) likewise
      if (noTimeFor(4, stepEstimateMs(shape))) continue;
      const whole = prepareStep(rt, shape, shape.B);
      let wholeMs: number;
      try {
        const t0 = performance.now();
        await whole.round(); // compile, first touch
        if (noTimeFor(1, performance.now() - t0)) continue;
        const r = await runRounds(whole, plan);
        wholeMs = (r.to - r.from) / r.rounds;
      } finally {
        whole.free();
      }
      for (const b of stepBatches(shape.B, plan.k)) {
        // alone, shared (once the peers have run a round) and alone again: skipped before compiling when the whole batch's
        // step scaled down to b would not fit, and after its first round (compiling: an upper bound of a round) when that does not
        if (noTimeFor(4, (wholeMs * b) / shape.B)) continue;
        const peersReady = prepareInPeers({ kind: 'step', shape, b });
        const seq = prepareStep(rt, shape, b);
        try {
          const t0 = performance.now();
          await seq.round(); // compile, first touch
          await peersReady;
          if (noTimeFor(3, Math.min(performance.now() - t0, wholeMs))) continue;
          const x = await measure(seq, peers, plan, 1).catch((e: unknown) => {
            throw new Error(`${shape.name} step at micro-batch ${b}: ${(e as Error).message}`, { cause: e });
          });
          steps.push({
            k: plan.k,
            op: STEP_SHARE_OP,
            shape: `${shape.name} step B=${b}`,
            flops: seq.flopsPerLaunch,
            bytes: 0,
            speedup: x.speedup,
            batch: b,
            launches: seq.launches,
            alone_ms: x.alone_ms,
            shared_ms: x.shared_ms,
            whole_batch: shape.B,
            whole_batch_ms: wholeMs,
          });
        } finally {
          seq.free();
        }
      }
    }
    for (const { shape, s, i } of measuringOrder(shapes)) {
      if (late()) break;
      const c = sharingCases(shape)[i]!;
      const peersReady = prepareInPeers({ kind: 'kernel', shape, case: i });
      const prepared = prepareCase(rt, c);
      try {
        await kernelWork(rt, prepared, 1).round(); // compile, first touch
        await peersReady;
        const t0 = performance.now();
        await kernelWork(rt, prepared, 1).round();
        const reps = Math.min(256, Math.max(1, Math.ceil(plan.roundMs / Math.max(performance.now() - t0, 0.01))));
        const x = await measure(kernelWork(rt, prepared, reps), peers, plan, reps).catch((e: unknown) => {
          throw new Error(`${c.op} ${c.shape}: ${(e as Error).message}`, { cause: e });
        });
        kernels.push({
          k: plan.k,
          op: c.op,
          shape: `${shape.name} ${c.shape}`,
          flops: c.flops,
          bytes: c.bytes,
          speedup: x.speedup,
          order: [s, i],
        });
      } finally {
        prepared.free();
      }
    }
    // the steps by shape and size, then the kernels by shape, as sharingCases lists them
    kernels.sort((a, b) => a.order[0] - b.order[0] || a.order[1] - b.order[1]);
    return [...steps, ...kernels.map(({ order: _, ...x }) => x)];
  } catch (e) {
    throw new Error(`measuring ${plan.k} processes sharing adapter ${adapter} failed: ${(e as Error).message}`, { cause: e });
  } finally {
    await Promise.all(peers.map((p) => p.close()));
  }
}

/** The peer side (`--share-peer ADAPTER`): open the adapter, then prepare, run and stop work as told on stdin. */
export async function sharePeer(adapterArg: string): Promise<void> {
  const rt = new Runtime(await openDevice(Number(adapterArg)));
  const reply = (msg: object) => process.stdout.write(`${JSON.stringify(msg)}\n`);
  let current: { work(reps: number): MeasuredWork; free(): void } | null = null;
  let stop = false;
  let loop: Promise<void> = Promise.resolve();
  const rl = createInterface({ input: process.stdin });
  reply({ ready: true });
  try {
    for await (const line of rl) {
      const m = JSON.parse(line) as { cmd: 'prepare'; spec: WorkSpec } | { cmd: 'run'; reps: number } | { cmd: 'stop' };
      if (m.cmd === 'prepare') {
        current?.free(); // prepared, never run
        const spec = m.spec;
        if (spec.kind === 'step') {
          const seq = prepareStep(rt, spec.shape, spec.b);
          current = { work: () => seq, free: seq.free };
        } else {
          const c = sharingCases(spec.shape)[spec.case];
          if (!c) throw new Error(`no sharing case ${spec.case} at these sizes`);
          const prepared = prepareCase(rt, c);
          current = { work: (reps) => kernelWork(rt, prepared, reps), free: prepared.free };
        }
        await current.work(1).round();
        reply({ prepared: true });
      } else if (m.cmd === 'run') {
        const w = current!.work(m.reps);
        stop = false;
        // runs until told to stop; the reader keeps taking lines meanwhile (each round's waits yield to it)
        loop = (async () => {
          const rounds: [number, number][] = [];
          while (!stop) {
            const a = epochMs();
            await w.round();
            rounds.push([a, epochMs()]);
            if (rounds.length === 1) reply({ started: true });
          }
          current!.free();
          current = null;
          reply({ rounds });
        })();
      } else if (m.cmd === 'stop') {
        stop = true;
        await loop;
      }
    }
  } finally {
    rt.destroy();
  }
}
