// Export a checkpoint as a Hugging Face GPT-2 model folder that transformers' GPT2LMHeadModel
// loads with from_pretrained(dir):
//   model.safetensors  HF names; HF's Conv1D stores weights as (in, out), so the four
//                      linear weights are transposed from PyTorch/nanoGPT's (out, in)
//   config.json        GPT2Config (torch_dtype names the tensors' format)
// The tensors are the checkpoint's fp32 master weights, or (--dtype bf16|fp16) those rounded to
// nearest even in 16 bits, the format a mixed-precision run computed with; fp16 turns values past
// its range (65504) into infinities, which the export refuses rather than writes.
//   vocab.json         character → id (a character-level vocabulary, not GPT-2's BPE)
//   tokenizer_config.json, README.md
import { existsSync } from 'node:fs';
import path from 'node:path';
import { commitDirAtomic, writeFileAtomic } from '../protocol/atomic-file.js';
import { latestCheckpoint, loadCheckpoint } from '../checkpoint/checkpoint.js';
import { CheckpointError } from '../checkpoint/errors.js';
import { encodeSafetensors, type Tensor } from '../checkpoint/safetensors.js';
import { encode16 } from '../gpu/precision.js';
import { paramSpecs, type GptConfig } from '../model/config.js';
import type { Precision } from '../../common/precision.js';

const SAFETENSORS_DTYPE = { fp32: 'F32', bf16: 'BF16', fp16: 'F16' } as const;
const TORCH_DTYPE = { fp32: 'float32', bf16: 'bfloat16', fp16: 'float16' } as const;

/** One exported tensor in the asked format: the fp32 values as they are, or their 16-bit encodings. */
function inFormat(name: string, shape: number[], data: Float32Array, dtype: Precision): Tensor {
  if (dtype === 'fp32') return { dtype: 'F32', shape, data };
  const bits = encode16(dtype, data);
  if (dtype === 'fp16') {
    const overflows = (i: number) => (bits[i]! & 0x7c00) === 0x7c00 && Number.isFinite(data[i]!);
    for (let i = 0; i < bits.length; i++)
      if (overflows(i))
        throw new CheckpointError(`cannot export ${name} as fp16: a value overflows its range (|x| > 65504); export as bf16 or fp32`);
  }
  return { dtype: SAFETENSORS_DTYPE[dtype], shape, data: bits };
}

/** nanoGPT weights that HF's GPT-2 stores transposed (Conv1D layout (in, out)). */
const CONV1D = /\.(attn\.c_attn|attn\.c_proj|mlp\.c_fc|mlp\.c_proj)\.weight$/;

export function isConv1dWeight(name: string): boolean {
  return CONV1D.test(name);
}

/** (R, K) row-major → (K, R) row-major. */
export function transpose2d(data: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[c * rows + r] = data[r * cols + c];
  return out;
}

/** HF GPT-2 tensors (names and layouts) from nanoGPT-named params, in forward order. */
export function toHfTensors(
  cfg: GptConfig,
  params: Map<string, { shape: number[]; data: Float32Array }>,
  dtype: Precision = 'fp32',
): [string, Tensor][] {
  return paramSpecs(cfg).map((p) => {
    const t = params.get(p.name);
    if (!t) throw new CheckpointError(`cannot export: tensor ${p.name} is missing`);
    if (isConv1dWeight(p.name)) {
      const [out, inp] = t.shape;
      return [p.name, inFormat(p.name, [inp, out], transpose2d(t.data, out, inp), dtype)];
    }
    return [p.name, inFormat(p.name, [...t.shape], t.data, dtype)];
  });
}

/** End of text: the newline when the vocabulary has one (generation stops at the end of a line), else id 0. */
export function eosId(chars: readonly string[]): number {
  const nl = chars.indexOf('\n');
  return nl >= 0 ? nl : 0;
}

/** transformers' GPT2Config for this model and character vocabulary (config.json). */
export function hfConfig(cfg: GptConfig, chars: readonly string[], dtype: Precision = 'fp32') {
  const eos = eosId(chars);
  return {
    architectures: ['GPT2LMHeadModel'],
    model_type: 'gpt2',
    vocab_size: cfg.vocab_size,
    n_positions: cfg.block_size,
    n_ctx: cfg.block_size,
    n_embd: cfg.d_model,
    n_layer: cfg.n_layer,
    n_head: cfg.n_head,
    n_inner: null,
    activation_function: 'gelu_new',
    layer_norm_epsilon: 1e-5,
    initializer_range: 0.02,
    resid_pdrop: 0,
    embd_pdrop: 0,
    attn_pdrop: 0,
    scale_attn_weights: true,
    scale_attn_by_inverse_layer_idx: false,
    reorder_and_upcast_attn: false,
    tie_word_embeddings: true,
    use_cache: true,
    bos_token_id: eos,
    eos_token_id: eos,
    torch_dtype: TORCH_DTYPE[dtype],
  };
}

