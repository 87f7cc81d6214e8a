// Random weights and tokens for the model tests, and how far GPU gradients are from the float64
// reference's. One seeded generator, so a seed gives the same numbers in every test.
import type { Params64 } from '../../reference/gpt.js';

export function rng(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s ^ (s >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0;
    return s / 4294967296;
  };
}

/** uniform in ±std around 0 (around 1 for layernorm weights), in the given tensor order */
export function randomParams(specs: readonly { name: string; shape: readonly number[] }[], seed: number, std = 0.3): Params64 {
  const r = rng(seed);
  const out: Params64 = new Map();
  for (const s of specs) {
    const n = s.shape.reduce((a, b) => a * b, 1);
    const isLnWeight = /ln_\w\.weight$|ln_f\.weight$/.test(s.name);
    out.set(
      s.name,
      Float64Array.from({ length: n }, () => (isLnWeight ? 1 : 0) + (r() * 2 - 1) * std),
    );
  }
  return out;
}

export function randomTokens(n: number, V: number, seed: number) {
  const r = rng(seed);
  return Uint32Array.from({ length: n }, () => Math.floor(r() * V));
}

export const to32 = (p: Params64) => new Map([...p].map(([k, v]) => [k, Float32Array.from(v)]));

/** per tensor of the reference: (max |gpu - ref|) / (max |ref|) */
export function gradErrors(gpu: Map<string, Float32Array>, ref: Map<string, Float64Array>): Record<string, number> {
  const errors: Record<string, number> = {};
  for (const [name, r] of ref) {
    const g = gpu.get(name);
    if (!g) throw new Error(`the GPU gradients have no ${name}`);
    let maxRef = 0;
    let maxErr = 0;
    for (let i = 0; i < r.length; i++) {
      maxRef = Math.max(maxRef, Math.abs(r[i]!));
      maxErr = Math.max(maxErr, Math.abs(g[i]! - r[i]!));
    }
    errors[name] = maxErr / Math.max(maxRef, 1e-6);
  }
  return errors;
}
