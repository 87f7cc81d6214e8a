// The PyTorch export's layout mapping (workers/export/torchrun/plan.ts) and its cluster files
// (cluster-configs.ts) checked against the tables of DeepSpeed's and Megatron-LM's documented
// names (cluster-keys.ts). The FSDP rows matter most here: this machine's PyTorch (1.13 on Python
// 3.11) cannot import FSDP, so the mapping is what can be checked of that path.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { resolveJob } from '../../src-main/cli/train.js';
import { clusterConfigs } from '../../workers/export/torchrun/cluster-configs.js';
import { DEEPSPEED_KEYS, type KeyType, MEGATRON_ARGS } from '../../workers/export/torchrun/cluster-keys.js';
import { torchPlan } from '../../workers/export/torchrun/plan.js';
import { DEFAULT_PARALLEL, type ParallelSpec, type TrainJob } from '../../workers/protocol/train.js';

const job = (extra: Partial<TrainJob> = {}): TrainJob => ({
  run_dir: '.',
  model: { n_layer: 2, n_head: 2, d_model: 64, block_size: 64 },
  data: { dataset: 'builtin:grammar' },
  train: {
    steps: 20,
    batch_size: 8,
    lr: 6e-3,
    min_lr: 6e-4,
    warmup_steps: 2,
    weight_decay: 0.1,
    beta1: 0.9,
    beta2: 0.95,
    eps: 1e-8,
    grad_clip: 1,
    seed: 3,
    eval_interval: 2,
    eval_batches: 4,
    checkpoint_interval: 10,
    keep_checkpoints: 3,
    activation_checkpointing: false,
  },
  device: {},
  ...extra,
});
const par = (p: Partial<ParallelSpec>): ParallelSpec => ({ ...DEFAULT_PARALLEL, ...p });

describe('torchPlan: a layout in PyTorch terms', () => {
  it('ddp keeps bucket_cap_mb; zero1 adds ZeroRedundancyOptimizer; single wraps nothing', () => {
    expect(torchPlan(job(), par({ strategy: 'ddp', world: 2, bucket_cap_mb: 0.5 }))).toMatchObject({
      wrapper: 'ddp',
      bucket_cap_mb: 0.5,
      optimizer: 'adamw',
      world: 2,
    });
    expect(torchPlan(job(), par({ strategy: 'zero1', world: 2 }))).toMatchObject({ wrapper: 'ddp', optimizer: 'zero' });
    expect(torchPlan(job(), par({}))).toMatchObject({ wrapper: 'none', optimizer: 'adamw', world: 1, comm_hook: null, autocast: null });
  });

  it('zero2, zero3 and offload become FSDP SHARD_GRAD_OP, FULL_SHARD and CPUOffload, with why FSDP is unchecked here', () => {
    expect(torchPlan(job(), par({ strategy: 'zero2', world: 2 }))).toMatchObject({
      wrapper: 'fsdp',
      sharding_strategy: 'SHARD_GRAD_OP',
      cpu_offload: false,
    });
    const z3 = torchPlan(job(), par({ strategy: 'zero3', world: 4 }));
    expect(z3).toMatchObject({ wrapper: 'fsdp', sharding_strategy: 'FULL_SHARD', cpu_offload: false, world: 4 });
    expect(z3.unmapped.join('\n')).toContain('PyTorch >= 2.0');
    const off = torchPlan(job(), par({ strategy: 'zero2', world: 2, offload_optimizer: 'cpu' }));
    expect(off).toMatchObject({ sharding_strategy: 'SHARD_GRAD_OP', cpu_offload: true });
    expect(off.unmapped.join('\n')).toMatch(/CPUOffload keeps parameters and gradients on the host/);
  });

  it('powersgd:R keeps the rank and start iteration (at least 2, as PyTorch requires) and resumes the iteration count', () => {
    const p = torchPlan(job(), par({ strategy: 'ddp', world: 2, grad_compression: { hook: 'powersgd', matrix_approximation_rank: 4 } }), {
      hookIter: 10,
    });
    expect(p.comm_hook).toEqual({
      name: 'powerSGD',
      matrix_approximation_rank: 4,
      start_powerSGD_iter: 10,
      min_compression_rate: 2,
      use_error_feedback: true,
      warm_start: true,
      iter: 10,
    });
    const early = torchPlan(job(), par({ strategy: 'ddp', world: 2, grad_compression: { hook: 'powersgd', start_powerSGD_iter: 0 } }));
    expect(early.comm_hook).toMatchObject({ start_powerSGD_iter: 2, iter: 0 });
    expect(early.unmapped.join('\n')).toContain('start_powerSGD_iter 0');
    expect(torchPlan(job(), par({ strategy: 'ddp', world: 2, grad_compression: { hook: 'bf16' } })).comm_hook).toEqual({
      name: 'bf16_compress',
    });
    // no hook outside DDP: said, not silently dropped
    expect(torchPlan(job(), par({ strategy: 'zero1', world: 2, grad_compression: { hook: 'fp16' } })).unmapped.join('\n')).toContain(
      'grad compression fp16 under zero1',
    );
  });

  it("bf16 is autocast; fp16 is autocast with GradScaler at the run's scaler (the checkpoint's scale first)", () => {
    expect(torchPlan(job({ precision: 'bf16' }), par({})).autocast).toBe('bfloat16');
    const fp16 = torchPlan(job({ precision: 'fp16' }), par({}));
    expect(fp16).toMatchObject({ autocast: 'float16', grad_scaler: { init_scale: 65536, growth_interval: 1000 } });
    const resumed = torchPlan(
      job({ precision: 'fp16', loss_scale: { initial_scale_power: 12, loss_scale_window: 200, hysteresis: 2, min_loss_scale: 1 } }),
      par({}),
      {
        scaler: { scale: 1024, good_steps: 5, hysteresis_left: 2, skipped_steps: 1 },
      },
    );
    expect(resumed.grad_scaler).toEqual({ init_scale: 1024, growth_interval: 200 });
  });

  it('tp, pp and 3d: train.py runs the data-parallel replicas; the split goes to the cluster files', () => {
    expect(torchPlan(job(), par({ strategy: 'tp', world: 2, tp: 2 }))).toMatchObject({ world: 1, wrapper: 'none' });
    expect(torchPlan(job(), par({ strategy: '3d', world: 8, dp: 2, tp: 2, pp: 2 }))).toMatchObject({ world: 2, wrapper: 'ddp' });
  });
});

