import { describe, expect, it } from 'vitest';
import { enumerateLayouts, layoutName } from '../../../common/advisor/layouts.js';
import { predictRankMemory } from '../../../common/advisor/memory.js';
import { advise, checkPlanInput, nothingFits, type PlanDevice, type PlanHardware } from '../../../common/advisor/plan.js';
import { kernelMs, speedOfPeak } from '../../../common/advisor/time.js';
import { AdviseResultSchema } from '../../../common/advisor/types.js';
import { gptParamCount } from '../../../common/model-params.js';
import { AdviceError, adviseRequest } from '../../../src-main/controller/advise.js';

// The advisor's pure parts: the memory arithmetic on a known shape, the ranking (fitting first,
// fastest first), the reasons in the seeds' terms, and the refusals. Real runs check the memory
// arithmetic against the ranks' allocators in tests/dist/advisor-memory.test.ts.
const TINY = { n_layer: 2, n_head: 2, d_model: 64, block_size: 64, vocab: 96 };
const PSI = gptParamCount(TINY, 96); // 96·64 + 64·64 + 2·(12·64² + 13·64) + 2·64

describe('memory per rank', () => {
  it('single, tiny, B=8 T=64: params 4Ψ, grads 4Ψ, AdamW 8Ψ; activations 1 300 992 floats', () => {
    expect(PSI).toBe(110_336);
    const m = predictRankMemory({ model: TINY, batch_size: 8, seq_len: 64, layout: { strategy: 'single', world: 1, micro_batches: 1 } }, 0);
    expect(m.device.params).toBe(4 * PSI);
    expect(m.device.grads).toBe(4 * PSI);
    expect(m.device.optimizer).toBe(8 * PSI);
    // per block: ln1, res2, ln2 (BTC) + 2 layernorm stats pairs (BT) + qkv 3BTC + att B·NH·T² + atty BTC + fch, gelu 4BTC each
    //   = 3·32768 + 4·512 + 3·32768 + 65536 + 32768 + 8·32768 = 559 104; 3 residuals 98 304; lnf, stats, logits, losses, targets 83 968; idx 512
    expect(m.device.activations).toBe(4 * (2 * 559_104 + 98_304 + 83_968 + 512));
    expect(m.device.comm).toBe(0);
    expect(m.host).toBe(0);
  });

  it('zero2 + offload: no optimizer and no gradient shard on the device; the shard lives on the host (16 bytes per element)', () => {
    const m = predictRankMemory(
      { model: TINY, batch_size: 8, seq_len: 64, layout: { strategy: 'zero2', world: 2, micro_batches: 1, offload_optimizer: true } },
      1,
    );
    expect(m.device.optimizer).toBe(0);
    expect(m.device.grads).toBe(0);
    expect(m.device.params).toBe(4 * PSI);
    expect(m.host).toBeGreaterThan(0);
    expect(m.host % 16).toBe(0);
  });

  it('1F1B keeps min(p - stage, m) micro-batches of activations, GPipe all m', () => {
    const q = (schedule: 'gpipe' | '1f1b') => ({
      model: TINY,
      batch_size: 8,
      seq_len: 64,
      layout: { strategy: 'pp' as const, world: 2, pp: 2, micro_batches: 4, schedule },
    });
    const one = predictRankMemory({ ...q('gpipe'), layout: { ...q('gpipe').layout, micro_batches: 1, schedule: 'gpipe' } }, 0);
    const perSlot = one.device.activations;
    // activations scale with the micro-batch's rows: m = 4 slots of B/4 rows hold what one slot of B rows does
    expect(predictRankMemory(q('gpipe'), 0).device.activations).toBe(perSlot);
    expect(predictRankMemory(q('1f1b'), 0).device.activations).toBe(perSlot / 2);
    expect(predictRankMemory(q('1f1b'), 1).device.activations).toBe(predictRankMemory(q('gpipe'), 1).device.activations / 4);
  });
});

const speed = speedOfPeak(10);
const hw = (memory: number, n = 2): PlanHardware => ({
  source: 'what-if',
  ranks: Array.from({ length: n }, (_, i): PlanDevice => ({ label: `GPU ${i}`, machine: `m${i}`, memory_bytes: memory, speed })),
  local: { gbps: 10, latency_us: 5 },
  remote: { gbps: 10, latency_us: 5 },
  notes: [],
});
const WIDE = { n_layer: 2, n_head: 4, d_model: 256, block_size: 16, vocab: 96 };
const plan = (memory: number, n = 2) => advise({ model: WIDE, batch_size: 4, seq_len: 16, precision: 'fp32', hardware: hw(memory, n) });

