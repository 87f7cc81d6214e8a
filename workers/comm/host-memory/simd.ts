// Element-wise float32 reductions (sum, max, min) for the collectives' hot path, in WebAssembly
// SIMD: V8 does not vectorise JS loops, and the unrolled JS loop (~1.5 ns an element here) was a
// large share of a ring all-reduce's CPU time. The module is a few hundred bytes emitted below
// (no toolchain, no dependency); where WebAssembly SIMD is missing the JS loops run instead.
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

// ---- a tiny WebAssembly encoder: just what the kernels need ----
function uleb(n: number): number[] {
  const out: number[] = [];
  do {
    let b = n & 0x7f;
    n >>>= 7;
    if (n) b |= 0x80;
    out.push(b);
  } while (n);
  return out;
}
function sleb(n: number): number[] {
  const out: number[] = [];
  for (;;) {
    const b = n & 0x7f;
    n >>= 7;
    if ((n === 0 && !(b & 0x40)) || (n === -1 && b & 0x40)) return (out.push(b), out);
    out.push(b | 0x80);
  }
}
const vec = (bytes: number[]) => [...uleb(bytes.length), ...bytes];
const name = (s: string) => vec([...Buffer.from(s, 'utf8')]);
const section = (id: number, bytes: number[]) => [id, ...vec(bytes)];

const I32 = 0x7f,
  V128 = 0x7b;
const LOCAL_GET = 0x20,
  LOCAL_SET = 0x21,
  LOCAL_TEE = 0x22;
const I32_CONST = 0x41,
  I32_ADD = 0x6a,
  I32_EQZ = 0x45,
  I32_LT_U = 0x49;
const BLOCK = 0x02,
  LOOP = 0x03,
  BR_IF = 0x0d,
  END = 0x0b,
  VOID = 0x40;
const simd = (op: number) => [0xfd, ...uleb(op)];
const V128_LOAD = 0x00,
  V128_STORE = 0x0b,
  V128_OR = 0x50,
  V128_BITSELECT = 0x52;
const F32X4_NE = 0x42,
  F32X4_LT = 0x43,
  F32X4_GT = 0x44,
  F32X4_ADD = 0xe4;
/** memarg: 16-byte alignment hint, constant offset */
const mem = (offset: number) => [4, ...uleb(offset)];

// params: 0 out, 1 a, 2 b (byte addresses; out may equal a or b), 3 len (bytes, a multiple of 64)
// locals: 4 i, 5 po, 6 pa, 7 pb (i32); 8 va, 9 vb (v128)
const [OUT, A, B, LEN, I, PO, PA, PB, VA, VB] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9];

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

function kernelBody(op: F32Op): number[] {
  const code = [
    2,
    4,
    I32,
    2,
    V128, // locals: 4 x i32, 2 x v128
    BLOCK,
    VOID,
    LOCAL_GET,
    LEN,
    I32_EQZ,
    BR_IF,
    0,
    LOOP,
    VOID,
    LOCAL_GET,
    OUT,
    LOCAL_GET,
    I,
    I32_ADD,
    LOCAL_SET,
    PO,
    LOCAL_GET,
    A,
    LOCAL_GET,
    I,
    I32_ADD,
    LOCAL_SET,
    PA,
    LOCAL_GET,
    B,
    LOCAL_GET,
    I,
    I32_ADD,
    LOCAL_SET,
    PB,
    ...vectorOp(op, 0),
    ...vectorOp(op, 16),
    ...vectorOp(op, 32),
    ...vectorOp(op, 48),
    LOCAL_GET,
    I,
    I32_CONST,
    ...sleb(UNROLL_ELEMS * 4),
    I32_ADD,
    LOCAL_TEE,
    I,
    LOCAL_GET,
    LEN,
    I32_LT_U,
    BR_IF,
    0,
    END,
    END,
    END,
  ];
  return vec(code);
}

