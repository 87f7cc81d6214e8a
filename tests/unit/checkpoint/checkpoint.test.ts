import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  latestCheckpoint,
  listCheckpoints,
  loadCheckpoint,
  saveCheckpoint,
  type Manifest,
} from '../../../workers/checkpoint/checkpoint.js';
import { commitDirAtomic, isTmpDirName, writeFileAtomic } from '../../../workers/protocol/atomic-file.js';
import { readSafetensors } from '../../../workers/checkpoint/safetensors.js';
import { CFG, state } from './helpers.js';

let run: string;
beforeEach(() => {
  run = mkdtempSync(path.join(tmpdir(), 'sw-ckpt-'));
});
afterEach(() => rmSync(run, { recursive: true, force: true }));

describe('checkpoints', () => {
  it('save → load round-trips params, AdamW moments and the manifest bit-exactly', () => {
    const s = state(100);
    const dir = saveCheckpoint(run, s);
    expect(dir).toBe(path.join(run, 'checkpoints', 'step-000100'));
    expect(readdirSync(dir).sort()).toEqual(['manifest.json', 'model.safetensors', 'optimizer.safetensors']);
    const c = loadCheckpoint(dir);
    expect(c.manifest.step).toBe(100);
    expect(c.manifest.format_version).toBe(1);
    expect(c.manifest.data).toEqual({ dataset: 'builtin:grammar', seed: 1337, position: 100 });
    expect(c.manifest.tokenizer.chars).toEqual(['\n', ' ', 'a', 'b', '😀']);
    expect(c.manifest.config.model).toEqual(CFG);
    expect(c.params.size).toBe(2 + 12 * 2 + 2);
    for (const [name, t] of s.params) expect(c.params.get(name)).toEqual(t);
    for (const [name, t] of s.optimizer.m) expect(c.optimizer!.m.get(name)).toEqual(t);
    for (const [name, t] of s.optimizer.v) expect(c.optimizer!.v.get(name)).toEqual(t);
    expect(c.optimizer!.step).toBe(100);
    // optimizer file uses PyTorch's AdamW state names
    const opt = readSafetensors(path.join(dir, 'optimizer.safetensors'));
    expect(opt.tensors.get('exp_avg.transformer.h.1.attn.c_attn.weight')!.shape).toEqual([24, 8]);
    expect(opt.tensors.get('exp_avg_sq.transformer.ln_f.bias')!.shape).toEqual([8]);
    const man = JSON.parse(readFileSync(path.join(dir, 'manifest.json'), 'utf8')) as Manifest;
    expect(man.files['model.safetensors'].bytes).toBe(readFileSync(path.join(dir, 'model.safetensors')).length);
    expect(man.files['model.safetensors'].sha256).toMatch(/^[0-9a-f]{64}$/);
  });

  it('loads without the optimizer for export/eval', () => {
    const dir = saveCheckpoint(run, state(5));
    rmSync(path.join(dir, 'optimizer.safetensors'));
    expect(loadCheckpoint(dir, { optimizer: false }).optimizer).toBeUndefined();
    expect(() => loadCheckpoint(dir)).toThrow(`corrupt checkpoint ${dir}: optimizer.safetensors is missing`);
  });

  it('detects a flipped byte (sha256 mismatch)', () => {
    const dir = saveCheckpoint(run, state(1));
    const f = path.join(dir, 'model.safetensors');
    const b = readFileSync(f);
    b[b.length - 3] ^= 0x01;
    writeFileSync(f, b);
    expect(() => loadCheckpoint(dir)).toThrow(
      `corrupt checkpoint file ${f}: sha256 does not match the manifest (the file was modified or damaged); use an earlier checkpoint`,
    );
  });

  it('detects a truncated file with both sizes', () => {
    const dir = saveCheckpoint(run, state(1));
    const f = path.join(dir, 'optimizer.safetensors');
    const n = readFileSync(f).length;
    truncateSync(f, n - 100);
    expect(() => loadCheckpoint(dir)).toThrow(`corrupt checkpoint file ${f}: ${n - 100} bytes but the manifest says ${n} (truncated)`);
  });

  it('detects a tensor whose shape does not match the config', () => {
    const s = state(1);
    const dir = saveCheckpoint(run, s);
    const manFile = path.join(dir, 'manifest.json');
    const man = JSON.parse(readFileSync(manFile, 'utf8')) as Manifest;
    man.config.model.vocab_size = 6; // wte should now be (6, 8)
    writeFileSync(manFile, JSON.stringify(man));
    expect(() => loadCheckpoint(dir)).toThrow(
      /model weights .*model\.safetensors: tensor transformer\.wte\.weight has shape \[5,8\] but the model config needs \[6,8\]/,
    );
  });

  it('refuses to save a model that does not match its config', () => {
    const s = state(1);
    s.params.delete('transformer.h.1.mlp.c_fc.bias');
    expect(() => saveCheckpoint(run, s)).toThrow('params (the model being saved): tensor transformer.h.1.mlp.c_fc.bias is missing');
    expect(existsSync(path.join(run, 'checkpoints', 'step-000001'))).toBe(false);
  });

  it('clear errors for a missing directory, a missing manifest, a bad manifest', () => {
    expect(() => loadCheckpoint(path.join(run, 'nope'))).toThrow(`checkpoint not found: ${path.join(run, 'nope')}`);
    const d = path.join(run, 'empty');
    mkdirSync(d);
    expect(() => loadCheckpoint(d)).toThrow(`not a checkpoint: ${d} has no manifest.json`);
    writeFileSync(path.join(d, 'manifest.json'), '{"format_version": 1, "step": ');
    expect(() => loadCheckpoint(d)).toThrow(/corrupt checkpoint manifest .*manifest\.json: not valid JSON/);
    writeFileSync(path.join(d, 'manifest.json'), '{"format_version": 99}');
    expect(() => loadCheckpoint(d)).toThrow(/format_version 99 is not supported/);
  });

  it('latestCheckpoint ignores temp dirs, half-written dirs and stray files; orders by step number', () => {
    expect(latestCheckpoint(run)).toBeNull();
    saveCheckpoint(run, state(100));
    saveCheckpoint(run, state(1000000)); // 7 digits sorts after 6
    saveCheckpoint(run, state(200));
    const root = path.join(run, 'checkpoints');
    mkdirSync(path.join(root, 'step-9999999.tmp-123-abcd')); // a crashed save
    mkdirSync(path.join(root, 'step-8888888')); // no manifest: not finished
    writeFileSync(path.join(root, 'notes.txt'), 'x');
    expect(listCheckpoints(run).map((c) => c.step)).toEqual([100, 200, 1000000]);
    expect(latestCheckpoint(run)).toBe(path.join(root, 'step-1000000'));
  });

  it('keepLast 2 keeps only the two newest checkpoints', () => {
    for (const step of [10, 20, 30, 40]) saveCheckpoint(run, state(step), { keepLast: 2 });
    expect(listCheckpoints(run).map((c) => c.step)).toEqual([30, 40]);
  });

  it('saving the same step again replaces it atomically', () => {
    saveCheckpoint(run, state(7));
    const s = state(7);
    s.params.get('transformer.wte.weight')!.data[0] = 42;
    const dir = saveCheckpoint(run, s);
    expect(loadCheckpoint(dir).params.get('transformer.wte.weight')!.data[0]).toBe(42);
    expect(readdirSync(path.join(run, 'checkpoints'))).toEqual(['step-000007']);
  });
});

describe('atomic writes', () => {
  it('a failing fill leaves no directory behind, tmp names are recognised', () => {
    const final = path.join(run, 'x', 'step-000001');
    expect(() =>
      commitDirAtomic(final, (tmp) => {
        expect(isTmpDirName(path.basename(tmp))).toBe(true);
        writeFileSync(path.join(tmp, 'a'), 'partial');
        throw new Error('disk full');
      }),
    ).toThrow('disk full');
    expect(readdirSync(path.join(run, 'x'))).toEqual([]);
    expect(isTmpDirName('step-000001')).toBe(false);
  });

  it('writeFileAtomic replaces content and leaves no temp file', () => {
    const f = path.join(run, 'a.json');
    writeFileAtomic(f, 'one');
    writeFileAtomic(f, 'two');
    expect(readFileSync(f, 'utf8')).toBe('two');
    expect(readdirSync(run)).toEqual(['a.json']);
  });
});
