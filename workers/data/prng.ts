// Small deterministic PRNGs for data, weight init and sampling: the same numbers on every
// machine and Node version (32-bit integer ops only; no Math.random).

/** Mixes a 32-bit value (lowbias32 by Chris Wellons): a good avalanche, cheap. */
export function mix32(x: number): number {
  x = (x ^ (x >>> 16)) >>> 0;
  x = Math.imul(x, 0x7feb352d) >>> 0;
  x = (x ^ (x >>> 15)) >>> 0;
  x = Math.imul(x, 0x846ca68b) >>> 0;
  x = (x ^ (x >>> 16)) >>> 0;
  return x;
}

/** Hashes a list of non-negative integers (< 2^53) into one 32-bit seed. */
export function hashSeed(...parts: number[]): number {
  let h = 0x9e3779b9;
  for (const p of parts) {
    if (!Number.isSafeInteger(p) || p < 0) throw new RangeError(`hashSeed: parts must be non-negative safe integers, got ${p}`);
    const lo = p >>> 0;
    const hi = Math.floor(p / 0x1_0000_0000) >>> 0;
    h = mix32((h ^ lo) >>> 0);
    h = mix32((h + Math.imul(hi, 0x85ebca6b) + 0x632be5ab) >>> 0);
  }
  return h;
}

/**
 * splitmix32: a counter advanced by the golden ratio, then mixed. Its whole state is one
 * 32-bit number (`state`), so it can be saved in a checkpoint manifest and restored.
 */
export class SplitMix32 {
  state: number;
  constructor(seed: number) {
    this.state = seed >>> 0;
  }
  /** uniform 32-bit unsigned integer */
  nextU32(): number {
    this.state = (this.state + 0x9e3779b9) >>> 0;
    return mix32(this.state);
  }
  /** uniform float in [0, 1) with 53 random bits */
  nextFloat(): number {
    const hi = this.nextU32() >>> 5; // 27 bits
    const lo = this.nextU32() >>> 6; // 26 bits
    return (hi * 67108864 + lo) / 9007199254740992;
  }
  /** uniform integer in [0, n), n ≤ 2^53 */
  nextInt(n: number): number {
    if (!(n >= 1) || !Number.isSafeInteger(n)) throw new RangeError(`nextInt: n must be a positive safe integer, got ${n}`);
    return Math.floor(this.nextFloat() * n);
  }
  /** one element of a non-empty array */
  pick<T>(xs: readonly T[]): T {
    return xs[this.nextInt(xs.length)];
  }
  /** standard normal (Box-Muller) */
  normal(): number {
    let u = this.nextFloat();
    while (u <= 1e-12) u = this.nextFloat();
    const v = this.nextFloat();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }
}
