// Samples this machine's CPU load and RAM once a second while a run goes, into the run
// folder's host.jsonl (common/api/host.ts). systeminformation reads /proc/stat and
// /proc/meminfo on Linux (and the platform's own calls elsewhere); a sample costs a few ms of
// the controller's CPU (about 5 ms measured on a loaded 2-core machine: 0.5% of a core at one a
// second), none of the ranks'. The first load reading after
// start covers the time since boot, so it is dropped: every row is the load of its last second.
import { appendFileSync } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';
import si from 'systeminformation';
import type { HostRow } from '../../common/api/host.js';

export const HOST_FILE = 'host.jsonl';
export const HOST_SAMPLE_MS = 1000;

export interface HostSample {
  cpu_pct: number;
  mem_used: number;
  mem_total: number;
}

export async function sampleHost(): Promise<HostSample> {
  const [load, mem] = await Promise.all([si.currentLoad(), si.mem()]);
  return { cpu_pct: load.currentLoad, mem_used: mem.total - mem.available, mem_total: mem.total };
}

export class HostSampler {
  private timer: ReturnType<typeof setTimeout> | undefined;
  private stopped = false;
  private readonly file: string;
  private readonly machine = hostname();

  constructor(
    dir: string,
    private readonly everyMs = HOST_SAMPLE_MS,
    private readonly sample: () => Promise<HostSample> = sampleHost,
  ) {
    this.file = path.join(dir, HOST_FILE);
  }

  start(): this {
    // primes the load counters; its reading (since boot) is not written
    void this.sample()
      .catch(() => undefined)
      .finally(() => this.next());
    return this;
  }

  private next() {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.tick(), this.everyMs);
    this.timer.unref();
  }

  private async tick() {
    try {
      const s = await this.sample();
      if (this.stopped) return;
      const row: HostRow = { time: Date.now(), machine: this.machine, ...s };
      appendFileSync(this.file, `${JSON.stringify(row)}\n`);
    } catch {
      // a failed reading (or the run folder deleted meanwhile) costs one point, not the run
    }
    this.next();
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
  }
}
