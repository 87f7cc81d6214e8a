// A run's tags and note (W&B's tags and notes): what a user writes about a run to find it again
// ("baseline", "lr sweep", "diverged at step 900: lr too high"). Kept in the run folder's
// meta.json (src-main/runs/run-meta.ts), so they travel with the folder and outlive the
// controller; runs.annotate writes them, runs.list shows them. Both ends check them with these
// schemas, and a bad tag or note is refused with the rule it broke.
import { z } from 'zod';
import { RunIdSchema } from './launch-config.js';

export const MAX_TAGS = 20;
export const MAX_NOTE_CHARS = 2000;

export const TagSchema = z
  .string()
  .trim()
  .min(1, 'a tag cannot be empty')
  .max(40, 'a tag is at most 40 characters')
  .regex(/^[\p{L}\p{N}_.:/+ -]+$/u, 'a tag is letters, digits, spaces and _ . : / + -');

export const RunMetaSchema = z.object({
  tags: z.array(TagSchema).max(MAX_TAGS, `at most ${MAX_TAGS} tags`),
  note: z.string().max(MAX_NOTE_CHARS, `a note is at most ${MAX_NOTE_CHARS} characters`),
});
export type RunMeta = z.infer<typeof RunMetaSchema>;

export const EMPTY_META: RunMeta = { tags: [], note: '' };

/** runs.annotate: the tags (the whole new list) and/or the note; what is absent stays as it was. */
export const AnnotateParamsSchema = z
  .strictObject({ runId: RunIdSchema, tags: RunMetaSchema.shape.tags.optional(), note: RunMetaSchema.shape.note.optional() })
  .refine((p) => p.tags !== undefined || p.note !== undefined, { message: 'give tags, a note or both', path: ['tags'] });

/** Tags as the list keeps them: trimmed, each once, in the order first given. */
export const normalizeTags = (tags: readonly string[]): string[] => [...new Set(tags.map((t) => t.trim()))];
