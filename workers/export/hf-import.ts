// `shardwise train --init-from HF_DIR`: a run's starting weights from a Hugging Face GPT-2
// folder (model.safetensors + config.json + vocab.json), such as the exported PyTorch job saves
// (run/hf/step-N) or `shardwise export --format hf` writes. The inverse of hf.ts: HF's Conv1D
// weights (in, out) are transposed back to PyTorch/nanoGPT's (out, in); 16-bit tensors are
// widened to fp32. The vocabulary comes from vocab.json (character → id), so the run encodes its
// dataset with the ids the weights were trained with. AdamW starts afresh (step 0): an HF folder
// holds no optimizer state.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { CheckpointError } from '../checkpoint/errors.js';
import { f16ToF32, readSafetensors, type Tensor } from '../checkpoint/safetensors.js';
import { CharTokenizer } from '../data/tokenizer.js';
import { type GptConfig, paramSpecs } from '../model/config.js';
import { isConv1dWeight, transpose2d } from './hf.js';

export interface HfInit {
  dir: string;
  tokenizer: CharTokenizer;
  /** the weights in the model's own names and layouts, checked against its shapes */
  params(config: GptConfig): Map<string, Float32Array>;
}

function toF32(name: string, t: Tensor): Float32Array {
  if (t.dtype === 'F32') return t.data as Float32Array;
  if (t.dtype === 'F16') return f16ToF32(t.data as Uint16Array);
  if (t.dtype === 'BF16') {
    const bits = t.data as Uint16Array;
    const out = new Uint32Array(bits.length);
    for (let i = 0; i < bits.length; i++) out[i] = bits[i]! << 16;
    return new Float32Array(out.buffer);
  }
  throw new CheckpointError(`--init-from: tensor ${name} is ${t.dtype}; expected F32, BF16 or F16`);
}

export function loadHfInit(dir: string): HfInit {
  for (const f of ['model.safetensors', 'vocab.json'])
    if (!existsSync(path.join(dir, f)))
      throw new CheckpointError(
        `--init-from ${dir}: no ${f} (a Hugging Face GPT-2 folder with a character vocab.json, as the PyTorch export saves)`,
      );
  const vocab = JSON.parse(readFileSync(path.join(dir, 'vocab.json'), 'utf8')) as Record<string, number>;
  const chars: string[] = [];
  for (const [c, id] of Object.entries(vocab)) chars[id] = c;
  if (chars.length !== Object.keys(vocab).length || chars.some((c) => c === undefined))
    throw new CheckpointError(`--init-from ${dir}: vocab.json's ids must be 0..${Object.keys(vocab).length - 1}, each once`);
  const tokenizer = CharTokenizer.fromJSON({ type: 'char', chars });
  const tensors = readSafetensors(path.join(dir, 'model.safetensors')).tensors;
  return {
    dir,
    tokenizer,
    params(config) {
      const out = new Map<string, Float32Array>();
      for (const spec of paramSpecs(config)) {
        const t = tensors.get(spec.name);
        if (!t)
          throw new CheckpointError(
            `--init-from ${dir}: model.safetensors lacks ${spec.name} (the run's model: ${JSON.stringify(config)})`,
          );
        const conv = isConv1dWeight(spec.name);
        const want = conv ? [spec.shape[1]!, spec.shape[0]!] : spec.shape;
        if (t.shape.join() !== want.join())
          throw new CheckpointError(`--init-from ${dir}: ${spec.name} has shape [${t.shape}], the run's model needs [${want}]`);
        const data = toF32(spec.name, t);
        out.set(spec.name, conv ? transpose2d(data, want[0]!, want[1]!) : data);
      }
      return out;
    },
  };
}
