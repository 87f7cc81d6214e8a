// The loader of the WGSL kernels: each op has one source, workers/kernels/NAME.wgsl
// (dist/workers/kernels/NAME.wgsl once built), and the launcher compiles it behind a prelude
// that fixes the element width and the storage of compute-precision tensors. A launcher picks
// width 4 when the shapes and offsets allow vec4 accesses (a quarter of the storage accesses,
// which cost dearly on SwiftShader) and width 1 otherwise; the kernel text is the same.
//
// The prelude contract (what a kernel source may use; it declares nothing else):
//   const W: u32          elements per V: 1 or 4
//   alias V               the f32 vector a kernel computes with: f32 (W = 1) or vec4f (W = 4)
//   alias S               the storage element of a compute-precision tensor (activations,
//                         weights, gradients): one S holds W consecutive elements
//   fn ld(s: S) -> V      storage to compute
//   fn st(v: V) -> S      compute to storage
//   fn hsum(v: V) -> f32  sum of the W lanes, in lane order
//   fn vdot(a: V, b: V) -> f32   dot product of the W lanes
//   fn quad(a: V, b: V, c: V, d: V) -> vec4f   W = 4: a (b, c, d unused); W = 1: vec4f(a, b, c, d)
//   fn lanes(v: vec4f, j: u32) -> V            W lanes of v from lane j (j % W == 0)
//   fn elem(v: V, j: u32) -> f32               lane j of v (j < W): per-element loops over a V in
//                         element order (sums whose bits must not depend on W: crossentropy.wgsl)
//   alias S4, fn ld4(s: S4) -> vec4f             4 consecutive elements of a compute-precision
//                         tensor at any W (vec4 loads of a kernel whose epilogue may run at W = 1:
//                         matmul-tiled.wgsl); S4 = S at W = 4
// A kernel declares a compute-precision tensor as array<S>, indexes it by element / W, reads
// it through ld and writes through st. fp32-only tensors (optimizer state, statistics,
// workspaces) are array<V> (element / W) or array<f32>. Uniform counts stay in elements.
//
// S = V for fp32 storage (ld and st are the identity; SwiftShader inlines them). Mixed precision
// (workers/gpu/precision.ts) adds 16-bit storage here without touching the kernels, at W = 4 only
// (a packed S holds W >= 2 elements, so its launchers take the vector path):
//   bf16 and fp16, packed: S = vec2u, two 16-bit values per u32, lane 0 in the low half (the
//     byte order of a Uint16Array on the host); bf16 unpacks by shifting into the upper half of an
//     f32 and packs with round-to-nearest-even bit operations; fp16 with unpack2x16float /
//     pack2x16float, finite values past the largest half (65504) made infinite by hand (WGSL
//     leaves pack2x16float of them indeterminate, and loss scaling must see the overflow), NaN kept.
//   fp16 native (the device has shader-f16, Runtime.shaderF16): S = vec4<f16> with `enable f16;`
//     as the prelude's first line (directives precede every declaration). Same bytes as packed
//     fp16; ld is a conversion, st rounds through the same overflow rule.
// Arithmetic stays f32 in every variant (V = vec4f): matmul sums, reductions, statistics.
import { readFileSync } from 'node:fs';
import type { StoragePrecision } from '../gpu/precision.js';
import type { Runtime } from '../gpu/runtime.js';

/** Elements per vector a kernel is compiled for. */
export type Width = 1 | 4;

/** How a kernel stores its compute-precision tensors. */
export interface Storage {
  precision: StoragePrecision;
  /** fp16 only: native f16 storage (needs the device's shader-f16) instead of packed u32 pairs */
  nativeF16?: boolean;
}

const FP32: Storage = { precision: 'fp32' };

const F32_BODY: Record<Width, string> = {
  1: `const W = 1u;
alias V = f32;
alias S = f32;
fn ld(s: S) -> V { return s; }
fn st(v: V) -> S { return v; }
alias S4 = vec4f;
fn ld4(s: S4) -> vec4f { return s; }
`,
  4: `const W = 4u;
alias V = vec4f;
alias S = vec4f;
fn ld(s: S) -> V { return s; }
fn st(v: V) -> S { return v; }
alias S4 = vec4f;
fn ld4(s: S4) -> vec4f { return s; }
`,
};

/** 16-bit storage exists at W = 4 only, where 4 elements are one S. */
const S4_IS_S = `alias S4 = S;
fn ld4(s: S4) -> vec4f { return ld(s); }
`;

const BF16_BODY = `const W = 4u;
alias V = vec4f;
alias S = vec2u;
fn bf16x2(u: u32) -> vec2f { return vec2f(bitcast<f32>(u << 16u), bitcast<f32>(u & 0xffff0000u)); }
// round to nearest even on the bits; NaN stays a (quiet) NaN, overflow rounds to infinity
fn bf16_bits(x: f32) -> u32 {
  let b = bitcast<u32>(x);
  if ((b & 0x7fffffffu) > 0x7f800000u) { return (b >> 16u) | 0x40u; }
  return (b + 0x7fffu + ((b >> 16u) & 1u)) >> 16u;
}
fn ld(s: S) -> V { return vec4f(bf16x2(s.x), bf16x2(s.y)); }
fn st(v: V) -> S {
  return vec2u(bf16_bits(v.x) | (bf16_bits(v.y) << 16u), bf16_bits(v.z) | (bf16_bits(v.w) << 16u));
}
`;

