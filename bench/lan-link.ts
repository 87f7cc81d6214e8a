// npm run bench:lan-link — how much of a shaped LAN link the collectives use. Two namespaced
// machines (bench/lan/harness.ts) at 1 and 10 Gbit/s; on each, raw TCP (one stream, then the
// same bytes split over several streams at once: what striping a transfer could gain) and a
// world-2 all-reduce through the comm layer, one rank per machine. The same TCP rows on
// loopback (no shaping) show what the CPUs allow without the link. Prints one JSON object on
// stdout (progress on stderr). Needs root and iproute2.
//
//   link_use   for the all-reduce: busbw x 8 / shaped rate. A world-2 ring all-reduce sends the
//              whole tensor each way, so its time can never beat bytes x 8 / rate: link_use 1.0
//              is the link fully used (Ethernet/IP/TCP headers cost ~4% of it at MTU 1500).
//   time_ms    per iteration, from the last rank's call to the last rank's result, median (the
//              collective's own time); own_time_ms: the slowest rank's time from its own call,
//              the earlier reports' time_ms; call_skew_ms between the calls
//              (bench/lan/allreduce-times.ts). Why both: back to back, a rank that calls d ms
//              late finishes d ms early (its peer's data is already on the wire) and calls the
//              next all-reduce first, so the skew changes sides and never heals, and
//              own_time_ms charges it to every all-reduce. Measured at 1 Gbit/s, 4 MiB (2 cores,
//              load 7-10): each direction carried a 1 MiB piece every 8.4-8.7 ms from its
//              sender's call (line rate) while the calls stayed 1-10 ms apart; smaller pieces
//              only let the skew grow further (pieceBytes sweep, see DEFAULT_TUNING).
//   tcp rows   gbps = payload bits / time of the whole transfer (acknowledged), median of rounds
//
// Options: --rates 1,10 --sizes 4194304,16777216,67108864 --iters 10 --streams 1,2,4
//          --piece BYTES (the collectives' pieceBytes tuning; default: the library's)
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { initProcessGroup, memAlloc, StoreServer } from '../workers/comm/index.js';
import { createLan, type Lan, lanUnavailable, type LinkGbit } from './lan/harness.js';
import { probeTcp } from './lan/tcp-probe.js';
import { allReduceRow, median, type RankTimes, round } from './lan/allreduce-times.js';

const SELF = fileURLToPath(import.meta.url);
const STORE_PORT = 29461;
const log = (s: string) => process.stderr.write(`${s}\n`);
const flag = (name: string, def: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1]! : def;
};
const nowMs = () => Number(process.hrtime.bigint() / 1000n) / 1000;

/** One rank of the all-reduce world: times `iters` all-reduces per size, prints {bytes, starts, ends} lines. */
async function rankMain() {
  const rank = Number(process.env.RANK);
  const masterAddr = process.env.MASTER_ADDR!;
  const secret = process.env.SHARDWISE_RUN_SECRET!;
  const piece = Number(flag('piece', '0'));
  const store = rank === 0 ? await StoreServer.start({ host: masterAddr, port: STORE_PORT, secret }) : null;
  const world = await initProcessGroup({
    rank,
    worldSize: Number(process.env.WORLD_SIZE),
    masterAddr,
    masterPort: STORE_PORT,
    secret,
    bindAddr: process.env.SHARDWISE_COMM_BIND,
    ...(piece ? { pieceBytes: piece } : {}),
  });
  const iters = Number(flag('iters', '10'));
  for (const bytes of flag('sizes', '').split(',').map(Number)) {
    const t = memAlloc(bytes / 4).fill(1);
    for (let w = 0; w < 3; w++) await world.allReduce(t).wait();
    await world.barrier().wait();
    // ms on the host's monotonic clock, which every namespaced machine shares
    const starts: number[] = [];
    const ends: number[] = [];
    for (let k = 0; k < iters; k++) {
      starts.push(nowMs());
      await world.allReduce(t).wait();
      ends.push(nowMs());
    }
    if (t[0] !== 2 ** (3 + iters)) throw new Error(`all-reduce result ${t[0]}, expected ${2 ** (3 + iters)}`);
    process.stdout.write(`${JSON.stringify({ bytes, starts, ends })}\n`);
  }
  await world.store.barrier('bench/end', world.size);
  // rank 0 hosts the store: it closes it only once every other rank has said it is leaving
  if (rank > 0) await world.store.set(`bench/left/${rank}`, '1');
  else for (let r = 1; r < world.size; r++) await world.store.get(`bench/left/${r}`);
  world.destroy();
  await store?.close();
}

