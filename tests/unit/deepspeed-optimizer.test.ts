// A ds_config.json written for DeepSpeed (optimizer, scheduler, logging keys, Hugging Face's
// "auto") resolves to the run it describes: AdamW's hyperparameters and the warm-up/decay land
// on train.*, what cannot map is refused naming its key, and what changes nothing is a note.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { readConfigFile } from '../../src-main/cli/train-flags.js';
import { JobError, resolveRun } from '../../src-main/launch/resolve-job.js';
import { learningRate } from '../../workers/train/schedule.js';

function configFile(content: unknown): string {
  const f = path.join(mkdtempSync(path.join(tmpdir(), 'ds-opt-')), 'ds_config.json');
  writeFileSync(f, JSON.stringify(content));
  return f;
}

const resolveFile = (content: unknown, req: Record<string, unknown> = {}) =>
  resolveRun(req, { runDir: '/tmp/run', file: readConfigFile(configFile(content)), configName: 'ds_config.json' });

function refusal(content: unknown, req: Record<string, unknown> = {}): JobError {
  try {
    resolveFile(content, req);
  } catch (e) {
    expect(e).toBeInstanceOf(JobError);
    return e as JobError;
  }
  throw new Error('resolved; expected a refusal');
}

describe("DeepSpeed's optimizer and scheduler sections", () => {
  it('a typical ds_config.json (Adam, WarmupLR, fp16, logging keys) resolves to the run it describes', () => {
    const { job, notes } = resolveFile(
      {
        train_batch_size: 16,
        gradient_accumulation_steps: 1,
        steps_per_print: 100,
        wall_clock_breakdown: false,
        zero_optimization: { stage: 1 },
        optimizer: { type: 'Adam', params: { lr: 0.002, betas: [0.8, 0.95], eps: 1e-7, weight_decay: 0.05 } },
        scheduler: { type: 'WarmupLR', params: { warmup_min_lr: 0, warmup_max_lr: 0.002, warmup_num_steps: 7, warmup_type: 'linear' } },
        fp16: { enabled: true, loss_scale: 0, initial_scale_power: 12 },
      },
      { world: 2 },
    );
    expect(job.parallel?.strategy).toBe('zero1');
    expect(job.train).toMatchObject({ batch_size: 16, lr: 0.002, beta1: 0.8, beta2: 0.95, eps: 1e-7, weight_decay: 0.05, warmup_steps: 7 });
    // WarmupLR: the peak after the warm-up, kept to the end
    expect(job.train.min_lr).toBe(0.002);
    const lr = (step: number) => learningRate(step, job.train);
    expect(lr(7)).toBeCloseTo(0.002, 12);
    expect(lr(150)).toBeCloseTo(0.002, 12);
    expect(lr(1)).toBeCloseTo(0.002 / 7, 12);
    expect(notes).toContain('config file ds_config.json: steps_per_print 100 ignored: every step is printed and kept in metrics.jsonl');
    expect(notes.some((n) => n.startsWith('config file ds_config.json: wall_clock_breakdown false ignored: '))).toBe(true);
  });

  it('WarmupDecayLR ends at 0 after total_num_steps, and says its decay is a cosine here', () => {
    const { job, notes } = resolveFile({
      optimizer: { type: 'AdamW', params: { lr: 0.001 } },
      scheduler: { type: 'WarmupDecayLR', params: { warmup_max_lr: 0.001, warmup_num_steps: 5, total_num_steps: 40 } },
    });
    expect(job.train).toMatchObject({ lr: 0.001, min_lr: 0, warmup_steps: 5, steps: 40 });
    expect(learningRate(40, job.train)).toBeCloseTo(0, 12);
    expect(notes.some((n) => n.includes('warmup_type "log" ignored: the warm-up here is linear'))).toBe(true);
    expect(notes.some((n) => n.includes('WarmupDecayLR decays to 0 along a cosine here'))).toBe(true);
    // the request still wins over the file
    expect(resolveFile({ scheduler: { type: 'WarmupDecayLR', params: { total_num_steps: 40 } } }, { steps: 12 }).job.train.steps).toBe(12);
  });

  it('WarmupCosineLR decays to cos_min_ratio x lr', () => {
    const { job } = resolveFile({
      optimizer: { type: 'AdamW', params: { lr: 0.004 } },
      scheduler: {
        type: 'WarmupCosineLR',
        params: { warmup_num_steps: 3, total_num_steps: 30, cos_min_ratio: 0.25, warmup_type: 'linear' },
      },
    });
    expect(job.train).toMatchObject({ lr: 0.004, min_lr: 0.001, warmup_steps: 3, steps: 30 });
    expect(learningRate(30, job.train)).toBeCloseTo(0.001, 12);
  });

  it('Hugging Face\'s "auto" leaves a value to Shardwise, with a note', () => {
    const { job, notes } = resolveFile({
      train_micro_batch_size_per_gpu: 'auto',
      gradient_clipping: 'auto',
      optimizer: { type: 'AdamW', params: { lr: 'auto', betas: 'auto', eps: 'auto', weight_decay: 'auto' } },
    });
    expect(job.train.lr).toBe(6e-3); // the tiny preset's
    expect(notes.filter((n) => n.includes('"auto" ignored')).length).toBe(6);
  });

  it('a value that is neither a number nor "auto" says which it expected', () => {
    expect(() => readConfigFile(configFile({ train_batch_size: 'lots' }))).toThrow(
      'train_batch_size: expected a positive integer, or "auto" (Hugging Face\'s placeholder)',
    );
  });

  it('refuses what cannot map, naming the key and what to use', () => {
    expect(refusal({ optimizer: { type: 'Lamb', params: { lr: 0.01 } } }).message).toContain(
      'ds_config.json: optimizer.type "Lamb" is not supported: Shardwise trains with AdamW; use "AdamW" (or "Adam")',
    );
    expect(refusal({ scheduler: { type: 'OneCycle', params: {} } }).message).toMatch(
      /scheduler.type "OneCycle" is not supported: .*WarmupLR, WarmupDecayLR and WarmupCosineLR map onto it/,
    );
    expect(refusal({ optimizer: { type: 'Adam', params: { adam_w_mode: false, weight_decay: 0.1 } } }).field).toBe('weight_decay');
    expect(refusal({ scheduler: { type: 'WarmupCosineLR', params: { warmup_num_steps: 3 } } }).message).toContain(
      'needs optimizer.params.lr in the same file',
    );
    // two keys of one file that set the learning rate differently: neither silently wins
    const both = refusal({
      optimizer: { type: 'AdamW', params: { lr: 0.001 } },
      scheduler: { type: 'WarmupLR', params: { warmup_max_lr: 0.002 } },
    });
    expect(both.field).toBe('lr');
    expect(both.message).toContain('optimizer.params.lr 0.001 and scheduler.params.warmup_max_lr 0.002 both set lr to different values');
    const own = refusal({ train: { lr: 0.003 }, optimizer: { type: 'AdamW', params: { lr: 0.001 } } });
    expect(own.message).toContain('train.lr 0.003 and optimizer.params.lr 0.001 both set train.lr to different values');
  });
});
