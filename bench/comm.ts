// npm run bench:comm — collectives between rank processes on loopback, in nccl-tests terms, next
// to the raw TCP throughput between two local processes measured in the same run. Prints one
// JSON object on stdout and nothing else (progress goes to stderr).
//
//   size    allreduce: the tensor; reducescatter: the full input (n x output); allgather: the
//           full output (n x input); broadcast: the tensor            (as nccl-tests count it)
//   time_us as nccl-tests: mean time of back-to-back iterations, averaged over ranks
//   median_us median over iterations of the rank-averaged iteration time
//   algbw   size / time                                              (GB/s, 1e9 bytes/s)
//   busbw   algbw x 2(n-1)/n (allreduce), x (n-1)/n (reducescatter, allgather), x 1 (broadcast)
//   cpu_ms  CPU time (user + system) of all processes per operation; cpu_gbps = busbw bytes per
//           CPU second. On a shared machine wall time swings with others' load while CPU cost
//           per byte barely moves: compare cpu_gbps of a collective with the tcp rows' to see
//           how close the library comes to plain sockets, load or not.
//
// tcp_gbps: one direction; tcp_duplex_gbps: per direction with both busy, timed until both
// directions have delivered everything (what a ring needs: every rank sends and receives at
// once; on a machine with few cores they share the CPU); both streamed (1 GiB in 4 MiB writes,
// received into one reused buffer on both ends: the best Node can do).
// Like for like, `tcp` rows measure plain sockets at every size the same way the collectives
// are measured (back-to-back iterations, mean time): op "tcp_oneway" sends `bytes` and waits
// for a 1-byte ack; op "tcp_duplex" has both processes send `bytes` to each other at once,
// which is what a world-2 all-reduce does (busbw_gbps = bytes / time per direction).
// The reference rows receive each transfer into a destination of its size (kernel -> that
// memory, nothing else), as the library's links do and as any receiver that keeps the bytes
// must: a ring can never receive everything into one small reused buffer, since its
// all-gather half has to land in the tensor. Rows with recv "reused" read into one reused
// 1 MiB buffer instead (cheaper for the kernel: that buffer stays in cache); they are shown
// beside the reference, not used for it. --tcp-recv into|reused|both (default both).
// Tensors are registered memory (memAlloc, as DDP's buckets; reductions run on them in place)
// unless --memory plain (ordinary Float32Arrays); each row says which ("memory").
// Collectives run over --transports shm,tcp,ws (default shm,tcp): "shm" is the library's default
// between ranks on one machine (frames on TCP links, payloads through /dev/shm rings); "tcp"
// and "ws" carry the payloads over the links themselves (SHARDWISE_COMM_SHM=0), as between
// machines. Every run also times an 8-byte row (latency).
//
// `targets` (last key) puts the two targets next to what was measured in this run:
// world-2 all-reduce busbw at >= 16 MiB against the raw TCP figures (one way, and per
// direction with both busy: a world-2 all-reduce sends its whole tensor each way, so on
// loopback, where both directions share the CPU, the duplex figure is what TCP allows it), and
// the median time of an 8-byte all-reduce at world 4 (target < 1 ms).
// Options: --worlds 2,4 --ops allreduce,reducescatter,allgather,broadcast --min 4096
//          --max 67108864 --iters 20; tuning: --piece BYTES --window BYTES --small BYTES
//          (all-reduce size up to which recursive doubling is used instead of the ring)
//          --direct BYTES (up to which one direct round over the mesh is used)
//          --dtype float32|float16|bfloat16 (the payload's elements; sizes stay in bytes)
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import {
  adoptReusingReads,
  connectReusingReads,
  initProcessGroup,
  isRegistered,
  memAlloc,
  memFree,
  StoreServer,
  type DType,
  type ReadSink,
} from '../workers/comm/index.js';
import { median, round } from '../common/stats.js';

const SELF = fileURLToPath(import.meta.url);
type Op = 'allreduce' | 'reducescatter' | 'allgather' | 'broadcast';
const BUS: Record<Op, (n: number) => number> = {
  allreduce: (n) => (2 * (n - 1)) / n,
  reducescatter: (n) => (n - 1) / n,
  allgather: (n) => (n - 1) / n,
  broadcast: () => 1,
};

