// npm run bench:lan — does DDP pay on a LAN? Namespaced machines (bench/lan/harness.ts) at 1 and
// 10 Gbit/s, an agent on each paired with the controller on m0, ranks placed one per machine;
// every rank on an emulated device (SHARDWISE_EMULATE, workers/protocol/emulate.ts), so N ranks
// on these 2 cores step like N GPUs. Models: tiny, small, and GPT-2 medium's shape (timed and
// with its gradient bytes on the wire, while a small proxy of its depth computes). Prints one
// JSON object on stdout (progress on stderr); every row says "emulated". Needs root and iproute2.
//
// --tflops: the emulated device's sustained rate. What decides whether data parallelism pays is
// the ratio of compute to communication per step: compute grows with the tokens per step,
// communication with the parameters only. These runs take tiny's batch (8 x 64 = 512 tokens per
// step), far fewer than a real GPT-2-medium step (~0.5M tokens); --tflops 0.03 gives 512 tokens
// the compute-to-communication ratio a 10 TFLOP/s device has at ~170k tokens per step
// (0.03 / 10 x 170k ≈ 512), a realistic batch for that model on such devices. Faster figures
// (the default 10) make the emulated compute of the small models shorter than their real
// kernels on this CPU: real_bound_pct then says the row measured the CPU.
//
// Per run:
//   step_ms, tokens_per_s    medians over the steps after the first (it compiles every kernel)
//   scaling_efficiency       tokens/s at N / (N x tokens/s at 1), world 1 of the same model
//   exposed_comm_ms          median over steps of the slowest rank's communication not hidden
//                            under its compute (common/charts/scaling.ts, as the run view shows)
//   link_min_ms              bytes on the busiest link / rate: the busiest machine's rank sends
//                            bytes_moved_per_step over its one link; no schedule can beat it.
//                            PowerSGD rows count their compressed steps only, in this and in
//                            bytes_moved_per_step (bench/lan/predict.ts compressedStepBytes: the
//                            first step all-reduces uncompressed)
//   real_bound_pct           the largest over the ranks of the share of readbacks where the real
//                            kernels (the proxy on the shared CPU) came after the emulated device:
//                            near 0 the row measured the emulated devices and the link; near 100
//                            it measured this machine's CPU (choose a slower --tflops)
//   predicted_ms, error_pct  the advisor's step time for the row's layout (common/advisor/time.ts,
//                            inputs in bench/lan/predict.ts: the emulated TFLOP/s, the shaped link,
//                            the hook's payloads and math) and (predicted - measured) / measured;
//                            predicted_exposed_comm_ms beside exposed_comm_ms. The JSON's
//                            `advisor` gives the median |error| over the rows, and over those
//                            that measured the emulated devices (real_bound_pct <= 50). The
//                            hosts' sums count too: one thread's rate on this machine (the JSON's
//                            host_reduce_ns), the ranks sharing its cores (bench/lan/predict.ts)
// With the GPT-2-medium shape every compression sends the shape's payload: the uncompressed rows
// its gradients, fp16/bf16 their 16-bit casts, PowerSGD the shape's P and Q and its uncompressed
// 1-D tensors (each zero-padded from the proxy's); PowerSGD's math is charged on the emulated
// device at the shape's FLOPs (comm-hooks/powersgd.ts).
// Multi-rank runs repeat for each of --compressions (DDP communication hooks: none, fp16, bf16,
// powersgd[:R], as `train --grad-compression` takes them).
//
// Options: --models tiny,small,medium --rates 1,10 --worlds 1,2,4 --steps 6 --tflops 10
//          --compressions none,fp16,bf16,powersgd:4
// The scaling case (does DDP of GPT-2 medium pay on a 1 Gbit/s LAN?): --models medium --rates 1 --tflops 0.03 --steps 4
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import path from 'node:path';
import { scalingSteps } from '../common/charts/scaling.js';
import type { Span, StepMetric } from '../common/charts/types.js';
import { measureReduceNs } from '../workers/comm/index.js';
import { EMULATED_SHAPES, type EmulatedShape } from '../workers/protocol/emulate.js';
import type { TrainJob } from '../workers/protocol/train.js';
import { median, round } from '../common/stats.js';
import { jsonLines } from './run-and-read.js';
import { startCluster } from './lan/cluster.js';
import { createLan, lanUnavailable, type LinkGbit } from './lan/harness.js';
import { compressedStepBytes, predictLanRow, rankHostReduce } from './lan/predict.js';

