// Element-wise float32 reductions (sum, max, min) for the collectives' hot path, in WebAssembly
// SIMD: V8 does not vectorise JS loops, and the unrolled JS loop (~1.5 ns an element here) was a
// large share of a ring all-reduce's CPU time. The same module holds the 16-bit sums and the
// float32 <-> 16-bit casts (simd-half.ts). It is a few kilobytes emitted here (no toolchain, no
// dependency: workers/wasm/encode.ts); where WebAssembly SIMD is missing the JS loops run instead.
//
// WebAssembly reads only its own memory, so operands are copied through two fixed blocks
// (A, B) of BLOCK_ELEMS floats: A <- x, B <- y, A = op(A, B) four vectors at a time, o <- A.
// The blocks stay in L2, and three memcpys plus the vector loop cost less than half the scalar
// loop (~0.65 vs ~1.5 ns an element for a 1 MiB piece on the 2-core CI machine). An operand
// that already lives in the module's memory is read in place: the memory also holds a few
// receive buffers (takeResident), which the ring hands to the TCP link as receive targets, so
// a received piece is reduced without being copied first (the copies were half of the
// reduction's cost in a profile of a 16 MiB all-reduce).
//
//   memory = A (BLOCK_ELEMS f32) | B (BLOCK_ELEMS f32) | RESIDENT_SLOTS x RESIDENT_SLOT_BYTES
//            | registered arena (registered.ts: tensors allocated here are reduced in place)
// The memory never grows (growing would detach every view of it that is out as a target), so
// the arena's size is fixed when the module is first instantiated (setArenaBytes before that).
//
// Results are bit for bit those of the JS loops, which tests/unit/comm-simd.test.ts checks:
//   sum  f32x4.add is one IEEE binary32 addition, round to nearest even; JS adds in float64
//        and rounds to float32 on the store, which gives the same bits (53 >= 2*24+2: double
//        rounding is harmless for +). Subnormals are kept by both (WebAssembly has no FTZ).
//   max  JS keeps a where (a > b || a is NaN), else b; so max(+0, -0) = -0 and NaN wins. The
//        kernel selects bits with the same mask (v128.bitselect), not f32x4.max (which orders
//        -0 below +0 and would differ). min: the same with a < b.
// NaN payloads are the one thing not promised equal (neither JS nor WebAssembly specify them).

import { HALF_STEP_BYTES, type HalfDType, halfSumBody, narrowBody, widenBody } from './simd-half.js';
import {
  F32X4_ADD,
  F32X4_GT,
  F32X4_LT,
  F32X4_NE,
  I32,
  LOCAL_GET,
  LOCAL_TEE,
  mem,
  moduleBytes,
  name,
  PA,
  PB,
  PO,
  section,
  simd,
  streamKernel,
  uleb,
  V0,
  V128_BITSELECT,
  V128_LOAD,
  V128_OR,
  V128_STORE,
} from '../../wasm/encode.js';

export type F32Op = 'sum' | 'max' | 'min';

/** floats per staging block (A and B each): 256 KiB, so both stay in a core's L2 */
const BLOCK_ELEMS = 64 * 1024;
/** receive buffers in the module's memory: one piece each (pieces are 2 MiB by default) */
export const RESIDENT_SLOT_BYTES = 2 << 20;
const RESIDENT_SLOTS = 12;
/** below this many elements the call and copies cost more than they save */
export const SIMD_MIN_ELEMS = 256;
/** floats the kernel handles per loop iteration (4 vectors); the rest (< 16) is done in JS */
const UNROLL_ELEMS = 16;

// f32 kernels' v128 scratch: the two operands of max/min
const VA = V0,
  VB = V0 + 1;

/** out[k] = op(a[k], b[k]) for one vector at byte offset `off` of this iteration */
function vectorOp(op: F32Op, off: number): number[] {
  const loadA = [LOCAL_GET, PA, ...simd(V128_LOAD), ...mem(off)];
  const loadB = [LOCAL_GET, PB, ...simd(V128_LOAD), ...mem(off)];
  const store = [...simd(V128_STORE), ...mem(off)];
  if (op === 'sum') return [LOCAL_GET, PO, ...loadA, ...loadB, ...simd(F32X4_ADD), ...store];
  // keep a where (a > b || a != a) [min: a < b], else b: exactly the JS loop's choice
  const cmp = op === 'max' ? F32X4_GT : F32X4_LT;
  return [
    LOCAL_GET,
    PO,
    ...loadA,
    LOCAL_TEE,
    VA,
    ...loadB,
    LOCAL_TEE,
    VB,
    LOCAL_GET,
    VA,
    LOCAL_GET,
    VB,
    ...simd(cmp),
    LOCAL_GET,
    VA,
    LOCAL_GET,
    VA,
    ...simd(F32X4_NE),
    ...simd(V128_OR),
    ...simd(V128_BITSELECT),
    ...store,
  ];
}

