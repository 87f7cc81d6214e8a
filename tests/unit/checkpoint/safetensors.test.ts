import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  decodeSafetensors,
  encodeSafetensors,
  f16ToF32,
  readSafetensors,
  writeSafetensors,
  type Tensor,
} from '../../../workers/checkpoint/safetensors.js';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'sw-st-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A valid file with a hand-written header, to corrupt in the tests. */
function rawFile(header: string, data: Uint8Array): Buffer {
  const h = Buffer.from(header, 'utf8');
  const out = Buffer.alloc(8 + h.length + data.length);
  out.writeBigUInt64LE(BigInt(h.length), 0);
  h.copy(out, 8);
  out.set(data, 8 + h.length);
  return out;
}

describe('safetensors', () => {
  it('writes the exact bytes of a known file: {"a": F32 [2] = [1, 2]} is 72 bytes', () => {
    const buf = encodeSafetensors([['a', { dtype: 'F32', shape: [2], data: Float32Array.of(1, 2) }]]);
    expect(buf.length).toBe(72);
    expect([...buf.subarray(0, 8)]).toEqual([56, 0, 0, 0, 0, 0, 0, 0]); // 54-byte JSON padded to 56
    expect(buf.subarray(8, 64).toString('utf8')).toBe('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}  ');
    expect([...buf.subarray(64)]).toEqual([0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40]);
  });

  it('round-trips F32/U32/F16 tensors and metadata bit-exactly (NaN payloads, -0, denormals)', () => {
    const weird = new Float32Array(new Uint32Array([0x7fc00001, 0x80000000, 0x00000001, 0x3f800000, 0xff800000, 0x12345678]).buffer);
    const tensors: [string, Tensor][] = [
      ['w', { dtype: 'F32', shape: [2, 3], data: weird }],
      ['ids', { dtype: 'U32', shape: [3], data: Uint32Array.of(0, 7, 0xffffffff) }],
      ['h', { dtype: 'F16', shape: [3], data: Uint16Array.of(0x3c00, 0xc000, 0x0001) }],
      ['empty', { dtype: 'F32', shape: [0, 4], data: new Float32Array(0) }],
    ];
    const f = path.join(dir, 'rt.safetensors');
    writeSafetensors(f, tensors, { format: 'pt', note: 'hi' });
    const back = readSafetensors(f);
    expect(back.metadata).toEqual({ format: 'pt', note: 'hi' });
    expect([...back.tensors.keys()]).toEqual(['w', 'ids', 'h', 'empty']);
    const w = back.tensors.get('w')!;
    expect(w.shape).toEqual([2, 3]);
    expect(new Uint32Array((w.data as Float32Array).buffer)).toEqual(new Uint32Array(weird.buffer));
    expect(back.tensors.get('ids')!.data).toEqual(Uint32Array.of(0, 7, 0xffffffff));
    expect([...f16ToF32(back.tensors.get('h')!.data as Uint16Array)]).toEqual([1, -2, 2 ** -24]);
    expect(back.tensors.get('empty')!.shape).toEqual([0, 4]);
    // the header is padded with spaces to a multiple of 8
    const bytes = readFileSync(f);
    expect(Number(bytes.readBigUInt64LE(0)) % 8).toBe(0);
  });

  it('refuses to write a shape that does not match the data', () => {
    expect(() => encodeSafetensors([['a', { dtype: 'F32', shape: [3], data: new Float32Array(2) }]])).toThrow(
      'tensor a: shape [3] has 3 elements but data has 2',
    );
  });

  describe('detects corruption with the file name and the problem', () => {
    const good = encodeSafetensors([
      ['a', { dtype: 'F32', shape: [2], data: Float32Array.of(1, 2) }],
      ['b', { dtype: 'F32', shape: [1], data: Float32Array.of(3) }],
    ]);

    it('truncated data (last 4 bytes cut off)', () => {
      expect(() => decodeSafetensors(good.subarray(0, good.length - 4), 'x.safetensors')).toThrow(
        'corrupt safetensors file x.safetensors: the header describes 12 data bytes but the file holds 8: the file is truncated',
      );
    });

    it('file shorter than 8 bytes', () => {
      expect(() => decodeSafetensors(good.subarray(0, 5), 'x.safetensors')).toThrow(/only 5 bytes, shorter than the 8-byte header length/);
    });

    it('header length larger than the file', () => {
      const b = Buffer.from(good);
      b.writeBigUInt64LE(1_000_000n, 0);
      expect(() => decodeSafetensors(b, 'x.safetensors')).toThrow(
        `corrupt safetensors file x.safetensors: header length 1000000 runs past the end of the file (${good.length} bytes)`,
      );
    });

    it('bad JSON', () => {
      const b = Buffer.from(good);
      b[8] = 0x5b; // '{' -> '['
      expect(() => decodeSafetensors(b, 'x.safetensors')).toThrow(/corrupt safetensors file x.safetensors: header is not valid JSON/);
    });

    it('shape × dtype size differs from the byte range', () => {
      const f = rawFile('{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}', new Uint8Array(8));
      expect(() => decodeSafetensors(f, 'x.safetensors')).toThrow(
        'tensor a: shape [3] of F32 needs 12 bytes but data_offsets [0, 8] span 8',
      );
    });

    it('offsets out of range, overlapping, holes, trailing bytes, bad dtype', () => {
      const d = new Uint8Array(8);
      expect(() => decodeSafetensors(rawFile('{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}', d))).toThrow(
        /describes 16 data bytes but the file holds 8/,
      );
      expect(() =>
        decodeSafetensors(
          rawFile('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', d),
        ),
      ).toThrow(/overlap the previous tensor/);
      expect(() => decodeSafetensors(rawFile('{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', d))).toThrow(
        /leaving a hole after byte 0/,
      );
      expect(() => decodeSafetensors(rawFile('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', d))).toThrow(/trailing bytes/);
      expect(() => decodeSafetensors(rawFile('{"a":{"dtype":"Q4","shape":[1],"data_offsets":[0,8]}}', d))).toThrow(
        /unsupported dtype "Q4"/,
      );
      expect(() => decodeSafetensors(rawFile('{"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}}', d))).toThrow(/0 ≤ begin ≤ end/);
      expect(() => decodeSafetensors(rawFile('{"__metadata__":{"k":1}}', new Uint8Array(0)))).toThrow(/__metadata__.k must be a string/);
    });

    it('a missing file names the path', () => {
      const f = path.join(dir, 'none.safetensors');
      expect(() => readSafetensors(f)).toThrow(`cannot read safetensors file ${f}: file not found`);
    });
  });
});
