// `train --resume RUN|CKPT`'s flags: the layout ones (the same as a new run's: --strategy --world
// --dp --tp --pp --schedule --micro-batches --precision --offload-optimizer --grad-compression
// --batch-size) become the resume's layout (src-main/launch/relayout.ts); --steps sets a new
// total; --placement and --json act as for a new run. Every other setting is the run's own, so a
// flag for one (--lr, --config, --out ...) is refused rather than ignored.
import { type ResumeLayout, ResumeLayoutSchema } from '../../common/api/elastic.js';
import { CliError } from './errors.js';
import { FLAG_NAMES, type TrainArgs } from './train-flags.js';
import type { JobField } from '../../common/strategies.js';

const LAYOUT_KEYS = Object.keys(ResumeLayoutSchema.shape).filter((k) => k !== 'placement') as (keyof ResumeLayout)[];

/** The layout fields the flags set (empty: resume as the run was), or a CliError naming the flags a resume cannot take. */
export function resumeLayoutOf(a: TrainArgs): ResumeLayout {
  const req = a.request as Record<string, unknown>;
  const others = Object.keys(req).filter((k) => req[k] !== undefined && k !== 'steps' && !(LAYOUT_KEYS as string[]).includes(k));
  const flags = [
    ...others.map((k) => FLAG_NAMES(k as JobField)),
    ...(a.file ? ['--config'] : []),
    ...(a.out !== undefined ? ['--out'] : []),
  ];
  if (flags.length)
    throw new CliError(
      `${flags.join(', ')} ${flags.length > 1 ? 'do' : 'does'} not apply to --resume: a resumed run keeps its own model, data and training settings; it takes --steps and the layout flags (${LAYOUT_KEYS.map((k) => FLAG_NAMES(k as JobField)).join(' ')} --placement)`,
      2,
    );
  return Object.fromEntries(LAYOUT_KEYS.filter((k) => req[k] !== undefined).map((k) => [k, req[k]])) as ResumeLayout;
}
