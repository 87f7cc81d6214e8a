// Binary frames of the data path: a fixed 40-byte little-endian header, then the payload,
// either inline in the same WebSocket message (small payloads: one syscall, one copy) or as the
// next message on the connection (large payloads: sent straight from the tensor, no copy).
//
//  off size field
//   0  u32  magic 'SWC1'
//   4  u8   version
//   5  u8   kind        1 = collective, 2 = point-to-point, 3 = link control (shm-ring.ts)
//   6  u8   dtype       1 = float32, 2 = float16, 3 = bfloat16 (both as Uint16Array bits)
//   7  u8   flags       bit 0: payload follows as the next message
//                       bit 1: payload is in the sender's shared-memory ring, at `ringPos`
//   8  u32  frameSeq    per connection and direction, +1 per frame: detects lost/reordered frames
//  12  u32  group       process-group id
//  16  u32  seq         collective sequence number in the group | p2p tag
//  20  u32  step        algorithm step (collective) | message index per (peer, tag) (p2p)
//  24  u32  offset      first element of the payload inside the operation's buffer
//  28  u32  bytes       payload length
//  32  u32  check       collective: fingerprint of (op, reduction, dtype, numel, root, algorithm) | p2p: numel
//  36  u32  ringPos     ring position of a shared-memory payload (flag bit 1), else 0
import { COMM_PROTOCOL_VERSION } from '../../protocol/comm.js';
import { FrameError } from '../errors.js';

export const HEADER_BYTES = 40;
export const MAGIC = 0x31435753; // 'SWC1' read as little-endian u32
/** Payloads up to this size travel inside the header's message. */
export const INLINE_MAX_BYTES = 16 * 1024;

export const enum FrameKind {
  Collective = 1,
  P2P = 2,
  /** between the two ends of one connection (shared-memory ring setup and credits), not a group */
  Control = 3,
}
export const FLAG_PAYLOAD_FOLLOWS = 1;
export const FLAG_PAYLOAD_SHM = 2;

export type DType = 'float32' | 'float16' | 'bfloat16';
export const DTYPE_CODE: Record<DType, number> = { float32: 1, float16: 2, bfloat16: 3 };
export const DTYPE_BYTES: Record<DType, number> = { float32: 4, float16: 2, bfloat16: 2 };
const CODE_DTYPE: Record<number, DType> = { 1: 'float32', 2: 'float16', 3: 'bfloat16' };

export interface FrameHeader {
  kind: FrameKind;
  dtype: DType;
  flags: number;
  frameSeq: number;
  group: number;
  seq: number;
  step: number;
  offset: number;
  bytes: number;
  check: number;
  /** ring position of a shared-memory payload (FLAG_PAYLOAD_SHM); 0 otherwise */
  ringPos?: number;
}

export function encodeHeader(h: FrameHeader, into?: Buffer): Buffer {
  const b = into ?? Buffer.allocUnsafe(HEADER_BYTES);
  b.writeUInt32LE(MAGIC, 0);
  b[4] = COMM_PROTOCOL_VERSION;
  b[5] = h.kind;
  b[6] = DTYPE_CODE[h.dtype];
  b[7] = h.flags;
  b.writeUInt32LE(h.frameSeq >>> 0, 8);
  b.writeUInt32LE(h.group >>> 0, 12);
  b.writeUInt32LE(h.seq >>> 0, 16);
  b.writeUInt32LE(h.step >>> 0, 20);
  b.writeUInt32LE(h.offset >>> 0, 24);
  b.writeUInt32LE(h.bytes >>> 0, 28);
  b.writeUInt32LE(h.check >>> 0, 32);
  b.writeUInt32LE((h.ringPos ?? 0) >>> 0, 36);
  return b;
}

/** Parses and validates a header; throws FrameError with the reason on any violation. */
export function decodeHeader(b: Buffer, maxPayloadBytes: number): FrameHeader {
  if (b.length < HEADER_BYTES) throw new FrameError(`frame of ${b.length} bytes is shorter than the ${HEADER_BYTES}-byte header`);
  const magic = b.readUInt32LE(0);
  if (magic !== MAGIC) throw new FrameError(`bad magic 0x${magic.toString(16)}`);
  if (b[4] !== COMM_PROTOCOL_VERSION) throw new FrameError(`frame version ${b[4]}, expected ${COMM_PROTOCOL_VERSION}`);
  const kind = b[5];
  if (kind !== FrameKind.Collective && kind !== FrameKind.P2P && kind !== FrameKind.Control)
    throw new FrameError(`unknown frame kind ${kind}`);
  const dtype = CODE_DTYPE[b[6]];
  if (!dtype) throw new FrameError(`unknown dtype code ${b[6]}`);
  const flags = b[7];
  if ((flags & ~(FLAG_PAYLOAD_FOLLOWS | FLAG_PAYLOAD_SHM)) !== 0 || flags === (FLAG_PAYLOAD_FOLLOWS | FLAG_PAYLOAD_SHM))
    throw new FrameError(`unknown flags 0x${flags.toString(16)}`);
  const ringPos = b.readUInt32LE(36);
  if (ringPos !== 0 && !(flags & FLAG_PAYLOAD_SHM)) throw new FrameError('ring position set on a frame without a shared-memory payload');
  if (kind === FrameKind.Control && flags !== 0) throw new FrameError('a control frame carries its payload inline');
  const h: FrameHeader = {
    kind,
    dtype,
    flags,
    frameSeq: b.readUInt32LE(8),
    group: b.readUInt32LE(12),
    seq: b.readUInt32LE(16),
    step: b.readUInt32LE(20),
    offset: b.readUInt32LE(24),
    bytes: b.readUInt32LE(28),
    check: b.readUInt32LE(32),
    ringPos,
  };
  if (h.bytes > maxPayloadBytes) throw new FrameError(`payload of ${h.bytes} bytes exceeds the ${maxPayloadBytes}-byte limit`);
  if (kind !== FrameKind.Control && h.bytes % DTYPE_BYTES[dtype] !== 0)
    throw new FrameError(`payload of ${h.bytes} bytes is not a whole number of ${dtype} elements`);
  const inline = b.length - HEADER_BYTES;
  if (flags & (FLAG_PAYLOAD_FOLLOWS | FLAG_PAYLOAD_SHM)) {
    if (inline !== 0) throw new FrameError('a header announcing a separate payload carries inline bytes');
    if (h.bytes <= INLINE_MAX_BYTES) throw new FrameError(`a ${h.bytes}-byte payload must be inline`);
  } else if (inline !== h.bytes) throw new FrameError(`inline payload of ${inline} bytes, header says ${h.bytes}`);
  return h;
}

/** 32-bit FNV-1a over the numbers that all ranks must agree on for one collective. */
export function fingerprint(...parts: (number | string)[]): number {
  let h = 0x811c9dc5;
  for (const p of parts) {
    const s = String(p) + '|';
    for (let i = 0; i < s.length; i++) {
      h ^= s.charCodeAt(i);
      h = Math.imul(h, 0x01000193);
    }
  }
  return h >>> 0;
}
