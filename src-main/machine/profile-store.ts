// Where this machine's profile lives: one JSON file in the controller's data dir
// (SHARDWISE_HOME, default ~/.shardwise), written atomically, checked against the schema when
// read. `shardwise profile` writes it; `shardwise plan` and runs.advise read it until
// `profile --refresh` measures again.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { type MachineProfile, MachineProfileSchema } from '../../common/advisor/profile.js';
import { writeFileAtomic } from '../../workers/protocol/atomic-file.js';
import { defaultHome } from '../cluster/controller-identity.js';

export const PROFILE_FILE = 'machine-profile.json';

export function profilePath(home = defaultHome()): string {
  return path.join(home, PROFILE_FILE);
}

/** The stored profile, or null when none was taken yet. A file that is not a profile is an error that says what to do. */
export function loadMachineProfile(home = defaultHome()): MachineProfile | null {
  const file = profilePath(home);
  if (!existsSync(file)) return null;
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new Error(
      `${file} is not JSON (${(e as Error).message}) ---> HINT: run 'shardwise profile --refresh' to measure this machine again`,
      { cause: e },
    );
  }
  const r = MachineProfileSchema.safeParse(raw);
  if (!r.success) {
    const issue = r.error.issues[0];
    throw new Error(
      `${file} is not a machine profile (${issue?.path.join('.') || 'root'}: ${issue?.message}) ---> HINT: run 'shardwise profile --refresh' to measure this machine again`,
    );
  }
  return r.data;
}

export function saveMachineProfile(p: MachineProfile, home = defaultHome()): string {
  const file = profilePath(home);
  writeFileAtomic(file, `${JSON.stringify(p, null, 2)}\n`);
  return file;
}
