// A tiny WebAssembly encoder: just what the host kernels need (the collectives' reductions and
// casts, comm/host-memory/simd.ts and simd-half.ts; the offloaded optimizer, optim/cpu-adamw-simd.ts).
// Opcodes are the finished SIMD proposal's numbering; the kernels' tests validate each module and
// check every kernel against the JS loops it replaces.
export function uleb(n: number): number[] {
  const out: number[] = [];
  do {
    let b = n & 0x7f;
    n >>>= 7;
    if (n) b |= 0x80;
    out.push(b);
  } while (n);
  return out;
}
export function sleb(n: number): number[] {
  const out: number[] = [];
  for (;;) {
    const b = n & 0x7f;
    n >>= 7;
    if ((n === 0 && !(b & 0x40)) || (n === -1 && b & 0x40)) return (out.push(b), out);
    out.push(b | 0x80);
  }
}
export const vec = (bytes: number[]) => [...uleb(bytes.length), ...bytes];
export const name = (s: string) => vec([...Buffer.from(s, 'utf8')]);
export const section = (id: number, bytes: number[]) => [id, ...vec(bytes)];

export const I32 = 0x7f,
  V128 = 0x7b;
export const LOCAL_GET = 0x20,
  LOCAL_SET = 0x21,
  LOCAL_TEE = 0x22;
export const I32_CONST = 0x41,
  I32_ADD = 0x6a,
  I32_SHL = 0x74,
  I32_EQZ = 0x45,
  I32_LT_U = 0x49;
export const BLOCK = 0x02,
  LOOP = 0x03,
  BR_IF = 0x0d,
  END = 0x0b,
  VOID = 0x40;
export const simd = (op: number) => [0xfd, ...uleb(op)];
export const V128_LOAD = 0x00,
  V128_LOAD16X4_U = 0x04,
  V128_STORE = 0x0b,
  V128_CONST = 0x0c,
  V128_AND = 0x4e,
  V128_OR = 0x50,
  V128_BITSELECT = 0x52;
export const I32X4_EQ = 0x37,
  I32X4_LT_S = 0x39,
  I32X4_GT_S = 0x3b,
  I32X4_LE_S = 0x3d,
  I16X8_NARROW_I32X4_U = 0x86,
  I32X4_SHL = 0xab,
  I32X4_SHR_U = 0xad,
  I32X4_ADD = 0xae,
  I32X4_SUB = 0xb1;
export const F32X4_NE = 0x42,
  F32X4_LT = 0x43,
  F32X4_GT = 0x44,
  F32X4_ADD = 0xe4;
/**
 * memarg: an alignment hint (log2 bytes; a hint only, unaligned accesses are allowed, but it may
 * not exceed the access's own size: 4 for a v128, 3 for an 8-byte load) and a constant offset
 */
export const mem = (offset: number, align = 4) => [align, ...uleb(offset)];
/** v128.const with `x` (an i32's bits) in all four lanes */
export const splat32 = (x: number) => {
  const b = [x & 0xff, (x >>> 8) & 0xff, (x >>> 16) & 0xff, (x >>> 24) & 0xff];
  return [...simd(V128_CONST), ...b, ...b, ...b, ...b];
};

// Every kernel has the type (out, a, b, len) -> (): byte addresses in the module's memory (out may
// equal a or b) and the length in bytes, a multiple of the kernel's step. Locals after the
// parameters: i and the three running addresses (i32), then the kernel's own v128 scratch.
export const OUT = 0,
  A = 1,
  B = 2,
  LEN = 3,
  I = 4,
  PO = 5,
  PA = 6,
  PB = 7;
/** the first v128 local */
export const V0 = 8;

/**
 * A kernel's body: `prologue`, then for i = 0, step, 2 step, ... < len: po = out + i, pa = a + i,
 * pb = b + i (2i for a side said wide: a cast's float32 side, len counting its 16-bit side's
 * bytes), then `step` (code reading pa, pb and writing po; it may use `v128Locals` locals from V0 on).
 */
export function streamKernel(
  v128Locals: number,
  step: number[],
  stepBytes: number,
  o: { prologue?: number[]; wideOut?: boolean; wideA?: boolean } = {},
): number[] {
  // a wide side (a cast's float32 side) advances two bytes for each of i's
  const at = (base: number, p: number, wide = false) => [
    LOCAL_GET,
    base,
    LOCAL_GET,
    I,
    ...(wide ? [I32_CONST, 1, I32_SHL] : []),
    I32_ADD,
    LOCAL_SET,
    p,
  ];
  const code = [
    2,
    4,
    I32,
    ...uleb(v128Locals),
    V128,
    ...(o.prologue ?? []),
    ...countedLoop(I, LEN, stepBytes, [...at(OUT, PO, o.wideOut), ...at(A, PA, o.wideA), ...at(B, PB), ...step]),
    END,
  ];
  return vec(code);
}

/**
 * Vector constants held in v128 locals, set once before the loop (ConstPool.prologue): V8 builds a
 * v128.const anew at every use, which in a loop of a few dozen of them cost more than the
 * arithmetic. Locals from `first` on, one per distinct value.
 */
export class ConstPool {
  private readonly values: number[] = [];
  constructor(private readonly first: number) {}

  /** code pushing `x` (an i32's bits) in all four lanes */
  get(x: number): number[] {
    let i = this.values.indexOf(x | 0);
    if (i < 0) i = this.values.push(x | 0) - 1;
    return [LOCAL_GET, ...uleb(this.first + i)];
  }

  get size(): number {
    return this.values.length;
  }

  /** code setting every local used so far */
  prologue(): number[] {
    return this.values.flatMap((x, i) => [...splat32(x), LOCAL_SET, ...uleb(this.first + i)]);
  }
}

/** Code running `body` for i = 0, step, 2 step, ... while i < len (not at all when len is 0); i and len are i32 locals. */
export function countedLoop(i: number, len: number, stepBytes: number, body: number[]): number[] {
  return [
    BLOCK,
    VOID,
    LOCAL_GET,
    ...uleb(len),
    I32_EQZ,
    BR_IF,
    0,
    LOOP,
    VOID,
    ...body,
    LOCAL_GET,
    ...uleb(i),
    I32_CONST,
    ...sleb(stepBytes),
    I32_ADD,
    LOCAL_TEE,
    ...uleb(i),
    LOCAL_GET,
    ...uleb(len),
    I32_LT_U,
    BR_IF,
    0,
    END,
    END,
  ];
}

/** A module's bytes: the magic number and version 1, then the sections (section()). */
export function moduleBytes(...sections: number[][]): Uint8Array {
  return new Uint8Array([0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, ...sections.flat()]);
}