const log = (s: string) => process.stderr.write(`${s}\n`);
const flag = (name: string, def: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1]! : def;
};
/** a run folder's JSON-lines file (metrics.jsonl, spans.jsonl), as `train --json` prints its lines */
const jsonl = <T>(file: string): T[] => jsonLines(readFileSync(file, 'utf8')) as T[];

// GPT-2 medium's shape is timed by the emulated device over a proxy of its depth (24 tiny blocks)
const MODELS: Record<
  string,
  { preset: string; emulate: (tflops: number) => string; label: string; shape?: EmulatedShape; model?: Record<string, number> }
> = {
  tiny: { preset: 'tiny', emulate: (t) => `tflops=${t}`, label: 'tiny' },
  small: { preset: 'small', emulate: (t) => `tflops=${t}`, label: 'small' },
  medium: {
    preset: 'tiny',
    emulate: (t) => `tflops=${t},shape=gpt2-medium`,
    label: 'GPT-2 medium shape (24-block tiny proxy)',
    shape: EMULATED_SHAPES['gpt2-medium'],
    model: { n_layer: 24, n_head: 2, d_model: 64, block_size: 64 },
  },
};

interface Row {
  model: string;
  world: number;
  rate_gbit: LinkGbit | null;
  compression: string;
  emulated: string;
  step_ms: number;
  tokens_per_s: number;
  scaling_efficiency: number | null;
  exposed_comm_ms: number | null;
  link_min_ms: number | null;
  bytes_moved_per_step: number | null;
  real_bound_pct: number | null;
  predicted_ms: number;
  predicted_exposed_comm_ms: number;
  error_pct: number;
}

