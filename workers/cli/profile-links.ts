// Bandwidth and latency between two ranks on this machine, through the real communication
// layer: this process is rank 0, a child (this file's peer side, started by profile.ts with
// --link-peer) is rank 1, joined over the rendezvous store with the run secret like any run.
// 'shm' carries payloads through /dev/shm rings (the default between ranks on one machine), 'tcp'
// keeps them on the loopback TCP link (as between machines).
//
//   latency   an 8-byte message there and back, half the median round trip
//   bandwidth `bytes` one way, acknowledged by 4 bytes back: bytes / best time
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import type { LinkProfile } from '../../common/advisor/profile.js';
import { initProcessGroup, StoreServer, type WorldGroup } from '../comm/index.js';
import { COMM_ENV } from '../protocol/comm.js';
import { median } from '../../common/stats.js';

export interface LinkPlan {
  /** ping-pongs for the latency */
  pings: number;
  /** size of the bandwidth message */
  bytes: number;
  /** bandwidth messages (the best is kept) */
  sends: number;
}

const PING_TAG = 1;
const DATA_TAG = 2;

/** The exchanges both ranks run, mirrored: rank 0 times them. */
async function exchanges(world: WorldGroup, plan: LinkPlan): Promise<{ latency_us: number; gbps: number }> {
  const peer = 1 - world.rank;
  const ping = new Float32Array(2);
  const data = new Float32Array(Math.max(1, Math.floor(plan.bytes / 4)));
  const ack = new Float32Array(1);
  const rtts: number[] = [];
  for (let i = 0; i < plan.pings + 1; i++) {
    const t0 = performance.now();
    if (world.rank === 0) {
      await world.send(ping, peer, { tag: PING_TAG }).wait();
      await world.recv(ping, peer, { tag: PING_TAG }).wait();
    } else {
      await world.recv(ping, peer, { tag: PING_TAG }).wait();
      await world.send(ping, peer, { tag: PING_TAG }).wait();
    }
    if (i > 0) rtts.push(performance.now() - t0); // the first sets the connection up
  }
  let best = Infinity;
  for (let i = 0; i < plan.sends + 1; i++) {
    const t0 = performance.now();
    if (world.rank === 0) {
      await world.send(data, peer, { tag: DATA_TAG }).wait();
      await world.recv(ack, peer, { tag: DATA_TAG }).wait();
    } else {
      await world.recv(data, peer, { tag: DATA_TAG }).wait();
      await world.send(ack, peer, { tag: DATA_TAG }).wait();
    }
    if (i > 0) best = Math.min(best, performance.now() - t0);
  }
  const rtt = rtts.length ? median(rtts) : 0;
  return { latency_us: (rtt / 2) * 1000, gbps: data.byteLength / (Math.max(best, 1e-3) * 1e6) };
}

/** Rank 0: serve the store, start the peer, measure one link kind. */
export async function profileLink(kind: 'shm' | 'tcp', plan: LinkPlan, peerEntry: string): Promise<LinkProfile> {
  const secret = randomBytes(24).toString('hex');
  const store = await StoreServer.start({ secret });
  const env = {
    ...process.env,
    [COMM_ENV.rank]: '1',
    [COMM_ENV.worldSize]: '2',
    [COMM_ENV.masterAddr]: '127.0.0.1',
    [COMM_ENV.masterPort]: String(store.port),
    [COMM_ENV.secret]: secret,
    [COMM_ENV.shm]: kind === 'shm' ? '1' : '0',
    [COMM_ENV.heartbeatMs]: '0',
  };
  const child = spawn(process.execPath, [peerEntry, '--link-peer', JSON.stringify(plan)], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += String(d)));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let world: WorldGroup | null = null;
  try {
    world = await initProcessGroup({
      rank: 0,
      worldSize: 2,
      masterAddr: '127.0.0.1',
      masterPort: store.port,
      secret,
      shm: kind === 'shm',
      heartbeatIntervalMs: 0,
      timeoutMs: 20_000,
    });
    const r = await exchanges(world, plan);
    return { kind, gbps: r.gbps, latency_us: r.latency_us };
  } catch (e) {
    child.kill();
    throw new Error(
      `the ${kind} link test between two local processes failed: ${(e as Error).message}${stderr ? ` (peer: ${stderr.trim().split('\n')[0]})` : ''}`,
      { cause: e },
    );
  } finally {
    world?.destroy();
    await exited;
    await store.close();
  }
}

/** Rank 1 (the child): join from the environment, mirror the exchanges, leave. */
export async function linkPeer(planJson: string): Promise<void> {
  const plan = JSON.parse(planJson) as LinkPlan;
  const world = await initProcessGroup();
  try {
    await exchanges(world, plan);
  } finally {
    world.destroy();
  }
}
