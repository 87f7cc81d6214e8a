// Wrong pairing proofs per source, with exponential backoff: a source's first FREE_FAILURES
// wrong codes are checked at once; after that each next proof is checked only once
// BASE_WAIT_MS * 2^(failures - FREE_FAILURES) have passed since its last wrong one (1 s, 2 s,
// 4 s, ... up to MAX_WAIT_MS). A proof that comes earlier is refused unchecked, so it costs no
// scrypt and tells nothing about the code. A source is an IPv4 address or an IPv6 /64 (a host
// picks freely inside its /64). A success clears the source; records older than FORGET_MS go.
import net from 'node:net';

export const FREE_FAILURES = 3;
export const BASE_WAIT_MS = 1_000;
export const MAX_WAIT_MS = 10 * 60_000;
const FORGET_MS = 60 * 60_000;
/** beyond this many sources the oldest records are dropped (a flood from many addresses must not grow memory) */
const MAX_SOURCES = 4096;

/** the address a limit applies to: IPv4 as is (also when mapped into IPv6), IPv6 by its /64 */
export function sourceOf(address: string): string {
  const a = address.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/, '');
  if (!net.isIPv6(a) || a === '::1') return a;
  const [head, tail = ''] = a.split('::');
  const h = head ? head.split(':') : [];
  const t = a.includes('::') && tail ? tail.split(':') : [];
  const groups = a.includes('::') ? [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t] : h;
  return `${groups
    .slice(0, 4)
    .map((g) => parseInt(g, 16).toString(16))
    .join(':')}::/64`;
}

interface Record {
  failures: number;
  lastFailure: number;
}

export class PairingBackoff {
  private readonly sources = new Map<string, Record>();
  constructor(private readonly now: () => number = Date.now) {}

  /** ms this source must still wait before its next proof is checked (0: check it now) */
  waitMs(source: string): number {
    const r = this.sources.get(source);
    if (!r || r.failures < FREE_FAILURES) return 0;
    const wait = Math.min(MAX_WAIT_MS, BASE_WAIT_MS * 2 ** (r.failures - FREE_FAILURES));
    return Math.max(0, r.lastFailure + wait - this.now());
  }

  failures(source: string): number {
    return this.sources.get(source)?.failures ?? 0;
  }

  /** one more wrong proof from the source; returns its count */
  failed(source: string): number {
    const now = this.now();
    const r = this.sources.get(source);
    const failures = r && now - r.lastFailure < FORGET_MS ? r.failures + 1 : 1;
    this.sources.delete(source);
    this.sources.set(source, { failures, lastFailure: now });
    // Map keeps insertion order: the first entries are the least recently failed
    while (this.sources.size > MAX_SOURCES) this.sources.delete(this.sources.keys().next().value!);
    return failures;
  }

  succeeded(source: string) {
    this.sources.delete(source);
  }
}

/** "2 s", "1 min 4 s": a wait as a user reads it, rounded up to the second */
export function formatWait(ms: number): string {
  const s = Math.ceil(ms / 1000);
  return s <= 60 ? `${s} s` : `${Math.floor(s / 60)} min${s % 60 ? ` ${s % 60} s` : ''}`;
}
