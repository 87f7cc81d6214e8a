import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { saveCheckpoint } from '../../../workers/checkpoint/checkpoint.js';
import { readSafetensors } from '../../../workers/checkpoint/safetensors.js';
import { exportHf, exportRunHf } from '../../../workers/export/hf.js';
import { encode16 } from '../../../workers/gpu/precision.js';
import { state } from './helpers.js';

let run: string;
beforeAll(() => {
  run = mkdtempSync(path.join(tmpdir(), 'sw-hf-'));
});
afterAll(() => rmSync(run, { recursive: true, force: true }));

describe('Hugging Face GPT-2 export (2 layers, C=8, V=5, block 16)', () => {
  it('writes HF names and Conv1D (in, out) layouts; transposed weights equal the originals element by element', () => {
    const s = state(100);
    const ckpt = saveCheckpoint(run, s);
    const out = path.join(run, 'hf');
    const r = exportHf(ckpt, out);
    expect(r.step).toBe(100);
    expect(readdirSync(out).sort()).toEqual(['README.md', 'config.json', 'model.safetensors', 'tokenizer_config.json', 'vocab.json']);
    const st = readSafetensors(path.join(out, 'model.safetensors'));
    expect(st.metadata).toEqual({ format: 'pt' });
    const shapes = Object.fromEntries([...st.tensors].map(([n, t]) => [n, t.shape]));
    expect(Object.keys(shapes).length).toBe(2 + 12 * 2 + 2);
    expect(shapes['lm_head.weight']).toBeUndefined(); // tied to wte
    expect(shapes['transformer.wte.weight']).toEqual([5, 8]);
    expect(shapes['transformer.wpe.weight']).toEqual([16, 8]);
    expect(shapes['transformer.h.0.ln_1.weight']).toEqual([8]);
    expect(shapes['transformer.h.0.attn.c_attn.weight']).toEqual([8, 24]);
    expect(shapes['transformer.h.0.attn.c_attn.bias']).toEqual([24]);
    expect(shapes['transformer.h.1.attn.c_proj.weight']).toEqual([8, 8]);
    expect(shapes['transformer.h.1.mlp.c_fc.weight']).toEqual([8, 32]);
    expect(shapes['transformer.h.1.mlp.c_proj.weight']).toEqual([32, 8]);
    expect(shapes['transformer.ln_f.bias']).toEqual([8]);
    for (const name of [
      'transformer.h.0.attn.c_attn.weight',
      'transformer.h.1.attn.c_proj.weight',
      'transformer.h.0.mlp.c_fc.weight',
      'transformer.h.1.mlp.c_proj.weight',
    ]) {
      const src = s.params.get(name)!; // (out, in)
      const [o, i] = src.shape;
      const hf = st.tensors.get(name)!.data as Float32Array; // (in, out)
      for (let a = 0; a < o; a++) for (let b = 0; b < i; b++) expect(hf[b * o + a]).toBe(src.data[a * i + b]);
    }
    for (const name of ['transformer.wte.weight', 'transformer.h.0.attn.c_attn.bias', 'transformer.h.1.ln_2.weight']) {
      expect(st.tensors.get(name)!.data).toEqual(s.params.get(name)!.data);
    }
  });

  it('config.json is a GPT2Config; vocab.json maps characters to ids', () => {
    const out = path.join(run, 'hf');
    const cfg = JSON.parse(readFileSync(path.join(out, 'config.json'), 'utf8'));
    expect(cfg).toMatchObject({
      model_type: 'gpt2',
      architectures: ['GPT2LMHeadModel'],
      vocab_size: 5,
      n_positions: 16,
      n_ctx: 16,
      n_embd: 8,
      n_layer: 2,
      n_head: 2,
      n_inner: null,
      activation_function: 'gelu_new',
      layer_norm_epsilon: 1e-5,
      initializer_range: 0.02,
      tie_word_embeddings: true,
      resid_pdrop: 0,
      embd_pdrop: 0,
      attn_pdrop: 0,
      bos_token_id: 0,
      eos_token_id: 0,
    });
    expect(JSON.parse(readFileSync(path.join(out, 'vocab.json'), 'utf8'))).toEqual({ '\n': 0, ' ': 1, a: 2, b: 3, '😀': 4 });
    expect(readFileSync(path.join(out, 'README.md'), 'utf8')).toMatch(/character-level/);
  });

  it('exportRunHf picks the latest checkpoint; a run without one is a clear error', () => {
    saveCheckpoint(run, state(200));
    expect(exportRunHf(run).step).toBe(200);
    expect(readdirSync(path.join(run, 'export', 'hf'))).toContain('model.safetensors');
    const empty = mkdtempSync(path.join(tmpdir(), 'sw-hf-empty-'));
    try {
      expect(() => exportRunHf(empty)).toThrow(`no checkpoint in ${empty}`);
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });

  it('--dtype bf16 / fp16: every tensor in 16 bits, each element the master value rounded to nearest even; fp16 refuses an overflow', () => {
    const s = state(300);
    const ckpt = saveCheckpoint(run, s);
    for (const [dtype, st, torch] of [
      ['bf16', 'BF16', 'bfloat16'],
      ['fp16', 'F16', 'float16'],
    ] as const) {
      const out = path.join(run, `hf-${dtype}`);
      exportHf(ckpt, out, dtype);
      const t = readSafetensors(path.join(out, 'model.safetensors'));
      expect([...t.tensors.values()].every((x) => x.dtype === st)).toBe(true);
      expect(t.tensors.get('transformer.wte.weight')!.data).toEqual(encode16(dtype, s.params.get('transformer.wte.weight')!.data));
      const src = s.params.get('transformer.h.0.attn.c_attn.weight')!; // (out 24, in 8) -> (8, 24)
      const hf = t.tensors.get('transformer.h.0.attn.c_attn.weight')!.data as Uint16Array;
      expect(hf[1 * 24 + 2]).toBe(encode16(dtype, [src.data[2 * 8 + 1]!])[0]);
      expect(JSON.parse(readFileSync(path.join(out, 'config.json'), 'utf8')).torch_dtype).toBe(torch);
    }
    s.params.get('transformer.wpe.weight')!.data[3] = 1e5;
    const big = saveCheckpoint(run, { ...s, step: 301 });
    expect(() => exportHf(big, path.join(run, 'hf-big'), 'fp16')).toThrow(
      'cannot export transformer.wpe.weight as fp16: a value overflows its range (|x| > 65504); export as bf16 or fp32',
    );
    expect(() => exportHf(big, path.join(run, 'hf-big'), 'bf16')).not.toThrow();
  });
});
