// Export a checkpoint as a Hugging Face GPT-2 model folder that transformers' GPT2LMHeadModel
// loads with from_pretrained(dir):
//   model.safetensors  HF names; HF's Conv1D stores weights as (in, out), so the four
//                      linear weights are transposed from PyTorch/nanoGPT's (out, in)
//   config.json        GPT2Config
//   vocab.json         character → id (a character-level vocabulary, not GPT-2's BPE)
//   tokenizer_config.json, README.md
import { existsSync } from 'node:fs';
import path from 'node:path';
import { commitDirAtomic, writeFileAtomic } from '../protocol/atomic-file.js';
import { latestCheckpoint, loadCheckpoint } from '../checkpoint/checkpoint.js';
import { CheckpointError } from '../checkpoint/errors.js';
import { encodeSafetensors, type Tensor } from '../checkpoint/safetensors.js';
import { paramSpecs, type GptConfig } from '../model/config.js';

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
export function toHfTensors(cfg: GptConfig, params: Map<string, { shape: number[]; data: Float32Array }>): [string, Tensor][] {
  return paramSpecs(cfg).map((p) => {
    const t = params.get(p.name);
    if (!t) throw new CheckpointError(`cannot export: tensor ${p.name} is missing`);
    if (isConv1dWeight(p.name)) {
      const [out, inp] = t.shape;
      return [p.name, { dtype: 'F32', shape: [inp, out], data: transpose2d(t.data, out, inp) }];
    }
    return [p.name, { dtype: 'F32', shape: [...t.shape], data: t.data }];
  });
}

export interface ExportResult {
  outDir: string;
  checkpointDir: string;
  step: number;
  files: string[];
}

/** Writes the HF folder for one checkpoint directory into `outDir` (atomically, replacing it). */
export function exportHf(checkpointDir: string, outDir: string): ExportResult {
  const ckpt = loadCheckpoint(checkpointDir, { optimizer: false });
  const cfg = ckpt.manifest.config.model;
  const chars = ckpt.manifest.tokenizer.chars;
  if (chars.length !== cfg.vocab_size) {
    throw new CheckpointError(
      `cannot export ${checkpointDir}: tokenizer has ${chars.length} characters but the model's vocab_size is ${cfg.vocab_size}`,
    );
  }
  const weights = encodeSafetensors(toHfTensors(cfg, ckpt.params), { format: 'pt' });
  // end of text: the newline when the vocabulary has one (generation stops at the end of a line), else id 0
  const nl = chars.indexOf('\n');
  const eos = nl >= 0 ? nl : 0;
  const config = {
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
    torch_dtype: 'float32',
  };
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

/** `shardwise export RUN_DIR --format hf [--out DIR]`: the run's latest checkpoint, by default into RUN_DIR/export/hf. */
export function exportRunHf(runDir: string, outDir?: string): ExportResult {
  if (!existsSync(runDir)) throw new CheckpointError(`run folder not found: ${runDir}`);
  const dir = latestCheckpoint(runDir);
  if (!dir)
    throw new CheckpointError(`no checkpoint in ${runDir}: train with checkpoints enabled first (checkpoints/step-N/ is empty or missing)`);
  return exportHf(dir, outDir ?? path.join(runDir, 'export', 'hf'));
}
