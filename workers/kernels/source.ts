// The loader of the WGSL kernels: each op has one source, workers/kernels/NAME.wgsl
// (dist/workers/kernels/NAME.wgsl once built), and the launcher compiles it behind a prelude
// that fixes the element width. A launcher picks width 4 when the shapes and offsets allow
// vec4 accesses (a quarter of the storage accesses, which cost dearly on SwiftShader) and
// width 1 otherwise; the kernel text is the same.
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
// A kernel declares a compute-precision tensor as array<S>, indexes it by element / W, reads
// it through ld and writes through st. fp32-only tensors (optimizer state, statistics,
// workspaces) are array<V> (element / W) or array<f32>. Uniform counts stay in elements.
// Today S = V (fp32 storage, ld and st are the identity; SwiftShader inlines them).
// Mixed precision adds storage types here without touching the kernels: 16-bit values packed
// two per u32 are S = vec2u at W = 4 (ld/st unpack/pack with unpack2x16float/pack2x16float for
// fp16, bit operations for bf16); native f16 is S = vec4<f16> with `enable f16;` as the
// prelude's first line (directives must precede every declaration, which the prelude does).
// A packed 16-bit S needs W >= 2: its launchers take the vector path only.
import { readFileSync } from 'node:fs';
import type { Runtime } from '../gpu/runtime.js';

/** Elements per vector a kernel is compiled for. */
export type Width = 1 | 4;

const PRELUDES: Record<Width, string> = {
  1: `const W = 1u;
alias V = f32;
alias S = f32;
fn ld(s: S) -> V { return s; }
fn st(v: V) -> S { return v; }
fn hsum(v: V) -> f32 { return v; }
fn vdot(a: V, b: V) -> f32 { return a * b; }
fn quad(a: V, b: V, c: V, d: V) -> vec4f { return vec4f(a, b, c, d); }
fn lanes(v: vec4f, j: u32) -> V { return v[j]; }
`,
  4: `const W = 4u;
alias V = vec4f;
alias S = vec4f;
fn ld(s: S) -> V { return s; }
fn st(v: V) -> S { return v; }
fn hsum(v: V) -> f32 { return v.x + v.y + v.z + v.w; }
fn vdot(a: V, b: V) -> f32 { return dot(a, b); }
fn quad(a: V, b: V, c: V, d: V) -> vec4f { return a; }
fn lanes(v: vec4f, j: u32) -> V { return v; }
`,
};

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

/** The prelude of the given width followed by the named sources, in order. */
export function kernelSource(width: Width, ...names: string[]): string {
  return PRELUDES[width] + names.map(wgsl).join('\n');
}

/**
 * The pipeline of `names` (one op's source, or a kernel and its epilogue) at `width`, entry
 * point `entry`; compiled once per runtime.
 */
export function kernel(rt: Runtime, width: Width, names: string | string[], entry = 'main'): GPUComputePipeline {
  const list = typeof names === 'string' ? [names] : names;
  return rt.compile(`${list.join('+')} w${width}${entry === 'main' ? '' : ` ${entry}`}`, kernelSource(width, ...list), entry);
}
