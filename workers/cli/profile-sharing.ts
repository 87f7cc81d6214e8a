// How much of one adapter's throughput k processes get together when each runs the same kernel
// on it at once, against one process alone: what the advisor's time model multiplies a shared
// device's throughput by (common/advisor/time.ts). A GPU time-slices its processes (about 1x);
// a software adapter need not: one process can leave cores idle that a second one fills (above
// 1), or two can fight over the same cores and caches (below 1), and differently by kernel size.
// So it is measured, at the sizes the profile times: each distinct matmul size of a training step
// and one memory-bound op (GELU forward, the widest elementwise launch).
//
// This process is the timer; k - 1 peers (this file's peer side, started by profile.ts with
// --share-peer ADAPTER, the same adapter opened there) run the same case when told. Per case:
//   alone   this process runs rounds of `reps` launches (a round ~roundMs) for at least windowMs,
//           before the shared window and again after it (the mean of the two rates)
//   shared  the peers loop on the case; once each has finished a round this process runs the same
//           rounds again (its window), then stops them. A peer's launches in the window are its
//           rounds' launches times the part of each round inside the window (processes on one
//           machine share a clock: performance.timeOrigin + now())
//   speedup (launches of all k in the window / window) / (launches alone / their time)
// The calibration's deadline may cut the list short: the cases go in an order that spans the sizes
// first (measuringOrder).
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { SharedTiming } from '../../common/advisor/profile.js';
import { openDevice } from '../gpu/device.js';
import { type Dispatch, Runtime } from '../gpu/runtime.js';
import { type Case, type KernelShape, prepareCase, stepCases } from './profile-kernels.js';

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

/** Rounds of `reps` launches until both minimums are met; the window they took, epoch ms. */
async function runRounds(rt: Runtime, d: Dispatch[], reps: number, plan: SharePlan) {
  const t0 = epochMs();
  let rounds = 0;
  while (rounds < plan.minRounds || epochMs() - t0 < plan.windowMs) {
    for (let i = 0; i < reps; i++) rt.run(d);
    await rt.sync();
    rounds++;
  }
  return { launches: rounds * reps, from: t0, to: epochMs() };
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

/**
 * The aggregate speedup of plan.k processes on rt's adapter (index `adapter`) at each sharing case
 * of each shape, in order; past `deadline` (epoch ms) the remaining cases are left out.
 */
export async function profileSharing(
  rt: Runtime,
  adapter: number,
  shapes: readonly (KernelShape & { name: string })[],
  plan: SharePlan,
  peerEntry: string,
  deadline?: number,
): Promise<SharedTiming[]> {
  // nothing to measure, or no time left (a loaded machine spent it on the kernels): no peer to start
  if (plan.k < 2 || (deadline !== undefined && Date.now() > deadline)) return [];
  const peers = Array.from(
    { length: plan.k - 1 },
    () => new Peer(spawn(process.execPath, [peerEntry, '--share-peer', String(adapter)], { stdio: ['pipe', 'pipe', 'pipe'] })),
  );
  const out: (SharedTiming & { order: [number, number] })[] = [];
  try {
    await Promise.all(peers.map((p) => p.next()));
    for (const { shape, s, i } of measuringOrder(shapes)) {
      if (deadline !== undefined && Date.now() > deadline) break;
      const c = sharingCases(shape)[i]!;
      for (const p of peers) p.send({ cmd: 'prepare', shape, case: i });
      const { dispatches: d, free } = prepareCase(rt, c);
      try {
        rt.run(d);
        await rt.sync(); // compile, first touch
        await Promise.all(peers.map((p) => p.next()));
        const t0 = performance.now();
        rt.run(d);
        await rt.sync();
        const reps = Math.min(256, Math.max(1, Math.ceil(plan.roundMs / Math.max(performance.now() - t0, 0.01))));
        const alone = await runRounds(rt, d, reps, plan);
        for (const p of peers) p.send({ cmd: 'run', reps });
        await Promise.all(peers.map((p) => p.next())); // each has finished a round: they all run
        const mine = await runRounds(rt, d, reps, plan);
        for (const p of peers) p.send({ cmd: 'stop' });
        const theirs = await Promise.all(peers.map((p) => p.next<{ rounds: [number, number][] }>()));
        const window = mine.to - mine.from;
        const together = mine.launches + theirs.reduce((n, t) => n + launchesInWindow(t.rounds, reps, mine.from, mine.to), 0);
        // alone again after: the mean of the rates before and after cancels a drift of the machine's speed
        const after = await runRounds(rt, d, reps, plan);
        const aloneRate = (alone.launches / (alone.to - alone.from) + after.launches / (after.to - after.from)) / 2;
        const speedup = together / window / aloneRate;
        if (!(Number.isFinite(speedup) && speedup > 0))
          throw new Error(`${c.op} ${c.shape}: no launches were timed (alone ${alone.launches}, together ${together})`);
        out.push({ k: plan.k, op: c.op, shape: `${shape.name} ${c.shape}`, flops: c.flops, bytes: c.bytes, speedup, order: [s, i] });
      } finally {
        free();
      }
    }
    // listed by shape, then as sharingCases lists them
    out.sort((a, b) => a.order[0] - b.order[0] || a.order[1] - b.order[1]);
    return out.map(({ order: _, ...x }) => x);
  } catch (e) {
    throw new Error(`measuring ${plan.k} processes sharing adapter ${adapter} failed: ${(e as Error).message}`, { cause: e });
  } finally {
    await Promise.all(peers.map((p) => p.close()));
  }
}

/** The peer side (`--share-peer ADAPTER`): open the adapter, then prepare, run and stop cases as told on stdin. */
export async function sharePeer(adapterArg: string): Promise<void> {
  const rt = new Runtime(await openDevice(Number(adapterArg)));
  const reply = (msg: object) => process.stdout.write(`${JSON.stringify(msg)}\n`);
  let current: { dispatches: Dispatch[]; free(): void } | null = null;
  let stop = false;
  let loop: Promise<void> = Promise.resolve();
  const rl = createInterface({ input: process.stdin });
  reply({ ready: true });
  try {
    for await (const line of rl) {
      const m = JSON.parse(line) as { cmd: 'prepare'; shape: KernelShape; case: number } | { cmd: 'run'; reps: number } | { cmd: 'stop' };
      if (m.cmd === 'prepare') {
        const c = sharingCases(m.shape)[m.case];
        if (!c) throw new Error(`no sharing case ${m.case} at these sizes`);
        current = prepareCase(rt, c);
        rt.run(current.dispatches);
        await rt.sync();
        reply({ prepared: true });
      } else if (m.cmd === 'run') {
        const { dispatches: d } = current!;
        const reps = m.reps;
        stop = false;
        // runs until told to stop; the reader keeps taking lines meanwhile (sync yields to it)
        loop = (async () => {
          const rounds: [number, number][] = [];
          while (!stop) {
            const a = epochMs();
            for (let i = 0; i < reps; i++) rt.run(d);
            await rt.sync();
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