function typeOf(v: unknown): KeyType {
  if (Array.isArray(v)) return 'number[]';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v as KeyType;
}

function flatten(o: Record<string, unknown>, prefix = ''): [string, unknown][] {
  return Object.entries(o).flatMap(([k, v]) => {
    const key = prefix ? `${prefix}.${k}` : k;
    return v && typeof v === 'object' && !Array.isArray(v)
      ? [[key, v] as [string, unknown], ...flatten(v as Record<string, unknown>, key)]
      : [[key, v] as [string, unknown]];
  });
}

describe("cluster files: DeepSpeed's and Megatron-LM's documented names only", () => {
  const layouts: [string, TrainJob, ParallelSpec][] = [
    [
      '3d fp16 with checkpointing',
      job({ precision: 'fp16', train: { ...job().train, activation_checkpointing: true } }),
      par({ strategy: '3d', world: 8, dp: 2, tp: 2, pp: 2, micro_batches: 2 }),
    ],
    ['pp bf16 gpipe', job({ precision: 'bf16' }), par({ strategy: 'pp', world: 2, pp: 2, micro_batches: 4, schedule: 'gpipe' })],
    ['tp fp32', job(), par({ strategy: 'tp', world: 2, tp: 2 })],
  ];
  for (const [name, j, p] of layouts) {
    it(`${name}: every ds_config key is documented with its type; batch sizes multiply out; every Megatron argument is known`, () => {
      const { deepspeed, megatron } = clusterConfigs(j, p);
      for (const [key, value] of flatten(deepspeed)) {
        const doc = DEEPSPEED_KEYS[key];
        expect(doc, `ds_config key ${key} is not in DeepSpeed's documented keys`).toBeDefined();
        const t = typeOf(value);
        expect(t === doc!.type || (doc!.type === 'number' && t === 'integer'), `${key}: ${t}, documented ${doc!.type}`).toBe(true);
      }
      const dp = p.strategy === '3d' ? p.dp! : 1;
      expect(deepspeed.train_batch_size).toBe(
        (deepspeed.train_micro_batch_size_per_gpu as number) * (deepspeed.gradient_accumulation_steps as number) * dp,
      );
      const args = megatron.split('\n').filter((l) => l && !l.startsWith('#'));
      for (const line of args) {
        const [flag, ...rest] = line.split(' ');
        const doc = MEGATRON_ARGS[flag!];
        expect(doc, `${flag} is not a Megatron-LM argument in the table`).toBeDefined();
        expect(rest.length > 0, `${flag} ${doc!.value ? 'takes' : 'takes no'} value`).toBe(doc!.value);
      }
      const value = (f: string) => Number(args.find((l) => l.startsWith(`${f} `))!.split(' ')[1]);
      expect(value('--tensor-model-parallel-size')).toBe(p.tp ?? 1);
      expect(value('--pipeline-model-parallel-size')).toBe(p.pp ?? 1);
      expect(value('--micro-batch-size')).toBe(deepspeed.train_micro_batch_size_per_gpu);
      expect(value('--global-batch-size')).toBe(8);
    });
  }
});

