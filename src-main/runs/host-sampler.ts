// Samples the CPU load and RAM of every machine a run uses, once a second while it goes, into
// the run folder's host.jsonl (common/api/host.ts): this machine's by systeminformation
// (workers/protocol/host-load.ts), a paired agent's by its `host` request over the run's
// connection to it. A sample costs the controller about 2-3 ms of CPU (measured on a loaded
// 2-core machine: under 0.3% of a core at one a second) and does not block its event loop;
// the ranks pay nothing. Each machine's
// first reading is its load since boot (or since another run's last sample), so it only primes
// the counters: every row written is the load of about its last second.
import { appendFileSync } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';
import type { HostRow } from '../../common/api/host.js';
import { type HostSample, sampleHost } from '../../workers/protocol/host-load.js';

export const HOST_FILE = 'host.jsonl';
export const HOST_SAMPLE_MS = 1000;

/** One machine to sample: its name in the rows, and how to read it. */
export interface HostSource {
  machine: string;
  sample: () => Promise<HostSample>;
}

export const localHost = (): HostSource => ({ machine: hostname(), sample: sampleHost });

/** A run's machines from where its ranks run: this one if any rank runs here, each agent once. */
export function hostSources(
  ranks:
    readonly ({ kind: 'local' } | { kind: 'agent'; machine: string; session: { request(m: 'host'): Promise<HostSample> } })[] | undefined,
): HostSource[] {
  if (!ranks) return [localHost()];
  const out: HostSource[] = ranks.some((r) => r.kind === 'local') ? [localHost()] : [];
  const seen = new Set<string>();
  for (const r of ranks) {
    if (r.kind !== 'agent' || seen.has(r.machine)) continue;
    seen.add(r.machine);
    out.push({ machine: r.machine, sample: () => r.session.request('host') });
  }
  return out;
}

export class HostSampler {
  private timer: ReturnType<typeof setTimeout> | undefined;
  private stopped = false;
  private readonly file: string;

  constructor(
    dir: string,
    private readonly sources: readonly HostSource[] = [localHost()],
    private readonly everyMs = HOST_SAMPLE_MS,
  ) {
    this.file = path.join(dir, HOST_FILE);
  }

  start(): this {
    // primes each machine's load counters; these readings are not written
    void Promise.allSettled(this.sources.map((s) => s.sample())).finally(() => this.next());
    return this;
  }

  private next() {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.tick(), this.everyMs);
    this.timer.unref();
  }

  private async tick() {
    const results = await Promise.allSettled(this.sources.map((s) => s.sample()));
    if (this.stopped) return;
    const time = Date.now();
    const rows: HostRow[] = [];
    // a machine that did not answer (an agent too old to know `host`, a lost link) misses this point only
    results.forEach((r, i) => r.status === 'fulfilled' && rows.push({ time, machine: this.sources[i]!.machine, ...r.value }));
    try {
      if (rows.length) appendFileSync(this.file, rows.map((r) => `${JSON.stringify(r)}\n`).join(''));
    } catch {
      // the run folder deleted meanwhile: nothing to keep them in
    }
    this.next();
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
  }
}