function flag(name: string, def: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1] : def;
}
const log = (s: string) => process.stderr.write(`${s}\n`);

// ---- raw TCP between two processes ----
const TCP_BYTES = 1 << 30;
const TCP_CHUNK = 4 << 20;

/**
 * Child side: listen, print the port, send TCP_BYTES to whoever connects, reading what it sends
 * into one reused buffer. With --duplex the child ends only once it has also received
 * TCP_BYTES, so the parent's clock stops when both directions have delivered everything.
 */
async function tcpPeer() {
  const duplex = process.argv.includes('--duplex');
  const chunk = Buffer.alloc(TCP_CHUNK, 1);
  const reads: ReadSink = { onChunk: null };
  const server = net.createServer({ pauseOnConnect: true }, async (accepted) => {
    const s = adoptReusingReads(accepted, reads) ?? (accepted.resume(), accepted);
    s.setNoDelay(true);
    s.on('error', () => {});
    let got = 0;
    let sent = false;
    const finish = () => {
      if (sent && (!duplex || got >= TCP_BYTES)) s.end();
    };
    const onChunk = (c: Buffer) => {
      got += c.length;
      if (got >= TCP_BYTES) finish();
    };
    if (s === accepted) s.on('data', onChunk);
    else reads.onChunk = onChunk;
    for (let k = 0; k < TCP_BYTES && !s.destroyed; k += chunk.length) if (!s.write(chunk)) await new Promise((r) => s.once('drain', r));
    sent = true;
    finish();
    s.on('close', () => server.close());
  });
  server.listen(0, '127.0.0.1', () => process.stdout.write(`${(server.address() as net.AddressInfo).port}\n`));
}

/**
 * Receives TCP_BYTES from a child process into one reused 1 MiB buffer (the cheapest receive
 * Node has), in GB/s, from the first byte to the last. With `duplex` both processes send
 * TCP_BYTES to each other at once, and the clock runs from the connection until both
 * directions have delivered everything (the child ends only then): the throughput of one
 * direction while both are busy. (Stopping at the first direction to finish overstates it:
 * on 2 cores one direction can get most of the CPU until it is done, then the other runs.)
 * Best of three.
 */
async function measureTcp(duplex: boolean): Promise<number> {
  let best = 0;
  for (let k = 0; k < 3; k++) {
    const child = spawn(process.execPath, [SELF, '--tcp-peer', ...(duplex ? ['--duplex'] : [])], { stdio: ['ignore', 'pipe', 'inherit'] });
    const port = await new Promise<number>((resolve) => child.stdout!.once('data', (d) => resolve(Number(String(d).trim()))));
    const gbps = await new Promise<number>((resolve, reject) => {
      let got = 0;
      let t0 = 0;
      const reads: ReadSink = {
        onChunk: (c) => {
          if (got === 0 && !duplex) t0 = performance.now();
          got += c.length;
        },
      };
      const s = connectReusingReads('127.0.0.1', port, reads);
      s.setNoDelay(true);
      s.on('error', reject);
      s.on('end', () => {
        if (got < TCP_BYTES) return reject(new Error(`raw TCP peer ended after ${got} of ${TCP_BYTES} bytes`));
        resolve(got / ((performance.now() - t0) / 1000) / 1e9);
        s.destroy();
      });
      if (duplex)
        s.once('connect', async () => {
          t0 = performance.now();
          const chunk = Buffer.alloc(TCP_CHUNK, 2);
          for (let sent = 0; sent < TCP_BYTES && !s.destroyed; sent += chunk.length)
            if (!s.write(chunk)) await new Promise((r) => s.once('drain', r));
        });
    });
    await new Promise((r) => child.once('exit', r));
    best = Math.max(best, gbps);
  }
  return best;
}

// ---- raw TCP at every size, measured like the collectives ----

