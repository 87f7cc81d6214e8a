// A LAN on one host, for benchmarks and tests: 2 to 4 "machines", each a network namespace with
// one Ethernet link (veth) to a switch (a bridge in a namespace of its own), every link
// rate-limited both ways with tc's token bucket (tbf) at 1 or 10 Gbit/s. Nothing is added to the
// root namespace: the links are created directly inside the namespaces, so traffic between the
// machines never leaves them, and each instance's names are its own (parallel runs do not
// collide; every instance may use the same addresses, its namespaces being separate).
//
//   m0 (10.77.0.1) eth0 ==tbf==> | switch ns: br0 | <==tbf== eth0 m1 (10.77.0.2) ...
//                  <==tbf======= m0            m1 =======tbf==>
//
// tbf shapes egress only, so each link has one on the machine's end (machine -> switch) and one
// on the switch's end (switch -> machine): full duplex at the rate each way, like a LAN port.
// Burst: 1 ms at the rate, at least 128 KiB (more than the largest GSO packet veth hands tbf,
// which tbf would otherwise drop); queue: 10 ms at the rate (latency), enough that TCP on a link
// with no propagation delay keeps it full. netem is not available, so links add no delay.
//
// Namespaces are named `swlan-<pid>-<n>-...`: teardown runs on destroy(), at process exit and on
// SIGINT/SIGTERM; sweepLans() removes those whose process is gone (a crashed run's).
import { execFileSync, spawnSync } from 'node:child_process';

export type LinkGbit = 1 | 10;

export interface LanMachine {
  /** m0, m1, ...: m0 is where the controller runs (rank 0 lives with the rendezvous) */
  name: string;
  /** its network namespace */
  ns: string;
  /** its address on the LAN */
  ip: string;
}

export interface Lan {
  machines: LanMachine[];
  /** the shaped rate of every link, each way, in bits/s */
  rateBitsPerS: number;
  /** tbf parameters, as stated in reports */
  shaping: { rateGbit: LinkGbit; burstBytes: number; latencyMs: number };
  /** argv prefix that runs a command inside a machine */
  exec(m: LanMachine): string[];
  /** bytes each machine's link carried so far (tbf's counters): sent = machine -> switch, received = switch -> machine */
  linkBytes(): { machine: string; sent: number; received: number }[];
  /** kills what still runs in the namespaces and deletes them; safe to call twice */
  destroy(): void;
}

const PREFIX = 'swlan';
export const LAN_SUBNET = '10.77.0.0/24';
const LATENCY_MS = 10;

/** Why namespaced LANs cannot be made here, or null when they can. */
export function lanUnavailable(): string | null {
  if (process.platform !== 'linux') return 'network namespaces are Linux only';
  if (process.getuid?.() !== 0) return 'network namespaces need root (CI runs as root)';
  for (const [cmd, args] of [
    ['ip', ['netns', 'list']],
    ['tc', ['-V']],
  ] as const) {
    const r = spawnSync(cmd, args, { encoding: 'utf8' });
    if (r.error || r.status !== 0)
      return `"${cmd} ${args.join(' ')}" does not work here (iproute2 needed): ${(r.error?.message ?? r.stderr).trim()}`;
  }
  return null;
}

const run = (cmd: string, args: string[]) => {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (e) {
    const err = e as { stderr?: string; message: string };
    throw new Error(`LAN harness: "${cmd} ${args.join(' ')}" failed: ${(err.stderr || err.message).trim()}`, { cause: e });
  }
};

const live = new Set<Lan>();
let hooked = false;
function hookTeardown() {
  if (hooked) return;
  hooked = true;
  process.on('exit', () => {
    for (const l of [...live]) l.destroy();
  });
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    const onSignal = () => {
      for (const l of [...live]) l.destroy();
      // then die of the signal as if nobody had listened
      process.removeListener(sig, onSignal);
      process.kill(process.pid, sig);
    };
    process.on(sig, onSignal);
  }
}

