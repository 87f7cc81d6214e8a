// Can a run folder be made at this path? Checked before anything is created, in well under a
// second: a recursive mkdir under /proc or /sys spins rather than failing, and a file or a
// read-only folder in the way would only fail after the ranks started.
import { accessSync, constants, statSync } from 'node:fs';
import path from 'node:path';

/** kernel file systems: nothing a run writes belongs there */
const SPECIAL = ['/proc', '/sys', '/dev'];

/** Why `dir` cannot hold a run folder, or null when it can (it, or the nearest folder above it, is a writable folder). */
export function outDirProblem(dir: string): string | null {
  const abs = path.resolve(dir);
  const special = SPECIAL.find((s) => abs === s || abs.startsWith(`${s}/`));
  // /dev/shm is memory the ranks use for their rings, not a place for a run
  if (special) return `${abs} is under ${special}, a kernel file system; choose a folder on a disk`;
  let at = abs;
  for (;;) {
    let st;
    try {
      st = statSync(at);
    } catch {
      const up = path.dirname(at);
      if (up === at) return `no folder above ${abs} exists`;
      at = up;
      continue;
    }
    if (!st.isDirectory()) return at === abs ? `${abs} is a file, not a folder` : `${at} is a file, so ${abs} cannot be made under it`;
    try {
      accessSync(at, constants.W_OK | constants.X_OK);
    } catch {
      return `${at} is not writable by this user${at === abs ? '' : `, so ${abs} cannot be made`}; choose a folder you can write to`;
    }
    return null;
  }
}
