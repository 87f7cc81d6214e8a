// Atomic writes for the run store: a reader after any crash sees the old file or the new one,
// never half of one (temp file in the same folder, fsync, rename, fsync the folder).
import { closeSync, fsyncSync, openSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** `mode` applies from creation: 0o600 keeps keys unreadable to other users at every moment. */
export function writeFileAtomic(file: string, data: string | Uint8Array, mode = 0o644) {
  const dir = path.dirname(file);
  const tmp = path.join(dir, `.${path.basename(file)}.tmp-${process.pid}-${Math.random().toString(36).slice(2)}`);
  const fd = openSync(tmp, 'w', mode);
  try {
    writeFileSync(fd, data);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, file);
  try {
    const dfd = openSync(dir, 'r');
    fsyncSync(dfd);
    closeSync(dfd);
  } catch {
    // some filesystems cannot fsync a directory; the rename is still atomic
  }
}