/** 4 vectors (UNROLL_ELEMS floats) a step */
const kernelBody = (op: F32Op) =>
  streamKernel(
    2,
    [0, 16, 32, 48].flatMap((off) => vectorOp(op, off)),
    UNROLL_ELEMS * 4,
  );

const OPS: readonly F32Op[] = ['sum', 'max', 'min'];
/** the module's functions, in order: the float32 ops, then the 16-bit sums */
const HALF_SUMS: readonly HalfDType[] = ['float16', 'bfloat16'];
const HALF_KERNELS = { sum: halfSumBody, narrow: narrowBody, widen: widenBody } as const;
type HalfKernel = keyof typeof HALF_KERNELS;
const halfName = (kind: HalfKernel, d: HalfDType) => `${kind}_${d === 'float16' ? 'f16' : 'bf16'}`;
const FUNCTIONS: readonly { name: string; body: () => number[] }[] = [
  ...OPS.map((op) => ({ name: op, body: () => kernelBody(op) })),
  ...(Object.keys(HALF_KERNELS) as HalfKernel[]).flatMap((kind) =>
    HALF_SUMS.map((d) => ({ name: halfName(kind, d), body: () => HALF_KERNELS[kind](d) })),
  ),
];

const RESIDENT_BASE = 2 * BLOCK_ELEMS * 4;
const ARENA_BASE = RESIDENT_BASE + RESIDENT_SLOTS * RESIDENT_SLOT_BYTES;
/** default registered arena: address space only until tensors are allocated and touched */
export const DEFAULT_ARENA_BYTES = 128 << 20;
let arenaBytes = DEFAULT_ARENA_BYTES;

/** The module's bytes: memory "m" (see the layout above) and one exported function per op. */
export function kernelModuleBytes(arena = 0): Uint8Array {
  const pages = Math.ceil((ARENA_BASE + arena) / 65536);
  return moduleBytes(
    section(1, [1, 0x60, 4, I32, I32, I32, I32, 0]), // type 0: (i32 i32 i32 i32) -> ()
    section(3, [...uleb(FUNCTIONS.length), ...FUNCTIONS.map(() => 0)]), // every function has type 0
    section(5, [1, 0x01, ...uleb(pages), ...uleb(pages)]), // one memory, fixed size
    section(7, [...uleb(FUNCTIONS.length + 1), ...name('m'), 0x02, 0, ...FUNCTIONS.flatMap((f, i) => [...name(f.name), 0x00, i])]),
    section(10, [...uleb(FUNCTIONS.length), ...FUNCTIONS.flatMap((f) => f.body())]),
  );
}

/** (out, a, b, len): byte addresses in the module's memory, len in bytes (a multiple of the kernel's step) */
type Kernel = (out: number, a: number, b: number, len: number) => void;

interface Kernels {
  memory: ArrayBuffer;
  /** the registered arena: [arenaBase, arenaBase + arenaBytes) of memory */
  arenaBase: number;
  arenaBytes: number;
  /** the staging blocks A | B, as floats and as 16-bit patterns */
  f32: Float32Array;
  u16: Uint16Array;
  run: Record<F32Op, Kernel>;
  /** the 16-bit sums and casts, by format */
  half: Record<HalfKernel, Record<HalfDType, Kernel>>;
  /** free resident receive buffers */
  free: Buffer[];
}

/** the part of the WebAssembly global used here (the project's libs leave it undeclared) */
interface Wasm {
  validate(bytes: Uint8Array): boolean;
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object) => { exports: Record<string, unknown> };
}

function instantiate(): Kernels | null {
  try {
    const wasm = (globalThis as { WebAssembly?: Wasm }).WebAssembly;
    if (!wasm) return null;
    const bytes = kernelModuleBytes(arenaBytes);
    if (!wasm.validate(bytes)) return null;
    const e = new wasm.Instance(new wasm.Module(bytes)).exports;
    const memory = (e.m as { buffer: ArrayBuffer }).buffer;
    return {
      memory,
      arenaBase: ARENA_BASE,
      arenaBytes,
      f32: new Float32Array(memory, 0, 2 * BLOCK_ELEMS),
      u16: new Uint16Array(memory, 0, 4 * BLOCK_ELEMS),
      run: { sum: e.sum, max: e.max, min: e.min } as Kernels['run'],
      half: Object.fromEntries(
        (Object.keys(HALF_KERNELS) as HalfKernel[]).map((kind) => [
          kind,
          { float16: e[halfName(kind, 'float16')], bfloat16: e[halfName(kind, 'bfloat16')] },
        ]),
      ) as Kernels['half'],
      free: Array.from({ length: RESIDENT_SLOTS }, (_, i) =>
        Buffer.from(memory, RESIDENT_BASE + i * RESIDENT_SLOT_BYTES, RESIDENT_SLOT_BYTES),
      ).reverse(),
    };
  } catch {
    return null;
  }
}

