// Two "machines" for cluster tests: network namespaces joined by a veth pair, each with its own
// address, loopback and a default route over the link (so mDNS multicast has a way out). Traffic
// stays inside the namespaces this creates. Needs root and iproute2; `available()` says why not.
import { execFileSync, spawnSync } from 'node:child_process';

export interface TwoMachines {
  a: { ns: string; ip: string };
  b: { ns: string; ip: string };
  /** argv prefix that runs a command inside a namespace */
  exec(ns: string): string[];
  destroy(): void;
}

export function netnsUnavailable(): string | null {
  if (process.getuid?.() !== 0) return 'network namespaces need root (CI runs as root)';
  const r = spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' });
  if (r.error || r.status !== 0) return `iproute2's "ip netns" does not work here: ${(r.error?.message ?? r.stderr).trim()}`;
  return null;
}

const ip = (...args: string[]) => execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });

export function twoMachines(tag = String(process.pid % 100000)): TwoMachines {
  const a = { ns: `sw-a-${tag}`, ip: '10.231.7.1' };
  const b = { ns: `sw-b-${tag}`, ip: '10.231.7.2' };
  const va = `swa${tag}`.slice(0, 15);
  const vb = `swb${tag}`.slice(0, 15);
  const destroy = () => {
    for (const ns of [a.ns, b.ns]) spawnSync('ip', ['netns', 'del', ns]);
  };
  destroy();
  try {
    ip('netns', 'add', a.ns);
    ip('netns', 'add', b.ns);
    ip('link', 'add', va, 'type', 'veth', 'peer', 'name', vb);
    ip('link', 'set', va, 'netns', a.ns);
    ip('link', 'set', vb, 'netns', b.ns);
    for (const [m, dev] of [
      [a, va],
      [b, vb],
    ] as const) {
      ip('-n', m.ns, 'addr', 'add', `${m.ip}/24`, 'dev', dev);
      ip('-n', m.ns, 'link', 'set', 'lo', 'up');
      ip('-n', m.ns, 'link', 'set', dev, 'up', 'multicast', 'on');
      ip('-n', m.ns, 'route', 'add', 'default', 'dev', dev);
    }
  } catch (e) {
    destroy();
    throw e;
  }
  return { a, b, exec: (ns) => ['ip', 'netns', 'exec', ns], destroy };
}
