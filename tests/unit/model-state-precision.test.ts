// The model-state formulas per precision (common/model-state.ts): mixed precision counts the
// ZeRO paper's 2Ψ + 2Ψ + KΨ with K = 12 (fp32 master + two moments), fp32 stays 4 + 4 + 8.
import { describe, expect, it } from 'vitest';
import { modelStateTotal, predictModelStateBytes, predictOffloadHostBytes } from '../../common/model-state.js';
import { memoryChartOption } from '../../common/charts/memory.js';
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

  it('tp: 2 bytes per local weight and gradient, 12 per parameter for master and moments', () => {
    const tiny = { n_layer: 2, d_model: 64, block_size: 64, vocab: 27 };
    const q = { strategy: 'tp', world: 2, params: 105_920, rank: 1, model: tiny };
    const fp32 = predictModelStateBytes(q)!;
    const local = fp32.params / 4;
    expect(predictModelStateBytes({ ...q, precision: 'bf16' })).toEqual({ params: 2 * local, grads: 2 * local, optimizer: 12 * local });
  });

  it('the memory chart names the precision on its formula line', () => {
    const steps = [{ step: 1, loss: 1, memory: { '0': { params: 2400, grads: 2400, optimizer: 14400 } } }];
    const label = (o: ReturnType<typeof memoryChartOption>) => JSON.stringify(o);
    expect(label(memoryChartOption(0, steps, { predicted: 19200, precision: 'bf16' }))).toContain('formula (model states, bf16)');
    expect(label(memoryChartOption(0, steps, { predicted: 19200 }))).toContain('formula (model states) ');
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