/** Child side of the sweep: per request [u8 mode][u32 LE bytes], then one-way: read bytes, ack 1 byte; duplex: send bytes while reading bytes. */
function tcpSweepPeer() {
  const into = process.argv.includes('--into');
  const reads: ReadSink = { onChunk: null };
  const server = net.createServer({ pauseOnConnect: true }, (accepted) => {
    const s = adoptReusingReads(accepted, reads) ?? (accepted.resume(), accepted);
    s.setNoDelay(true);
    s.on('error', () => {});
    let payload = Buffer.alloc(0);
    let dest = Buffer.alloc(0);
    const head = Buffer.alloc(5);
    let headFill = 0,
      need = 0,
      mode = 0,
      total = 0;
    // --into: the request's payload is read into a destination of its size, as a receiver
    // that keeps the bytes must (the headers exactly, so no payload lands elsewhere)
    if (into) reads.nextBuffer = () => (need > 0 ? dest.subarray(total - need, total) : head.subarray(headFill));
    const onChunk = (chunk: Buffer) => {
      let pos = 0;
      while (pos < chunk.length) {
        if (need === 0 && headFill < 5) {
          const take = Math.min(5 - headFill, chunk.length - pos);
          if (chunk.buffer !== head.buffer) chunk.copy(head, headFill, pos, pos + take);
          headFill += take;
          pos += take;
          if (headFill < 5) return;
          mode = head[0];
          need = total = head.readUInt32LE(1);
          if (payload.length < need) payload = Buffer.alloc(need, 3);
          if (into && dest.length < need) dest = Buffer.alloc(need);
          if (mode === 2) s.write(payload.subarray(0, need));
          if (need === 0) headFill = 0;
          continue;
        }
        const take = Math.min(need, chunk.length - pos);
        need -= take;
        pos += take;
        if (need === 0) {
          headFill = 0;
          if (mode === 1) s.write(Buffer.from([1]));
        }
      }
    };
    if (s === accepted) s.on('data', onChunk);
    else reads.onChunk = onChunk;
    s.on('close', () => server.close());
  });
  server.listen(0, '127.0.0.1', () => process.stdout.write(`${(server.address() as net.AddressInfo).port}\n`));
}

interface TcpRow {
  op: 'tcp_oneway' | 'tcp_duplex';
  recv?: 'reused';
  world: 2;
  bytes: number;
  time_us: number;
  algbw_gbps: number;
  busbw_gbps: number;
  median_us: number;
  iters: number;
  cpu_ms: number;
  cpu_gbps: number;
}

async function measureTcpSweep(sizes: number[], iters: number, into: boolean): Promise<TcpRow[]> {
  const child = spawn(process.execPath, [SELF, '--tcp-sweep-peer', ...(into ? ['--into'] : [])], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve) => child.stdout!.once('data', (d) => resolve(Number(String(d).trim()))));
  const reads: ReadSink = { onChunk: null };
  const s = connectReusingReads('127.0.0.1', port, reads);
  s.setNoDelay(true);
  await new Promise((r) => s.once('connect', r));
  let want = 0;
  let cur = 0;
  const dest = Buffer.alloc(into ? Math.max(...sizes) : 0);
  // the duplex reply lands in a destination of its size (see tcpSweepPeer)
  if (into) reads.nextBuffer = () => (want > 1 ? dest.subarray(cur - want, cur) : null);
  let wake: (() => void) | null = null;
  reads.onChunk = (chunk: Buffer) => {
    want -= chunk.length;
    if (want <= 0 && wake) {
      const w = wake;
      wake = null;
      w();
    }
  };
  const payload = Buffer.alloc(Math.max(...sizes), 2);
  const once = (mode: 1 | 2, bytes: number) =>
    new Promise<void>((resolve) => {
      want = mode === 1 ? 1 : bytes;
      cur = bytes;
      let flushed = false,
        received = want === 0;
      const check = () => flushed && received && resolve();
      wake = () => ((received = true), check());
      const head = Buffer.alloc(5);
      head[0] = mode;
      head.writeUInt32LE(bytes, 1);
      s.cork();
      s.write(head);
      s.write(payload.subarray(0, bytes), () => ((flushed = true), check()));
      s.uncork();
    });
  const rows: TcpRow[] = [];
  for (const mode of [1, 2] as const)
    for (const bytes of sizes) {
      const reps = repsFor(iters, bytes);
      for (let w = 0; w < Math.max(3, reps >> 2); w++) await once(mode, bytes);
      const times: number[] = [];
      const cpu0 = process.cpuUsage();
      for (let k = 0; k < reps; k++) {
        const t0 = performance.now();
        await once(mode, bytes);
        times.push(performance.now() - t0);
      }
      const cpu = process.cpuUsage(cpu0);
      const t = times.reduce((a, b) => a + b, 0) / times.length / 1000;
      // duplex is symmetric: the peer spends what this process spends; one-way: count this side twice too (an estimate)
      const cpuPerOp = (2 * (cpu.user + cpu.system)) / reps / 1e6;
      rows.push({
        op: mode === 1 ? 'tcp_oneway' : 'tcp_duplex',
        ...(into ? {} : { recv: 'reused' }),
        world: 2,
        bytes,
        time_us: round(t * 1e6, 1),
        algbw_gbps: round(bytes / t / 1e9, 4),
        busbw_gbps: round(bytes / t / 1e9, 4),
        median_us: round(median(times) * 1000, 1),
        iters: reps,
        cpu_ms: round(cpuPerOp * 1000, 2),
        cpu_gbps: round(bytes / cpuPerOp / 1e9, 4),
      });
      log(`raw tcp ${mode === 1 ? 'one-way' : 'duplex'} ${bytes} B: ${(bytes / t / 1e9).toFixed(3)} GB/s`);
    }
  s.destroy();
  await new Promise((r) => child.once('exit', r));
  return rows;
}