export interface ExportResult {
  outDir: string;
  checkpointDir: string;
  step: number;
  files: string[];
}

/** Writes the HF folder for one checkpoint directory into `outDir` (atomically, replacing it). */
export function exportHf(checkpointDir: string, outDir: string, dtype: Precision = 'fp32'): ExportResult {
  const ckpt = loadCheckpoint(checkpointDir, { optimizer: false });
  const cfg = ckpt.manifest.config.model;
  const chars = ckpt.manifest.tokenizer.chars;
  if (chars.length !== cfg.vocab_size) {
    throw new CheckpointError(
      `cannot export ${checkpointDir}: tokenizer has ${chars.length} characters but the model's vocab_size is ${cfg.vocab_size}`,
    );
  }
  const weights = encodeSafetensors(toHfTensors(cfg, ckpt.params, dtype), { format: 'pt' });
  const eos = eosId(chars);
  const config = hfConfig(cfg, chars, dtype);
  const vocab: Record<string, number> = {};
  chars.forEach((c, i) => (vocab[c] = i));
  const tokenizerConfig = {
    model_max_length: cfg.block_size,
    tokenizer_type: 'character-level',
    note: 'One token per Unicode code point; vocab.json maps each character to its id. This is not GPT-2 BPE: encode with [vocab[c] for c in text].',
    bos_token: chars[eos],
    eos_token: chars[eos],
  };
  const readme = [
    `# Shardwise GPT-2 export (step ${ckpt.manifest.step})`,
    '',
    `GPT-2 architecture: ${cfg.n_layer} layers, ${cfg.n_head} heads, d_model ${cfg.d_model}, context ${cfg.block_size}, vocabulary ${cfg.vocab_size}.`,
    `Trained on \`${ckpt.manifest.data.dataset}\`.`,
    '',
    "**The vocabulary is character-level** (one token per Unicode code point), not GPT-2's BPE:",
    '`vocab.json` maps each character to its id. There is no `tokenizer.json`; encode and decode by hand:',
    '',
    '```python',
    'import json, torch',
    'from transformers import GPT2LMHeadModel',
    'model = GPT2LMHeadModel.from_pretrained(".")',
    'vocab = json.load(open("vocab.json")); inv = {i: c for c, i in vocab.items()}',
    'ids = torch.tensor([[vocab[c] for c in "the "]])',
    'out = model.generate(ids, max_new_tokens=40, do_sample=False)',
    'print("".join(inv[i] for i in out[0].tolist()))',
    '```',
    '',
    `bos/eos id ${eos} is ${JSON.stringify(chars[eos])}. The LM head is tied to \`transformer.wte.weight\`.`,
    '',
  ].join('\n');
  const files = ['model.safetensors', 'config.json', 'vocab.json', 'tokenizer_config.json', 'README.md'];
  commitDirAtomic(outDir, (tmp) => {
    writeFileAtomic(path.join(tmp, 'model.safetensors'), weights);
    writeFileAtomic(path.join(tmp, 'config.json'), JSON.stringify(config, null, 2) + '\n');
    writeFileAtomic(path.join(tmp, 'vocab.json'), JSON.stringify(vocab, null, 2) + '\n');
    writeFileAtomic(path.join(tmp, 'tokenizer_config.json'), JSON.stringify(tokenizerConfig, null, 2) + '\n');
    writeFileAtomic(path.join(tmp, 'README.md'), readme);
  });
  return { outDir, checkpointDir, step: ckpt.manifest.step, files };
}

/** `shardwise export RUN_DIR --format hf [--dtype fp32|bf16|fp16] [--out DIR]`: the run's latest checkpoint, by default into RUN_DIR/export/hf. */
export function exportRunHf(runDir: string, outDir?: string, dtype: Precision = 'fp32'): ExportResult {
  if (!existsSync(runDir)) throw new CheckpointError(`run folder not found: ${runDir}`);
  const dir = latestCheckpoint(runDir);
  if (!dir)
    throw new CheckpointError(`no checkpoint in ${runDir}: train with checkpoints enabled first (checkpoints/step-N/ is empty or missing)`);
  return exportHf(dir, outDir ?? path.join(runDir, 'export', 'hf'), dtype);
}