async function allReduceOnLan(lan: Lan, sizes: number[], iters: number) {
  const secret = randomBytes(24).toString('hex');
  const m = lan.machines;
  const outs: string[] = m.map(() => '');
  const procs = m.map((machine, rank) => {
    const [cmd, ...pre] = lan.exec(machine);
    const p = spawn(
      cmd!,
      [...pre, process.execPath, SELF, '--rank', '--sizes', sizes.join(','), '--iters', String(iters), '--piece', flag('piece', '0')],
      {
        env: {
          ...process.env,
          RANK: String(rank),
          WORLD_SIZE: String(m.length),
          MASTER_ADDR: m[0]!.ip,
          SHARDWISE_RUN_SECRET: secret,
          SHARDWISE_COMM_BIND: machine.ip,
        },
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    p.stdout!.on('data', (d: Buffer) => (outs[rank] += d.toString()));
    return new Promise<void>((resolve, reject) =>
      p.on('exit', (code) =>
        code === 0 ? resolve() : reject(new Error(`all-reduce rank ${rank} on ${machine.name} exited with ${code}`)),
      ),
    );
  });
  await Promise.all(procs);
  const perRank = outs.map((o) =>
    o
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as RankTimes),
  );
  return perRank[0]!.map((_, i) =>
    allReduceRow(
      perRank.map((r) => r[i]!),
      lan.rateBitsPerS,
    ),
  );
}

async function tcpRows(lan: Lan, label: string, sizes: number[], streamsList: number[], rounds: number) {
  const rows = [];
  for (const bytes of sizes)
    for (const streams of streamsList) {
      const s = median((await probeTcp(lan, lan.machines[0]!, lan.machines[1]!, bytes, rounds + 2, streams)).slice(2));
      const gbps = (bytes * 8) / s / 1e9;
      rows.push({
        op: 'tcp',
        streams,
        bytes,
        time_ms: round(s * 1000, 2),
        gbps: round(gbps),
        link_use: round((gbps * 1e9) / lan.rateBitsPerS),
      });
      log(`tcp ${label} ${bytes} B x ${streams} stream(s): ${gbps.toFixed(3)} Gbit/s`);
    }
  return rows;
}

async function main() {
  const why = lanUnavailable();
  if (why) throw new Error(`bench:lan-link needs namespaced machines: ${why}`);
  const rates = flag('rates', '1,10').split(',').map(Number) as LinkGbit[];
  const sizes = flag('sizes', `${4 << 20},${16 << 20},${64 << 20}`)
    .split(',')
    .map(Number);
  const iters = Number(flag('iters', '10'));
  const streams = flag('streams', '1,2,4').split(',').map(Number);
  const links = [];
  for (const rateGbit of rates) {
    const lan = createLan({ machines: 2, rateGbit });
    try {
      const tcp = await tcpRows(lan, `${rateGbit} Gbit/s`, sizes, streams, iters);
      const allreduce = await allReduceOnLan(lan, sizes, iters);
      for (const r of allreduce)
        log(
          `allreduce ${rateGbit} Gbit/s ${r.bytes} B: ${r.busbw_gbps} Gbit/s busbw, link use ${r.link_use} (${r.own_link_use} from each rank's own call, ${r.loop_link_use} over the back-to-back loop)`,
        );
      links.push({ rate_gbit: rateGbit, shaping: lan.shaping, tcp, allreduce });
    } finally {
      lan.destroy();
    }
  }
  // loopback: one namespace, no shaping: what two processes' TCP reaches on these CPUs
  const lo = createLan({ machines: 1, rateGbit: 10 });
  let loopback;
  try {
    const m = lo.machines[0]!;
    const self = { ...lo, machines: [m, { ...m, ip: '127.0.0.1' }] };
    loopback = await tcpRows(self, 'loopback', sizes, streams, iters);
  } finally {
    lo.destroy();
  }
  const target = links.find((l) => l.rate_gbit === 1)?.allreduce.find((r) => r.bytes >= 4 << 20);
  process.stdout.write(
    `${JSON.stringify({
      links,
      loopback: loopback.map(({ link_use: _, ...r }) => r),
      targets: target
        ? {
            allreduce_4mib_1gbit: {
              bytes: target.bytes,
              achieved_over_shaped: target.link_use,
              from_each_rank_call: target.own_link_use,
              back_to_back_loop: target.loop_link_use,
              target: 0.9,
              // the collective's own time, and the loop as nccl-tests time it: both must reach the target
              met: target.link_use >= 0.9 && target.loop_link_use >= 0.9,
            },
          }
        : {},
    })}\n`,
  );
}

if (process.argv.includes('--rank')) await rankMain();
else await main();
