// The machine's speed now, for bench:advisor. This VM's throughput drifts with what its host
// runs: the same single-rank small step measured 2.1-2.4 s in one quarter hour and 4.4-6 s in the
// next, with nothing else running here. A prediction made from one profile cannot follow that,
// so the bench reads this gauge around every run: one pass over the kernels of a training step at
// the preset's sizes (workers/cli/profile-kernels.ts, each case once, the median of three
// passes), timed in the bench's own process on the same adapter. A run's reading over the
// calibration runs' reading is how much slower the machine was during it.
import { type KernelShape, prepareCase, stepCases } from '../workers/cli/profile-kernels.js';
import { openDevice } from '../workers/gpu/device.js';
import { Runtime } from '../workers/gpu/runtime.js';

export class SpeedGauge {
  private constructor(
    private readonly rt: Runtime,
    private readonly cases: { dispatches: Parameters<Runtime['run']>[0]; free(): void }[],
  ) {}

  static async open(shape: KernelShape): Promise<SpeedGauge> {
    const rt = new Runtime(await openDevice(process.env.SHARDWISE_DEVICE));
    const cases = stepCases(shape).map((c) => prepareCase(rt, c));
    const g = new SpeedGauge(rt, cases);
    await g.pass(); // compile, first touch
    return g;
  }

  private async pass(): Promise<number> {
    const t0 = performance.now();
    for (const c of this.cases) {
      this.rt.run(c.dispatches);
      await this.rt.sync();
    }
    return performance.now() - t0;
  }

  /** ms of one pass over the step's kernels now (the median of three) */
  async read(): Promise<number> {
    const xs = [await this.pass(), await this.pass(), await this.pass()].sort((a, b) => a - b);
    return xs[1]!;
  }

  close() {
    for (const c of this.cases) c.free();
    this.rt.destroy();
  }
}
