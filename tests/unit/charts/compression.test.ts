// The run view's gradient-compression line (common/charts/compression.ts) from a run summary.
import { describe, expect, it } from 'vitest';
import { gradCompressionLine } from '../../../common/charts/index.js';

describe('gradient compression line', () => {
  it('PowerSGD: ratio, bytes each rank sent against float32, every rank its own error-feedback norm, where its math ran', () => {
    const rank = (norm: number) => ({
      hook: 'powersgd',
      compression_ratio: 18.25,
      uncompressed_bytes: 20 * 2 ** 20,
      compressed_bytes: 1.5 * 2 ** 20,
      error_feedback_norm: norm,
      math: 'device' as const,
    });
    expect(gradCompressionLine({ grad_compression: { '0': rank(0.01234), '1': rank(0.0111) } })).toBe(
      'Gradient compression: powersgd, 18.3× smaller gradient payloads (rank 0 1.50 MiB for 20.0 MiB · rank 1 1.50 MiB for 20.0 MiB); error-feedback norm: rank 0 0.0123 · rank 1 0.0111; its math on the device',
    );
  });

  it('fp16 has no error feedback; no compression, no line', () => {
    const fp16 = { hook: 'fp16', compression_ratio: 2, uncompressed_bytes: 4096, compressed_bytes: 2048 };
    expect(gradCompressionLine({ grad_compression: { '0': fp16, '1': fp16 } })).toBe(
      'Gradient compression: fp16, 2.0× smaller gradient payloads (rank 0 2.00 KiB for 4.00 KiB · rank 1 2.00 KiB for 4.00 KiB)',
    );
    expect(gradCompressionLine({ bytes_moved_per_step: { '0': 1 } })).toBeNull();
    expect(gradCompressionLine(undefined)).toBeNull();
  });
});
