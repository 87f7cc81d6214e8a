import { cpSync, existsSync, mkdirSync, readFileSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { shardwise, tempDir } from './helpers.js';

// Bad input: one clear line on stderr, a non-zero exit, and no run folder that looks complete.
const root = tempDir('bad');

function expectOneLineError(r: ReturnType<typeof shardwise>, pattern: RegExp) {
  expect(r.code).not.toBe(0);
  const lines = r.stderr.trim().split('\n');
  expect(lines, r.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(/^shardwise: /);
  expect(lines[0]).toMatch(pattern);
}

function expectNoCompleteRun(dir: string) {
  if (!existsSync(dir)) return;
  const state = path.join(dir, 'state.json');
  if (existsSync(state)) expect(JSON.parse(readFileSync(state, 'utf8')).status).not.toBe('completed');
  expect(existsSync(path.join(dir, 'summary.json'))).toBe(false);
}

describe('train rejects bad input before training', () => {
  it('unknown preset: names the presets', () => {
    const out = path.join(root, 'p');
    const r = shardwise(['train', '--preset', 'huge', '--steps', '2', '--out', out]);
    expectOneLineError(r, /unknown preset "huge".*tiny, small/);
    expect(existsSync(out)).toBe(false);
  });

  it('unknown flag: says which and where to look', () => {
    const r = shardwise(['train', '--preset', 'tiny', '--stepz', '2']);
    expectOneLineError(r, /--stepz.*shardwise train --help/);
  });

  it('unknown command', () => {
    expectOneLineError(shardwise(['trian']), /unknown command "trian"/);
  });

  it('a missing dataset file', () => {
    const out = path.join(root, 'missing');
    const r = shardwise(['train', '--steps', '2', '--dataset', path.join(root, 'nope.txt'), '--out', out]);
    expectOneLineError(r, /nope\.txt.*does not exist/);
    expect(existsSync(out)).toBe(false);
  });

  it('an empty dataset file', () => {
    const file = path.join(root, 'empty.txt');
    writeFileSync(file, '');
    const out = path.join(root, 'empty');
    const r = shardwise(['train', '--steps', '2', '--dataset', file, '--out', out]);
    expectOneLineError(r, /empty/);
    expect(existsSync(out)).toBe(false);
  });

  it('a binary dataset file', () => {
    const file = path.join(root, 'blob.bin');
    writeFileSync(file, Buffer.from([0x7f, 0x45, 0x4c, 0x46, 0, 1, 2, 3, 0xff, 0xfe, 0, 0]));
    const out = path.join(root, 'binary');
    const r = shardwise(['train', '--steps', '2', '--dataset', file, '--out', out]);
    expectOneLineError(r, /binary|NUL|UTF-8/i);
    expect(existsSync(out)).toBe(false);
  });

  it('a text too small for one block', () => {
    const file = path.join(root, 'small.txt');
    writeFileSync(file, 'hello world\n'.repeat(20));
    const out = path.join(root, 'small');
    const r = shardwise(['train', '--steps', '2', '--dataset', file, '--out', out]);
    expectOneLineError(r, /too small/);
    expect(existsSync(out)).toBe(false);
  });

  it("a model too large for the adapter's buffer limits", () => {
    const cfg = path.join(root, 'huge.json');
    writeFileSync(cfg, JSON.stringify({ model: { n_layer: 2, n_head: 16, d_model: 16384, block_size: 64 } }));
    const out = path.join(root, 'huge');
    const r = shardwise(['train', '--config', cfg, '--steps', '2', '--out', out]);
    expectOneLineError(r, /adapter allows at most \d+ bytes/);
    expectNoCompleteRun(out);
    expect(existsSync(out)).toBe(false);
  });

  it('a config whose heads do not divide d_model', () => {
    const cfg = path.join(root, 'heads.json');
    writeFileSync(cfg, JSON.stringify({ model: { n_head: 3 } }));
    const r = shardwise(['train', '--config', cfg, '--steps', '2', '--out', path.join(root, 'heads')]);
    expectOneLineError(r, /d_model \(64\) must be divisible by model\.n_head \(3\)/);
  });

  it('an output folder that already holds a run', () => {
    const out = path.join(root, 'occupied');
    mkdirSync(out);
    writeFileSync(path.join(out, 'state.json'), '{}');
    expectOneLineError(shardwise(['train', '--steps', '2', '--out', out]), /not empty.*--resume/);
  });
});

describe('corrupt or truncated checkpoints are refused', () => {
  const run = path.join(root, 'ckpt-run');
  let ckpt: string;
  beforeAll(() => {
    const r = shardwise(['train', '--steps', '2', '--checkpoint-interval', '2', '--eval-interval', '0', '--out', run]);
    expect(r.code, r.stderr).toBe(0);
    ckpt = path.join(run, 'checkpoints', 'step-000002');
    expect(existsSync(path.join(ckpt, 'manifest.json'))).toBe(true);
  });

  it('a truncated model file: resume and eval both name the file', () => {
    const copy = path.join(root, 'trunc-run');
    cpSync(run, copy, { recursive: true });
    const file = path.join(copy, 'checkpoints', 'step-000002', 'model.safetensors');
    truncateSync(file, Math.floor(statSync(file).size / 2));
    const resume = shardwise(['train', '--resume', copy, '--steps', '4']);
    expectOneLineError(resume, /model\.safetensors/);
    const text = path.join(root, 'eval.txt');
    writeFileSync(text, 'the cat sat on the mat. '.repeat(20));
    expectOneLineError(shardwise(['eval', copy, '--text', text]), /model\.safetensors/);
    expect(JSON.parse(readFileSync(path.join(copy, 'state.json'), 'utf8')).status).toBe('failed');
  });

  it('a flipped byte in the optimizer state fails the checksum', () => {
    const copy = path.join(root, 'flip-run');
    cpSync(run, copy, { recursive: true });
    const file = path.join(copy, 'checkpoints', 'step-000002', 'optimizer.safetensors');
    const bytes = readFileSync(file);
    bytes[bytes.length - 3] ^= 0xff;
    writeFileSync(file, bytes);
    expectOneLineError(shardwise(['train', '--resume', copy, '--steps', '4']), /optimizer\.safetensors.*(sha256|checksum)/i);
  });

  it('eval without --text, sample with bad --tokens, export with an unknown format', () => {
    expectOneLineError(shardwise(['eval', run]), /--text FILE/);
    expectOneLineError(shardwise(['sample', run, '--tokens', 'many']), /--tokens must be a positive integer/);
    expectOneLineError(shardwise(['export', run, '--format', 'onnx']), /--format hf/);
  });
});