// ---- one rank of the benchmark world ----
async function rankMain() {
  const piece = Number(flag('piece', '0'));
  const win = Number(flag('window', '0'));
  const small = Number(flag('small', '-1'));
  const direct = Number(flag('direct', '-1'));
  const extra = JSON.parse(flag('tuning', '{}')) as Record<string, number>;
  const kind = flag('transport', 'tcp') as 'shm' | 'tcp' | 'ws';
  const transport = kind === 'ws' ? 'ws' : 'tcp';
  const world = await initProcessGroup({
    transport,
    shm: kind === 'shm',
    ...extra,
    ...(piece ? { pieceBytes: piece } : {}),
    ...(win ? { windowBytes: win } : {}),
    ...(small >= 0 ? { allReduceSmallBytes: small } : {}),
    ...(direct >= 0 ? { allReduceDirectBytes: direct } : {}),
  });
  const n = world.size;
  const ops = flag('ops', '').split(',') as Op[];
  // registered (memAlloc, what DDP's buckets use: reduced in place) or the caller's own arrays
  const registered = flag('memory', 'registered') === 'registered';
  const dtype = flag('dtype', 'float32') as DType;
  const size = dtype === 'float32' ? 4 : 2;
  const live: Float32Array[] = [];
  /** `numel` elements of the run's dtype (16-bit ones a Uint16Array view of the float32 allocation), all 1.0 */
  const alloc = (numel: number): Float32Array | Uint16Array => {
    const words = size === 4 ? numel : Math.ceil(numel / 2);
    const t = registered ? memAlloc(words) : new Float32Array(words);
    live.push(t);
    return size === 4 ? t.fill(1) : new Uint16Array(t.buffer, t.byteOffset, numel).fill(dtype === 'bfloat16' ? 0x3f80 : 0x3c00);
  };
  const o = { dtype };
  const sizes = flag('sizes', '').split(',').map(Number);
  const iters = Number(flag('iters', '20'));
  // JIT warm-up of the whole path before anything is timed
  for (let k = 0; k < 300; k++) await world.allReduce(new Float32Array(2)).wait();
  for (const op of ops)
    for (const bytes of sizes) {
      const per = Math.max(1, Math.floor(bytes / size / n)); // elements per rank block
      const full = alloc(op === 'allreduce' || op === 'broadcast' ? Math.max(1, Math.floor(bytes / size)) : per * n);
      const part = alloc(per);
      const run = () =>
        op === 'allreduce'
          ? world.allReduce(full, o).wait()
          : op === 'reducescatter'
            ? world.reduceScatter(full, { ...o, output: part }).wait()
            : op === 'allgather'
              ? world.allGather(part, { ...o, output: full }).wait()
              : world.broadcast(full, { ...o, root: 0 }).wait();
      // fewer iterations for large sizes (repsFor)
      const reps = repsFor(iters, bytes);
      for (let w = 0; w < Math.max(3, reps >> 2); w++) await run();
      // nccl-tests style: one barrier, then back-to-back iterations, each timed
      await world.barrier().wait();
      const times: number[] = [];
      const cpu0 = process.cpuUsage();
      for (let k = 0; k < reps; k++) {
        const t0 = performance.now();
        await run();
        times.push(performance.now() - t0);
      }
      const cpu = process.cpuUsage(cpu0);
      process.stdout.write(
        `${JSON.stringify({ op, bytes: full.byteLength, times, cpu_us: cpu.user + cpu.system, registered: isRegistered(full) })}\n`,
      );
      for (const t of live.splice(0)) memFree(t);
    }
  await world.store.barrier('bench/end', n);
  world.destroy();
}

