// Raw TCP throughput between two LAN machines, the link's ceiling for every collective: a sink
// on one machine, a source on the other writing `bytes` per round and waiting for the sink's
// one-byte acknowledgement (so each round's time is the whole transfer, not a send buffer fill).
// With STREAMS > 1 each round's bytes are split evenly over that many connections sending at
// once (striping), and the round ends when every part is acknowledged.
//   node tcp-probe.js sink HOST PORT PART_BYTES
//   node tcp-probe.js source HOST PORT BYTES ROUNDS STREAMS   -> one JSON line {"seconds":[...]}
// probeTcp() runs the pair inside a Lan.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { SHARDWISE_ROOT } from './cluster.js';
import type { Lan, LanMachine } from './harness.js';

const PORT = 9461;

function sink(host: string, port: number, bytes: number) {
  const server = net.createServer((s) => {
    let got = 0;
    s.on('data', (d: Buffer) => {
      got += d.length;
      while (got >= bytes) {
        got -= bytes;
        s.write('k');
      }
    });
  });
  server.listen(port, host, () => process.stdout.write('ready\n'));
}

async function source(host: string, port: number, bytes: number, rounds: number, streams: number) {
  const part = bytes / streams;
  const sockets = await Promise.all(
    [...Array(streams).keys()].map(
      () =>
        new Promise<net.Socket>((resolve, reject) => {
          const s = net.connect(port, host, () => resolve(s));
          s.once('error', reject);
          s.setNoDelay(true);
        }),
    ),
  );
  const buf = Buffer.alloc(part, 7);
  const seconds: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const t0 = process.hrtime.bigint();
    const acked = sockets.map((s) => new Promise((resolve) => s.once('data', resolve)));
    for (const s of sockets) s.write(buf);
    await Promise.all(acked);
    seconds.push(Number(process.hrtime.bigint() - t0) / 1e9);
  }
  process.stdout.write(`${JSON.stringify({ seconds })}\n`);
  for (const s of sockets) s.end();
}

/**
 * Seconds per round of `bytes` from machine `from` to machine `to` over `streams` connections
 * (the first rounds include TCP's ramp-up). `bytes` must divide evenly by `streams`.
 */
export async function probeTcp(lan: Lan, from: LanMachine, to: LanMachine, bytes: number, rounds: number, streams = 1): Promise<number[]> {
  if (bytes % streams) throw new Error(`${bytes} bytes do not split evenly over ${streams} streams`);
  // the built probe (tests run from source after the build; tsx would add seconds per start)
  const self = fileURLToPath(import.meta.url);
  const built = self.endsWith('.ts') ? path.join(SHARDWISE_ROOT, 'dist/bench/lan/tcp-probe.js') : self;
  if (!existsSync(built)) throw new Error(`${built} is missing: run npm run build first`);
  const runner = [process.execPath, built];
  const [cmd, ...pre] = lan.exec(to);
  const server = spawn(cmd!, [...pre, ...runner, 'sink', to.ip, String(PORT), String(bytes / streams)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    await new Promise<void>((resolve, reject) => {
      server.stdout!.once('data', () => resolve());
      server.once('exit', (code) => reject(new Error(`the TCP probe's sink on ${to.name} exited (${code}) before listening`)));
    });
    const [c, ...p] = lan.exec(from);
    const r = spawnSync(c!, [...p, ...runner, 'source', to.ip, String(PORT), String(bytes), String(rounds), String(streams)], {
      encoding: 'utf8',
      timeout: 120_000,
    });
    if (r.status !== 0) throw new Error(`the TCP probe from ${from.name} to ${to.name} failed: ${r.stderr}`);
    return (JSON.parse(r.stdout) as { seconds: number[] }).seconds;
  } finally {
    server.kill();
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const [mode, host, port, bytes, rounds, streams] = process.argv.slice(2);
  if (mode === 'sink') sink(host!, Number(port), Number(bytes));
  else if (mode === 'source') await source(host!, Number(port), Number(bytes), Number(rounds), Number(streams ?? 1));
  else {
    process.stderr.write('usage: tcp-probe sink HOST PORT PART_BYTES | source HOST PORT BYTES ROUNDS [STREAMS]\n');
    process.exit(2);
  }
}
