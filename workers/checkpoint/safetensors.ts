// The safetensors format (https://github.com/huggingface/safetensors), written and read here:
//   [8 bytes: N, u64 little-endian] [N bytes: JSON header, padded with spaces to a multiple of 8]
//   [data: every tensor's bytes, little-endian, back to back, no holes]
// Header: { "__metadata__"?: {string: string}, NAME: { dtype, shape, data_offsets: [begin, end] } },
// offsets relative to the start of the data section.
import { readFileSync } from 'node:fs';
import { CheckpointError } from './errors.js';
import { writeFileAtomic } from '../protocol/atomic-file.js';

export type Dtype = 'F32' | 'F16' | 'BF16' | 'F64' | 'U32' | 'I32' | 'U8';
export type TensorArray = Float32Array | Float64Array | Uint32Array | Int32Array | Uint16Array | Uint8Array;

export interface Tensor {
  dtype: Dtype;
  shape: number[];
  /** F16 and BF16 hold their raw 16-bit patterns (see f16ToF32) */
  data: TensorArray;
}

export interface SafetensorsFile {
  tensors: Map<string, Tensor>;
  metadata: Record<string, string>;
}

const DTYPE_BYTES: Record<Dtype, number> = { F32: 4, F16: 2, BF16: 2, F64: 8, U32: 4, I32: 4, U8: 1 };
const MAX_HEADER = 100_000_000; // the reference implementation's limit

function arrayDtypeOk(dtype: Dtype, a: TensorArray): boolean {
  switch (dtype) {
    case 'F32':
      return a instanceof Float32Array;
    case 'F64':
      return a instanceof Float64Array;
    case 'U32':
      return a instanceof Uint32Array;
    case 'I32':
      return a instanceof Int32Array;
    case 'F16':
    case 'BF16':
      return a instanceof Uint16Array;
    case 'U8':
      return a instanceof Uint8Array;
  }
}

function numel(shape: number[]): number {
  return shape.reduce((a, x) => a * x, 1);
}

/** f32 tensor from a Float32Array (the common case). */
export function f32(shape: number[], data: Float32Array): Tensor {
  return { dtype: 'F32', shape, data };
}