describe('ranking', () => {
  it('lists every layout the table accepts: tiny at 2 ranks has 15 layouts, each with and without checkpointing', () => {
    const ls = enumerateLayouts(TINY, 8, 2);
    expect(ls.map(layoutName).filter((n) => !n.endsWith('+ckpt'))).toEqual([
      'single',
      'dp x2',
      'ddp x2',
      'zero1 x2',
      'zero2 x2',
      'zero3 x2',
      'zero1+offload x2',
      'zero2+offload x2',
      'tp 2',
      'pp 2 m2 gpipe',
      'pp 2 m2 1f1b',
      'pp 2 m4 gpipe',
      'pp 2 m4 1f1b',
      'pp 2 m8 gpipe',
      'pp 2 m8 1f1b',
    ]);
    expect(ls).toHaveLength(30);
  });

  it('fitting layouts first, fastest first; then the rest, nearest to fitting first', () => {
    const r = AdviseResultSchema.parse(plan(40e6));
    const fits = r.layouts.filter((l) => l.fits);
    expect(fits.length).toBeGreaterThan(0);
    expect(r.layouts.slice(0, fits.length).every((l) => l.fits)).toBe(true);
    const steps = fits.map((l) => l.time.step_ms);
    expect(steps).toEqual([...steps].sort((a, b) => a - b));
    expect(r.layouts.map((l) => l.rank_order)).toEqual(r.layouts.map((_, i) => i));
    expect(fits[0]!.reason).toMatch(/^fastest layout that fits: /);
    for (const l of r.layouts) {
      const t = l.time;
      expect(t.step_ms).toBeCloseTo(t.compute_ms + t.comm_exposed_ms + t.bubble_ms + t.host_copy_ms, 9);
      expect(l.tokens_per_s).toBeCloseTo((4 * 16 * 1000) / t.step_ms, 6);
      expect(l.mfu).toBeGreaterThan(0);
    }
  });

  it('a rejection names the largest category, its bytes in Ψ, the device and what to do', () => {
    const r = plan(6e6);
    const single = r.layouts.find((l) => l.layout.strategy === 'single' && !l.layout.activation_checkpointing)!;
    expect(single.fits).toBe(false);
    expect(single.ranks[0]!.memory.optimizer).toBe(8 * 1_608_704);
    expect(single.reason).toBe(
      'optimizer 8Ψ = 12.9 MB is the largest part of the 29.8 MB rank 0 needs > 6 MB on GPU 0: use ZeRO-1/2/3 or offload',
    );
    const zero2 = r.layouts.find(
      (l) => l.layout.strategy === 'zero2' && !l.layout.offload_optimizer && !l.layout.activation_checkpointing,
    )!;
    expect(zero2.reason).toBe(
      'params 4Ψ = 6.43 MB per rank is the largest part of the 25.1 MB rank 0 needs > 6 MB on GPU 0: use ZeRO-3, tensor or pipeline parallelism',
    );
  });

  it('two devices of one speed each compute half the batch; two ranks on one device take turns', () => {
    // 64 rows of 16 tokens: kernels long enough to be compute-bound, not launch-bound
    const apart = advise({ model: WIDE, batch_size: 64, seq_len: 16, precision: 'fp32', hardware: hw(1e12) }).layouts;
    const shared = hw(1e12);
    shared.ranks[1] = shared.ranks[0]!;
    const together = advise({ model: WIDE, batch_size: 64, seq_len: 16, precision: 'fp32', hardware: shared }).layouts;
    const pick = (ls: typeof apart, strategy: string) =>
      ls.find((l) => l.layout.strategy === strategy && !l.layout.activation_checkpointing)!;
    expect(pick(apart, 'ddp').time.compute_ms).toBeLessThan(0.75 * pick(apart, 'single').time.compute_ms);
    expect(pick(together, 'ddp').time.compute_ms).toBeGreaterThan(0.95 * pick(together, 'single').time.compute_ms);
  });

  it('ranks that share a device add up against its memory', () => {
    const shared = hw(16e6);
    shared.ranks[1] = shared.ranks[0]!;
    const r = advise({ model: WIDE, batch_size: 4, seq_len: 16, precision: 'fp32', hardware: shared });
    const tp = r.layouts.find((l) => l.layout.strategy === 'tp' && !l.layout.activation_checkpointing)!;
    expect(tp.ranks[0]!.memory.total).toBeLessThan(16e6);
    expect(tp.fits).toBe(false);
    expect(tp.reason).toMatch(/is the largest part of the 30.9 MB the ranks on GPU 0 need > 16 MB on GPU 0: /);
  });

  it('nothing fits: the refusal names the nearest layout and the memory it lacks', () => {
    const none = nothingFits(plan(1e6));
    expect(none?.field).toBe('model');
    expect(none?.message).toMatch(
      /^the model \(Ψ = 1608704\) fits no layout of these devices; the nearest, tp 2 \+ckpt, needs 13.8 MB more device memory/,
    );
    expect(nothingFits(plan(40e6))).toBeNull();
  });
});

