// A rank process for the multi-process tests and the benchmark: joins the world from the
// torchrun-style environment, runs one scenario (argv[2]) and prints one JSON object per line
// on stdout ({"type":"ok"|"fail"|"error"|"result", ...}). Checks use integer-valued inputs so
// every reduction order gives exact results. Never calls process.exit after joining: the
// process must end by itself once the group is destroyed (no leaked sockets or timers).
import fs from 'node:fs';
import { initProcessGroup, type WorldGroup } from './init.js';
import type { PeerConnection } from './connection.js';
import { isRegistered, memAlloc, memFree } from './registered.js';
import { FrameKind, FLAG_PAYLOAD_SHM } from './frames.js';
import type { ProcessGroup } from './process-group.js';
import { CommError } from './errors.js';
import { chunkBounds, floatToHalf, halfToFloat, type ReduceOp, type Tensor } from './dtype.js';

const out = (o: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(o)}\n`);
const scenario = process.argv[2] ?? 'correctness';
const arg = process.argv[3] ? (JSON.parse(process.argv[3]) as Record<string, unknown>) : {};

type DT = 'float32' | 'float16';
const value = (rank: number, i: number, salt: number) => ((rank * 131 + i * 7 + salt * 13) % 17) - 8;

function make(dt: DT, n: number, f: (i: number) => number): Tensor {
  if (dt === 'float32') {
    const a = new Float32Array(n);
    for (let i = 0; i < n; i++) a[i] = f(i);
    return a;
  }
  const a = new Uint16Array(n);
  for (let i = 0; i < n; i++) a[i] = floatToHalf(f(i));
  return a;
}
const num = (t: Tensor, i: number) => (t instanceof Float32Array ? t[i] : halfToFloat(t[i]));
const round = (dt: DT, x: number) => (dt === 'float32' ? Math.fround(x) : halfToFloat(floatToHalf(x)));

function combine(op: ReduceOp, vals: number[], dt: DT): number {
  if (op === 'max') return Math.max(...vals);
  if (op === 'min') return Math.min(...vals);
  const s = vals.reduce((a, b) => a + b, 0);
  return op === 'avg' ? round(dt, s / vals.length) : s;
}

class Checker {
  failures: string[] = [];
  checked = 0;
  expect(name: string, got: Tensor, want: (i: number) => number, n = got.length) {
    this.checked++;
    if (got.length !== n) return void this.failures.push(`${name}: length ${got.length}, expected ${n}`);
    for (let i = 0; i < n; i++) {
      const g = num(got, i),
        w = want(i);
      if (!Object.is(g, w) && !(g === 0 && w === 0)) {
        this.failures.push(`${name}: element ${i} = ${g}, expected ${w}`);
        return;
      }
    }
  }
}

/** Posts every case for one length at once (many operations in flight), then checks them all. */
async function correctness(pg: ProcessGroup, c: Checker, dt: DT, len: number, salt: number, algs: 'small' | 'large') {
  const n = pg.size,
    r = pg.rank,
    g = pg.ranks;
  const checks: (() => void)[] = [];
  const works: Array<{ wait(): Promise<unknown> }> = [];
  const tag = `${pg.name} ${dt} len ${len} ${algs}`;
  const ops: ReduceOp[] = dt === 'float32' ? ['sum', 'avg', 'max', 'min'] : ['sum', 'avg', 'max'];
  for (const op of ops) {
    const s = salt + ops.indexOf(op);
    const buf = make(dt, len, (i) => value(g[r], i, s));
    works.push(pg.allReduce(buf, { op, algorithm: algs === 'small' ? (len % 2 ? 'direct' : 'recursive-doubling') : 'ring' }));
    checks.push(() =>
      c.expect(`allReduce ${op} ${tag}`, buf, (i) =>
        combine(
          op,
          g.map((q) => value(q, i, s)),
          dt,
        ),
      ),
    );
  }
  for (const op of ['sum', 'max'] as ReduceOp[]) {
    const s = salt + 10 + (op === 'sum' ? 0 : 1);
    const input = make(dt, len, (i) => value(g[r], i, s));
    const b = chunkBounds(len, n);
    const w = pg.reduceScatter(input, { op, algorithm: algs === 'small' ? 'direct' : 'ring' });
    works.push(w);
    checks.push(() => c.expect(`reduceScatter ${op} input untouched ${tag}`, input, (i) => round(dt, value(g[r], i, s))));
    w.wait().then(
      (res) =>
        checks.push(() =>
          c.expect(
            `reduceScatter ${op} ${tag}`,
            res,
            (i) =>
              combine(
                op,
                g.map((q) => value(q, b[r] + i, s)),
                dt,
              ),
            b[r + 1] - b[r],
          ),
        ),
      () => {},
    );
  }
  {
    // uneven blocks: rank q contributes len + (q % 2) elements
    const s = salt + 20;
    const counts = g.map((_, q) => len + (q % 2));
    const bounds = [0];
    for (const k of counts) bounds.push(bounds[bounds.length - 1] + k);
    const input = make(dt, counts[r], (i) => value(g[r], i, s));
    const w = pg.allGather(input, { counts, algorithm: algs === 'small' ? 'direct' : 'ring' });
    works.push(w);
    w.wait().then(
      (res) =>
        checks.push(() =>
          c.expect(
            `allGather uneven ${tag}`,
            res,
            (i) => {
              let q = 0;
              while (i >= bounds[q + 1]) q++;
              return value(g[q], i - bounds[q], s);
            },
            bounds[n],
          ),
        ),
      () => {},
    );
  }
  {
    const root = (salt + len) % n;
    const s = salt + 30;
    const buf = make(dt, len, (i) => value(g[r], i, s));
    works.push(pg.broadcast(buf, { root, algorithm: algs === 'small' ? 'tree' : 'chain' }));
    checks.push(() => c.expect(`broadcast root ${root} ${tag}`, buf, (i) => value(g[root], i, s)));
  }
  for (const op of ['sum', 'min'] as ReduceOp[]) {
    const root = (salt + len + 1 + (op === 'min' ? 1 : 0)) % n;
    const s = salt + 40 + (op === 'min' ? 1 : 0);
    const buf = make(dt, len, (i) => value(g[r], i, s));
    works.push(pg.reduce(buf, { root, op, algorithm: algs === 'small' ? 'tree' : 'chain' }));
    checks.push(() =>
      c.expect(`reduce ${op} root ${root} ${tag}`, buf, (i) =>
        r === root
          ? combine(
              op,
              g.map((q) => value(q, i, s)),
              dt,
            )
          : value(g[r], i, s),
      ),
    );
  }
  {
    // gather with uneven blocks: rank q contributes len + (q % 2) elements
    const s = salt + 50;
    const root = (salt + len + 2) % n;
    const counts = g.map((_, q) => len + (q % 2));
    const bounds = [0];
    for (const k of counts) bounds.push(bounds[bounds.length - 1] + k);
    const w = pg.gather(
      make(dt, counts[r], (i) => value(g[r], i, s)),
      { root, counts },
    );
    works.push(w);
    w.wait().then(
      (res) =>
        checks.push(() => {
          if (r !== root) return void (res === null ? c.checked++ : c.failures.push(`gather ${tag}: a non-root got a result`));
          const owner = (i: number) => bounds.findIndex((_, q) => i < bounds[q + 1]);
          c.expect(`gather root ${root} ${tag}`, res!, (i) => value(g[owner(i)], i - bounds[owner(i)], s), bounds[n]);
        }),
      () => {},
    );
  }
  {
    // scatter with uneven blocks: rank q receives len + (q % 3 === 1 ? 1 : 0) elements
    const s = salt + 60;
    const root = (salt + len + 3) % n;
    const counts = g.map((_, q) => len + (q % 3 === 1 ? 1 : 0));
    const bounds = [0];
    for (const k of counts) bounds.push(bounds[bounds.length - 1] + k);
    const output = make(dt, counts[r], () => 99);
    works.push(pg.scatter(output, { root, counts, ...(r === root ? { input: make(dt, bounds[n], (i) => value(g[root], i, s)) } : {}) }));
    checks.push(() => c.expect(`scatter root ${root} ${tag}`, output, (i) => value(g[root], bounds[r] + i, s)));
  }
  {
    // all-to-all with uneven splits: rank a sends rank b len + ((3a + b) % 2) elements
    const s = salt + 70;
    const split = (a: number, b: number) => len + ((3 * a + b) % 2);
    const inputSplits = g.map((_, j) => split(r, j));
    const outputSplits = g.map((_, i) => split(i, r));
    const inB = [0],
      outB = [0];
    for (let j = 0; j < n; j++) {
      inB.push(inB[j] + inputSplits[j]);
      outB.push(outB[j] + outputSplits[j]);
    }
    const input = make(dt, inB[n], (k) => {
      const j = inB.findIndex((_, q) => k < inB[q + 1]);
      return value(g[r], 1000 * j + k - inB[j], s);
    });
    const w = pg.allToAll(input, { inputSplits, outputSplits });
    works.push(w);
    w.wait().then(
      (res) =>
        checks.push(() =>
          c.expect(
            `allToAll ${tag}`,
            res,
            (k) => {
              const i = outB.findIndex((_, q) => k < outB[q + 1]);
              return value(g[i], 1000 * r + k - outB[i], s);
            },
            outB[n],
          ),
        ),
      () => {},
    );
  }
  works.push(pg.barrier());
  const settled = await Promise.allSettled(works.map((w) => w.wait()));
  const failed = settled.find((x) => x.status === 'rejected');
  if (failed) throw (failed as PromiseRejectedResult).reason;
  for (const ch of checks) ch();
}

function report(c: Checker, extra: Record<string, unknown> = {}) {
  out({ type: c.failures.length ? 'fail' : 'ok', checked: c.checked, failures: c.failures.slice(0, 20), ...extra });
}

/** All-reduce, reduce-scatter, all-gather and broadcast of `len` floats, checked exactly. */
async function bigOps(world: WorldGroup, c: Checker, len: number, registered = false): Promise<boolean> {
  const n = world.size,
    r = world.rank;
  let allRegistered = true;
  for (const op of ['allReduce', 'reduceScatter', 'allGather', 'broadcast'] as const) {
    const s = 3;
    const per = Math.floor(len / n);
    const plain = make('float32', op === 'allGather' ? per : len, (i) => value(r, i, s)) as Float32Array;
    // registered: the same values in registered memory (reduced in place)
    const buf = registered ? memAlloc(plain.length) : plain;
    if (registered) buf.set(plain);
    allRegistered &&= isRegistered(buf);
    const t0 = performance.now();
    if (op === 'allReduce') {
      await world.allReduce(buf).wait();
      c.expect('allReduce 16MiB', buf, (i) =>
        combine(
          'sum',
          world.ranks.map((q) => value(q, i, s)),
          'float32',
        ),
      );
    } else if (op === 'reduceScatter') {
      const res = await world.reduceScatter(buf).wait();
      const b = chunkBounds(len, n);
      c.expect(
        'reduceScatter 16MiB',
        res,
        (i) =>
          combine(
            'sum',
            world.ranks.map((q) => value(q, b[r] + i, s)),
            'float32',
          ),
        b[r + 1] - b[r],
      );
    } else if (op === 'allGather') {
      const res = await world.allGather(buf).wait();
      c.expect('allGather 16MiB', res, (i) => value(Math.floor(i / per), i % per, s), per * n);
    } else {
      await world.broadcast(buf, { root: n - 1 }).wait();
      c.expect('broadcast 16MiB', buf, (i) => value(n - 1, i, s));
    }
    out({ type: 'timing', op, ms: performance.now() - t0 });
    if (registered) memFree(buf);
  }
  return registered && allRegistered;
}

/**
 * Rank `culprit` runs `inject` (on its link to rank 0) once rank 0 is waiting in a world
 * all-reduce; every other rank posts that all-reduce and returns how it ended (it must fail,
 * naming the culprit). The culprit reports ok and returns `injected`.
 */
async function faultWhileWaiting(
  world: WorldGroup,
  culprit: number,
  key: string,
  inject: () => void,
): Promise<{ injected: boolean; err: unknown }> {
  if (world.rank === culprit) {
    await world.store.get(`${key}/posted`, 30_000);
    inject();
    out({ type: 'ok', checked: 0, failures: [] });
    return { injected: true, err: null };
  }
  const pending = world.allReduce(new Float32Array(8));
  if (world.rank === 0) await world.store.set(`${key}/posted`, '1');
  try {
    await pending.wait();
    return { injected: false, err: null };
  } catch (e) {
    return { injected: false, err: e };
  }
}

function errorInfo(e: unknown) {
  const err = e as CommError;
  return { message: err.message, code: err.code, op: err.op, group: err.group, seq: err.seq, peer: err.peer };
}

async function main() {
  const pieceBytes = typeof arg.pieceBytes === 'number' ? arg.pieceBytes : undefined;
  const timeoutMs = typeof arg.timeoutMs === 'number' ? arg.timeoutMs : undefined;
  const shmOff = Array.isArray(arg.shmOffRanks) && (arg.shmOffRanks as number[]).includes(Number(process.env.RANK));
  const world: WorldGroup = await initProcessGroup({
    ...(pieceBytes ? { pieceBytes } : {}),
    ...(timeoutMs ? { timeoutMs } : {}),
    ...(shmOff ? { shm: false } : {}),
  });
  const n = world.size,
    r = world.rank;
  const conns = () => (world as unknown as { t: { conns: Map<number, PeerConnection> } }).t.conns;
  const c = new Checker();
  try {
    switch (scenario) {
      case 'correctness': {
        const lengths = Array.isArray(arg.lengths)
          ? (arg.lengths as number[])
          : [...new Set([0, 1, Math.max(1, n - 1), n, 7, 101, 1001, 3 * n + 1])];
        let salt = 0;
        for (const len of lengths)
          for (const dt of ['float32', 'float16'] as DT[])
            for (const algs of ['small', 'large'] as const) await correctness(world, c, dt, len, ++salt, algs);
        report(c, { spans: world.telemetry.takeSpans().length, peers: world.peerBytes().length });
        break;
      }
      case 'big': {
        await bigOps(world, c, (arg.bytes as number) / 4);
        report(c);
        break;
      }
      case 'shm': {
        // every large op through shared memory where both ends allow it; what each link did
        const registered = await bigOps(world, c, (arg.bytes as number) / 4, arg.registered === true);
        await world.barrier().wait();
        const links = [...conns()].map(([peer, k]) => ({
          peer,
          shm: k.sharedMemory,
          ring: k.sharedMemoryRing,
          ringOnDisk: k.sharedMemoryRing ? fs.existsSync(`/dev/shm/${k.sharedMemoryRing}`) : false,
          sent: k.shmFramesSent,
          received: k.shmFramesReceived,
          bytes: k.shmBytesSent,
        }));
        report(c, { links, registered });
        break;
      }
      case 'shmbad': {
        // world 3, rank 1 with shared memory off. Rank 1 forges a ring offer with a path for a
        // name: rank 0 declines it and the link keeps working. Then rank 2 (whose ring rank 0
        // accepted) forges a payload outside its ring while rank 0 waits in an all-reduce:
        // rank 0 drops that link, fails the op naming rank 2, and keeps serving {0, 1}.
        const sub = await world.newGroup([0, 1], { name: 'survivors' });
        await world.barrier().wait();
        if (r === 1) {
          const offer = Buffer.from(JSON.stringify({ name: '../../etc/passwd', nonce: '00'.repeat(32), ringBytes: 4096 }));
          conns()
            .get(0)!
            .sendForgedFrameForTest(
              { kind: FrameKind.Control, dtype: 'float32', flags: 0, group: 0, seq: 0, step: 1, offset: 0, bytes: offer.length, check: 0 },
              offer,
            );
        }
        // the same link, over TCP, still exact
        if (sub) for (let k = 0; k < 2; k++) await correctness(sub, c, 'float32', 70000, 500 + k, 'large');
        await world.barrier().wait();
        const shm = Object.fromEntries([...conns()].map(([p, k]) => [p, k.sharedMemory]));
        const f = await faultWhileWaiting(world, 2, 'shmbad', () =>
          conns()
            .get(0)!
            .sendForgedFrameForTest({
              kind: FrameKind.Collective,
              dtype: 'float32',
              flags: FLAG_PAYLOAD_SHM,
              group: 0,
              seq: 1 << 20,
              step: 0,
              offset: 0,
              bytes: 1 << 20,
              check: 0,
              ringPos: 0xfff00000,
            }),
        );
        if (f.injected) break;
        if (sub) for (let k = 0; k < 2; k++) await correctness(sub, c, 'float32', 70000, 600 + k, 'large');
        report(c, { error: f.err ? errorInfo(f.err) : null, shm });
        break;
      }
      case 'subgroups': {
        // 3D-style grid: TP pairs {0,1},{2,3},..., DP groups of equal TP rank; all used at once
        const tpGroups = Array.from({ length: n / 2 }, (_, k) => [2 * k, 2 * k + 1]);
        const dpGroups = [0, 1].map((t) => Array.from({ length: n / 2 }, (_, k) => 2 * k + t));
        const mine: ProcessGroup[] = [];
        for (const ranks of tpGroups) {
          const g = await world.newGroup(ranks, { name: `tp${ranks[0] / 2}` });
          if (g) mine.push(g);
        }
        for (const ranks of dpGroups) {
          const g = await world.newGroup(ranks, { name: `dp${ranks[0]}` });
          if (g) mine.push(g);
        }
        if (mine.length !== 2) throw new Error(`rank ${r} is in ${mine.length} sub-groups, expected 2`);
        let salt = 100;
        const runs: Promise<void>[] = [];
        for (const len of [5, 1001, 70000])
          for (const pg of [...mine, world]) runs.push(correctness(pg, c, 'float32', len, ++salt, len > 1000 ? 'large' : 'small'));
        await Promise.all(runs);
        report(c, { groups: mine.map((g) => `${g.name}:${g.ranks.join(',')}`) });
        break;
      }
      case 'p2p': {
        // pipeline: rank r sends to r+1 with tags 0 and 1 interleaved; receivers post in another order
        const msgs = 6;
        const works: Array<{ wait(): Promise<unknown> }> = [];
        if (r + 1 < n)
          for (let k = 0; k < msgs; k++)
            for (const tag of [0, 1]) {
              const len = tag === 0 ? 3 + k : (1 << 20) + k; // the second tag carries multi-piece messages
              works.push(
                world.send(
                  make('float32', len, (i) => value(r, i, k * 2 + tag)),
                  r + 1,
                  { tag },
                ),
              );
            }
        const got: Promise<void>[] = [];
        if (r > 0)
          for (const tag of [1, 0])
            for (let k = 0; k < msgs; k++) {
              const len = tag === 0 ? 3 + k : (1 << 20) + k;
              const buf = new Float32Array(len);
              got.push(
                world
                  .recv(buf, r - 1, { tag })
                  .wait()
                  .then(() => c.expect(`recv tag ${tag} message ${k}`, buf, (i) => value(r - 1, i, k * 2 + tag))),
              );
            }
        await Promise.all([...works.map((w) => w.wait()), ...got]);
        report(c);
        break;
      }
      case 'departure': {
        // rank 1 sends to rank 2 and leaves at once (destroys its group, as a rank does after the
        // run's last barrier); rank 2 posts its receive later and must still get the data, while
        // a receive from the departed rank that can never be served fails naming it.
        // `stallMs`: rank 2's event loop is blocked (a driver compiling pipelines) while the others
        // leave, so it reads their rings' offers and their closes only afterwards.
        // `lateGroup`: they talk in group {1, 2}, which rank 2 creates only 1 s later: rank 1's
        // frames wait as early frames and its link is closed before the group exists.
        if (r === 2) for (const t0 = Date.now(); Date.now() - t0 < (typeof arg.stallMs === 'number' ? arg.stallMs : 0););
        if (arg.lateGroup && r === 2) await new Promise((res) => setTimeout(res, 1000));
        const g = arg.lateGroup ? await world.newGroup([1, 2]) : world;
        const [sender, receiver] = arg.lateGroup ? [0, 1] : [1, 2]; // ranks 1 and 2 in g
        if (r === 1) {
          await g!
            .send(
              make('float32', 1000, (i) => value(1, i, 7)),
              receiver,
              { tag: 3 },
            )
            .wait();
          world.destroy();
          out({ type: 'ok', checked: 0, failures: [] });
          break;
        }
        if (r === 2) {
          if (!arg.lateGroup) await new Promise((res) => setTimeout(res, 400));
          const buf = new Float32Array(1000);
          await g!.recv(buf, sender, { tag: 3 }).wait();
          c.expect('message from the departed rank', buf, (i) => value(1, i, 7));
          const t0 = performance.now();
          const never = await g!
            .recv(new Float32Array(4), sender, { tag: 4 })
            .wait()
            .then(
              () => null,
              (e: unknown) => e as { code?: string; peer?: number },
            );
          out({ type: 'never', code: never?.code, peer: never?.peer, ms: performance.now() - t0 });
        }
        report(c);
        break;
      }
      case 'kill': {
        // all-reduce forever; the test kills one rank; the others must fail naming it
        out({ type: 'ready', pid: process.pid });
        const buf = new Float32Array((arg.bytes as number) / 4);
        try {
          for (let k = 0; ; k++) {
            buf.fill(1);
            await world.allReduce(buf).wait();
            if (k === 2) out({ type: 'running' });
          }
        } catch (e) {
          out({ type: 'error', ...errorInfo(e) });
        }
        break;
      }
      case 'straggler': {
        // the last rank never posts the all-reduce: the others must time out, not hang
        if (r === n - 1) {
          await world.store.get('straggler/release', 60_000);
          out({ type: 'ok', checked: 0, failures: [] });
          break;
        }
        const t0 = performance.now();
        try {
          await world.allReduce(new Float32Array(16), { timeoutMs: arg.opTimeoutMs as number }).wait();
          out({ type: 'fail', checked: 1, failures: ['allReduce completed without the last rank'] });
        } catch (e) {
          out({ type: 'error', ms: performance.now() - t0, ...errorInfo(e) });
        }
        // later operations of the aborted group fail at once
        const later = world.barrier();
        await later.wait().catch(() => {});
        out({ type: 'later', failedFast: later.isCompleted() && !later.isSuccess(), code: later.exception()?.code });
        await world.store.add('straggler/count', 1);
        if ((await world.store.add('straggler/count', 0)) === n - 1) await world.store.set('straggler/release', '1');
        break;
      }
      case 'garbage': {
        // the test attacks this world's rank 0 while it works; then results must still be exact
        await world.store.set(`garbage/ready/${r}`, '1');
        await world.store.get('garbage/done', 60_000);
        for (let k = 0; k < 3; k++) await correctness(world, c, 'float32', 1001, 300 + k, k % 2 ? 'large' : 'small');
        report(c);
        break;
      }
      case 'badframe': {
        // rank 1 writes a malformed frame on its link to rank 0; rank 0 must close that link,
        // fail what it waits for from rank 1, and keep serving the sub-group {0, 2}
        const sub = await world.newGroup([0, 2], { name: 'survivors' });
        await world.barrier().wait();
        const f = await faultWhileWaiting(world, 1, 'badframe', () =>
          conns().get(0)!.sendRawForTest(Buffer.from('this is not a frame, it is garbage, and it is long enough')),
        );
        if (f.injected) break;
        if (sub) for (let k = 0; k < 2; k++) await correctness(sub, c, 'float32', 101, 400 + k, 'small');
        report(c, { error: f.err ? errorInfo(f.err) : null });
        break;
      }
      case 'bench': {
        const sizes = arg.sizes as number[];
        const ops = arg.ops as string[];
        const iters = arg.iters as number;
        for (const op of ops)
          for (const bytes of sizes) {
            const len = Math.max(1, Math.floor(bytes / 4));
            const buf = new Float32Array(len).fill(1);
            const gathered = new Float32Array(Math.floor(len / n) * n);
            const part = new Float32Array(Math.floor(len / n));
            const run = () =>
              op === 'allreduce'
                ? world.allReduce(buf).wait()
                : op === 'reducescatter'
                  ? world.reduceScatter(gathered, { output: part }).wait()
                  : op === 'allgather'
                    ? world.allGather(part, { output: gathered }).wait()
                    : world.broadcast(buf, { root: 0 }).wait();
            const reps = Math.max(3, Math.min(iters, Math.ceil((iters * 65536) / Math.max(bytes, 65536))));
            for (let w = 0; w < 2; w++) await run();
            const times: number[] = [];
            for (let k = 0; k < reps; k++) {
              await world.barrier().wait();
              const t0 = performance.now();
              await run();
              times.push(performance.now() - t0);
            }
            out({ type: 'result', op, bytes: op === 'allreduce' || op === 'broadcast' ? len * 4 : gathered.length * 4, times });
          }
        break;
      }
      default:
        throw new Error(`unknown scenario ${scenario}`);
    }
  } catch (e) {
    out({ type: 'error', ...errorInfo(e) });
  } finally {
    // let peers finish reading before the links close
    if (!['kill', 'badframe', 'shmbad', 'straggler', 'departure'].includes(scenario))
      await world.store.barrier(`end/${scenario}`, n, 30_000).catch(() => {});
    world.destroy();
  }
}

main().catch((e) => {
  out({ type: 'error', message: (e as Error).message });
  process.exitCode = 1;
});