const OPS: readonly F32Op[] = ['sum', 'max', 'min'];

const RESIDENT_BASE = 2 * BLOCK_ELEMS * 4;
const ARENA_BASE = RESIDENT_BASE + RESIDENT_SLOTS * RESIDENT_SLOT_BYTES;
/** default registered arena: address space only until tensors are allocated and touched */
export const DEFAULT_ARENA_BYTES = 128 << 20;
let arenaBytes = DEFAULT_ARENA_BYTES;

/** The module's bytes: memory "m" (see the layout above) and one exported function per op. */
export function kernelModuleBytes(arena = 0): Uint8Array {
  const pages = Math.ceil((ARENA_BASE + arena) / 65536);
  const bytes = [
    0x00,
    0x61,
    0x73,
    0x6d,
    0x01,
    0x00,
    0x00,
    0x00,
    ...section(1, [1, 0x60, 4, I32, I32, I32, I32, 0]), // type 0: (i32 i32 i32 i32) -> ()
    ...section(3, [...uleb(OPS.length), ...OPS.map(() => 0)]), // one function of type 0 per op
    ...section(5, [1, 0x01, ...uleb(pages), ...uleb(pages)]), // one memory, fixed size
    ...section(7, [...uleb(OPS.length + 1), ...name('m'), 0x02, 0, ...OPS.flatMap((op, i) => [...name(op), 0x00, i])]),
    ...section(10, [...uleb(OPS.length), ...OPS.flatMap((op) => kernelBody(op))]),
  ];
  return new Uint8Array(bytes);
}

interface Kernels {
  memory: ArrayBuffer;
  /** the registered arena: [arenaBase, arenaBase + arenaBytes) of memory */
  arenaBase: number;
  arenaBytes: number;
  f32: Float32Array;
  run: Record<F32Op, (out: number, a: number, b: number, len: number) => void>;
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
      run: { sum: e.sum, max: e.max, min: e.min } as Kernels['run'],
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
 * kernel for long arrays when available, else the JS loop; the same bits either way. Operands
 * in the module's memory (resident receive buffers, registered tensors) are read and written
 * where they are; the others go through the staging blocks A (x, and the output) and B (y).
 */
export function combineF32(op: F32Op, o: Float32Array, x: Float32Array, y: Float32Array): void {
  const n = o.length;
  const k = n >= SIMD_MIN_ELEMS ? getKernels() : null;
  if (!k) return combineF32Js(op, o, x, y);
  const { f32, run, memory } = k;
  const fn = run[op];
  const xAt = x.buffer === memory ? x.byteOffset : -1;
  const yAt = y.buffer === memory ? y.byteOffset : -1;
  const oAt = o.buffer === memory ? o.byteOffset : -1;
  if (oAt >= 0 && xAt >= 0 && yAt >= 0) {
    // all in place (registered tensor, resident piece): no copy at all
    const vecEnd = n & ~(UNROLL_ELEMS - 1);
    if (vecEnd > 0) fn(oAt, xAt, yAt, vecEnd * 4);
    if (vecEnd < n) combineF32Js(op, o, x, y, vecEnd, n);
    return;
  }
  for (let s = 0; s < n; s += BLOCK_ELEMS) {
    const e = Math.min(n, s + BLOCK_ELEMS);
    const vecEnd = s + ((e - s) & ~(UNROLL_ELEMS - 1));
    if (vecEnd > s) {
      if (xAt < 0) f32.set(x.subarray(s, vecEnd), 0);
      if (yAt < 0) f32.set(y.subarray(s, vecEnd), BLOCK_ELEMS);
      fn(0, xAt < 0 ? 0 : xAt + s * 4, yAt < 0 ? BLOCK_ELEMS * 4 : yAt + s * 4, (vecEnd - s) * 4);
      o.set(f32.subarray(0, vecEnd - s), s);
    }
    if (vecEnd < e) combineF32Js(op, o, x, y, vecEnd, e);
  }
}