describe('refusals, field by field', () => {
  const base = { model: { ...TINY }, batch_size: 8, seq_len: 64, precision: 'fp32' as const, ranks: 2 };
  it('a batch that does not divide over the ranks, a sequence longer than the block, heads that do not divide, a precision this build lacks', () => {
    expect(checkPlanInput({ ...base, batch_size: 7 })).toEqual([
      {
        field: 'batch_size',
        message:
          'batch_size 7 does not split over 2 ranks (data parallelism gives each rank whole rows); pick a multiple of 2, or fewer devices',
      },
    ]);
    expect(checkPlanInput({ ...base, seq_len: 65 })[0]!.field).toBe('seq_len');
    expect(checkPlanInput({ ...base, model: { ...TINY, n_head: 3 } })[0]!.field).toBe('model.n_head');
    expect(checkPlanInput({ ...base, precision: 'bf16' })[0]!.field).toBe('precision');
    expect(checkPlanInput(base)).toEqual([]);
  });

  const deps = { devices: () => Promise.reject(new Error('not probed in a what-if')), profile: () => Promise.resolve(null) };
  const whatIf = { devices: 2, memory_gb: 1, tflops: 10, link_gbps: 10, latency_us: 5 };
  const refusal = async (p: Promise<unknown>) => {
    const e = await p.then(
      () => null,
      (x: unknown) => x,
    );
    expect(e).toBeInstanceOf(AdviceError);
    return e as AdviceError;
  };
  it('an unknown preset or device class, a model too large for every layout', async () => {
    expect((await refusal(adviseRequest({ preset: 'huge', batch_size: 8, seq_len: 64, what_if: whatIf }, deps))).field).toBe('preset');
    const cls = await refusal(
      adviseRequest(
        { preset: 'tiny', batch_size: 8, seq_len: 64, what_if: { device_class: 'nope', devices: 2, link_gbps: 1, latency_us: 1 } },
        deps,
      ),
    );
    expect(cls.field).toBe('what_if.device_class');
    const big = await refusal(
      adviseRequest(
        {
          model: { n_layer: 48, n_head: 25, d_model: 1600, block_size: 1024 },
          batch_size: 8,
          seq_len: 1024,
          what_if: { ...whatIf, memory_gb: 8 },
        },
        deps,
      ),
    );
    expect(big.field).toBe('model');
    expect(big.message).toMatch(
      /fits no layout of these devices; the nearest, .*, needs [\d.]+ [KMG]B more device memory \(params 4Ψ = [\d.]+ GB per rank is the largest part/,
    );
    const ok = await adviseRequest({ preset: 'tiny', batch_size: 8, seq_len: 64, what_if: whatIf }, deps);
    expect(ok.profile.source).toBe('what-if');
    expect(ok.layouts[0]!.launch).toMatchObject({ preset: 'tiny', batch_size: 8, seq_len: 64 });
  });
});

describe('kernel time from the profile', () => {
  const d = {
    kernels: [
      { op: 'matmul', flops: 1e6, bytes: 0, ms: 1 },
      { op: 'matmul', flops: 1e8, bytes: 0, ms: 10 },
      { op: 'gelu', flops: 0, bytes: 1e6, ms: 2 },
    ],
    h2d_gbps: 1,
    d2h_gbps: 1,
  };
  it('log-log between timed sizes, linear beyond the largest, the smallest launch below it; an untimed op at its kind`s rate', () => {
    expect(kernelMs(d, 'matmul', 1e7, 0)).toBeCloseTo(Math.sqrt(10), 9);
    expect(kernelMs(d, 'matmul', 1e9, 0)).toBeCloseTo(100, 9);
    expect(kernelMs(d, 'matmul', 10, 0)).toBe(1);
    expect(kernelMs(d, 'layernorm', 0, 4e6)).toBeCloseTo(8, 9);
  });
});