// Round trip: the exported ds_config.json, read back by `shardwise train --config` (DeepSpeed's
// names: src-main/launch/deepspeed-config.ts) with the split megatron_args.txt states as flags
// (DeepSpeed sets tensor and pipeline sizes in code, not in its config), resolves to the layout,
// batch, precision, loss scaling and optimizer settings exported.
describe('round trip: train --config ds_config.json (+ megatron_args.txt sizes) resolves to the exported layout', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'shardwise-ds-roundtrip-'));
  const cases: [string, TrainJob, ParallelSpec][] = [
    ['zero1 2, fp32', job(), par({ strategy: 'zero1', world: 2, micro_batches: 2 })],
    ['zero2 2 with offload, bf16', job({ precision: 'bf16' }), par({ strategy: 'zero2', world: 2, offload_optimizer: 'cpu' })],
    [
      '3d 2x2x2 fp16, 2 micro-batches',
      job({ precision: 'fp16' }),
      par({ strategy: '3d', world: 8, dp: 2, tp: 2, pp: 2, micro_batches: 2 }),
    ],
    ['pp 2, 4 micro-batches', job(), par({ strategy: 'pp', world: 2, pp: 2, micro_batches: 4 })],
  ];
  for (const [name, j, p] of cases) {
    it(name, () => {
      const { deepspeed, megatron } = clusterConfigs(j, p);
      const file = path.join(dir, `${name.replace(/\W+/g, '-')}.json`);
      writeFileSync(file, JSON.stringify(deepspeed));
      const arg = (f: string) =>
        megatron
          .split('\n')
          .find((l) => l.startsWith(`${f} `))
          ?.split(' ')[1];
      const [tp, pp] = [Number(arg('--tensor-model-parallel-size')), Number(arg('--pipeline-model-parallel-size'))];
      const dp = Number(arg('--global-batch-size')) / Number(arg('--micro-batch-size')) / Number(deepspeed.gradient_accumulation_steps);
      // the flags a user gives beside the file: the strategy (which DeepSpeed's config has no key for) and the split's sizes
      const split =
        tp > 1 && pp > 1
          ? ['--strategy', '3d', '--dp', String(dp), '--tp', String(tp), '--pp', String(pp)]
          : pp > 1
            ? ['--strategy', 'pp', '--pp', String(pp)]
            : ['--world', String(dp)];
      const { job: got } = resolveJob(['--config', file, '--preset', 'tiny', '--seed', '3', ...split, '--out', path.join(dir, 'run')]);
      expect(got.parallel).toMatchObject({
        strategy: p.strategy,
        world: p.world,
        micro_batches: p.micro_batches,
        ...(p.offload_optimizer ? { offload_optimizer: p.offload_optimizer } : {}),
        ...(p.strategy === '3d' ? { dp: p.dp, tp: p.tp, pp: p.pp } : {}),
      });
      const t = j.train;
      expect(got.train).toMatchObject({
        steps: t.steps,
        batch_size: t.batch_size,
        lr: t.lr,
        warmup_steps: t.warmup_steps,
        weight_decay: t.weight_decay,
        beta1: t.beta1,
        beta2: t.beta2,
        eps: t.eps,
        grad_clip: t.grad_clip,
      });
      expect(got.train.min_lr).toBeCloseTo(t.min_lr, 12);
      expect(got.precision ?? 'fp32').toBe(j.precision ?? 'fp32');
      if (j.precision === 'fp16')
        expect(got.loss_scale).toMatchObject({ initial_scale_power: 16, loss_scale_window: 1000, hysteresis: 2, min_loss_scale: 1 });
    });
  }
});
