// Crash-safe writes, shared by ranks (checkpoints, agent state) and the controller (run folders,
// keys, reports): a reader sees either the old content or the complete new one, never a
// partial file or a half-filled directory.
import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import path from 'node:path';

function tmpSuffix(): string {
  return `${process.pid}-${randomBytes(4).toString('hex')}`;
}

/** fsync a directory so a rename inside it survives a power loss (a no-op where unsupported). */
export function fsyncDir(dir: string): void {
  let fd: number | undefined;
  try {
    fd = openSync(dir, 'r');
    fsyncSync(fd);
  } catch {
    // some platforms (Windows) cannot open or fsync directories
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** Writes `data` to a temp file in the same directory, fsyncs it, renames it over `file`, fsyncs
 * the directory. `mode` applies from the file's creation (0o600 for keys: never readable by others). */
export function writeFileAtomic(file: string, data: Uint8Array | string, mode = 0o644): void {
  const dir = path.dirname(file);
  mkdirSync(dir, { recursive: true });
  const tmp = path.join(dir, `.${path.basename(file)}.tmp-${tmpSuffix()}`);
  const fd = openSync(tmp, 'w', mode);
  try {
    const buf = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    let off = 0;
    while (off < buf.length) off += writeSync(fd, buf, off, buf.length - off);
    fsyncSync(fd);
  } catch (e) {
    closeSync(fd);
    rmSync(tmp, { force: true });
    throw e;
  }
  closeSync(fd);
  try {
    renameSync(tmp, file);
  } catch (e) {
    rmSync(tmp, { force: true });
    throw e;
  }
  fsyncDir(dir);
}

const TMP_DIR_RE = /\.(tmp|old)-\d+-[0-9a-f]+$/;

/** True for the names commitDirAtomic uses while writing or replacing: never a finished directory. */
export function isTmpDirName(name: string): boolean {
  return TMP_DIR_RE.test(name);
}

/**
 * Builds a directory atomically: `fill` writes into `NAME.tmp-<pid>-<rand>` next to `finalDir`,
 * which is then fsynced and renamed to `finalDir`. An existing `finalDir` is replaced (moved
 * aside to `NAME.old-...`, then deleted). If `fill` throws, the temp directory is removed.
 */
export function commitDirAtomic<T>(finalDir: string, fill: (tmpDir: string) => T): T {
  const parent = path.dirname(finalDir);
  mkdirSync(parent, { recursive: true });
  const tmp = `${finalDir}.tmp-${tmpSuffix()}`;
  mkdirSync(tmp);
  let result: T;
  try {
    result = fill(tmp);
    fsyncDir(tmp);
    if (existsSync(finalDir)) {
      const old = `${finalDir}.old-${tmpSuffix()}`;
      renameSync(finalDir, old);
      renameSync(tmp, finalDir);
      fsyncDir(parent);
      rmSync(old, { recursive: true, force: true });
    } else {
      renameSync(tmp, finalDir);
    }
  } catch (e) {
    rmSync(tmp, { recursive: true, force: true });
    throw e;
  }
  fsyncDir(parent);
  return result;
}