interface Row {
  op: Op;
  transport: string;
  /** the tensors: registered (memAlloc) or plain Float32Arrays */
  memory: 'registered' | 'plain';
  /** the elements' type (--dtype); 16-bit payloads are summed in float32 and rounded back at every hop */
  dtype: DType;
  world: number;
  bytes: number;
  time_us: number;
  algbw_gbps: number;
  busbw_gbps: number;
  median_us: number;
  iters: number;
  cpu_ms: number;
  cpu_gbps: number;
}

async function runWorld(n: number, ops: Op[], sizes: number[], iters: number, transport: string): Promise<Row[]> {
  const secret = randomBytes(24).toString('hex');
  const store = await StoreServer.start({ secret });
  const perRank: { op: Op; bytes: number; times: number[]; cpu_us: number; registered: boolean }[][] = [];
  const procs = Array.from({ length: n }, (_, r) => {
    const p = spawn(
      process.execPath,
      [
        ...process.execArgv,
        SELF,
        '--rank',
        '--ops',
        ops.join(','),
        '--sizes',
        sizes.join(','),
        '--iters',
        String(iters),
        '--piece',
        flag('piece', '0'),
        '--window',
        flag('window', '0'),
        '--small',
        flag('small', '-1'),
        '--direct',
        flag('direct', '-1'),
        '--tuning',
        flag('tuning', '{}'),
        '--transport',
        transport,
        '--memory',
        flag('memory', 'registered'),
        '--dtype',
        flag('dtype', 'float32'),
      ],
      {
        env: {
          ...process.env,
          RANK: String(r),
          WORLD_SIZE: String(n),
          LOCAL_RANK: String(r),
          MASTER_ADDR: '127.0.0.1',
          MASTER_PORT: String(store.port),
          SHARDWISE_RUN_SECRET: secret,
        },
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    perRank[r] = [];
    let buf = '';
    p.stdout!.on('data', (d) => {
      buf += d;
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = JSON.parse(buf.slice(0, nl));
        buf = buf.slice(nl + 1);
        perRank[r].push(line);
        if (r === 0) log(`${transport} world ${n} ${line.op} ${line.bytes} B: median ${median(line.times).toFixed(3)} ms (rank 0)`);
      }
    });
    return new Promise<void>((resolve, reject) =>
      p.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`rank ${r} of world ${n} exited with ${code}`)))),
    );
  });
  try {
    await Promise.all(procs);
  } finally {
    await store.close();
  }
  return perRank[0].map((first, i) => {
    // nccl-tests: time per iteration averaged over back-to-back iterations, then over ranks;
    // median_us: median over iterations of the rank-averaged iteration time
    const perIter = first.times.map((_, k) => perRank.reduce((a, rows) => a + rows[i].times[k], 0) / n);
    const t = perIter.reduce((a, b) => a + b, 0) / perIter.length / 1000;
    const algbw = first.bytes / t / 1e9;
    // CPU seconds of all ranks per operation: unlike wall time, barely moved by other load
    const cpuPerOp = perRank.reduce((a, rows) => a + rows[i].cpu_us, 0) / first.times.length / 1e6;
    return {
      op: first.op,
      transport,
      memory: perRank.every((rows) => rows[i].registered) ? 'registered' : 'plain',
      dtype: flag('dtype', 'float32') as DType,
      world: n,
      bytes: first.bytes,
      time_us: round(t * 1e6, 1),
      algbw_gbps: round(algbw, 4),
      busbw_gbps: round(algbw * BUS[first.op](n), 4),
      median_us: round(median(perIter) * 1000, 1),
      iters: perIter.length,
      cpu_ms: round(cpuPerOp * 1000, 2),
      cpu_gbps: round((first.bytes * BUS[first.op](n)) / cpuPerOp / 1e9, 4),
    };
  });
}

