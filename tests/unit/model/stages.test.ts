import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDevice } from '../../../workers/gpu/device.js';
import { Runtime } from '../../../workers/gpu/runtime.js';
import { type GptConfig, paramSpecs } from '../../../workers/model/config.js';
import { Gpt } from '../../../workers/model/gpt.js';
import type { StageRange } from '../../../workers/model/stage.js';
import { SingleRankTpOps, type TensorParallelOps } from '../../../workers/model/tensor-parallel.js';
import { shardModel } from '../../../workers/model/tp-layout.js';
import { refGpt } from '../../reference/gpt.js';
import { gradErrors, randomParams, randomTokens, to32 } from './helpers.js';

// The model with the tensor-parallel ops of a group of one rank (f and g the identity), whole
// and split into pipeline stages, against the float64 reference GPT. Splits over several ranks
// run in tests/dist/tensor-parallel.test.ts with real all-reduces.
const cfg: GptConfig = { n_layer: 3, n_head: 4, d_model: 16, block_size: 9, vocab_size: 13 };
const B = 2;
const T = 7;

const worstGradError = (gpu: Map<string, Float32Array>, ref: Map<string, Float64Array>) => Math.max(...Object.values(gradErrors(gpu, ref)));

describe('GPT with the tensor-parallel ops of one rank against the float64 reference, whole and as pipeline stages', () => {
  let rt: Runtime;
  beforeAll(async () => {
    rt = new Runtime(await openDevice());
  });
  afterAll(() => rt.destroy());

  const P = randomParams(paramSpecs(cfg), 21, 0.2);
  const idx = randomTokens(B * T, cfg.vocab_size, 22);
  const tgt = randomTokens(B * T, cfg.vocab_size, 23);
  const full32 = to32(P);
  const ref = refGpt(cfg, P, idx, tgt, B, T);

  const build = (stage: StageRange | undefined, checkpointing: boolean) => {
    const m = new Gpt(rt, cfg, { B, T, checkpointing, tp: { ops: new SingleRankTpOps(rt) }, ...(stage ? { stage } : {}) });
    const own = new Set(m.params.refs.map((r) => r.name));
    m.params.writeParams(new Map([...shardModel(cfg, full32, 1, 0)].filter(([k]) => own.has(k))));
    m.setBatch(idx, tgt);
    m.zeroGrad();
    return m;
  };

  it('whole model, with and without activation checkpointing: loss within 1e-5, gradients within 1e-4', async () => {
    for (const checkpointing of [false, true]) {
      const m = build(undefined, checkpointing);
      await m.forward('train');
      await m.backward();
      const loss = await m.readLoss();
      expect(Math.abs(loss - ref.loss) / ref.loss, `checkpointing ${checkpointing}`).toBeLessThan(1e-5);
      expect(worstGradError(await m.params.readGrads(), ref.grads)).toBeLessThan(1e-4);
    }
  });

  it('two stages (blocks [0,1) with the embedding, [1,3) with the head and its wte copy) pass resid and dresid: same loss and gradients', async () => {
    const s0 = build({ from: 0, to: 1, first: true, last: false }, false);
    const s1 = build({ from: 1, to: 3, first: false, last: true }, true);
    expect(s0.params.refs.map((r) => r.name)).not.toContain('transformer.ln_f.weight');
    expect(s1.params.refs.map((r) => r.name)).toContain('transformer.wte.weight');
    expect(s1.params.refs.map((r) => r.name)).not.toContain('transformer.wpe.weight');
    await s0.forward('train');
    rt.write(s1.acts.resid[1]!, await rt.read(s0.acts.resid[1]!));
    await s1.forward('train');
    await s1.backward();
    rt.write(s0.scratch.dresid, await rt.read(s1.scratch.dresid));
    await s0.backward();
    const loss = await s1.readLoss();
    expect(Math.abs(loss - ref.loss) / ref.loss).toBeLessThan(1e-5);
    const g0 = await s0.params.readGrads();
    const g1 = await s1.params.readGrads();
    // the tied wte's gradient is the sum of the embedding's (first stage) and the head's (last stage)
    const wte = g0.get('transformer.wte.weight')!.map((x, i) => x + g1.get('transformer.wte.weight')![i]!);
    const merged = new Map([...g0, ...g1, ['transformer.wte.weight', wte]]);
    expect(merged.size).toBe(P.size);
    expect(worstGradError(merged, ref.grads)).toBeLessThan(1e-4);
  });

  it('a group of one records no collective: forward, backward and recomputation never call the ops', async () => {
    const untouchable = (what: string) => () => {
      throw new Error(`${what} was called for a group of one rank`);
    };
    const ops: TensorParallelOps = {
      rank: 0,
      size: 1,
      f: { forward: untouchable('f.forward'), backward: untouchable('f.backward') },
      g: { forward: untouchable('g.forward'), backward: untouchable('g.backward') },
      allReduce: untouchable('allReduce'),
      allGather: untouchable('allGather'),
    };
    const m = new Gpt(rt, cfg, { B, T, checkpointing: true, tp: { ops, partitionActivations: true } });
    m.params.writeParams(full32);
    m.setBatch(idx, tgt);
    m.zeroGrad();
    await m.forward('train');
    await m.backward();
    await m.forward('eval');
    expect(Math.abs((await m.readLoss()) - ref.loss) / ref.loss).toBeLessThan(1e-5);
  });

  it('refuses a stage outside the model', () => {
    expect(
      () => new Gpt(rt, cfg, { B, T, tp: { ops: new SingleRankTpOps(rt) }, stage: { from: 2, to: 4, first: false, last: true } }),
    ).toThrow(/stage blocks \[2, 4\) must lie within the model's 3 blocks/);
  });
});
