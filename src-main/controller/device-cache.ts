// This machine's devices for the API: `shardwise devices`' report (probe in a child process
// with a timeout, so a driver crash or hang never takes the controller down), refreshed on
// demand and every `intervalMs`. Concurrent callers share one probe.
import { type DevicesView, DevicesViewSchema } from '../../common/api/index.js';
import { collectDevices } from '../machine/devices.js';

export class DeviceCache {
  private last: DevicesView | null = null;
  private inflight: Promise<DevicesView> | null = null;
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly intervalMs = 5 * 60_000) {}

  start() {
    void this.refresh().catch(() => undefined);
    this.timer = setInterval(() => void this.refresh().catch(() => undefined), this.intervalMs);
    this.timer.unref();
  }

  stop() {
    if (this.timer) clearInterval(this.timer);
  }

  list(): Promise<DevicesView> {
    return this.last ? Promise.resolve(this.last) : this.refresh();
  }

  refresh(): Promise<DevicesView> {
    if (!this.inflight) {
      this.inflight = collectDevices()
        .then((r) => {
          this.last = DevicesViewSchema.parse({ ...r, probed_at: new Date().toISOString() });
          return this.last;
        })
        .finally(() => (this.inflight = null));
    }
    return this.inflight;
  }
}