/**
 * Timed iterations at a size: `iters` up to 1 MiB, fewer for larger sizes (iters x 1 MiB of
 * traffic), but never under min(iters, 20): a mean of 5 large iterations swung by +-20% here.
 */
function repsFor(iters: number, bytes: number): number {
  return Math.max(Math.min(iters, 20), Math.min(iters, Math.round((iters * (1 << 20)) / Math.max(bytes, 1 << 20))));
}

async function main() {
  if (process.argv.includes('--tcp-peer')) return tcpPeer();
  if (process.argv.includes('--tcp-sweep-peer')) return tcpSweepPeer();
  if (process.argv.includes('--rank')) return rankMain();
  const worlds = flag('worlds', '2,4').split(',').map(Number);
  const ops = flag('ops', 'allreduce,reducescatter,allgather,broadcast').split(',') as Op[];
  const min = Number(flag('min', '4096'));
  const max = Number(flag('max', String(64 << 20)));
  const iters = Number(flag('iters', '20'));
  const sizes: number[] = [];
  for (let s = min; s <= max; s *= 4) sizes.push(s);
  const noTcp = process.argv.includes('--no-tcp');
  const tcp = noTcp ? 0 : await measureTcp(false);
  const duplex = noTcp ? 0 : await measureTcp(true);
  log(`raw TCP between two processes: ${tcp.toFixed(3)} GB/s one way, ${duplex.toFixed(3)} GB/s per direction both ways`);
  const dtype = flag('dtype', 'float32');
  if (!['float32', 'float16', 'bfloat16'].includes(dtype)) throw new Error(`--dtype ${dtype}: use float32, float16 or bfloat16`);
  const transports = flag('transports', 'shm,tcp').split(',');
  for (const tr of transports) if (!['shm', 'tcp', 'ws'].includes(tr)) throw new Error(`--transports ${tr}: use shm, tcp or ws`);
  if (!sizes.includes(8)) sizes.unshift(8);
  const recv = flag('tcp-recv', 'both');
  const results: (Row | TcpRow)[] = [];
  if (!noTcp && recv !== 'reused') results.push(...(await measureTcpSweep(sizes, iters, true)));
  if (!noTcp && recv !== 'into') results.push(...(await measureTcpSweep(sizes, iters, false)));
  for (const tr of transports) for (const n of worlds) results.push(...(await runWorld(n, ops, sizes, iters, tr)));
  const env = { cpus: os.cpus().length, loadavg_1m: round(os.loadavg()[0], 2), node: process.version };
  const targets = {
    allreduce_world2_16mib_plus: results
      .filter((r): r is Row => r.op === 'allreduce' && r.world === 2 && r.bytes >= 16 << 20)
      .map((r) => ({
        transport: r.transport,
        memory: r.memory,
        bytes: r.bytes,
        busbw_gbps: r.busbw_gbps,
        of_tcp_oneway: tcp ? round(r.busbw_gbps / tcp, 3) : null,
        of_tcp_duplex: duplex ? round(r.busbw_gbps / duplex, 3) : null,
      })),
    allreduce_world4_8b: results
      .filter((r): r is Row => r.op === 'allreduce' && r.world === 4 && r.bytes === 8)
      .map((r) => ({ transport: r.transport, memory: r.memory, median_us: r.median_us, under_1ms: r.median_us < 1000 })),
  };
  process.stdout.write(`${JSON.stringify({ tcp_gbps: round(tcp, 4), tcp_duplex_gbps: round(duplex, 4), env, results, targets })}\n`);
}

main().catch((e) => {
  process.stderr.write(`bench:comm failed: ${(e as Error).message}\n`);
  process.exit(1);
});
