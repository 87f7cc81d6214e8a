// npm run bench:host-kernels [-- --elements N --rounds R]
// The host's per-element kernels, WebAssembly SIMD against the JS loops they replace, ns per
// element (the best of R rounds over N elements; one thread):
//   sum     the collectives' reduction of one piece into another, by dtype (float32, float16,
//           bfloat16: 16-bit sums widen, add in float32, round back), as measureReduceNs times it
//   narrow  the fp16/bf16 hooks' and ZeRO's 16-bit gradients: float32 -> 16 bits, and
//   widen   back (narrowArray, widenArray)
//   adamw   ZeRO-Offload's host AdamW update of a shard (CpuAdamW)
// The JS figures of sum, narrow and widen come from a child process with SHARDWISE_COMM_SIMD=0
// (the comm layer's own fallback loops), adamw's from CpuAdamW without SIMD. Prints one JSON
// object: {"node", "cpu", "elements", "ns_per_element": {kernel: {dtype?: {simd, js, speedup}}}}.
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { measureReduceNs, narrowArray, widenArray } from '../workers/comm/index.js';
import { CpuAdamW } from '../workers/optim/cpu-adamw.js';

const { values: v } = parseArgs({
  options: { elements: { type: 'string', default: String(1 << 22) }, rounds: { type: 'string', default: '5' }, child: { type: 'boolean' } },
  strict: true,
});
const n = Number(v.elements);
const rounds = Number(v.rounds);
if (!Number.isInteger(n) || n < 1024) throw new Error(`--elements must be an integer >= 1024, got "${v.elements}"`);
if (!Number.isInteger(rounds) || rounds < 1) throw new Error(`--rounds must be a positive integer, got "${v.rounds}"`);

/** ns per element of `run` over n elements: the best of the rounds after a first (compiling) one */
function nsPerElement(run: () => void): number {
  run();
  let best = Infinity;
  for (let r = 0; r < rounds; r++) {
    const t0 = performance.now();
    run();
    best = Math.min(best, performance.now() - t0);
  }
  return Math.round(((best * 1e6) / n) * 1000) / 1000;
}

type Figures = Record<string, Record<string, number>>;

/** the comm layer's kernels in this process (SIMD unless SHARDWISE_COMM_SIMD=0) */
function commKernels(): Figures {
  const sum = measureReduceNs(n, rounds);
  const src = Float32Array.from({ length: n }, (_, i) => Math.sin(i) * 1e-3);
  const out: Figures = { sum: { ...sum }, narrow: {}, widen: {} };
  for (const d of ['float16', 'bfloat16'] as const) {
    const bits = new Uint16Array(n);
    const back = new Float32Array(n);
    out.narrow![d] = nsPerElement(() => narrowArray(src, d, bits));
    out.widen![d] = nsPerElement(() => widenArray(bits, d, back));
  }
  return out;
}

function adamw(simd: boolean): number {
  const w = Float32Array.from({ length: n }, (_, i) => Math.sin(i) * 0.02);
  const g = Float32Array.from({ length: n }, (_, i) => Math.cos(i) * 1e-3);
  const opt = new CpuAdamW(
    { lr: 6e-4, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, maxGradNorm: 1 },
    w,
    new Uint8Array(n).fill(1),
    { simd },
  );
  return nsPerElement(() => opt.update(g, 1, 6e-4));
}

if (v.child) {
  process.stdout.write(`${JSON.stringify(commKernels())}\n`);
} else {
  const simd = commKernels();
  const child = spawnSync(
    process.execPath,
    [fileURLToPath(import.meta.url), '--child', '--elements', String(n), '--rounds', String(rounds)],
    {
      env: { ...process.env, SHARDWISE_COMM_SIMD: '0' },
      encoding: 'utf8',
    },
  );
  if (child.status !== 0) throw new Error(`the JS-loop child failed: ${child.stderr.trim().split('\n').at(-1)}`);
  const js = JSON.parse(child.stdout) as Figures;
  const r3 = (x: number) => Math.round(x * 1000) / 1000;
  const pair = (s: number, j: number) => ({ simd: r3(s), js: r3(j), speedup: Math.round((j / s) * 10) / 10 });
  const ns: Record<string, Record<string, ReturnType<typeof pair>> | ReturnType<typeof pair>> = {};
  for (const [kernel, byType] of Object.entries(simd))
    ns[kernel] = Object.fromEntries(Object.entries(byType).map(([d, s]) => [d, pair(s, js[kernel]![d]!)]));
  ns.adamw = pair(adamw(true), adamw(false));
  process.stdout.write(
    `${JSON.stringify({ node: process.version, cpu: os.cpus()[0]?.model ?? 'unknown', elements: n, ns_per_element: ns })}\n`,
  );
}
