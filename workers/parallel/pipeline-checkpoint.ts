// A pipeline's whole-model checkpoint: every stage sends stage 0 its tensors (weights and the
// two AdamW moments, in the single-device layout; the tied wte once, from the first stage), and
// stage 0 puts them back in the model's forward order.
import type { ProcessGroup } from '../comm/index.js';
import { type GptConfig, paramSpecs } from '../model/config.js';
import { type StageRange, stageOwns } from '../model/stage.js';

/** the checkpoint's tag on the pipeline group (the stage's transfers use 1, 2 and 4) */
const TAG_CKPT = 3;

type Tensors = Map<string, Float32Array>;

/** Parameters a stage contributes to the whole model's checkpoint (wte once: from the first stage). */
function checkpointNames(config: GptConfig, r: StageRange): string[] {
  return paramSpecs(config)
    .map((s) => s.name)
    .filter((n) => stageOwns(r, n) && !(n === 'transformer.wte.weight' && !r.first));
}

/**
 * The whole model's weights and moments on stage 0 from each stage's own (whole tensors, not TP
 * shards); null on the other stages. Collective over the pipeline group `pg` (stage = group rank).
 */
export async function gatherStages(
  pg: ProcessGroup,
  config: GptConfig,
  ranges: readonly StageRange[],
  own: { params: Tensors; m: Tensors; v: Tensors },
): Promise<{ params: Tensors; m: Tensors; v: Tensors } | null> {
  const numel = new Map(paramSpecs(config).map((s) => [s.name, s.shape.reduce((a, b) => a * b, 1)]));
  const pack = (names: string[]) => {
    const flat = new Float32Array(3 * names.reduce((s, n) => s + numel.get(n)!, 0));
    let off = 0;
    for (const src of [own.params, own.m, own.v])
      for (const n of names) {
        flat.set(src.get(n)!, off);
        off += numel.get(n)!;
      }
    return flat;
  };
  const stage = pg.rank;
  if (stage !== 0) {
    await pg.send(pack(checkpointNames(config, ranges[stage]!)), 0, { tag: TAG_CKPT, labels: { what: 'checkpoint' } }).wait();
    return null;
  }
  const params: Tensors = new Map();
  const m: Tensors = new Map();
  const v: Tensors = new Map();
  const unpack = (names: string[], flat: Float32Array) => {
    let off = 0;
    for (const dst of [params, m, v])
      for (const n of names) {
        dst.set(n, flat.slice(off, off + numel.get(n)!));
        off += numel.get(n)!;
      }
  };
  unpack(checkpointNames(config, ranges[0]!), pack(checkpointNames(config, ranges[0]!)));
  for (let s = 1; s < pg.size; s++) {
    const names = checkpointNames(config, ranges[s]!);
    const size = 3 * names.reduce((a, n) => a + numel.get(n)!, 0);
    unpack(names, await pg.recv(new Float32Array(size), s, { tag: TAG_CKPT }).wait());
  }
  // forward order, as the single-device checkpoint writes them
  const order = paramSpecs(config).map((s) => s.name);
  const sorted = (x: Tensors) => new Map(order.map((n) => [n, x.get(n)!]));
  return { params: sorted(params), m: sorted(m), v: sorted(v) };
}
