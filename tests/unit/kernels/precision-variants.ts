// The 16-bit storage variants the precision tests run (bf16 and fp16 packed two per u32; fp16
// native where the adapter has shader-f16) and the bounds they share. The derivation of the
// bounds is written in precision.test.ts's header:
//   an output stored in 16 bits:  |gpu - ref| <= TOL32 |ref| + rnd |ref| (1 + TOL32)
//   an output kept in f32:        |gpu - ref| <= TOL32 |ref|
import type { StoragePrecision } from '../../../workers/gpu/precision.js';
import { unitRoundoff } from '../../../workers/gpu/precision.js';
import type { Runtime } from '../../../workers/gpu/runtime.js';

/** The fp32 tests' bound for the same kernels (f32 accumulation, WGSL's few-ULP builtins). */
export const TOL32 = 1e-4;
/** relErr floor (helpers.ts) for outputs whose elements may cancel to ~0. */
export const CANCEL_FLOOR = 1e-2;

export interface Variant {
  precision: Exclude<StoragePrecision, 'fp32'>;
  native: boolean;
  label: string;
}

/** One rounding to the format: u for bf16 (our round to nearest even), 2u for fp16 (pack2x16float may round to either neighbour). */
export const rnd = (v: Pick<Variant, 'precision'>) => (v.precision === 'bf16' ? 1 : 2) * unitRoundoff(v.precision);
/** The bound of an output stored in 16 bits. */
export const bound16 = (v: Pick<Variant, 'precision'>) => TOL32 + rnd(v) * (1 + TOL32);

/** bf16, fp16 packed, and fp16 native where the runtime's adapter has shader-f16 (SwiftShader lacks it). */
export function variantsOf(rt: Runtime): Variant[] {
  return [
    { precision: 'bf16', native: false, label: 'bf16' },
    { precision: 'fp16', native: false, label: 'fp16 packed' },
    ...(rt.shaderF16 ? [{ precision: 'fp16', native: true, label: 'fp16 native' } as Variant] : []),
  ];
}

/** Run body once per variant, with the runtime on that variant's fp16 path (restored after). */
export async function eachVariant(rt: Runtime, variants: readonly Variant[], body: (v: Variant) => Promise<void>) {
  const hasF16 = rt.shaderF16;
  for (const v of variants) {
    rt.shaderF16 = v.native;
    try {
      await body(v);
    } finally {
      rt.shaderF16 = hasF16;
    }
  }
}
