import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { mapDeepSpeed } from '../../src-main/launch/deepspeed-config.js';
import { shardwise, tempDir } from '../cli/helpers.js';

describe('DeepSpeed config names', () => {
  it('maps stage, offload, buckets, accumulation and batch sizes onto the run', () => {
    const m = mapDeepSpeed(
      {
        train_micro_batch_size_per_gpu: 3,
        gradient_accumulation_steps: 2,
        gradient_clipping: 0.5,
        zero_optimization: { stage: 1, reduce_bucket_size: 262144, offload_optimizer: { device: 'cpu' } },
      },
      2,
    );
    expect(m.parallel).toEqual({ strategy: 'zero1', offload_optimizer: 'cpu', bucket_cap_mb: 1, micro_batches: 2 });
    expect(m.train).toEqual({ batch_size: 12, grad_clip: 0.5 });
    expect(mapDeepSpeed({ zero_optimization: { stage: 0 } }, 2).parallel.strategy).toBe('ddp');
    expect(mapDeepSpeed({ zero_optimization: { stage: 2 } }, 2).parallel.strategy).toBe('zero2');
    expect(mapDeepSpeed({ zero_optimization: { stage: 3, stage3_prefetch_bucket_size: 0 } }, 2).parallel).toEqual({
      strategy: 'zero3',
      prefetch: false,
    });
  });

  it('names the field of every impossible combination', () => {
    expect(() => mapDeepSpeed({ zero_optimization: { stage: 0, offload_optimizer: { device: 'cpu' } } }, 2)).toThrow(
      /offload_optimizer.device "cpu" needs zero_optimization.stage 1/,
    );
    expect(() => mapDeepSpeed({ zero_optimization: { stage: 3, offload_optimizer: { device: 'cpu' } } }, 2)).toThrow(
      /available with stages 1 and 2 in this build, not yet with stage 3/,
    );
    expect(() => mapDeepSpeed({ zero_optimization: { stage: 1, stage3_prefetch_bucket_size: 1e6 } }, 2)).toThrow(
      /stage3_prefetch_bucket_size applies to zero_optimization.stage 3/,
    );
    expect(() => mapDeepSpeed({ train_batch_size: 10, train_micro_batch_size_per_gpu: 3, gradient_accumulation_steps: 2 }, 2)).toThrow(
      /train_batch_size 10 must equal train_micro_batch_size_per_gpu 3 x gradient_accumulation_steps 2 x world 2 = 12/,
    );
    expect(mapDeepSpeed({ activation_checkpointing: { partition_activations: true } }, 2).parallel.partition_activations).toBe(true);
  });

  it("reports every refused key at once, not only the first section's", () => {
    expect(() =>
      mapDeepSpeed(
        {
          zero_optimization: { stage: 1, stage3_prefetch_bucket_size: 1e6 },
          activation_checkpointing: { cpu_checkpointing: true },
          bf16: { enabled: true },
          fp16: { enabled: true },
        },
        2,
      ),
    ).toThrow(
      [
        'zero_optimization.stage3_prefetch_bucket_size applies to zero_optimization.stage 3',
        'activation_checkpointing.cpu_checkpointing is not supported: checkpointed activations stay on the device',
        'bf16.enabled and fp16.enabled are both true; enable one of them (bf16 needs no loss scaling)',
      ].join('\n'),
    );
  });

  it('maps bf16.enabled and fp16 (loss_scale 0 = dynamic, > 0 = static) onto the precision and its loss scaling', () => {
    expect(mapDeepSpeed({ bf16: { enabled: true } }, 1).precision).toBe('bf16');
    const dyn = mapDeepSpeed(
      { fp16: { enabled: true, loss_scale: 0, initial_scale_power: 12, loss_scale_window: 200, hysteresis: 3, min_loss_scale: 0.5 } },
      1,
    );
    expect(dyn.precision).toBe('fp16');
    expect(dyn.loss_scale).toEqual({ initial_scale_power: 12, loss_scale_window: 200, hysteresis: 3, min_loss_scale: 0.5 });
    expect(mapDeepSpeed({ fp16: { enabled: true, loss_scale: 128 } }, 1).loss_scale).toEqual({ static_scale: 128 });
    expect(mapDeepSpeed({ fp16: { enabled: false } }, 1).precision).toBeUndefined();
    expect(() => mapDeepSpeed({ bf16: { enabled: true }, fp16: { enabled: true } }, 1)).toThrow(/both true; enable one of them/);
  });

  it('the CLI refuses a bad ds config in one line before starting anything', () => {
    const dir = tempDir('ds');
    const cfg = path.join(dir, 'ds.json');
    writeFileSync(cfg, JSON.stringify({ zero_optimization: { stage: 0, offload_optimizer: { device: 'cpu' } } }));
    const r = shardwise(['train', '--config', cfg, '--world', '2', '--steps', '1', '--out', path.join(dir, 'run')]);
    expect(r.code).toBe(2);
    expect(r.stderr.trim()).toMatch(
      /^shardwise: config file .*ds\.json: zero_optimization\.offload_optimizer\.device "cpu" needs zero_optimization\.stage 1/,
    );
    writeFileSync(cfg, JSON.stringify({ zero_optimisation: { stage: 1 } }));
    const typo = shardwise(['train', '--config', cfg, '--steps', '1']);
    expect(typo.code).toBe(2);
    expect(typo.stderr).toMatch(/zero_optimisation/);
    writeFileSync(cfg, JSON.stringify({ bf16: { enabled: true }, fp16: { enabled: true } }));
    const both = shardwise(['train', '--config', cfg, '--steps', '1', '--out', path.join(dir, 'run')]);
    expect(both.code).toBe(2);
    expect(both.stderr).toMatch(/bf16\.enabled and fp16\.enabled are both true/);
  });
});
