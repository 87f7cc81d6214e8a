import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadTextFile, firstInvalidUtf8 } from '../../../workers/data/text-file.js';
import { loadDataset } from '../../../workers/data/dataset.js';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'sw-text-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('text file datasets: one clear error line per bad file', () => {
  it('loads UTF-8 text and drops a BOM', () => {
    const f = path.join(dir, 'ok.txt');
    writeFileSync(f, '\ufeffhéllo 😀\n');
    expect(loadTextFile(f)).toBe('héllo 😀\n');
  });

  it('missing file', () => {
    const f = path.join(dir, 'nope.txt');
    expect(() => loadTextFile(f)).toThrow(
      `dataset file not found: ${f} (check the path, or use a built-in dataset such as builtin:grammar)`,
    );
  });

  it('directory', () => {
    const d = path.join(dir, 'sub');
    mkdirSync(d);
    expect(() => loadTextFile(d)).toThrow(`dataset path is a directory, not a file: ${d}`);
  });

  it('empty file', () => {
    const f = path.join(dir, 'empty.txt');
    writeFileSync(f, '');
    expect(() => loadTextFile(f)).toThrow(`dataset file is empty: ${f} (give it some text to train on)`);
  });

  it('binary file with a NUL byte at offset 3', () => {
    const f = path.join(dir, 'bin.dat');
    writeFileSync(f, Buffer.from([0x61, 0x62, 0x63, 0x00, 0xff]));
    expect(() => loadTextFile(f)).toThrow(`dataset file looks binary: ${f} has a NUL byte at offset 3 (pass a UTF-8 text file)`);
  });

  it('invalid UTF-8 (Latin-1 é at offset 1)', () => {
    const f = path.join(dir, 'latin1.txt');
    writeFileSync(f, Buffer.from([0x63, 0xe9, 0x74, 0x65]));
    expect(() => loadTextFile(f)).toThrow(`dataset file is not valid UTF-8: ${f} has an invalid byte sequence at offset 1`);
  });

  it('UTF-8 validator rejects overlongs, surrogates, truncation; accepts 4-byte sequences', () => {
    expect(firstInvalidUtf8(Buffer.from('a😀é中', 'utf8'))).toBe(-1);
    expect(firstInvalidUtf8(Uint8Array.from([0x61, 0xc0, 0x80]))).toBe(1); // overlong NUL
    expect(firstInvalidUtf8(Uint8Array.from([0xed, 0xa0, 0x80]))).toBe(0); // U+D800
    expect(firstInvalidUtf8(Uint8Array.from([0x61, 0x62, 0xf0, 0x9f, 0x98]))).toBe(2); // truncated
    expect(firstInvalidUtf8(Uint8Array.from([0xf4, 0x90, 0x80, 0x80]))).toBe(0); // > U+10FFFF
  });

  it('too small: 100 chars cannot give block 64 a window in train and validation (needs 641)', () => {
    const f = path.join(dir, 'small.txt');
    writeFileSync(f, 'abcd'.repeat(25));
    expect(() => loadDataset(f, 64)).toThrow(
      `dataset file ${f} is too small: 100 tokens, but block_size 64 needs 65 tokens in both the training and the validation part (last 10%), so at least 641 tokens: use a longer text or a smaller block size`,
    );
    writeFileSync(f, 'abcd'.repeat(200).slice(0, 641));
    const d = loadDataset(f, 64);
    expect(d.val.length).toBe(65);
    writeFileSync(f, 'abcd'.repeat(200).slice(0, 640));
    expect(() => loadDataset(f, 64)).toThrow(/too small: 640 tokens/);
  });
});