/** Serialises tensors in the given order. */
export function encodeSafetensors(tensors: Iterable<[string, Tensor]>, metadata?: Record<string, string>): Buffer {
  const header: Record<string, unknown> = {};
  if (metadata && Object.keys(metadata).length > 0) {
    for (const [k, v] of Object.entries(metadata))
      if (typeof v !== 'string') throw new TypeError(`safetensors metadata ${k} must be a string`);
    header.__metadata__ = metadata;
  }
  const list = [...tensors];
  let offset = 0;
  for (const [name, t] of list) {
    if (name === '__metadata__') throw new TypeError('a tensor cannot be named __metadata__');
    if (name in header) throw new TypeError(`tensor ${name} appears twice`);
    if (!arrayDtypeOk(t.dtype, t.data)) throw new TypeError(`tensor ${name}: ${t.data.constructor.name} cannot be stored as ${t.dtype}`);
    if (numel(t.shape) !== t.data.length)
      throw new TypeError(`tensor ${name}: shape [${t.shape}] has ${numel(t.shape)} elements but data has ${t.data.length}`);
    const bytes = t.data.byteLength;
    header[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  let json = Buffer.from(JSON.stringify(header), 'utf8');
  const pad = (8 - (json.length % 8)) % 8;
  if (pad) json = Buffer.concat([json, Buffer.alloc(pad, 0x20)]);
  const out = Buffer.alloc(8 + json.length + offset);
  out.writeBigUInt64LE(BigInt(json.length), 0);
  json.copy(out, 8);
  let p = 8 + json.length;
  for (const [, t] of list) {
    // typed arrays are little-endian on every platform Node supports
    out.set(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength), p);
    p += t.data.byteLength;
  }
  return out;
}

function newArray(dtype: Dtype, bytes: Uint8Array): TensorArray {
  const copy = new Uint8Array(bytes.length); // own, aligned buffer (Buffer#slice would share memory)
  copy.set(bytes);
  const b = copy.buffer;
  switch (dtype) {
    case 'F32':
      return new Float32Array(b);
    case 'F64':
      return new Float64Array(b);
    case 'U32':
      return new Uint32Array(b);
    case 'I32':
      return new Int32Array(b);
    case 'F16':
    case 'BF16':
      return new Uint16Array(b);
    case 'U8':
      return copy;
  }
}

/** Parses and validates safetensors bytes; `file` names the source in errors. */
export function decodeSafetensors(bytes: Uint8Array, file = '<buffer>'): SafetensorsFile {
  const fail = (problem: string): never => {
    throw new CheckpointError(`corrupt safetensors file ${file}: ${problem}`);
  };
  if (bytes.length < 8) fail(`only ${bytes.length} bytes, shorter than the 8-byte header length (the file is truncated)`);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const n64 = dv.getBigUint64(0, true);
  if (n64 > BigInt(bytes.length - 8))
    fail(`header length ${n64} runs past the end of the file (${bytes.length} bytes): the file is truncated or not safetensors`);
  const n = Number(n64);
  if (n > MAX_HEADER) fail(`header length ${n} exceeds the ${MAX_HEADER}-byte limit`);
  let header: unknown;
  try {
    header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(8, 8 + n)));
  } catch (e) {
    fail(`header is not valid JSON (${(e as Error).message})`);
  }
  if (!header || typeof header !== 'object' || Array.isArray(header)) fail('header is not a JSON object');
  const dataStart = 8 + n;
  const dataLen = bytes.length - dataStart;
  const metadata: Record<string, string> = {};
  const entries: { name: string; dtype: Dtype; shape: number[]; begin: number; end: number }[] = [];
  for (const [name, v] of Object.entries(header as Record<string, unknown>)) {
    if (name === '__metadata__') {
      if (!v || typeof v !== 'object' || Array.isArray(v)) fail('__metadata__ must be an object of strings');
      for (const [k, s] of Object.entries(v as Record<string, unknown>)) {
        if (typeof s !== 'string') fail(`__metadata__.${k} must be a string`);
        metadata[k] = s as string;
      }
      continue;
    }
    const e = v as { dtype?: unknown; shape?: unknown; data_offsets?: unknown } | null;
    if (!e || typeof e !== 'object') fail(`tensor ${name}: entry is not an object`);
    const dtype = e!.dtype as Dtype;
    if (typeof dtype !== 'string' || !(dtype in DTYPE_BYTES))
      fail(`tensor ${name}: unsupported dtype ${JSON.stringify(e!.dtype)} (readable: ${Object.keys(DTYPE_BYTES).join(', ')})`);
    const shape = e!.shape;
    if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0))
      fail(`tensor ${name}: shape must be a list of non-negative integers`);
    const off = e!.data_offsets;
    if (!Array.isArray(off) || off.length !== 2 || !off.every((d) => Number.isSafeInteger(d) && d >= 0) || off[0] > off[1]) {
      fail(`tensor ${name}: data_offsets must be [begin, end] with 0 ≤ begin ≤ end`);
    }
    const [begin, end] = off as [number, number];
    const want = numel(shape as number[]) * DTYPE_BYTES[dtype];
    if (end - begin !== want)
      fail(`tensor ${name}: shape [${shape}] of ${dtype} needs ${want} bytes but data_offsets [${begin}, ${end}] span ${end - begin}`);
    entries.push({ name, dtype, shape: shape as number[], begin, end });
  }
  // the data section must be covered exactly: sorted ranges, no overlap, no hole, no excess
  const sorted = [...entries].sort((a, b) => a.begin - b.begin || a.end - b.end);
  let pos = 0;
  for (const e of sorted) {
    if (e.begin < pos) fail(`tensor ${e.name}: data_offsets [${e.begin}, ${e.end}] overlap the previous tensor (ends at ${pos})`);
    if (e.begin > pos) fail(`tensor ${e.name}: data_offsets start at ${e.begin}, leaving a hole after byte ${pos}`);
    pos = e.end;
  }
  if (pos > dataLen) fail(`the header describes ${pos} data bytes but the file holds ${dataLen}: the file is truncated`);
  if (pos < dataLen) fail(`the file holds ${dataLen} data bytes but the header describes only ${pos}: trailing bytes`);
  const tensors = new Map<string, Tensor>();
  for (const e of entries) {
    tensors.set(e.name, {
      dtype: e.dtype,
      shape: e.shape,
      data: newArray(e.dtype, bytes.subarray(dataStart + e.begin, dataStart + e.end)),
    });
  }
  return { tensors, metadata };
}

/** Writes a safetensors file atomically (temp file + fsync + rename). Returns the bytes written. */
export function writeSafetensors(path: string, tensors: Iterable<[string, Tensor]>, metadata?: Record<string, string>): Buffer {
  const buf = encodeSafetensors(tensors, metadata);
  writeFileAtomic(path, buf);
  return buf;
}

export function readSafetensors(path: string): SafetensorsFile {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (e) {
    throw new CheckpointError(
      `cannot read safetensors file ${path}: ${(e as NodeJS.ErrnoException).code === 'ENOENT' ? 'file not found' : (e as Error).message}`,
    );
  }
  return decodeSafetensors(bytes, path);
}

/** Converts IEEE half-precision bit patterns to float32. */
export function f16ToF32(bits: Uint16Array): Float32Array {
  const out = new Float32Array(bits.length);
  for (let i = 0; i < bits.length; i++) {
    const h = bits[i];
    const s = h & 0x8000 ? -1 : 1;
    const e = (h >> 10) & 0x1f;
    const m = h & 0x3ff;
    out[i] = e === 0 ? s * m * 2 ** -24 : e === 31 ? (m ? NaN : s * Infinity) : s * (1 + m / 1024) * 2 ** (e - 15);
  }
  return out;
}