async function main() {
  const why = lanUnavailable();
  if (why) throw new Error(`bench:lan needs namespaced machines: ${why}`);
  const models = flag('models', 'tiny,small,medium').split(',');
  const rates = flag('rates', '1,10').split(',').map(Number) as LinkGbit[];
  const worlds = flag('worlds', '1,2,4').split(',').map(Number);
  const steps = Number(flag('steps', '6'));
  const tflops = Number(flag('tflops', '10'));
  const compressions = flag('compressions', 'none,fp16,bf16,powersgd:4').split(',');
  const out = mkdtempSync(path.join(tmpdir(), 'shardwise-bench-lan-'));
  // this host's sums, one thread, before any run loads it (ns per element)
  const reduceNs = measureReduceNs();
  const cores = availableParallelism();
  const rows: Row[] = [];
  const maxWorld = Math.max(...worlds);
  for (const rate of rates) {
    const lan = createLan({ machines: Math.max(2, maxWorld), rateGbit: rate });
    const cluster = await startCluster(lan);
    try {
      for (const name of models) {
        const model = MODELS[name];
        if (!model) throw new Error(`unknown model "${name}"; use ${Object.keys(MODELS).join(', ')}`);
        const emulate = model.emulate(tflops);
        let base: number | null = rows.find((r) => r.model === model.label && r.world === 1)?.tokens_per_s ?? null;
        for (const [world, compression] of worlds.flatMap((w) =>
          w === 1 ? [[w, 'none'] as const] : compressions.map((c) => [w, c] as const),
        )) {
          if (world === 1 && base !== null) continue; // no link involved: measured once
          const dir = path.join(out, `${name}-${rate}g-w${world}-${compression.replace(':', '')}`);
          const args = [
            'train',
            '--preset',
            model.preset,
            '--steps',
            String(steps),
            '--seed',
            '1',
            '--eval-interval',
            '0',
            '--json',
            '--out',
            dir,
          ];
          if (model.model) {
            const cfg = path.join(out, `${name}.json`);
            writeFileSync(cfg, JSON.stringify({ model: model.model }));
            args.push('--config', cfg);
          }
          if (world > 1)
            args.push('--strategy', 'ddp', '--world', String(world), '--placement', cluster.placement(Array<number>(world).fill(1)));
          if (compression !== 'none') args.push('--grad-compression', compression);
          // PowerSGD's default start (step 10) would leave a short run uncompressed throughout
          if (compression.startsWith('powersgd')) args.push('--powersgd-start-iter', '1');
          log(`bench:lan ${model.label} world ${world} at ${rate} Gbit/s, compression ${compression} (${emulate})`);
          const r = cluster.shardwise(args, { env: { SHARDWISE_EMULATE: emulate }, timeoutMs: 1_800_000 });
          if (r.code !== 0) throw new Error(`${name} world ${world} at ${rate} Gbit/s failed: ${r.stderr.trim().split('\n').at(-1)}`);
          const metrics = jsonl<StepMetric>(path.join(dir, 'metrics.jsonl')).filter(
            (m) => typeof m.step === 'number' && typeof m.loss === 'number',
          );
          const later = metrics.filter((m) => m.step > Math.min(...metrics.map((x) => x.step)));
          const tokensPerS = median(later.map((m) => m.tokens_per_s ?? NaN));
          const summary = JSON.parse(readFileSync(path.join(dir, 'summary.json'), 'utf8')) as {
            bytes_moved_per_step?: Record<string, number>;
            emulated?: { ranks?: Record<string, { real_bound_pct?: number }> };
            grad_compression?: Record<string, { uncompressed_bytes: number; compressed_bytes: number } | null>;
          };
          const job = JSON.parse(readFileSync(path.join(dir, 'config.json'), 'utf8')) as TrainJob;
          const { vocab_size: vocab } = JSON.parse(readFileSync(path.join(dir, 'state.json'), 'utf8')) as { vocab_size: number };
          const realBound = Object.values(summary.emulated?.ranks ?? {}).map((r) => r.real_bound_pct ?? NaN);
          const movedAll = summary.bytes_moved_per_step ? Math.max(...Object.values(summary.bytes_moved_per_step)) : null;
          // PowerSGD: the compressed steps' bytes (its first step sends the whole gradient)
          const psgd = job.parallel?.grad_compression?.hook === 'powersgd' ? summary.grad_compression?.['0'] : null;
          const moved =
            movedAll !== null && psgd
              ? (compressedStepBytes(movedAll, job.train.steps, job.parallel!.grad_compression!.start_powerSGD_iter ?? 10, psgd) ??
                movedAll)
              : movedAll;
          const predicted = predictLanRow(
            job,
            vocab,
            { tflops, ...(model.shape ? { shape: model.shape } : {}) },
            world > 1 ? rate : null,
            rankHostReduce(reduceNs, cores, world),
          );
          const stepMs = median(later.map((m) => m.step_ms ?? NaN));
          const scaling = world > 1 ? scalingSteps(metrics, jsonl<Span>(path.join(dir, 'spans.jsonl'))) : [];
          if (world === 1) base = tokensPerS;
          const row: Row = {
            model: model.label,
            world,
            rate_gbit: world > 1 ? rate : null,
            compression,
            emulated: emulate,
            step_ms: round(stepMs, 1),
            tokens_per_s: round(tokensPerS, 0),
            scaling_efficiency: world > 1 && base ? round(tokensPerS / (world * base), 3) : null,
            exposed_comm_ms: world > 1 ? round(median(scaling.map((s) => s.exposed_comm_ms)), 1) : null,
            link_min_ms: world > 1 && moved !== null ? round(((moved * 8) / lan.rateBitsPerS) * 1000, 1) : null,
            bytes_moved_per_step: world > 1 ? moved : null,
            real_bound_pct: realBound.length ? round(Math.max(...realBound), 0) : null,
            predicted_ms: round(predicted.step_ms, 1),
            predicted_exposed_comm_ms: round(predicted.comm_exposed_ms, 1),
            error_pct: round((100 * (predicted.step_ms - stepMs)) / stepMs, 1),
          };
          log(JSON.stringify(row));
          rows.push(row);
        }
      }
    } finally {
      await cluster.stop();
      lan.destroy();
    }
  }
  process.stdout.write(
    `${JSON.stringify({
      emulated: `every rank on an emulated device at ${tflops} TFLOP/s (SHARDWISE_EMULATE); the real kernels compute the real losses`,
      shaping: rates.map((r) => ({ rate_gbit: r, tbf: 'both ways per link, burst max(128 KiB, 1 ms), latency 10 ms' })),
      host_reduce_ns: { ...reduceNs, cores },
      advisor: {
        predicts:
          'common/advisor/time.ts for each row: the emulated TFLOP/s per rank, the shaped link less TCP framing, the hook (bench/lan/predict.ts)',
        median_abs_error_pct: round(median(rows.map((r) => Math.abs(r.error_pct))), 1),
        emulated_rows: rows.filter((r) => (r.real_bound_pct ?? 0) <= 50).length,
        median_abs_error_pct_emulated_rows: round(
          median(rows.filter((r) => (r.real_bound_pct ?? 0) <= 50).map((r) => Math.abs(r.error_pct))),
          1,
        ),
      },
      results: rows,
    })}\n`,
  );
}

await main();
