// One single-device training step of a bench: batch i, forward, backward, gradient norm and
// AdamW update, then the loss read back (which waits for the device). engine.ts times it
// alone, telemetry-overhead.ts with and without compute spans around it.
import type { BatchSampler } from '../workers/data/index.js';
import type { Gpt } from '../workers/model/gpt.js';
import type { AdamW } from '../workers/optim/adamw.js';

/** lossScale: fp16's (a fixed one here), which seeds backward and the update divides out */
export async function singleStep(model: Gpt, opt: AdamW, sampler: BatchSampler, i: number, lr: number, lossScale = 1): Promise<number> {
  const b = sampler.batchAt(i);
  model.setBatch(b.inputs, b.targets);
  model.zeroGrad();
  model.setLossScale(lossScale);
  await model.forward('train');
  await model.backward();
  opt.recordGradNorm();
  opt.recordStep(lr, lossScale);
  return model.readLoss();
}