let kernels: Kernels | null | undefined;
function getKernels(): Kernels | null {
  if (kernels === undefined) kernels = process.env.SHARDWISE_COMM_SIMD === '0' ? null : instantiate();
  return kernels;
}

/**
 * Sets the registered arena's size; only before the kernels are first used (false after: the
 * memory cannot grow). 0 leaves no arena.
 */
export function setArenaBytes(bytes: number): boolean {
  if (kernels !== undefined) return false;
  arenaBytes = Math.max(0, Math.ceil(bytes / 65536) * 65536);
  return true;
}

/** The kernels' memory and its registered arena, or null where the kernels do not run. */
export function kernelArena(): { memory: ArrayBuffer; base: number; bytes: number } | null {
  const k = getKernels();
  return k ? { memory: k.memory, base: k.arenaBase, bytes: k.arenaBytes } : null;
}

/** Whether the WebAssembly SIMD kernels run here (false: every reduction uses the JS loops). */
export function simdAvailable(): boolean {
  return getKernels() !== null;
}

/**
 * A receive buffer of RESIDENT_SLOT_BYTES inside the kernels' memory (reductions read it in
 * place), or null when none is free, `bytes` is larger, or the kernels are not in use. Give it
 * back with giveResident once nothing reads or writes it any more.
 */
export function takeResident(bytes: number): Buffer | null {
  const k = getKernels();
  if (!k || bytes > RESIDENT_SLOT_BYTES) return null;
  return k.free.pop() ?? null;
}

/** Whether `b` came from takeResident. */
export function isResident(b: Buffer): boolean {
  return !!kernels && b.buffer === kernels.memory;
}

export function giveResident(b: Buffer): void {
  if (kernels && b.buffer === kernels.memory && b.length === RESIDENT_SLOT_BYTES) kernels.free.push(b);
}

// ---- the JS loops: the reference, the fallback, and the tails ----

/** o[i] = op(x[i], y[i]) in JS, i in [from, to); o may be x or y. */
export function combineF32Js(op: F32Op, o: Float32Array, x: Float32Array, y: Float32Array, from = 0, to = o.length): void {
  let i = from;
  if (op === 'sum') {
    // unrolled by 4: ~1.4 instead of ~2.6 ns an element
    for (; i + 4 <= to; i += 4) {
      o[i] = x[i] + y[i];
      o[i + 1] = x[i + 1] + y[i + 1];
      o[i + 2] = x[i + 2] + y[i + 2];
      o[i + 3] = x[i + 3] + y[i + 3];
    }
    for (; i < to; i++) o[i] = x[i] + y[i];
  } else if (op === 'max')
    for (; i < to; i++) {
      const a = x[i],
        b = y[i];
      o[i] = a > b || a !== a ? a : b;
    }
  else
    for (; i < to; i++) {
      const a = x[i],
        b = y[i];
      o[i] = a < b || a !== a ? a : b;
    }
}

/**
 * o[i] = op(x[i], y[i]) for whole arrays of one length (o may be x or y): the WebAssembly
 * kernel for long arrays when available, else the JS loop; the same bits either way.
 */
export function combineF32(op: F32Op, o: Float32Array, x: Float32Array, y: Float32Array): void {
  const k = o.length >= SIMD_MIN_ELEMS ? getKernels() : null;
  if (!k) return combineF32Js(op, o, x, y);
  stream(k, k.f32, k.run[op], UNROLL_ELEMS, o, x, y, (from, to) => combineF32Js(op, o, x, y, from, to));
}

/** A JS loop summing 16-bit patterns: out[o + i] = a[ai + i] + b[bi + i] for i < n (dtype.ts's). */
export type HalfSumLoop = (out: Uint16Array, o: number, a: Uint16Array, ai: number, b: Uint16Array, bi: number, n: number) => void;

