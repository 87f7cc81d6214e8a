// meta.json of a run folder: the tags and note a user gave the run (common/api/annotations.ts).
// Written whole and atomically (temp file, fsync, rename), so a crash leaves the old file or the
// new one, never half of one; read leniently, so a hand-edited or damaged file costs the run its
// tags, not its place in the list. The run's writer never touches it: a live run can be tagged.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { EMPTY_META, normalizeTags, type RunMeta, RunMetaSchema } from '../../common/api/annotations.js';
import { writeFileAtomic } from '../../workers/protocol/atomic-file.js';

export const META_FILE = 'meta.json';

export function readRunMeta(dir: string): RunMeta {
  const file = path.join(dir, META_FILE);
  if (!existsSync(file)) return { ...EMPTY_META, tags: [] };
  try {
    const r = RunMetaSchema.safeParse(JSON.parse(readFileSync(file, 'utf8')));
    return r.success ? r.data : { ...EMPTY_META, tags: [] };
  } catch {
    return { ...EMPTY_META, tags: [] };
  }
}

/** Sets the tags and/or the note (what is absent is kept); returns what the file now holds. */
export function writeRunMeta(dir: string, change: { tags?: readonly string[]; note?: string }): RunMeta {
  const old = readRunMeta(dir);
  const meta = RunMetaSchema.parse({
    tags: change.tags ? normalizeTags(change.tags) : old.tags,
    note: change.note ?? old.note,
  });
  writeFileAtomic(path.join(dir, META_FILE), `${JSON.stringify(meta, null, 2)}\n`);
  return meta;
}
