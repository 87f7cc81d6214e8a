// A training run's state in a checkpoint (checkpoint.ts): the whole model's tensors by name, a
// manifest with the job, data position and tokenizer, fp16's loss scaler, a gradient-compression
// run's hook record (workers/comm-hooks/hook-state.ts); loading gives back what the training
// loop and the eval/sample tools need to continue.
import type { CharTokenizerJson } from '../data/tokenizer.js';
import { type GptConfig, paramSpecs } from '../model/config.js';
import type { LossScalerState } from '../precision/loss-scaler.js';
import type { TrainJob } from '../protocol/train.js';
import { type CommHookCheckpoint, loadCheckpoint, saveCheckpoint, type TensorMap } from './checkpoint.js';

export interface TrainingState {
  step: number;
  config: GptConfig;
  tokenizer: CharTokenizerJson;
  /** the whole model's weights and AdamW state (its moments and step count), in the model's own shapes */
  params: Map<string, Float32Array>;
  state: { m: Map<string, Float32Array>; v: Map<string, Float32Array>; step: number };
  /** a gradient-compression run's setting and every data-parallel rank's hook state */
  commHook?: CommHookCheckpoint;
  /** fp16: the loss scaler's state */
  lossScaler?: LossScalerState;
}

export async function saveTrainingCheckpoint(job: TrainJob, s: TrainingState): Promise<string> {
  const shapes = new Map(paramSpecs(s.config).map((r) => [r.name, [...r.shape]]));
  const withShapes = (values: Map<string, Float32Array>): TensorMap =>
    new Map([...values].map(([k, data]) => [k, { shape: shapes.get(k)!, data }]));
  return saveCheckpoint(
    job.run_dir,
    {
      step: s.step,
      params: withShapes(s.params),
      optimizer: { m: withShapes(s.state.m), v: withShapes(s.state.v), step: s.state.step },
      manifest: {
        config: { model: s.config, training: { ...job.train, dataset: job.data.dataset } },
        // the sampler is a pure function of (seed, step): the next batch is that of step s.step
        data: { dataset: job.data.dataset, seed: job.train.seed, position: s.step },
        tokenizer: s.tokenizer,
        ...(s.lossScaler ? { loss_scaler: s.lossScaler } : {}),
      },
      commHook: s.commHook,
    },
    { keepLast: job.train.keep_checkpoints },
  );
}

export interface ResumedState {
  manifest: { step: number; optimizer_step: number; tokenizer: CharTokenizerJson; config: GptConfig };
  params: Map<string, Float32Array>;
  m: Map<string, Float32Array>;
  v: Map<string, Float32Array>;
  commHook?: CommHookCheckpoint;
  /** fp16: the loss scaler's state at the checkpoint (absent: a run that had none) */
  lossScaler?: LossScalerState;
}

const values = (t: TensorMap) => new Map([...t].map(([k, v]) => [k, v.data]));

export async function loadTrainingCheckpoint(dir: string, withOptimizer = true): Promise<ResumedState> {
  const c = loadCheckpoint(dir, { optimizer: withOptimizer });
  return {
    manifest: {
      step: c.manifest.step,
      optimizer_step: c.optimizer?.step ?? c.manifest.step,
      tokenizer: c.manifest.tokenizer,
      config: c.manifest.config.model,
    },
    params: values(c.params),
    m: c.optimizer ? values(c.optimizer.m) : new Map(),
    v: c.optimizer ? values(c.optimizer.v) : new Map(),
    ...(c.commHook ? { commHook: c.commHook } : {}),
    ...(c.manifest.loss_scaler ? { lossScaler: c.manifest.loss_scaler } : {}),
  };
}
