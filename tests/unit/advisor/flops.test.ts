// The model FLOPs per token (common/advisor/flops.ts) counted launch by launch for tiny, the
// Megatron/PaLM closed forms, per-rank shares, and the device-class table.
import { describe, expect, it } from 'vitest';
import { flopsPerToken, matmulParams, mfu, tflopsOf, trainFlopsPerToken } from '../../../common/advisor/flops.js';
import { DEVICE_CLASSES, deviceClassById, deviceClassForName, peakTflops } from '../../../common/advisor/device-classes.js';
import { PRESETS } from '../../../workers/protocol/presets.js';

const tiny = { n_layer: PRESETS.tiny!.n_layer, d_model: PRESETS.tiny!.d_model, vocab_size: 96 };

describe('model FLOPs per token', () => {
  it('tiny (L 2, C 64, T 64, V 96) trains 724 992 FLOPs per token: 3 x the forward matmuls counted one by one', () => {
    const C = 64,
      T = 64,
      V = 96;
    const perBlock =
      2 * C * 3 * C /* qkv */ +
      2 * C * C /* attn proj */ +
      2 * C * 4 * C /* fc */ +
      2 * 4 * C * C /* mlp proj */ +
      2 * T * C /* Q·Kᵀ */ +
      2 * T * C; /* A·V */
    const forward = 2 * perBlock + 2 * V * C; /* LM head */
    expect(3 * forward).toBe(724_992);
    expect(trainFlopsPerToken(tiny, T)).toBe(724_992);
    expect(flopsPerToken(tiny, T)).toEqual({ model: 724_992, hardware: 724_992 });
  });

  it('is 6Ψ + 12·L·T·C with Ψ = 12·L·C² + V·C (tiny: Ψ 104 448), and Megatron eq. 3 with recomputation', () => {
    expect(matmulParams(tiny)).toBe(104_448);
    const s = PRESETS.small!;
    const m = { n_layer: s.n_layer, d_model: s.d_model, vocab_size: 65 };
    const [L, C, T, V] = [m.n_layer, m.d_model, s.block_size, m.vocab_size];
    expect(trainFlopsPerToken(m, T)).toBe(6 * matmulParams(m) + 12 * L * T * C);
    // Narayanan et al. 2021, eq. 3, per token: 96·l·h²·(1 + s/6h + V/16lh)
    expect(trainFlopsPerToken(m, T, { recompute: true })).toBeCloseTo(96 * L * C * C * (1 + T / (6 * C) + V / (16 * L * C)), 6);
    const both = flopsPerToken(m, T, { checkpointing: true });
    expect(both.hardware - both.model).toBe(L * (24 * C * C + 4 * T * C)); // one more forward of every block
  });

  it('splits over ranks: tp divides everything, pipeline stages add up to the whole model', () => {
    const T = 64;
    expect(trainFlopsPerToken(tiny, T, { share: { tp: 2 } })).toBe(724_992 / 2);
    const first = trainFlopsPerToken(tiny, T, { share: { layers: 1, lm_head: false } });
    const last = trainFlopsPerToken(tiny, T, { share: { layers: 1, lm_head: true } });
    expect(first + last).toBe(724_992);
    expect(last - first).toBe(6 * 96 * 64);
  });

  it('converts to TFLOP/s and MFU', () => {
    expect(tflopsOf(2e12, 1000)).toBe(2);
    expect(tflopsOf(1, 0)).toBe(0);
    expect(mfu(33.5, 67)).toBe(0.5);
  });
});

describe('device classes', () => {
  it('lists each known GPU once with memory and both peaks, and matches adapter names', () => {
    const ids = DEVICE_CLASSES.map((d) => d.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const d of DEVICE_CLASSES) {
      expect(d.memory_bytes).toBeGreaterThan(0);
      expect(d.half_tflops).toBeGreaterThanOrEqual(d.fp32_tflops);
      expect(d.source.length).toBeGreaterThan(10);
    }
    expect(deviceClassForName('NVIDIA H200')?.id).toBe('h200');
    expect(deviceClassForName('NVIDIA A100-SXM4-80GB')?.id).toBe('a100-80gb');
    expect(deviceClassForName('NVIDIA A100-PCIE-40GB')?.id).toBe('a100-40gb');
    expect(deviceClassForName('NVIDIA GeForce RTX 4090')?.id).toBe('rtx-4090');
    expect(deviceClassForName('Tesla T4')?.id).toBe('t4');
    expect(deviceClassForName('Apple M2')?.id).toBe('apple-m2');
    expect(deviceClassForName('Apple M2 Max')).toBeUndefined();
    expect(deviceClassForName('SwiftShader Device (Subzero)')).toBeUndefined();
    expect(peakTflops(deviceClassById('H100')!, 'bf16')).toBe(989.5);
    expect(peakTflops(deviceClassById('h100')!)).toBe(67);
  });
});
