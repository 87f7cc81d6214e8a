// The two fixed costs the advisor's time model adds to the work of a step (common/advisor/time.ts):
//   launch_ms  one kernel launch among many recorded in a pass, however little it computes: a
//              64-element GELU launched back to back in one pass, per launch (its dispatch, its
//              bindings and the barrier after it). A micro-batch of one sequence or a tensor-
//              parallel shard pays it as a full batch does, which is why many small launches run
//              far below a large one's rate.
//   sync_ms    one host round trip: write a few floats, run that launch, wait for the device and
//              map the floats back. Every collective a rank waits on and every pipeline hop pays it
//              before its bytes move (the comm layer reads device data to the host).
// Each is the median over rounds; the launch's median round is grown to the kernel budget's length.
import type { Runtime } from '../gpu/runtime.js';
import { geluForward } from '../kernels/gelu.js';
import { median } from '../../common/stats.js';

const N = 64;

export async function profileLaunchCosts(rt: Runtime, roundMs: number, rounds: number): Promise<{ launch_ms: number; sync_ms: number }> {
  const inp = rt.allocator.tensor('profile.launch.in', 'workspace', [N]);
  const out = rt.allocator.tensor('profile.launch.out', 'workspace', [N]);
  const host = new Float32Array(N).fill(0.5);
  try {
    const d = geluForward(rt, { out, inp, n: N });
    rt.write(inp, host);
    rt.run(d);
    await rt.read(out, N); // compile, first touch of both copy paths
    const perLaunch: number[] = [];
    let reps = 16;
    for (let r = 0; r < rounds; r++) {
      const t0 = performance.now();
      for (let i = 0; i < reps; i++) rt.run(d);
      await rt.sync();
      const ms = performance.now() - t0;
      perLaunch.push(ms / reps);
      if (r === 0 && ms < roundMs) reps = Math.min(4096, Math.ceil((reps * roundMs) / Math.max(ms, 0.01)));
    }
    const trips: number[] = [];
    for (let r = 0; r < Math.max(rounds, 9); r++) {
      const t0 = performance.now();
      rt.write(inp, host);
      rt.run(d);
      await rt.read(out, N, 0, host);
      trips.push(performance.now() - t0);
    }
    const launch_ms = median(perLaunch);
    // the round trip beyond the one launch it carries
    return { launch_ms, sync_ms: Math.max(median(trips) - launch_ms, 0) };
  } finally {
    rt.allocator.free(inp);
    rt.allocator.free(out);
  }
}
