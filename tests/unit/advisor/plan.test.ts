import { describe, expect, it } from 'vitest';
import { enumerateLayouts, layoutName } from '../../../common/advisor/layouts.js';
import { predictRankMemory } from '../../../common/advisor/memory.js';
import { advise, checkPlanInput, nothingFits, type PlanDevice, type PlanHardware } from '../../../common/advisor/plan.js';
import { kernelMs, speedOfPeak } from '../../../common/advisor/time.js';
import { AdviseResultSchema } from '../../../common/advisor/types.js';
import { gptParamCount } from '../../../common/model-params.js';
import { predictModelStateBytes } from '../../../common/model-state.js';
import { AdviceError, adviseRequest } from '../../../src-main/controller/advise.js';

// The advisor's pure parts: the memory arithmetic on a known shape, the ranking (fitting first,
// fastest first), the reasons in the seeds' terms, and the refusals. Real runs check the memory
// arithmetic against the ranks' allocators in tests/dist/advisor-memory.test.ts.
const TINY = { n_layer: 2, n_head: 2, d_model: 64, block_size: 64, vocab_size: 96 };
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
const WIDE = { n_layer: 2, n_head: 4, d_model: 256, block_size: 16, vocab_size: 96 };
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
      'optimizer 8Ψ = 12.3 MiB is the largest part of the 28.4 MiB rank 0 needs > 5.72 MiB on GPU 0: use ZeRO-1/2/3 or offload',
    );
    const zero2 = r.layouts.find(
      (l) => l.layout.strategy === 'zero2' && !l.layout.offload_optimizer && !l.layout.activation_checkpointing,
    )!;
    expect(zero2.reason).toBe(
      'params 4Ψ = 6.14 MiB per rank is the largest part of the 23.9 MiB rank 0 needs > 5.72 MiB on GPU 0: use ZeRO-3, tensor or pipeline parallelism',
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
    expect(tp.reason).toMatch(/is the largest part of the 29.4 MiB the ranks on GPU 0 need > 15.3 MiB on GPU 0: /);
  });

  it('nothing fits: the refusal names the nearest layout and the memory it lacks', () => {
    const none = nothingFits(plan(1e6));
    expect(none?.field).toBe('model');
    expect(none?.message).toMatch(
      /^the model \(Ψ = 1608704\) fits no layout of these devices; the nearest, tp 2 \+ckpt, needs 13.2 MiB more device memory/,
    );
    expect(nothingFits(plan(40e6))).toBeNull();
  });
});

describe('refusals, field by field', () => {
  const base = { model: { ...TINY }, batch_size: 8, seq_len: 64, precision: 'fp32' as const, ranks: 2 };
  it('a batch that no layout of two ranks takes, a sequence longer than the block, heads that do not divide', () => {
    // one head and one block: no tp 2 or pp 2 to fall back on, and 7 rows do not split over 2 replicas
    const ONE = { n_layer: 1, n_head: 1, d_model: 64, block_size: 64, vocab_size: 96 };
    expect(checkPlanInput({ ...base, model: ONE, batch_size: 7 })).toEqual([
      {
        field: 'batch_size',
        message:
          'batch_size 7 does not split over 2 ranks (data parallelism gives each rank whole rows), and no other layout of 2 ranks applies (' +
          'tp: model.n_head (1) must be divisible by tp 2: each rank computes whole attention heads; pick tp among the divisors of 1 or a model with more heads; ' +
          'pp: model.n_layer 1 is smaller than pp 2: every pipeline stage needs at least one block; lower pp or raise model.n_layer); pick a multiple of 2, or fewer devices',
      },
    ]);
    // tiny's two heads take tp 2 whatever the batch: 7 rows are planned (single and tp 2), not refused
    expect(checkPlanInput({ ...base, batch_size: 7 })).toEqual([]);
    expect(checkPlanInput({ ...base, seq_len: 65 })[0]!.field).toBe('seq_len');
    expect(checkPlanInput({ ...base, model: { ...TINY, n_head: 3 } })[0]!.field).toBe('model.n_head');
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
      /fits no layout of these devices; the nearest, .*, needs [\d.]+ [KMG]iB more device memory \(params 4Ψ = [\d.]+ GiB per rank is the largest part/,
    );
    const ok = await adviseRequest({ preset: 'tiny', batch_size: 8, seq_len: 64, what_if: whatIf }, deps);
    expect(ok.profile.source).toBe('what-if');
    expect(ok.layouts[0]!.launch).toMatchObject({ preset: 'tiny', batch_size: 8, seq_len: 64 });
  });
});

