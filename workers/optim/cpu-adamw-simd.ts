// ZeRO-Offload's AdamW update in WebAssembly SIMD (DeepSpeed's CPU-Adam does the same with AVX):
// the shard's master weights and both moments live in one WebAssembly memory, and the update
// runs four elements a vector. The JS loop took 17-28 ns an element here (a 62M-element shard:
// over a second a step). Every operation is one IEEE binary32 operation, rounded to nearest even,
// in the JS loop's order, so the bits are the JS loop's (cpu-adamw.ts): it computes in float64
// and rounds each result to float32, which gives the same bits for +, -, *, / and sqrt.
//
//   memory = p (n f32) | m (n f32) | v (n f32) | g (BLOCK f32: the gradients, a block at a time)
//   adamw(p, m, v, g, len, clip, b1, 1-b1, b2, 1-b2, stepSize, sqrt(bc2), eps, keep):
//     G = g clip; m = b1 m + (1-b1) G; v = b2 v + ((1-b2) G) G
//     p = p keep - (stepSize m) / (sqrt(v) / sqrt(bc2) + eps)        (keep 1: no weight decay)
// A memory is at most 4 GiB, so shards over ~350M elements keep the JS loop (CpuAdamW decides).
import {
  countedLoop,
  END,
  F32X4_ADD,
  I32,
  I32_ADD,
  LOCAL_GET,
  LOCAL_SET,
  LOCAL_TEE,
  mem,
  moduleBytes,
  name,
  section,
  simd,
  uleb,
  V128,
  V128_LOAD,
  V128_STORE,
  vec,
} from '../wasm/encode.js';

const F32 = 0x7d;
const F32X4_SPLAT = 0x13,
  F32X4_SQRT = 0xe3,
  F32X4_SUB = 0xe5,
  F32X4_MUL = 0xe6,
  F32X4_DIV = 0xe7;

/** gradient elements staged per kernel call */
export const ADAMW_BLOCK = 64 * 1024;

// parameters: the four arrays' byte addresses and len (bytes, a multiple of 16), then the scalars
const [P, M, V, G, LEN] = [0, 1, 2, 3, 4];
const SCALARS = ['clip', 'b1', 'omb1', 'b2', 'omb2', 'stepSize', 'sqrtBc2', 'eps', 'keep'] as const;
const scalar = (s: (typeof SCALARS)[number]) => 5 + SCALARS.indexOf(s);
// locals: i, then the scalars splatted to vectors, then the step's G, m and v
const I = 5 + SCALARS.length;
const splat = (s: (typeof SCALARS)[number]) => I + 1 + SCALARS.indexOf(s);
const [GV, MV, VV] = [I + 1 + SCALARS.length, I + 2 + SCALARS.length, I + 3 + SCALARS.length];

const get = (l: number) => [LOCAL_GET, ...uleb(l)];
const op = simd;
/** the vector at arrays[base] + i */
const load = (base: number) => [...get(base), ...get(I), I32_ADD, ...op(V128_LOAD), ...mem(0)];
const addr = (base: number) => [...get(base), ...get(I), I32_ADD];

