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
//   tcp rows   gbps = payload bits / time of the whole transfer (acknowledged), median of rounds
//
// Options: --rates 1,10 --sizes 4194304,16777216,67108864 --iters 10 --streams 1,2,4
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { initProcessGroup, memAlloc, StoreServer } from '../workers/comm/index.js';
import { createLan, type Lan, lanUnavailable, type LinkGbit } from './lan/harness.js';
import { probeTcp } from './lan/tcp-probe.js';

const SELF = fileURLToPath(import.meta.url);
const STORE_PORT = 29461;
const log = (s: string) => process.stderr.write(`${s}\n`);
const flag = (name: string, def: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1]! : def;
};
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
const round = (x: number, d = 3) => Math.round(x * 10 ** d) / 10 ** d;

/** One rank of the all-reduce world: times `iters` all-reduces per size, prints {bytes, times} lines. */
async function rankMain() {
  const rank = Number(process.env.RANK);
  const masterAddr = process.env.MASTER_ADDR!;
  const secret = process.env.SHARDWISE_RUN_SECRET!;
  const store = rank === 0 ? await StoreServer.start({ host: masterAddr, port: STORE_PORT, secret }) : null;
  const world = await initProcessGroup({
    rank,
    worldSize: Number(process.env.WORLD_SIZE),
    masterAddr,
    masterPort: STORE_PORT,
    secret,
    bindAddr: process.env.SHARDWISE_COMM_BIND,
  });
  const iters = Number(flag('iters', '10'));
  for (const bytes of flag('sizes', '').split(',').map(Number)) {
    const t = memAlloc(bytes / 4).fill(1);
    for (let w = 0; w < 3; w++) await world.allReduce(t).wait();
    await world.barrier().wait();
    const times: number[] = [];
    for (let k = 0; k < iters; k++) {
      const t0 = performance.now();
      await world.allReduce(t).wait();
      times.push((performance.now() - t0) / 1000);
    }
    if (t[0] !== 2 ** (3 + iters)) throw new Error(`all-reduce result ${t[0]}, expected ${2 ** (3 + iters)}`);
    process.stdout.write(`${JSON.stringify({ bytes, times })}\n`);
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
    const p = spawn(cmd!, [...pre, process.execPath, SELF, '--rank', '--sizes', sizes.join(','), '--iters', String(iters)], {
      env: {
        ...process.env,
        RANK: String(rank),
        WORLD_SIZE: String(m.length),
        MASTER_ADDR: m[0]!.ip,
        SHARDWISE_RUN_SECRET: secret,
        SHARDWISE_COMM_BIND: machine.ip,
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
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
      .map((l) => JSON.parse(l) as { bytes: number; times: number[] }),
  );
  return perRank[0]!.map((row, i) => {
    // an all-reduce ends when its slowest rank has the result
    const times = row.times.map((_, k) => Math.max(...perRank.map((r) => r[i]!.times[k]!)));
    const t = median(times);
    const n = m.length;
    const busbw = ((row.bytes / t) * 2 * (n - 1)) / n;
    return {
      op: 'allreduce',
      world: n,
      bytes: row.bytes,
      time_ms: round(t * 1000, 2),
      busbw_gbps: round((busbw * 8) / 1e9),
      link_min_ms: round(((row.bytes * 2 * (n - 1)) / n / (lan.rateBitsPerS / 8)) * 1000, 2),
      link_use: round((busbw * 8) / lan.rateBitsPerS),
    };
  });
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
      for (const r of allreduce) log(`allreduce ${rateGbit} Gbit/s ${r.bytes} B: ${r.busbw_gbps} Gbit/s busbw, link use ${r.link_use}`);
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
        ? { allreduce_4mib_1gbit: { bytes: target.bytes, achieved_over_shaped: target.link_use, target: 0.9, met: target.link_use >= 0.9 } }
        : {},
    })}\n`,
  );
}

if (process.argv.includes('--rank')) await rankMain();
else await main();
