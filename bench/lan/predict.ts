// The advisor's prediction of a bench:lan row (the target: predicted step times of the bench:lan
// runs within 25% of measured): the step time common/advisor/time.ts predicts for
// the run's own layout, from what the run was given rather than what it measured:
//   device   the emulated device's stated TFLOP/s (speedOfEmulated: its clock's rule). Emulated
//            devices do not share the CPU, so each rank has its own (no sharing factor)
//   model    the run's model, or the emulated shape it timed (GPT-2 medium's), its proxy filling
//            DDP's buckets as the rank does
//   link     the shaped rate, less Ethernet/IP/TCP framing (1448 payload bytes per 1514-byte frame
//            at MTU 1500, what tbf counts); the advisor's default per-message latency (the links
//            add no delay: no netem). No shared memory between the machines
//   DDP      the job's bucket caps and communication hook (TimeQuery.ddp): the hook's payloads and,
//            for PowerSGD, its math on the device. PowerSGD is predicted once compressing: the rows
//            measure the steps after the first, and bench:lan starts compressing at step 2
//   host     how fast this host sums collective payloads (reduce-rate.ts, measured by bench:lan
//            on this machine): every namespaced machine's ranks run on this host's cores, so a
//            rank gets cores / world of one when there are fewer cores than ranks. A collective
//            takes at least its sums' time (ddp-comm.ts)
import type { HostReduce } from '../../common/advisor/ddp-comm.js';
import { DEFAULT_LINK, type LinkSpeed, predictStepTime, speedOfEmulated, type TimePrediction } from '../../common/advisor/time.js';
import { gptParamCount } from '../../common/model-params.js';
import { TABLE } from '../../common/strategies.js';
import type { EmulatedShape } from '../../workers/protocol/emulate.js';
import type { TrainJob } from '../../workers/protocol/train.js';

/** payload share of a full TCP frame at MTU 1500 with timestamps: 1448 of the 1514 bytes tbf counts */
export const TCP_PAYLOAD_SHARE = 1448 / 1514;

/** The link the advisor assumes for a tbf-shaped LAN link of `rateGbit` Gbit/s each way. */
export function shapedLink(rateGbit: number): LinkSpeed {
  return { gbps: (rateGbit / 8) * TCP_PAYLOAD_SHARE, latency_us: DEFAULT_LINK.latency_us };
}

/** One rank's host sums when `world` ranks share `cores` cores: one thread's ns per element, times the ranks per core beyond one. */
export function rankHostReduce(oneThread: HostReduce, cores: number, world: number): HostReduce {
  const slower = Math.max(1, world / Math.max(1, cores));
  return { float32: oneThread.float32 * slower, float16: oneThread.float16 * slower, bfloat16: oneThread.bfloat16 * slower };
}

/**
 * The advisor's step time for a finished bench:lan run: its job (config.json), its dataset's
 * vocabulary, the emulated device; `host`: one rank's host sums (rankHostReduce), absent = hidden.
 */
export function predictLanRow(
  job: TrainJob,
  vocab: number,
  emulated: { tflops: number; shape?: EmulatedShape },
  rateGbit: number | null,
  host?: HostReduce,
): TimePrediction {
  const m = job.model;
  const par = job.parallel;
  const world = par?.world ?? 1;
  const computed = { n_layer: m.n_layer, d_model: m.d_model, block_size: m.block_size, vocab_size: vocab };
  const s = emulated.shape;
  // the timed model: the emulated shape at the proxy's depth and positions, else the model itself
  const timed = s
    ? { n_layer: s.n_layer, n_head: s.n_head, d_model: s.d_model, block_size: m.block_size, vocab_size: s.vocab_size }
    : { ...computed, n_head: m.n_head };
  const psi = gptParamCount(timed, timed.vocab_size);
  // a bucketed all-reduce (ddp) is what this predictor times; any other layout is timed as one device
  const ddp = world > 1 && par && TABLE[par.strategy].bucketAllReduce ? par : null;
  return predictStepTime({
    model: timed,
    batch_size: job.train.batch_size,
    seq_len: job.train.seq_len ?? m.block_size,
    layout: { strategy: ddp ? 'ddp' : 'single', world: ddp ? world : 1, micro_batches: par?.micro_batches ?? 1 },
    // one emulated device per rank (separate objects: no rank shares one); the real adapter under
    // it is SwiftShader, so PowerSGD's math runs where a software adapter puts it (the host)
    devices: Array.from({ length: ddp ? world : 1 }, () => ({ ...speedOfEmulated(emulated.tflops), is_software: true })),
    link: shapedLink(rateGbit ?? 1),
    params: psi,
    rankParams: Array<number>(ddp ? world : 1).fill(psi),
    ...(ddp
      ? {
          ddp: {
            bucket_cap_mb: ddp.bucket_cap_mb,
            first_bucket_mb: ddp.first_bucket_mb,
            ...(ddp.grad_compression ? { compression: ddp.grad_compression } : {}),
            ...(s ? { proxy: computed } : {}),
            ...(host ? { host } : {}),
          },
        }
      : {}),
  });
}

/**
 * Bytes per step of a PowerSGD run's compressed steps alone, from its summary: the run's bytes
 * per step over all steps, less its first uncompressed ones. The wire's bytes split as the hook's
 * payload bytes do (the summary's grad_compression: every step's float32 bucket bytes, and what
 * it sent: that bucket for the first `startIter` steps, then the plain tensors, P and Q).
 */
export function compressedStepBytes(
  movedPerStep: number,
  steps: number,
  startIter: number,
  hook: { uncompressed_bytes: number; compressed_bytes: number },
): number | null {
  const first = Math.min(steps, startIter);
  if (steps <= first || hook.compressed_bytes <= 0) return null;
  const perStep = hook.uncompressed_bytes / steps;
  const share = Math.max(0, hook.compressed_bytes - first * perStep) / hook.compressed_bytes;
  return (movedPerStep * steps * share) / (steps - first);
}
