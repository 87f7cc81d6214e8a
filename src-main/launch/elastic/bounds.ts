// An elastic run's bounds as the job keeps them: `--elastic MIN:MAX` / LaunchConfig.elastic checked
// against the run's own layout (it starts at its world, so MIN <= world <= MAX), the restarts
// defaulted. The job carries them (config.json), so that a resumed run is elastic as it was.
import { DEFAULT_MAX_RESTARTS, type ElasticConfig } from '../../../common/api/elastic.js';
import { type FieldError, type FieldNames, TABLE } from '../../../common/strategies.js';
import type { TrainJob } from '../../../workers/protocol/train.js';

export type ElasticBounds = Required<ElasticConfig>;

/** The bounds the job runs with, or what is wrong with them (field `elastic`, worded with `names`). */
export function elasticBounds(asked: ElasticConfig, job: Pick<TrainJob, 'parallel'>, names: FieldNames): ElasticBounds | FieldError {
  const flag = names('elastic');
  const bad = (message: string): FieldError => ({ field: 'elastic', message: `${flag} ${asked.min}:${asked.max}: ${message}` });
  const par = job.parallel;
  const world = par?.world ?? 1;
  if (!par || TABLE[par.strategy].oneRank || world < 2)
    return bad(`an elastic run needs several ranks; pick a multi-rank strategy and ${names('world')} (e.g. ddp at ${names('world')} 3)`);
  if (asked.min < 1) return bad('MIN must be at least 1 rank');
  if (asked.min > asked.max) return bad('MIN must be at most MAX (MIN:MAX ranks, e.g. 2:3)');
  if (asked.min > world) return bad(`MIN is more than the ${world} ranks the run starts with; lower MIN or raise ${names('world')}`);
  if (asked.max < world) return bad(`MAX is less than the ${world} ranks the run starts with; raise MAX or lower ${names('world')}`);
  const maxRestarts = asked.max_restarts ?? DEFAULT_MAX_RESTARTS;
  if (!Number.isInteger(maxRestarts) || maxRestarts < 0) return bad(`the restarts must be a non-negative integer, got ${maxRestarts}`);
  return { min: asked.min, max: asked.max, max_restarts: maxRestarts };
}
