// How a data-parallel rank's weights and optimizer state cross between a checkpoint (whole fp32
// tensors in the model's own shapes) and its device, at the run's precision (a strategy's
// loadOptimizerState takes this rank's layout: tp's shards, the padded vocabulary): apart from the
// model and the engine, as apex's amp keeps its master weights. fp32: the model's parameters are
// the weights. bf16 / fp16: the optimizer's fp32 master copy is (the strategy's loadMasterWeights;
// the 16-bit parameters are cast from it), in this rank's layout: its tensor-parallel shard, the
// vocabulary padded to the 16-bit kernels' multiple (tp-layout.ts vocabAlign), padding dropped
// again in a checkpoint.
import type { StoragePrecision } from '../gpu/precision.js';
import { type GptConfig, paramSpecs } from '../model/config.js';
import type { ParamStore } from '../model/params.js';
import { shardModel, unshardTensor, vocabAlign } from '../model/tp-layout.js';
import type { OptimizerState, RankStrategy } from '../parallel/strategy.js';

type Tensors = Map<string, Float32Array>;

export interface RankWeights {
  /** take the whole model's weights (initial or a checkpoint's) and optimizer state */
  load(full: Tensors, state: OptimizerState | null): void;
  /** on the rank that saves a checkpoint: the whole model from the optimizer state and `gathered`, the strategy's whole weights where it gathers them */
  whole(state: OptimizerState, gathered: Tensors | null): Promise<{ params: Tensors; state: OptimizerState }>;
}

/** A single device's tensors back in the model's own shapes: wte without its padding rows. */
export function unpadModel(c: GptConfig, local: Tensors, align: number): Tensors {
  if (align === 1) return local;
  const out = new Map<string, Float32Array>();
  for (const s of paramSpecs(c)) {
    const v = local.get(s.name);
    if (!v) throw new Error(`missing tensor ${s.name}`);
    out.set(s.name, unshardTensor(s, [v], 1, align));
  }
  return out;
}

/** `tp`: this rank's place in its tensor-parallel group, null without one. */
export function rankWeights(
  precision: StoragePrecision,
  config: GptConfig,
  params: ParamStore,
  strategy: RankStrategy,
  tp: { size: number; rank: number } | null,
): RankWeights {
  if (precision === 'fp32') {
    const mine = (x: Tensors) => (tp ? shardModel(config, x, tp.size, tp.rank) : x);
    return {
      load(full, state) {
        params.writeParams(mine(full));
        if (state) strategy.loadOptimizerState({ m: mine(state.m), v: mine(state.v), step: state.step });
      },
      whole: async (state, gathered) => ({ params: gathered ?? (await params.readParams()), state }),
    };
  }
  const align = vocabAlign(precision);
  const local = (x: Tensors) => shardModel(config, x, tp?.size ?? 1, tp?.rank ?? 0, align);
  const unpad = (x: Tensors) => unpadModel(config, x, align);
  return {
    load(full, state) {
      if (!strategy.loadMasterWeights) throw new Error(`${strategy.name} trains fp32 only in this build; it keeps no fp32 master weights`);
      strategy.loadMasterWeights(local(full));
      if (state) strategy.loadOptimizerState({ m: local(state.m), v: local(state.v), step: state.step });
    },
    async whole(state) {
      if (!state.master) throw new Error(`${strategy.name}: a mixed-precision optimizer state without its master weights`);
      return { params: unpad(state.master), state: { m: unpad(state.m), v: unpad(state.v), step: state.step } };
    },
  };
}
