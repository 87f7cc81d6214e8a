// The share of the model one pipeline stage computes: blocks [from, to), plus the embedding on
// the first stage and ln_f + the LM head on the last, which keeps its own copy of the tied wte
// (Megatron's embedding group sums the two copies' gradients). The whole model is one stage.
export interface StageRange {
  from: number;
  to: number;
  first: boolean;
  last: boolean;
}

export function wholeModel(nLayer: number): StageRange {
  return { from: 0, to: nLayer, first: true, last: true };
}

/** Does a stage hold this parameter? (the last stage keeps its own copy of the tied wte) */
export function stageOwns(stage: StageRange, name: string): boolean {
  if (name === 'transformer.wte.weight') return stage.first || stage.last;
  if (name === 'transformer.wpe.weight') return stage.first;
  if (name.startsWith('transformer.ln_f.')) return stage.last;
  const m = /^transformer\.h\.(\d+)\./.exec(name);
  return m !== null && Number(m[1]) >= stage.from && Number(m[1]) < stage.to;
}

export function validateStage(stage: StageRange, nLayer: number): StageRange {
  const { from, to, first, last } = stage;
  if (!(Number.isInteger(from) && Number.isInteger(to) && 0 <= from && from <= to && to <= nLayer))
    throw new Error(`stage blocks [${from}, ${to}) must lie within the model's ${nLayer} blocks`);
  if (first !== (from === 0) || last !== (to === nLayer))
    throw new Error(`stage [${from}, ${to}): first/last must mark the stages that hold the embedding and the head`);
  return stage;
}
