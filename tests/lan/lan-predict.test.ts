// bench:lan's advisor columns (bench/lan/predict.ts), in process: no namespaces needed.
import { describe, expect, it } from 'vitest';
import { predictStepTime, speedOfEmulated } from '../../common/advisor/time.js';
import { gptParamCount } from '../../common/model-params.js';
import { compressedStepBytes, predictLanRow, rankHostReduce, shapedLink, TCP_PAYLOAD_SHARE } from '../../bench/lan/predict.js';
import { EMULATED_SHAPES } from '../../workers/protocol/emulate.js';
import { DEFAULT_PARALLEL, type TrainJob } from '../../workers/protocol/train.js';

/** bench:lan's medium row: the 24-block tiny proxy at tiny's batch, DDP over `world` machines */
function mediumJob(world: number, hook?: 'powersgd'): TrainJob {
  return {
    run_dir: '/tmp/x',
    model: { preset: 'tiny', n_layer: 24, n_head: 2, d_model: 64, block_size: 64 },
    data: { dataset: 'builtin:grammar' },
    train: { steps: 4, batch_size: 8 } as TrainJob['train'],
    device: {},
    parallel: {
      ...DEFAULT_PARALLEL,
      strategy: world > 1 ? 'ddp' : 'single',
      world,
      ...(hook ? { grad_compression: { hook, matrix_approximation_rank: 4, start_powerSGD_iter: 1 } } : {}),
    },
  };
}

describe('bench:lan: the advisor columns', () => {
  it('the shaped link is its rate less TCP framing, in GB/s', () => {
    expect(shapedLink(1).gbps).toBeCloseTo(0.125 * TCP_PAYLOAD_SHARE, 12);
    expect(shapedLink(10).gbps).toBeCloseTo(1.25 * TCP_PAYLOAD_SHARE, 12);
  });

  it("a medium row is predicted for the GPT-2-medium shape on one emulated device per rank, its buckets filled by the proxy's parameters", () => {
    const shape = EMULATED_SHAPES['gpt2-medium']!;
    const got = predictLanRow(mediumJob(2), 27, { tflops: 0.03, shape }, 1);
    const timed = { n_layer: 24, n_head: 16, d_model: 1024, block_size: 64, vocab_size: 50257 };
    const psi = gptParamCount(timed, timed.vocab_size);
    const want = predictStepTime({
      model: timed,
      batch_size: 8,
      seq_len: 64,
      layout: { strategy: 'ddp', world: 2, micro_batches: 1 },
      devices: [speedOfEmulated(0.03), speedOfEmulated(0.03)],
      link: shapedLink(1),
      params: psi,
      rankParams: [psi, psi],
      ddp: { bucket_cap_mb: 0.25, first_bucket_mb: 0.0625, proxy: { n_layer: 24, d_model: 64, block_size: 64, vocab_size: 27 } },
    });
    expect(got).toEqual(want);
    // world 1 runs single: compute alone; world 2 halves the compute and adds the link's tail
    const one = predictLanRow(mediumJob(1), 27, { tflops: 0.03, shape }, null);
    expect(one.comm_exposed_ms).toBe(0);
    expect(got.compute_ms).toBeCloseTo(one.compute_ms / 2, 6);
    expect(got.comm_exposed_ms).toBeGreaterThan(0);
    const psgd = predictLanRow(mediumJob(2, 'powersgd'), 27, { tflops: 0.03, shape }, 1);
    expect(psgd.comm_exposed_ms).toBeLessThan(got.comm_exposed_ms / 4);
  });

  it("PowerSGD's compressed steps: the run's bytes less its uncompressed first steps, split as the hook's payloads", () => {
    // 4 steps, the first uncompressed: 100 payload bytes per step uncompressed, 2 compressed; the wire carries 1.1x the payload
    const wire = 1.1 * (100 + 3 * 2);
    expect(compressedStepBytes(wire / 4, 4, 1, { uncompressed_bytes: 400, compressed_bytes: 106 })).toBeCloseTo(2.2, 9);
    // compressing from the first step: every step counts
    expect(compressedStepBytes(2.2, 4, 0, { uncompressed_bytes: 400, compressed_bytes: 8 })).toBeCloseTo(2.2, 9);
    // never compressed: no figure
    expect(compressedStepBytes(110, 4, 10, { uncompressed_bytes: 400, compressed_bytes: 400 })).toBeNull();
  });
  it("the hosts' sums: one thread's rate slowed by the ranks per core beyond one; slow sums lengthen a 1 Gbit/s medium fp16 row, fast ones leave it", () => {
    const one = { float32: 0.5, float16: 3, bfloat16: 2 };
    expect(rankHostReduce(one, 2, 2)).toEqual(one);
    expect(rankHostReduce(one, 2, 4)).toEqual({ float32: 1, float16: 6, bfloat16: 4 });
    const shape = EMULATED_SHAPES['gpt2-medium']!;
    const job = mediumJob(4);
    job.parallel!.grad_compression = { hook: 'fp16' };
    const without = predictLanRow(job, 27, { tflops: 0.03, shape }, 1).step_ms;
    expect(predictLanRow(job, 27, { tflops: 0.03, shape }, 1, rankHostReduce(one, 2, 4)).step_ms).toBe(without);
    // 100 ns an element: ~300 Mi 16-bit elements x 3/4 summed per rank take ~22 s, far beyond the link's ~7 s
    expect(predictLanRow(job, 27, { tflops: 0.03, shape }, 1, { float32: 100, float16: 100, bfloat16: 100 }).step_ms).toBeGreaterThan(
      without + 10_000,
    );
  });
});
