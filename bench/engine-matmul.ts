// Square matmul throughput of the engine's kernel (workers/kernels/matmul.ts), for
// `npm run bench:engine`: n x n x n, one warm-up, then timed repetitions until ~1 s has passed
// (at least 3), each ended by rt.sync() so the GPU really finished.
import type { Runtime } from '../workers/gpu/runtime.js';
import { matmul } from '../workers/kernels/matmul.js';

export async function benchMatmul(rt: Runtime, sizes: number[]): Promise<{ n: number; gflops: number }[]> {
  const results: { n: number; gflops: number }[] = [];
  for (const n of sizes) {
    const a = rt.allocator.tensor(`bench.a${n}`, 'workspace', [n, n]);
    const b = rt.allocator.tensor(`bench.b${n}`, 'workspace', [n, n]);
    const out = rt.allocator.tensor(`bench.out${n}`, 'workspace', [n, n]);
    try {
      const data = new Float32Array(n * n);
      for (let i = 0; i < data.length; i++) data[i] = ((i * 7919) % 1000) / 1000 - 0.5;
      rt.write(a, data);
      rt.write(b, data);
      const d = matmul(rt, { out, a, b, M: n, N: n, K: n });
      rt.run(d);
      await rt.sync(); // warm-up: pipeline compile, first-touch of the buffers
      let reps = 0;
      const t0 = performance.now();
      let elapsed = 0;
      while (reps < 3 || elapsed < 1000) {
        rt.run(d);
        await rt.sync();
        reps++;
        elapsed = performance.now() - t0;
        if (reps >= 100) break;
      }
      results.push({ n, gflops: (2 * n * n * n * reps) / (elapsed / 1000) / 1e9 });
    } finally {
      rt.allocator.free(a);
      rt.allocator.free(b);
      rt.allocator.free(out);
    }
  }
  return results;
}