function nsPids(ns: string): number[] {
  const r = spawnSync('ip', ['netns', 'pids', ns], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.split(/\s+/).filter(Boolean).map(Number) : [];
}

function deleteNamespaces(names: string[]) {
  for (const ns of names) {
    for (const pid of nsPids(ns)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
  for (const ns of names) spawnSync('ip', ['netns', 'del', ns], { stdio: 'ignore' });
}

function listNamespaces(): string[] {
  const r = spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.split('\n').map((l) => l.split(' ')[0]!) : [];
}

const pidAlive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
};

/** Removes the namespaces of harness instances whose process has died; how many it removed. */
export function sweepLans(): number {
  const stale = listNamespaces().filter((ns) => {
    const m = new RegExp(`^${PREFIX}-(\\d+)-`).exec(ns);
    return m !== null && Number(m[1]) !== process.pid && !pidAlive(Number(m[1]));
  });
  deleteNamespaces(stale);
  return stale.length;
}

let instances = 0;

/** Creates `count` machines (2 to 4) on a switch, every link shaped at `rateGbit` each way. */
export function createLan(opts: { machines: number; rateGbit: LinkGbit }): Lan {
  const { machines: count, rateGbit } = opts;
  if (!Number.isInteger(count) || count < 1 || count > 4) throw new Error(`a LAN of 1 to 4 machines, not ${count}`);
  sweepLans();
  hookTeardown();
  const tag = `${PREFIX}-${process.pid}-${instances++}`;
  const sw = `${tag}-sw`;
  const machines: LanMachine[] = [...Array(count).keys()].map((i) => ({ name: `m${i}`, ns: `${tag}-m${i}`, ip: `10.77.0.${i + 1}` }));
  const rateBitsPerS = rateGbit * 1e9;
  const burstBytes = Math.max(128 * 1024, Math.round(rateBitsPerS / 8 / 1000));
  const tbf = ['root', 'tbf', 'rate', `${rateGbit}gbit`, 'burst', String(burstBytes), 'latency', `${LATENCY_MS}ms`];
  const names = [sw, ...machines.map((m) => m.ns)];
  let destroyed = false;
  const lan: Lan = {
    machines,
    rateBitsPerS,
    shaping: { rateGbit, burstBytes, latencyMs: LATENCY_MS },
    exec: (m) => ['ip', 'netns', 'exec', m.ns],
    linkBytes: () =>
      machines.map((m) => ({
        machine: m.name,
        sent: tbfBytes(['-n', m.ns], 'eth0'),
        received: tbfBytes(['-n', sw], m.name),
      })),
    destroy() {
      if (destroyed) return;
      destroyed = true;
      live.delete(lan);
      deleteNamespaces(names);
    },
  };
  live.add(lan);
  try {
    for (const ns of names) {
      run('ip', ['netns', 'add', ns]);
      run('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
    }
    run('ip', ['-n', sw, 'link', 'add', 'br0', 'type', 'bridge']);
    run('ip', ['-n', sw, 'link', 'set', 'br0', 'up']);
    for (const m of machines) {
      // the pair is born inside the two namespaces: no name ever exists in the root namespace
      run('ip', ['-n', m.ns, 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', m.name, 'netns', sw]);
      run('ip', ['-n', m.ns, 'addr', 'add', `${m.ip}/24`, 'dev', 'eth0']);
      run('ip', ['-n', m.ns, 'link', 'set', 'eth0', 'up', 'multicast', 'on']);
      run('ip', ['-n', m.ns, 'route', 'add', 'default', 'dev', 'eth0']);
      run('ip', ['-n', sw, 'link', 'set', m.name, 'master', 'br0']);
      run('ip', ['-n', sw, 'link', 'set', m.name, 'up']);
      run('tc', ['-n', m.ns, 'qdisc', 'add', 'dev', 'eth0', ...tbf]);
      run('tc', ['-n', sw, 'qdisc', 'add', 'dev', m.name, ...tbf]);
    }
  } catch (e) {
    lan.destroy();
    throw e;
  }
  return lan;
}

function tbfBytes(where: string[], dev: string): number {
  const q = JSON.parse(run('tc', [...where, '-s', '-j', 'qdisc', 'show', 'dev', dev])) as { kind: string; bytes: number }[];
  const t = q.find((x) => x.kind === 'tbf');
  if (!t) throw new Error(`LAN harness: no tbf on ${dev}`);
  return t.bytes;
}