/** fp16 packing with explicit infinities and NaN, shared by the packed and native variants. */
const FP16_PACK = `// |x| >= 65520 rounds to infinity (to nearest even); NaN stays NaN; h: pack2x16float's lane
fn fp16_fix(x: f32, h: u32) -> u32 {
  let b = bitcast<u32>(x);
  let mag = b & 0x7fffffffu;
  if (mag > 0x7f800000u) { return 0x7e00u; }
  if (mag >= 0x477ff000u) { return ((b >> 16u) & 0x8000u) | 0x7c00u; }
  return h;
}
fn fp16x2(a: vec2f) -> u32 {
  let h = pack2x16float(clamp(a, vec2f(-65504.0), vec2f(65504.0)));
  return fp16_fix(a.x, h & 0xffffu) | (fp16_fix(a.y, h >> 16u) << 16u);
}
`;

const FP16_PACKED_BODY = `const W = 4u;
alias V = vec4f;
alias S = vec2u;
${FP16_PACK}fn ld(s: S) -> V { return vec4f(unpack2x16float(s.x), unpack2x16float(s.y)); }
fn st(v: V) -> S { return vec2u(fp16x2(v.xy), fp16x2(v.zw)); }
`;

const FP16_NATIVE_BODY = `enable f16;
const W = 4u;
alias V = vec4f;
alias S = vec4<f16>;
${FP16_PACK}fn ld(s: S) -> V { return vec4f(s); }
fn st(v: V) -> S { return vec4<f16>(bitcast<vec2<f16>>(fp16x2(v.xy)), bitcast<vec2<f16>>(fp16x2(v.zw))); }
`;

/** The lane helpers, the same for every storage: they act on V. */
const LANES: Record<Width, string> = {
  1: `fn hsum(v: V) -> f32 { return v; }
fn vdot(a: V, b: V) -> f32 { return a * b; }
fn quad(a: V, b: V, c: V, d: V) -> vec4f { return vec4f(a, b, c, d); }
fn lanes(v: vec4f, j: u32) -> V { return v[j]; }
fn elem(v: V, j: u32) -> f32 { return v; }
`,
  4: `fn hsum(v: V) -> f32 { return v.x + v.y + v.z + v.w; }
fn vdot(a: V, b: V) -> f32 { return dot(a, b); }
fn quad(a: V, b: V, c: V, d: V) -> vec4f { return a; }
fn lanes(v: vec4f, j: u32) -> V { return v; }
fn elem(v: V, j: u32) -> f32 { return v[j]; }
`,
};

/** The prelude for this width and storage. */
export function prelude(width: Width, storage: Storage = FP32): string {
  const p = storage.precision;
  if (p === 'fp32') return F32_BODY[width] + LANES[width];
  if (width !== 4)
    throw new Error(
      `${p} storage packs 4 elements per S and needs width 4, but this launch took width 1 (a length or offset not a multiple of 4). ---> HINT: pad the tensor to a multiple of 4 elements`,
    );
  if (p === 'bf16') return BF16_BODY + S4_IS_S + LANES[4];
  return (storage.nativeF16 ? FP16_NATIVE_BODY : FP16_PACKED_BODY) + S4_IS_S + LANES[4];
}

const sources = new Map<string, string>();

/** The text of workers/kernels/NAME.wgsl (dist/workers/kernels/NAME.wgsl once built). */
export function wgsl(name: string): string {
  let s = sources.get(name);
  if (s === undefined) {
    s = readFileSync(new URL(`./${name}.wgsl`, import.meta.url), 'utf8');
    sources.set(name, s);
  }
  return s;
}

/** The prelude of the given width and storage followed by the named sources, in order. */
export function kernelSource(width: Width, names: readonly string[], storage: Storage = FP32): string {
  return prelude(width, storage) + names.map(wgsl).join('\n');
}

/**
 * The pipeline of `names` (one op's source, or a kernel and its epilogue) at `width`, entry
 * point `entry`, its compute-precision tensors stored at `precision` (native f16 where the
 * runtime has shader-f16); compiled once per runtime.
 */
export function kernel(
  rt: Runtime,
  width: Width,
  names: string | string[],
  entry = 'main',
  precision: StoragePrecision = 'fp32',
): GPUComputePipeline {
  const list = typeof names === 'string' ? [names] : names;
  const storage: Storage = { precision, nativeF16: precision === 'fp16' && rt.shaderF16 };
  const tag = precision === 'fp32' ? '' : ` ${precision}${storage.nativeF16 ? ' native' : ''}`;
  return rt.compile(`${list.join('+')} w${width}${tag}${entry === 'main' ? '' : ` ${entry}`}`, kernelSource(width, list, storage), entry);
}