describe('a batch only a smaller world splits', () => {
  it('tiny, batch 6 on 4 devices: the data-parallel layouts of 2 and 3 ranks are listed; the note says why none of 4 is', () => {
    const r = advise({ model: TINY, batch_size: 6, seq_len: 64, precision: 'fp32', hardware: hw(1e12, 4) });
    const worldsOf = (pick: (s: string) => boolean) => [
      ...new Set(r.layouts.filter((l) => pick(l.layout.strategy)).map((l) => l.layout.world)),
    ];
    expect(worldsOf((s) => ['dp', 'ddp', 'zero1', 'zero2', 'zero3'].includes(s)).sort()).toEqual([2, 3]);
    // the only layout of all 4 ranks: 3d 1x2x2 (tp 2 x pp 2 takes the batch in micro-batches of 3 rows)
    expect(new Set(r.layouts.filter((l) => l.layout.world === 4).map((l) => layoutName(l.layout)))).toEqual(
      new Set(['3d 1x2x2 m2 gpipe', '3d 1x2x2 m2 gpipe +ckpt', '3d 1x2x2 m2 1f1b', '3d 1x2x2 m2 1f1b +ckpt']),
    );
    expect(r.notes).toContain(
      'not listed at 4 ranks: dp, ddp and ZeRO (batch size 6 is not divisible by world 4 x micro-batches 1; pick batch_size as a multiple of 4); ' +
        'tp (model.n_head (2) must be divisible by tp 4: each rank computes whole attention heads; pick tp among the divisors of 2 or a model with more heads); ' +
        'pp (model.n_layer 2 is smaller than pp 4: every pipeline stage needs at least one block; lower pp or raise model.n_layer)',
    );
    expect(checkPlanInput({ model: TINY, batch_size: 6, seq_len: 64, precision: 'fp32', ranks: 4 })).toEqual([]);
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

  it('with the launch cost measured: the launch plus the work at the throughput the samples reached near that size', () => {
    // 0.1 ms per launch; the samples then ran 1e6 FLOP/ms (1e6 FLOPs in 1.1 ms) and 1e7 FLOP/ms (1e8 in 10.1 ms)
    const withLaunch = {
      ...d,
      launch_ms: 0.1,
      kernels: [
        { op: 'matmul', flops: 1e6, bytes: 0, ms: 1.1 },
        { op: 'matmul', flops: 1e8, bytes: 0, ms: 10.1 },
        { op: 'matmul', flops: 1e6, bytes: 0, ms: 0.6, precision: 'bf16' as const },
      ],
    };
    expect(kernelMs(withLaunch, 'matmul', 1e6, 0)).toBeCloseTo(1.1, 9);
    // a micro-batch's small launch: the launch cost and its little work, not the smallest sample's whole time
    expect(kernelMs(withLaunch, 'matmul', 1e4, 0)).toBeCloseTo(0.11, 9);
    expect(kernelMs(withLaunch, 'matmul', 1e9, 0)).toBeCloseTo(100.1, 9);
    // bf16 at its own samples (2e6 FLOP/ms); fp16, which the profile did not time, at fp32's
    expect(kernelMs(withLaunch, 'matmul', 1e6, 0, 'bf16')).toBeCloseTo(0.6, 9);
    expect(kernelMs(withLaunch, 'matmul', 1e6, 0, 'fp16')).toBeCloseTo(1.1, 9);
  });
});

describe('mixed precision (bf16)', () => {
  const bf16 = (strategy: 'single' | 'ddp' | 'zero1' | 'zero2' | 'zero3', world: number, precision: 'bf16' | 'fp32' = 'bf16') =>
    predictRankMemory({ model: TINY, batch_size: 8, seq_len: 64, layout: { strategy, world, micro_batches: 1, precision } }, world - 1)
      .device;
  it('model states: DDP 16Ψ, ZeRO-1 4Ψ + 12Ψ/N, ZeRO-2 2Ψ + 14Ψ/N, ZeRO-3 16Ψ/N (plus its gathered layers), as common/model-state.ts counts them', () => {
    const states = (m: ReturnType<typeof bf16>) => m.params + m.grads + m.optimizer;
    expect(states(bf16('single', 1))).toBe(16 * PSI);
    for (const N of [2, 4]) {
      // tiny's Ψ = 110 336 = 64 · 1724 splits into whole 64-element slots at 2 and 4 ranks: the shards are exactly Ψ/N
      expect(states(bf16('ddp', N))).toBe(16 * PSI);
      expect(bf16('ddp', N)).toMatchObject({ params: 2 * PSI, grads: 2 * PSI, optimizer: 12 * PSI });
      expect(bf16('zero1', N)).toMatchObject({ params: 2 * PSI, grads: 2 * PSI, optimizer: (12 * PSI) / N });
      expect(bf16('zero2', N)).toMatchObject({ params: 2 * PSI, grads: (2 * PSI) / N, optimizer: (12 * PSI) / N });
      const z3 = bf16('zero3', N);
      expect(z3.grads + z3.optimizer).toBe((14 * PSI) / N);
      // its weights: the 2Ψ/N shard and two layers gathered whole, all 16-bit (half the fp32 run's bytes)
      expect(z3.params).toBe(bf16('zero3', N, 'fp32').params / 2);
      for (const strategy of ['ddp', 'zero1', 'zero2'] as const) {
        const m = bf16(strategy, N);
        const formula = predictModelStateBytes({ strategy, world: N, params: PSI, rank: N - 1, precision: 'bf16' })!;
        expect({ params: m.params, grads: m.grads, optimizer: m.optimizer }, `${strategy} x${N}`).toEqual(formula);
      }
    }
  });

  it('activations and workspace at 2 bytes where the kernels store 16 bits: about half the fp32 bytes', () => {
    const b = bf16('single', 1);
    const f = bf16('single', 1, 'fp32');
    expect(b.activations).toBeLessThan(0.65 * f.activations);
    expect(b.activations).toBeGreaterThan(0.5 * f.activations);
    expect(b.workspace).toBeLessThan(f.workspace);
  });

  it('plans bf16: the optimizer as 12Ψ, half the bytes on the wire, the fallback to fp32 kernel times said in the notes', () => {
    const noLatency = { ...hw(1e12), local: { gbps: 1, latency_us: 0 }, remote: { gbps: 1, latency_us: 0 } };
    // a what-if device's speeds are stated at the plan's precision
    const at = (precision: 'fp32' | 'bf16') =>
      advise({
        model: TINY,
        batch_size: 8,
        seq_len: 64,
        precision,
        hardware: { ...noLatency, ranks: noLatency.ranks.map((r) => ({ ...r, speed: speedOfPeak(10, precision) })) },
      });
    const pick = (r: ReturnType<typeof at>, strategy: string) =>
      r.layouts.find((l) => l.layout.strategy === strategy && !l.layout.offload_optimizer && !l.layout.activation_checkpointing)!;
    const [f, b] = [at('fp32'), at('bf16')];
    expect(pick(b, 'zero1').layout.precision).toBe('bf16');
    expect(pick(b, 'zero1').launch.precision).toBe('bf16');
    // zero1's traffic: reduce-scatter the gradients, all-gather the weights, their staging copies: all linear in the bytes
    expect(pick(b, 'zero1').time.comm_exposed_ms).toBeCloseTo(pick(f, 'zero1').time.comm_exposed_ms / 2, 9);
    expect(b.notes.some((n) => n.startsWith('bf16 mixed precision: 16-bit weights'))).toBe(true);
    // no fallback note: the speeds time bf16
    expect(b.notes.some((n) => n.includes('time no bf16'))).toBe(false);
    const noHalf = advise({
      model: TINY,
      batch_size: 8,
      seq_len: 64,
      precision: 'bf16',
      hardware: { ...noLatency, ranks: noLatency.ranks.map((r) => ({ ...r, speed: speedOfPeak(10) })) },
    });
    expect(
      noHalf.notes.some((n) => n.includes('time no bf16 matmul or attention kernels: bf16 compute is taken at their fp32 speed')),
    ).toBe(true);
    expect(checkPlanInput({ model: TINY, batch_size: 8, seq_len: 64, precision: 'bf16', ranks: 2 })).toEqual([]);
  });
});

describe('host round trips', () => {
  it('tensor parallelism waits on every all-reduce: tiny tp 2 pays 14 round trips per step (4 per block, the embedding`s and the head`s, three cross-entropy statistics, the grad norm)', () => {
    const at = (sync_ms: number) => {
      const h = hw(1e12);
      const speed = { ...speedOfPeak(10), sync_ms };
      return advise({
        model: TINY,
        batch_size: 8,
        seq_len: 64,
        precision: 'fp32',
        hardware: { ...h, ranks: h.ranks.map((r) => ({ ...r, speed })) },
      }).layouts.find((l) => l.layout.strategy === 'tp' && !l.layout.activation_checkpointing)!;
    };
    expect(at(1).time.comm_exposed_ms - at(0).time.comm_exposed_ms).toBeCloseTo(14, 9);
  });
});
