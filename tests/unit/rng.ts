// Seeded random numbers for tests (kernel data, random alloc/release walks, random timings):
// the same seed gives the same sequence on every machine.

/** mulberry32: small, fast, seeded */
export function rng(seed: number) {
  let s = seed >>> 0;
  const next = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    /** float32-representable uniforms in [lo, hi) */
    f32(n: number, lo = -1, hi = 1): Float32Array {
      const a = new Float32Array(n);
      for (let i = 0; i < n; i++) a[i] = lo + (hi - lo) * next();
      return a;
    },
    /** normal(0, sd) rounded to float32 */
    normal(n: number, sd = 1): Float32Array {
      const a = new Float32Array(n);
      for (let i = 0; i < n; i++) a[i] = sd * Math.sqrt(-2 * Math.log(1 - next())) * Math.cos(2 * Math.PI * next());
      return a;
    },
    u32(n: number, below: number): Uint32Array {
      const a = new Uint32Array(n);
      for (let i = 0; i < n; i++) a[i] = Math.floor(next() * below);
      return a;
    },
  };
}
