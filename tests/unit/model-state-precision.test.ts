// The model-state formulas per precision (common/model-state.ts): mixed precision counts the
// ZeRO paper's 2Ψ + 2Ψ + KΨ with K = 12 (fp32 master + two moments), fp32 stays 4 + 4 + 8; tp, pp
// and 3d count their tensors with the engine's 16-bit padding (worked numbers below).
import { describe, expect, it } from 'vitest';
import { modelStatePadding, modelStateTotal, predictModelStateBytes, predictOffloadHostBytes } from '../../common/model-state.js';
import { memoryChartOption } from '../../common/charts/memory.js';
import { runCharts } from '../../common/charts/run-charts.js';
import { formatBytes } from '../../common/charts/style.js';
import { lossScaleLine, precisionLabel } from '../../common/precision.js';

const PSI = 1200; // divisible by N = 4 everywhere below
const at = (strategy: string, precision: 'fp32' | 'bf16' | 'fp16', extra: { offloadOptimizer?: boolean; rank?: number } = {}) =>
  predictModelStateBytes({ strategy, world: 4, params: PSI, rank: extra.rank ?? 0, precision, offloadOptimizer: extra.offloadOptimizer })!;

describe('model states in mixed precision (K = 12)', () => {
  it('DDP 16Ψ = 2Ψ weights + 2Ψ grads + 12Ψ master and moments, bf16 and fp16 alike', () => {
    for (const p of ['bf16', 'fp16'] as const) {
      expect(at('ddp', p)).toEqual({ params: 2400, grads: 2400, optimizer: 14400 });
      expect(modelStateTotal(at('ddp', p))).toBe(16 * PSI);
    }
    expect(at('single', 'bf16')).toEqual(at('ddp', 'bf16'));
  });

  it('ZeRO-1 4Ψ + 12Ψ/N, ZeRO-2 2Ψ + 14Ψ/N, ZeRO-3 16Ψ/N at N = 4', () => {
    expect(at('zero1', 'bf16')).toEqual({ params: 2400, grads: 2400, optimizer: 3600 });
    expect(modelStateTotal(at('zero1', 'bf16'))).toBe(4 * PSI + (12 * PSI) / 4);
    expect(at('zero2', 'bf16')).toEqual({ params: 2400, grads: 600, optimizer: 3600 });
    expect(modelStateTotal(at('zero2', 'bf16'))).toBe(2 * PSI + (14 * PSI) / 4);
    expect(at('zero3', 'fp16')).toEqual({ params: 600, grads: 600, optimizer: 3600 });
    expect(modelStateTotal(at('zero3', 'fp16'))).toBe((16 * PSI) / 4);
  });

  it('dp keeps the 12Ψ optimizer on rank 0 only', () => {
    expect(at('dp', 'bf16', { rank: 0 }).optimizer).toBe(12 * PSI);
    expect(at('dp', 'bf16', { rank: 1 })).toEqual({ params: 2400, grads: 2400, optimizer: 0 });
  });

  it('offload: the device keeps the 16-bit weights only; the host the fp32 master, the 16-bit grad shard and the moments, 1/N each', () => {
    for (const s of ['zero1', 'zero2']) {
      expect(at(s, 'bf16', { offloadOptimizer: true })).toEqual({ params: 2400, grads: 0, optimizer: 0 });
      expect(predictOffloadHostBytes({ strategy: s, world: 4, params: PSI, rank: 0, precision: 'bf16', offloadOptimizer: true })).toEqual({
        params: 1200,
        grads: 600,
        optimizer: 2400,
      });
    }
    expect(
      predictOffloadHostBytes({ strategy: 'zero2', world: 4, params: PSI, rank: 0, precision: 'fp32', offloadOptimizer: true }),
    ).toBeNull();
    expect(predictOffloadHostBytes({ strategy: 'zero2', world: 4, params: PSI, rank: 0, precision: 'bf16' })).toBeNull();
  });

  it('fp32 is unchanged: 4 + 4 + 8, ZeRO-1 8Ψ + 8Ψ/N, offload keeps the fp32 grads on the device', () => {
    expect(at('ddp', 'fp32')).toEqual({ params: 4800, grads: 4800, optimizer: 9600 });
    expect(modelStateTotal(at('zero1', 'fp32'))).toBe(8 * PSI + (8 * PSI) / 4);
    expect(at('zero2', 'fp32', { offloadOptimizer: true })).toEqual({ params: 4800, grads: 1200, optimizer: 0 });
    expect(predictModelStateBytes({ strategy: 'zero3', world: 4, params: PSI, rank: 0 })).toEqual(at('zero3', 'fp32'));
  });

  // tiny on builtin:grammar: Ψ = 105 920, vocabulary 27, C = 64; one block = 12C² + 13C = 49 984
  const tiny = { n_layer: 2, d_model: 64, block_size: 64, vocab_size: 27 };
  it('tp 2: 2 bytes per local weight and gradient, 12 per parameter for master and moments, wte padded to 4T = 32 rows at 16 bits', () => {
    const q = { strategy: 'tp', world: 2, params: 105_920, rank: 1, model: tiny };
    // fp32: 4992 replicated + 99 200 split / 2 + 14 of the 28 padded wte rows x 64 = 55 488 elements
    expect(predictModelStateBytes(q)).toEqual({ params: 4 * 55_488, grads: 4 * 55_488, optimizer: 8 * 55_488 });
    // 16 bits: wte's 27 rows padded to 32 (the kernels read 4 elements at a time), 16 rows x 64 a rank: 55 616 elements
    for (const precision of ['bf16', 'fp16'] as const)
      expect(predictModelStateBytes({ ...q, precision })).toEqual({ params: 111_232, grads: 111_232, optimizer: 667_392 });
    expect(modelStatePadding({ ...q, precision: 'bf16' })).toEqual(['vocab 27 padded to 32 (a multiple of 4T)']);
    expect(modelStatePadding(q)).toEqual(['vocab 27 padded to 28 (a multiple of T)']);
  });

  it('pp 2: each stage its tensors, wte padded to 28 rows at 16 bits on both ends (the stages cut as at fp32)', () => {
    const q = { strategy: 'pp', world: 2, params: 105_920, model: tiny, precision: 'bf16' as const };
    // stage 0: wte 28 x 64 + wpe 64 x 64 + block 0 = 55 872; stage 1: wte 28 x 64 + block 1 + ln_f 128 = 51 904
    expect(predictModelStateBytes({ ...q, rank: 0 })).toEqual({ params: 111_744, grads: 111_744, optimizer: 670_464 });
    expect(predictModelStateBytes({ ...q, rank: 1 })).toEqual({ params: 103_808, grads: 103_808, optimizer: 622_848 });
    expect(predictModelStateBytes({ ...q, rank: 1, precision: 'fp32' })!.params).toBe(4 * 51_840);
    expect(modelStatePadding({ ...q, rank: 0 })).toEqual(['vocab 27 padded to 28 (a multiple of 4)']);
  });

  it('3d 2x2x2: ZeRO-1 keeps 12 bytes for half of the stage shard laid out in 128-element slots at 16 bits', () => {
    const q = { strategy: '3d', world: 8, dp: 2, tp: 2, pp: 2, params: 105_920, model: tiny, precision: 'bf16' as const };
    // rank 0 (stage 0, TP 0, DP 0): 30 304 elements (wte 16 x 64 rows); in 128-element slots 30 720, half of it 15 360
    expect(predictModelStateBytes({ ...q, rank: 0 })).toEqual({ params: 60_608, grads: 60_608, optimizer: 12 * 15_360 });
    // fp32: 30 176 elements (wte 14 rows), 30 208 in 64-element slots, half 15 104
    expect(predictModelStateBytes({ ...q, rank: 0, precision: 'fp32' })).toEqual({
      params: 120_704,
      grads: 120_704,
      optimizer: 8 * 15_104,
    });
    expect(modelStatePadding({ ...q, rank: 0 })).toEqual(['vocab 27 padded to 32 (a multiple of 4T)', 'ZeRO-1 shard in 128-element slots']);
    // the data-parallel family's formula counts Ψ as the run reports it: no padding to name
    expect(modelStatePadding({ strategy: 'zero1', world: 2, params: 105_920, rank: 0, model: tiny, precision: 'bf16' })).toEqual([]);
  });

  it('the memory chart names the precision on its formula line', () => {
    const steps = [{ step: 1, loss: 1, memory: { '0': { params: 2400, grads: 2400, optimizer: 14400 } } }];
    const label = (o: ReturnType<typeof memoryChartOption>) => JSON.stringify(o);
    expect(label(memoryChartOption(0, steps, { predicted: 19200, precision: 'bf16' }))).toContain('formula (model states, bf16)');
    expect(label(memoryChartOption(0, steps, { predicted: 19200 }))).toContain('formula (model states) ');
    expect(
      label(memoryChartOption(0, steps, { predicted: 19200, precision: 'bf16', padding: ['vocab 27 padded to 32 (a multiple of 4T)'] })),
    ).toContain('formula (model states, bf16; vocab 27 padded to 32 (a multiple of 4T))');
  });
});

