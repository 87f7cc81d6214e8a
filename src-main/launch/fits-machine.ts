// Before launching: do the model states of the largest rank fit the machine at all? The
// prediction is the strategy's formula (common/model-state.ts, the one the launch form shows,
// at the vocabulary it assumes); the limit is the machine's memory (os.totalmem(): a software
// adapter's memory is the host's, and no rank here gets more than the machine has). A model
// past it would start, allocate for minutes and fail with raw byte counts; refused here with
// the formula's line instead. Activations and buffers come on top, so passing is no promise.
import { ASSUMED_VOCAB, gptParamCount } from '../../common/model-params.js';
import { modelStateTotal, predictModelStateBytes } from '../../common/model-state.js';
import { formatBytes } from '../../common/charts/style.js';
import { computeBytes, type Precision } from '../../common/precision.js';
import { type FieldError, strategyOf } from '../../common/strategies.js';
import { precisionOf, type TrainJob } from '../../workers/protocol/train.js';

/** The formula of one rank's model states in Ψ and N (the ZeRO paper's), as the strategy and precision make it. */
export function modelStateFormula(strategy: string, precision: Precision, offload: boolean): string {
  const W = computeBytes(precision);
  const G = W;
  const K = precision === 'fp32' ? 8 : 12;
  const mixed = precision !== 'fp32';
  const s = strategyOf(strategy);
  if (!s || s.splitsModel) return `${W + G + K} bytes per parameter of the rank's share of the tensors`;
  switch (s.zeroStage) {
    case 0:
      return s.optimizerRanks === 'every' ? `${W + G + K}Ψ` : `${W + G + K}Ψ on rank 0, the parameter server`;
    case 1:
      return offload ? `${mixed ? W : W + G}Ψ` : `${W + G}Ψ + ${K}Ψ/N`;
    case 2:
      return offload ? (mixed ? `${W}Ψ` : `${W}Ψ + ${G}Ψ/N`) : `${W}Ψ + ${G + K}Ψ/N`;
    case 3:
      return offload ? `${W + G}Ψ/N` : `${W + G + K}Ψ/N`;
  }
}

/** The refusal when the largest rank's predicted model states exceed `machineBytes`; null when they fit or no formula applies. */
export function modelStatesRefusal(job: TrainJob, machineBytes: number): FieldError | null {
  const par = job.parallel;
  const strategy = par?.strategy ?? 'single';
  const world = par?.world ?? 1;
  const precision = precisionOf(job);
  const offload = par?.offload_optimizer === 'cpu';
  const params = gptParamCount(job.model, ASSUMED_VOCAB);
  const model = { ...job.model, vocab_size: ASSUMED_VOCAB };
  let most = 0;
  // the data-parallel family's ranks differ only at rank 0 (dp's optimizer): two ranks say it all
  const ranks = strategyOf(strategy)?.splitsModel ? world : Math.min(world, 2);
  for (let rank = 0; rank < ranks; rank++) {
    const b = predictModelStateBytes({
      strategy,
      world,
      params,
      rank,
      offloadOptimizer: offload,
      precision,
      model,
      tp: par?.tp,
      pp: par?.pp,
      dp: par?.dp,
    });
    if (!b) return null;
    most = Math.max(most, modelStateTotal(b));
  }
  if (most <= machineBytes) return null;
  const formula = modelStateFormula(strategy, precision, offload);
  return {
    field: 'strategy',
    message:
      `model states need ${formatBytes(most)} per rank (${formula} with Ψ = ${params.toLocaleString('en-US')} parameters at a ${ASSUMED_VOCAB}-character vocabulary, N = ${world}, ${precision}) ` +
      `but this machine has ${formatBytes(machineBytes)} of memory; use a smaller model, or zero3 over more ranks (16-bit precision keeps 16Ψ: its fp32 master copy)`,
  };
}
