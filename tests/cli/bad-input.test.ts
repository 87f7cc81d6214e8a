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
    // one attention buffer (B, NH, T, T) = 8 x 64 x 1024² floats = 2 GiB, with model states of ~1 MiB (a model whose states
    // exceed the machine's memory is refused earlier, by the formula: the case below)
    writeFileSync(cfg, JSON.stringify({ model: { n_layer: 1, n_head: 64, d_model: 64, block_size: 1024 } }));
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

// whole messages (one line per problem), one precedence rule, values at the edges
describe('train: every problem, in full, one line each', () => {
  const lines = (r: ReturnType<typeof shardwise>) => r.stderr.trim().split('\n');

  it('a config file with wrong types: every problem, naming the file and each field', () => {
    const cfg = path.join(root, 'types.json');
    writeFileSync(cfg, JSON.stringify({ train: { steps: 'ten', lr: 'fast' }, model: { n_layer: 'two' }, zero_optimisation: {} }));
    const r = shardwise(['train', '--config', cfg, '--out', path.join(root, 'types')]);
    expect(r.code).toBe(2);
    expect(lines(r)).toEqual([
      `shardwise: config file ${cfg}: model.n_layer: Invalid input: expected number, received string`,
      `shardwise: config file ${cfg}: train.steps: Invalid input: expected number, received string`,
      `shardwise: config file ${cfg}: train.lr: Invalid input: expected number, received string`,
      `shardwise: config file ${cfg}: (top level): Unrecognized key: "zero_optimisation"`,
    ]);
    expect(existsSync(path.join(root, 'types'))).toBe(false);
  });

  it('one file whose keys disagree: each pair named with both values', () => {
    const cfg = path.join(root, 'both.json');
    writeFileSync(
      cfg,
      JSON.stringify({ train_batch_size: 16, train: { batch_size: 8 }, zero_optimization: { stage: 2 }, strategy: 'ddp' }),
    );
    const r = shardwise(['train', '--config', cfg, '--world', '2', '--steps', '1', '--out', path.join(root, 'both')]);
    expect(r.code).toBe(2);
    expect(lines(r)).toEqual([
      `shardwise: config file ${cfg}: strategy "ddp" and zero_optimization.stage 2 (zero2) both set the strategy to different values; keep one of them`,
      `shardwise: config file ${cfg}: train.batch_size 8 and train_batch_size 16 both set the batch size to different values; keep one of them`,
    ]);
  });

  it('values at the edges: a negative --steps, a stage delay of 1e12 ms (also from the later of two --config files), a folder as --dataset', () => {
    expectOneLineError(shardwise(['train', '--steps', '-5']), /^shardwise: --steps must be a positive integer, got -5$/);
    const cfg = path.join(root, 'delay.json');
    writeFileSync(cfg, JSON.stringify({ parallel: { stage_delay_ms: 1e12 } }));
    expectOneLineError(
      shardwise(['train', '--config', cfg, '--steps', '1']),
      /parallel\.stage_delay_ms must be a number from 0 to 60000, got 1000000000000$/,
    );
    // two files merge in order: the later one's value stands, and its range is checked the same
    const sane = path.join(root, 'sane-delay.json');
    writeFileSync(sane, JSON.stringify({ parallel: { stage_delay_ms: 5 } }));
    expectOneLineError(
      shardwise(['train', '--config', sane, '--config', cfg, '--steps', '1']),
      /parallel\.stage_delay_ms must be a number from 0 to 60000, got 1000000000000$/,
    );
    expectOneLineError(
      shardwise(['train', '--dataset', root, '--steps', '1', '--out', path.join(root, 'dsdir')]),
      /--dataset .* is a folder, not a text file/,
    );
    expect(existsSync(path.join(root, 'dsdir'))).toBe(false);
  });

  it('--out under /proc is refused within a second, before anything is created', () => {
    const t0 = Date.now();
    const r = shardwise(['train', '--out', '/proc/nope', '--steps', '1'], { timeoutMs: 30_000 });
    // the process itself (node's start included) well under the 10 minutes a recursive mkdir spun
    expect(Date.now() - t0).toBeLessThan(5_000);
    expectOneLineError(r, /^shardwise: --out \/proc\/nope: \/proc\/nope is under \/proc, a kernel file system/);
  });

  it("a model past the machine's memory is refused with the formula line", () => {
    const cfg = path.join(root, 'gpt3.json');
    writeFileSync(cfg, JSON.stringify({ model: { n_layer: 96, n_head: 96, d_model: 12288, block_size: 2048 } }));
    const out = path.join(root, 'gpt3');
    const r = shardwise(['train', '--config', cfg, '--steps', '1', '--out', out]);
    expectOneLineError(
      r,
      /^shardwise: model states need 2\.53 TiB per rank \(16Ψ with Ψ = 173,987,880,960 parameters.*\) but this machine has .* of memory/,
    );
    expect(existsSync(out)).toBe(false);
  });

  it('ignored DeepSpeed keys: printed as notes on stderr and kept in summary.json; flags beat the file', () => {
    const cfg = path.join(root, 'ignored.json');
    writeFileSync(
      cfg,
      JSON.stringify({ train: { steps: 3, seed: 5 }, zero_optimization: { overlap_comm: false, allgather_bucket_size: 5e8 } }),
    );
    const out = path.join(root, 'ignored');
    const r = shardwise(['train', '--config', cfg, '--steps', '2', '--eval-interval', '0', '--json', '--out', out]);
    expect(r.code, r.stderr).toBe(0);
    const notes = [
      `config file ${cfg}: zero_optimization.overlap_comm false ignored: this build always overlaps gradient communication with backward`,
      `config file ${cfg}: zero_optimization.allgather_bucket_size 500000000 ignored: weights are gathered whole per layer, not in buckets of a set size`,
    ];
    expect(r.stderr.split('\n').filter((l) => l.includes('note:'))).toEqual(notes.map((n) => `shardwise: note: ${n}`));
    const summary = JSON.parse(readFileSync(path.join(out, 'summary.json'), 'utf8'));
    expect(summary).toMatchObject({ steps: 2, notes });
    // stdout is JSON lines only: the notes are a field of the summary there
    expect(
      r.stdout
        .trim()
        .split('\n')
        .every((l) => l.startsWith('{')),
    ).toBe(true);
    expect(JSON.parse(r.stdout.trim().split('\n').at(-1)!).notes).toEqual(notes);
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