function body(): number[] {
  const code = [
    2,
    1,
    I32,
    ...uleb(SCALARS.length + 3),
    V128,
    ...SCALARS.flatMap((s) => [...get(scalar(s)), ...op(F32X4_SPLAT), LOCAL_SET, ...uleb(splat(s))]),
    ...countedLoop(I, LEN, 16, [
      // G = g clip
      ...load(G),
      ...get(splat('clip')),
      ...op(F32X4_MUL),
      LOCAL_SET,
      ...uleb(GV),
      // m = b1 m + (1-b1) G
      ...addr(M),
      ...get(splat('b1')),
      ...load(M),
      ...op(F32X4_MUL),
      ...get(splat('omb1')),
      ...get(GV),
      ...op(F32X4_MUL),
      ...op(F32X4_ADD),
      LOCAL_TEE,
      ...uleb(MV),
      ...op(V128_STORE),
      ...mem(0),
      // v = b2 v + ((1-b2) G) G
      ...addr(V),
      ...get(splat('b2')),
      ...load(V),
      ...op(F32X4_MUL),
      ...get(splat('omb2')),
      ...get(GV),
      ...op(F32X4_MUL),
      ...get(GV),
      ...op(F32X4_MUL),
      ...op(F32X4_ADD),
      LOCAL_TEE,
      ...uleb(VV),
      ...op(V128_STORE),
      ...mem(0),
      // p = p keep - (stepSize m) / (sqrt(v) / sqrt(bc2) + eps)
      ...addr(P),
      ...load(P),
      ...get(splat('keep')),
      ...op(F32X4_MUL),
      ...get(splat('stepSize')),
      ...get(MV),
      ...op(F32X4_MUL),
      ...get(VV),
      ...op(F32X4_SQRT),
      ...get(splat('sqrtBc2')),
      ...op(F32X4_DIV),
      ...get(splat('eps')),
      ...op(F32X4_ADD),
      ...op(F32X4_DIV),
      ...op(F32X4_SUB),
      ...op(V128_STORE),
      ...mem(0),
    ]),
    END,
  ];
  return vec(code);
}

/** The module: memory "m" imported from "e", one function "adamw". */
export function adamwModuleBytes(): Uint8Array {
  const params = [I32, I32, I32, I32, I32, ...SCALARS.map(() => F32)];
  return moduleBytes(
    section(1, [1, 0x60, ...uleb(params.length), ...params, 0]),
    section(2, [1, ...name('e'), ...name('m'), 0x02, 0x00, 0]), // import memory e.m, min 0 pages
    section(3, [1, 0]),
    section(7, [1, ...name('adamw'), 0x00, 0]),
    section(10, [1, ...body()]),
  );
}

export type AdamwKernel = (
  p: number,
  m: number,
  v: number,
  g: number,
  len: number,
  clip: number,
  b1: number,
  omb1: number,
  b2: number,
  omb2: number,
  stepSize: number,
  sqrtBc2: number,
  eps: number,
  keep: number,
) => void;

/** A shard's state in WebAssembly memory: the arrays (views of it), their addresses, and the kernel. */
export interface AdamwWasm {
  p: Float32Array;
  m: Float32Array;
  v: Float32Array;
  /** the gradient staging block (ADAMW_BLOCK floats) */
  g: Float32Array;
  at: { p: number; m: number; v: number; g: number };
  run: AdamwKernel;
}

interface Wasm {
  validate(bytes: Uint8Array): boolean;
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object, imports: object) => { exports: Record<string, unknown> };
  Memory: new (d: { initial: number; maximum: number }) => { buffer: ArrayBuffer };
}

let compiled: object | null | undefined;

/** Memory and kernel for a shard of n elements, or null where WebAssembly SIMD or the memory is not to be had. */
export function createAdamwWasm(n: number): AdamwWasm | null {
  const wasm = (globalThis as { WebAssembly?: Wasm }).WebAssembly;
  if (!wasm) return null;
  if (compiled === undefined) {
    const bytes = adamwModuleBytes();
    compiled = wasm.validate(bytes) ? new wasm.Module(bytes) : null;
  }
  if (!compiled) return null;
  const bytes = (3 * n + ADAMW_BLOCK) * 4;
  const pages = Math.ceil(bytes / 65536);
  if (pages > 65536) return null;
  try {
    const memory = new wasm.Memory({ initial: pages, maximum: pages });
    const run = new wasm.Instance(compiled, { e: { m: memory } }).exports.adamw as AdamwKernel;
    const at = { p: 0, m: 4 * n, v: 8 * n, g: 12 * n };
    const view = (byte: number, len: number) => new Float32Array(memory.buffer, byte, len);
    return { p: view(at.p, n), m: view(at.m, n), v: view(at.v, n), g: view(at.g, ADAMW_BLOCK), at, run };
  } catch {
    return null; // the memory could not be reserved: the JS loop on ordinary arrays
  }
}
