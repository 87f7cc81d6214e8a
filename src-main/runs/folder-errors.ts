// A run folder's file that does not read as it should, said whole: the folder, the file and each
// field with what was expected and what is there, one line per problem
// (`run folder X: config.json: train.steps: expected number, got "ten"`).
import type { z } from 'zod';

/** A run folder file that is missing, not JSON or of the wrong shape. */
export class RunFileError extends Error {
  override name = 'RunFileError';
}

function shown(v: unknown): string {
  if (v === undefined) return 'nothing';
  const s = JSON.stringify(v);
  return s.length > 60 ? `${s.slice(0, 57)}...` : s;
}

/** One line per zod issue: `run folder DIR: FILE: a.b: expected ..., got ...`. */
export function issueLines(dir: string, file: string, issues: readonly z.core.$ZodIssue[]): string[] {
  return issues.map((i) => {
    const where = i.path.length ? i.path.map(String).join('.') : '(the whole file)';
    const input = (i as { input?: unknown }).input;
    let what: string;
    if (i.code === 'invalid_type') what = `expected ${i.expected}, got ${shown(input)}`;
    else if (i.code === 'unrecognized_keys') what = `unknown key${i.keys.length > 1 ? 's' : ''} ${i.keys.map((k) => `"${k}"`).join(', ')}`;
    else what = `${i.message.replace(/^Invalid input: /, '')}${input !== undefined ? `, got ${shown(input)}` : ''}`;
    return `run folder ${dir}: ${file}: ${where}: ${what}`;
  });
}

/** `text` as JSON, or a RunFileError naming the folder and the file. */
export function parseJsonFile(dir: string, file: string, text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (e) {
    throw new RunFileError(`run folder ${dir}: ${file} is not valid JSON (${(e as Error).message})`, { cause: e });
  }
}

/** `value` checked against `schema`, or a RunFileError with every problem, one line each. */
export function checkFile<T>(dir: string, file: string, schema: z.ZodType<T>, value: unknown): T {
  const r = schema.safeParse(value, { reportInput: true });
  if (r.success) return r.data;
  throw new RunFileError(issueLines(dir, file, r.error.issues).join('\n'));
}
