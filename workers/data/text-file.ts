// Loads a user's text file as a dataset. Every failure is one DataError line that names the
// file, says what is wrong with it and what to do.
import { readFileSync, statSync } from 'node:fs';
import { DataError } from './errors.js';

/** Offset of the first byte that breaks UTF-8 (overlongs, surrogates and > U+10FFFF included), or -1. */
export function firstInvalidUtf8(b: Uint8Array): number {
  let i = 0;
  const n = b.length;
  while (i < n) {
    const c = b[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    let len: number;
    let min: number;
    if (c >= 0xc2 && c <= 0xdf) [len, min] = [2, 0x80];
    else if (c >= 0xe0 && c <= 0xef) [len, min] = [3, 0x800];
    else if (c >= 0xf0 && c <= 0xf4) [len, min] = [4, 0x10000];
    else return i;
    if (i + len > n) return i;
    let cp = c & (0xff >> (len + 1));
    for (let k = 1; k < len; k++) {
      const cc = b[i + k];
      if ((cc & 0xc0) !== 0x80) return i;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
    i += len;
  }
  return -1;
}

/** Reads a UTF-8 text file (a leading BOM is dropped). */
export function loadTextFile(path: string): string {
  let st;
  try {
    st = statSync(path);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') {
      throw new DataError(`dataset file not found: ${path} (check the path, or use a built-in dataset such as builtin:grammar)`);
    }
    throw new DataError(`cannot read dataset file ${path}: ${(e as Error).message}`);
  }
  if (st.isDirectory()) throw new DataError(`dataset path is a directory, not a file: ${path} (pass one UTF-8 text file)`);
  if (!st.isFile()) throw new DataError(`dataset path is not a regular file: ${path} (pass one UTF-8 text file)`);
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (e) {
    throw new DataError(`cannot read dataset file ${path}: ${(e as Error).message}`);
  }
  if (bytes.length === 0) throw new DataError(`dataset file is empty: ${path} (give it some text to train on)`);
  const nul = bytes.indexOf(0);
  if (nul >= 0) throw new DataError(`dataset file looks binary: ${path} has a NUL byte at offset ${nul} (pass a UTF-8 text file)`);
  const bad = firstInvalidUtf8(bytes);
  if (bad >= 0) {
    throw new DataError(
      `dataset file is not valid UTF-8: ${path} has an invalid byte sequence at offset ${bad} (convert it to UTF-8, e.g. iconv -t UTF-8)`,
    );
  }
  let text = bytes.toString('utf8');
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  if (text.length === 0) throw new DataError(`dataset file is empty: ${path} (it only holds a byte-order mark; give it some text)`);
  return text;
}
