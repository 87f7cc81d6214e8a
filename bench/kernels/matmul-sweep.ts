// Timing sweep of the numbered matmul variants (bench/kernels/matmul-variants.ts) and of the
// engine's kernel, on square sizes. Spot-checks every variant's output against a float64 dot
// product before timing it. Run: npx tsx bench/kernels/matmul-sweep.ts [sizes...] [--only ID]
// Prints one JSON object per (variant, size) and a summary table on stderr.
import { openDevice } from '../../workers/gpu/device.js';
import { packParams, Runtime } from '../../workers/gpu/runtime.js';
import { matmul } from '../../workers/kernels/matmul.js';
import { VARIANTS } from './matmul-variants.js';

/** Wall ms per run, and CPU ms per run of this process (SwiftShader's worker threads included). */
async function timeIt(rt: Runtime, run: () => void, minMs = 800): Promise<{ ms: number; cpuMs: number }> {
  run();
  await rt.sync(); // warm-up
  let reps = 0;
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  let elapsed = 0;
  while (reps < 2 || elapsed < minMs) {
    run();
    await rt.sync();
    reps++;
    elapsed = performance.now() - t0;
    if (reps >= 50) break;
  }
  const c = process.cpuUsage(c0);
  return { ms: elapsed / reps, cpuMs: (c.user + c.system) / 1000 / reps };
}

async function main() {
  const args = process.argv.slice(2);
  const onlyIdx = args.indexOf('--only');
  const only = onlyIdx >= 0 ? args[onlyIdx + 1]!.split(',') : null;
  const roundsIdx = args.indexOf('--rounds');
  const rounds = roundsIdx >= 0 ? Number(args[roundsIdx + 1]) : 3;
  const sizes = args.filter((a, i) => /^\d+$/.test(a) && !['--only', '--rounds'].includes(args[i - 1] ?? '')).map(Number);
  if (sizes.length === 0) sizes.push(256, 512, 1024);
  const rt = new Runtime(await openDevice());
  process.stderr.write(`adapter: ${rt.opened.report.description}\n`);
  const table: Record<string, Record<number, number>> = {};
  const cpuTable: Record<string, Record<number, number>> = {};
  for (const n of sizes) {
    const a = rt.allocator.tensor('a', 'workspace', [n, n]);
    const b = rt.allocator.tensor('b', 'workspace', [n, n]);
    const out = rt.allocator.tensor('out', 'workspace', [n, n]);
    const dummy = rt.allocator.tensor('dummy', 'workspace', [1]);
    const ha = new Float32Array(n * n);
    const hb = new Float32Array(n * n);
    for (let i = 0; i < n * n; i++) {
      ha[i] = ((i * 7919) % 1000) / 1000 - 0.5;
      hb[i] = ((i * 104729) % 997) / 997 - 0.5;
    }
    rt.write(a, ha);
    rt.write(b, hb);
    // the engine's kernel in its four layouts (square: the same buffers read transposed)
    const candidates: { id: string; dispatch: () => void; transA?: boolean; transB?: boolean }[] = [];
    for (const [transA, transB] of [
      [false, false],
      [false, true],
      [true, false],
      [true, true],
    ] as const) {
      const d = matmul(rt, { out, a, b, M: n, N: n, K: n, transA, transB });
      candidates.push({ id: `engine-${transA ? 't' : 'n'}${transB ? 't' : 'n'}`, dispatch: () => rt.run(d), transA, transB });
    }
    for (const v of VARIANTS) {
      if (!v.supports(n, n, n)) continue;
      const pipeline = rt.compile(v.id, v.code);
      const d = rt.prepare(v.id, pipeline, [out, a, b, dummy], packParams(v.params(n, n, n)), v.grid(n, n));
      candidates.push({ id: v.id, dispatch: () => rt.run(d) });
    }
    const ok: typeof candidates = [];
    for (const c of candidates) {
      if (only && !only.some((o) => c.id.startsWith(o))) continue;
      rt.clear(out);
      c.dispatch();
      const got = await rt.read(out);
      await rt.checkErrors();
      let maxErr = 0;
      for (let s = 0; s < 64; s++) {
        const i = (s * 7727) % n;
        const j = (s * 4099 + 13) % n;
        let ref = 0;
        for (let k = 0; k < n; k++) ref += (c.transA ? ha[k * n + i] : ha[i * n + k]) * (c.transB ? hb[j * n + k] : hb[k * n + j]);
        maxErr = Math.max(maxErr, Math.abs(got[i * n + j] - ref) / Math.max(1, Math.abs(ref)));
      }
      if (!(maxErr < 1e-4)) process.stderr.write(`${c.id} n=${n}: WRONG (max err ${maxErr}), skipped\n`);
      else ok.push(c);
    }
    // Other processes share these 2 cores: interleave the candidates over several rounds and
    // keep each one's best round, which is the least disturbed.
    for (let round = 0; round < rounds; round++) {
      for (const c of ok) {
        const { ms, cpuMs } = await timeIt(rt, c.dispatch, 300);
        const gflops = (2 * n * n * n) / (ms / 1000) / 1e9;
        // per CPU-second of this process, times the 2 cores: what an idle machine would give
        const cpuGflops = (2 * (2 * n * n * n)) / (cpuMs / 1000) / 1e9;
        const row = (table[c.id] ??= {});
        row[n] = Math.max(row[n] ?? 0, gflops);
        const crow = (cpuTable[c.id] ??= {});
        crow[n] = Math.max(crow[n] ?? 0, cpuGflops);
        if (round === rounds - 1)
          console.log(
            JSON.stringify({
              variant: c.id,
              n,
              gflops: Number(row[n]!.toFixed(3)),
              gflops_2cores_by_cpu_time: Number(crow[n]!.toFixed(3)),
            }),
          );
      }
    }
    for (const t of [a, b, out, dummy]) rt.allocator.free(t);
  }
  const fmt = (v: number | undefined) => (v === undefined ? '-' : v.toFixed(2)).padStart(9);
  process.stderr.write(`\n${'variant'.padEnd(36)}${sizes.map((s) => String(s).padStart(9)).join('')}  | same, 2 x GFLOP per CPU-second\n`);
  for (const [id, row] of Object.entries(table)) {
    process.stderr.write(
      `${id.padEnd(36)}${sizes.map((s) => fmt(row[s])).join('')}  |${sizes.map((s) => fmt(cpuTable[id]?.[s])).join('')}\n`,
    );
  }
  rt.destroy();
}

await main();