describe("a run's memory charts count the padding and name it", () => {
  it('tp 2 in bf16: the formula line is the padded prediction (889 856 bytes a rank), with the vocabulary the state reports named as padded to 32', () => {
    const states = { params: 111_232, grads: 111_232, optimizer: 667_392 };
    const charts = runCharts({
      config: { parallel: { strategy: 'tp', world: 2, tp: 2 }, model: { n_layer: 2, d_model: 64, block_size: 64 }, precision: 'bf16' },
      state: { vocab_size: 27 },
      summary: { params: 55_616 },
      steps: [{ step: 1, loss: 1, memory: { '0': states, '1': states } }],
      evals: [],
      spans: [],
    });
    const memory = charts.filter((c) => c.id.startsWith('memory-rank-'));
    expect(memory).toHaveLength(2);
    for (const c of memory)
      expect(JSON.stringify(c.option)).toContain(
        `formula (model states, bf16; vocab 27 padded to 32 (a multiple of 4T)) ${formatBytes(889_856)}`,
      );
    // without the state's vocabulary, the one the shard's Ψ implies (32: already padded): the same number, nothing to name
    const bare = runCharts({
      config: { parallel: { strategy: 'tp', world: 2, tp: 2 }, model: { n_layer: 2, d_model: 64, block_size: 64 }, precision: 'bf16' },
      summary: { params: 55_616 },
      steps: [{ step: 1, loss: 1, memory: { '0': states } }],
      evals: [],
      spans: [],
    });
    expect(JSON.stringify(bare.find((c) => c.id === 'memory-rank-0')!.option)).toContain(
      `formula (model states, bf16) ${formatBytes(889_856)}`,
    );
  });
});

describe('outputs name the precision and fp16 loss scaling', () => {
  it('the run view and report lines: the precision, and the loss scale with the skipped steps when the rank reports them', () => {
    expect(precisionLabel({ precision: 'bf16' })).toBe('bf16 mixed precision (fp32 master weights and moments)');
    expect(precisionLabel({})).toBe('fp32');
    expect(lossScaleLine({ loss_scale: 32768, skipped_steps: 3 })).toBe('loss scale 32768 · 3 steps skipped (overflow)');
    expect(lossScaleLine({ loss_scale: 65536, skipped_steps: 1 })).toBe('loss scale 65536 · 1 step skipped (overflow)');
    expect(lossScaleLine({ step: 1 } as object)).toBeNull();
  });
});
