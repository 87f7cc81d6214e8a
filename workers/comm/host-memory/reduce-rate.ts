// How fast this host sums collective payloads, per dtype: the comm layer reduces on the CPU (a
// ring all-reduce sums (N-1)/N of the buffer on every rank, a piece at a time, while the link
// carries the next pieces), so a collective takes at least that long whatever the link. Every
// dtype runs the WebAssembly SIMD kernels where they run (simd.ts, simd-half.ts), else the JS
// loops (dtype.ts). One thread, pieces of the collectives' size; the best of a few rounds, tens
// of ms in all.
import type { DType } from '../transport/frames.js';
import { reduceTo } from './dtype.js';

/** ns per element of a sum, by dtype */
export type ReduceNs = Record<DType, number>;

/** Times reduceTo's sum over `elems`-element pieces (best of `rounds`); 1 Mi elements is one 2-4 MiB piece. */
export function measureReduceNs(elems = 1 << 20, rounds = 5): ReduceNs {
  const time = (run: () => void) => {
    run(); // compiles the loop
    let best = Infinity;
    for (let r = 0; r < rounds; r++) {
      const t0 = performance.now();
      run();
      best = Math.min(best, performance.now() - t0);
    }
    return (best * 1e6) / elems;
  };
  // out of place, so the operands (and the branches narrowing takes) stay the same every round
  const f32 = [new Float32Array(elems), new Float32Array(elems), new Float32Array(elems)] as const;
  // ordinary finite values of either 16-bit format (1.0 .. 1.06 in fp16, 1.0 .. 1.5 in bf16)
  const u16 = [new Uint16Array(elems), new Uint16Array(elems), new Uint16Array(elems)] as const;
  for (let i = 0; i < elems; i++) {
    f32[0][i] = 1 + (i % 977) / 977;
    f32[1][i] = 2 - (i % 499) / 499;
    u16[0][i] = 0x3c00 + (i % 64);
    u16[1][i] = 0x3f80 + (i % 64);
  }
  return {
    float32: time(() => reduceTo(f32[2], 0, f32[0], 0, f32[1], 0, elems, 'sum')),
    float16: time(() => reduceTo(u16[2], 0, u16[0], 0, u16[0], 0, elems, 'sum', 'float16')),
    bfloat16: time(() => reduceTo(u16[2], 0, u16[1], 0, u16[1], 0, elems, 'sum', 'bfloat16')),
  };
}
