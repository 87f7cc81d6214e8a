// Square matmul throughput of the engine's kernel (workers/kernels/matmul.ts), for
// `npm run bench:engine`: n x n x n, one warm-up, then timed batches until ~1 s has passed
// (at least 3). A batch is k back-to-back launches ended by one rt.sync() so the GPU really
// finished; k grows until a batch takes ~20 ms, so a fast GPU is timed on its kernel, not on the
// submit/readback round trip (k = 1 on SwiftShader, where one launch already takes that long).
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
      let k = 1;
      for (;;) {
        const t = performance.now();
        for (let i = 0; i < k; i++) rt.run(d);
        await rt.sync();
        if (performance.now() - t >= 20 || k >= 4096) break;
        k *= 2;
      }
      let reps = 0;
      let batches = 0;
      const t0 = performance.now();
      let elapsed = 0;
      while (batches < 3 || elapsed < 1000) {
        for (let i = 0; i < k; i++) rt.run(d);
        await rt.sync();
        reps += k;
        batches++;
        elapsed = performance.now() - t0;
        if (batches >= 100) break;
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
