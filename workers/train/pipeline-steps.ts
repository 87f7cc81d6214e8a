// What the pipeline trainers (--strategy pp: pipeline-trainer.ts, --strategy 3d:
// three-d-trainer.ts) do alike around PipelineStage: the step's spans message, the whole-model
// checkpoint, and the end of the run. Their step loops differ in which rows a rank reads,
// which rank reports the loss and what the summary counts, and stay in their own files.
import type { CommSpan, WorldGroup } from '../comm/index.js';
import type { CharTokenizerJson } from '../data/tokenizer.js';
import type { Runtime } from '../gpu/runtime.js';
import { type GptConfig, paramSpecs } from '../model/config.js';
import type { PipelineStage, StageSpan } from '../parallel/pipeline.js';
import type { TrainJob } from '../protocol/train.js';
import { saveTrainingCheckpoint } from './checkpointing.js';
import type { Emit } from './trainer.js';

/** One step's spans message: the stage's forward/backward per micro-batch and its comm spans. */
export function stageSpansMessage(
  rank: number,
  step: number,
  stage: PipelineStage,
  spans: readonly StageSpan[],
  comm: readonly CommSpan[],
) {
  return {
    type: 'spans' as const,
    rank,
    step,
    spans: [
      ...spans.map((s) => ({ kind: s.kind, name: `stage.${stage.stage}`, stage: stage.stage, micro: s.micro, start: s.start, end: s.end })),
      ...comm.map((s) => ({
        kind: 'comm' as const,
        name: s.op,
        start: s.start,
        end: s.end,
        bytes: s.bytes,
        stage: stage.stage,
        ...(s.labels ? { labels: s.labels } : {}),
      })),
    ],
  };
}

/** Collective: every stage sends rank 0 its share (3D: its TP shards and ZeRO-1 moments gathered first); rank 0 saves the whole model. */
export async function saveWholeModel(
  stage: PipelineStage,
  job: TrainJob,
  step: number,
  config: GptConfig,
  tokenizer: CharTokenizerJson,
  emit: Emit,
): Promise<void> {
  const whole = await stage.gather();
  if (!whole) return;
  const path = await saveTrainingCheckpoint(
    job,
    { step, config, tokenizer, params: whole.params, m: whole.state.m, v: whole.state.v, optimizerStep: whole.state.step },
    new Map(paramSpecs(config).map((x) => [x.name, [...x.shape]])),
  );
  await emit({ type: 'checkpoint', step, path });
}

/** The end of a run: a comm barrier, then a store barrier before anyone closes its links. */
export async function finishRun(world: WorldGroup, rt: Runtime): Promise<void> {
  await world.barrier().wait();
  // every rank passed the barrier above before anyone closes its links: a fast rank's close
  // must not reach a peer still finishing the barrier's last round (it would abort that peer)
  await world.store.barrier('end-of-run', world.size, 60_000).catch(() => {});
  rt.destroy();
}