/**
 * o[i] = x[i] + y[i] of 16-bit floats (`dtype`'s bits), whole arrays of one length (o may be x or
 * y): the WebAssembly kernel for long arrays when available, `js` for the rest and elsewhere;
 * the same bits either way (NaN payloads aside).
 */
export function sumHalf(dtype: HalfDType, o: Uint16Array, x: Uint16Array, y: Uint16Array, js: HalfSumLoop): void {
  const k = o.length >= SIMD_MIN_ELEMS ? getKernels() : null;
  if (!k) return js(o, 0, x, 0, y, 0, o.length);
  stream(k, k.u16, k.half.sum[dtype], HALF_STEP_BYTES / 2, o, x, y, (from, to) => js(o, from, x, from, y, from, to - from));
}

/**
 * float32 -> 16-bit patterns (`narrow`, round to nearest even) or back (`widen`, exact), whole
 * arrays of one length: the WebAssembly kernel for long arrays when available, `js` (a loop over
 * [from, to)) for the rest and elsewhere; the same bits either way (NaN payloads aside).
 */
export function castHalf(
  kind: 'narrow' | 'widen',
  dtype: HalfDType,
  out: Float32Array | Uint16Array,
  src: Float32Array | Uint16Array,
  js: (from: number, to: number) => void,
): void {
  const n = out.length;
  const k = n >= SIMD_MIN_ELEMS ? getKernels() : null;
  if (!k) return js(0, n);
  const fn = k.half[kind][dtype];
  const step = HALF_STEP_BYTES / 2;
  const at = (t: Float32Array | Uint16Array) => (t.buffer === k.memory ? t.byteOffset : -1);
  const [outAt, srcAt] = [at(out), at(src)];
  // the source goes through block A, the result through block B (each holds BLOCK_ELEMS floats)
  const inStage = src instanceof Float32Array ? k.f32 : k.u16;
  const outStage = out instanceof Float32Array ? k.f32 : k.u16;
  const outBase = (BLOCK_ELEMS * 4) / out.BYTES_PER_ELEMENT;
  for (let s = 0; s < n; s += BLOCK_ELEMS) {
    const e = Math.min(n, s + BLOCK_ELEMS);
    const vecEnd = s + (e - s) - ((e - s) % step);
    if (vecEnd > s) {
      if (srcAt < 0) inStage.set(src.subarray(s, vecEnd), 0);
      const o = outAt < 0 ? BLOCK_ELEMS * 4 : outAt + s * out.BYTES_PER_ELEMENT;
      fn(o, srcAt < 0 ? 0 : srcAt + s * src.BYTES_PER_ELEMENT, 0, (vecEnd - s) * 2);
      if (outAt < 0) out.set(outStage.subarray(outBase, outBase + vecEnd - s), s);
    }
    if (vecEnd < e) js(vecEnd, e);
  }
}

/**
 * Runs a kernel over whole arrays: operands in the module's memory (resident receive buffers,
 * registered tensors) are read and written where they are; the others go through the staging
 * blocks A (x, and the output) and B (y), `stage` viewing them in the arrays' element type. The
 * kernel takes a multiple of `step` elements; `tail` (a JS loop) does the rest of each block.
 */
function stream<T extends Float32Array | Uint16Array>(
  k: Kernels,
  stage: T,
  fn: Kernel,
  step: number,
  o: T,
  x: T,
  y: T,
  tail: (from: number, to: number) => void,
): void {
  const n = o.length;
  const size = o.BYTES_PER_ELEMENT;
  const at = (t: T) => (t.buffer === k.memory ? t.byteOffset : -1);
  const [oAt, xAt, yAt] = [at(o), at(x), at(y)];
  if (oAt >= 0 && xAt >= 0 && yAt >= 0) {
    // all in place (registered tensor, resident piece): no copy at all
    const vecEnd = n - (n % step);
    if (vecEnd > 0) fn(oAt, xAt, yAt, vecEnd * size);
    if (vecEnd < n) tail(vecEnd, n);
    return;
  }
  const block = (BLOCK_ELEMS * 4) / size;
  for (let s = 0; s < n; s += block) {
    const e = Math.min(n, s + block);
    const vecEnd = s + (e - s) - ((e - s) % step);
    if (vecEnd > s) {
      if (xAt < 0) stage.set(x.subarray(s, vecEnd), 0);
      if (yAt < 0) stage.set(y.subarray(s, vecEnd), block);
      fn(0, xAt < 0 ? 0 : xAt + s * size, yAt < 0 ? block * size : yAt + s * size, (vecEnd - s) * size);
      o.set(stage.subarray(0, vecEnd - s), s);
    }
    if (vecEnd < e) tail(vecEnd, e);
  }
}
