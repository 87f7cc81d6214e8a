// The one job resolver (src-main/launch/resolve-job.ts): precedence of defaults, preset, config
// file and request; the strategy's knobs written where the trainers read them; and every
// refusal a JobError tagged with the request field, worded with the caller's names.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FLAG_NAMES, parseTrainArgs, placedHere } from '../../src-main/cli/train-flags.js';
import { checkLaunchable, type ConfigFile, JobError, type JobRequest, resolveJob, resolveRun } from '../../src-main/launch/resolve-job.js';

const resolve = (req: JobRequest, file?: ConfigFile) =>
  resolveJob(req, { runDir: '/tmp/run', ...(file ? { file, configName: 'c.json' } : {}) });

function refusal(req: JobRequest, opts: { file?: ConfigFile; cli?: boolean } = {}): { field: string; message: string } {
  try {
    resolveJob(req, {
      runDir: '/tmp/run',
      ...(opts.file ? { file: opts.file, configName: 'c.json' } : {}),
      ...(opts.cli ? { names: FLAG_NAMES } : {}),
    });
  } catch (e) {
    expect(e).toBeInstanceOf(JobError);
    return { field: (e as JobError).field, message: (e as JobError).message };
  }
  throw new Error('resolved; expected a refusal');
}

describe('resolveJob', () => {
  it('defaults <- preset <- config file <- request', () => {
    const job = resolve({ steps: 20 });
    expect(job.parallel).toMatchObject({ strategy: 'single', world: 1, micro_batches: 1 });
    expect(job.model).toMatchObject({ preset: 'tiny', n_layer: 2, n_head: 2, d_model: 64 });
    expect(job.train).toMatchObject({
      steps: 20,
      batch_size: 8,
      lr: 6e-3,
      warmup_steps: 2,
      eval_interval: 2,
      checkpoint_interval: 10,
    });
    const file: ConfigFile = { model: { n_layer: 3 }, train: { batch_size: 4, lr: 1e-3 }, parallel: { strategy: 'ddp' } };
    const filed = resolve({ batch_size: 16, model: { n_head: 4 } }, file);
    expect(filed.model).toMatchObject({ n_layer: 3, n_head: 4 });
    expect(filed.train).toMatchObject({ batch_size: 16, lr: 1e-3 });
    expect(filed.parallel).toMatchObject({ strategy: 'ddp', world: 2 });
    // a learning rate without its floor: the floor follows it
    expect(resolve({ lr: 2e-3 }).train.min_lr).toBeCloseTo(2e-4, 12);
  });

  it("writes each strategy's grid where the trainers read it, and only its own knobs", () => {
    expect(resolve({ strategy: 'tp', tp: 2 }).parallel).toMatchObject({ world: 2, tp: 2 });
    expect(resolve({ strategy: 'tp', world: 2 }).parallel).toMatchObject({ world: 2, tp: 2 });
    const pp = resolve({ strategy: 'pp' }).parallel!;
    expect(pp).toMatchObject({ world: 2, pp: 2, schedule: '1f1b' });
    expect(pp.tp).toBeUndefined();
    expect(resolve({ strategy: '3d', tp: 2, pp: 2 }).parallel).toMatchObject({ world: 4, dp: 1, tp: 2, pp: 2, schedule: '1f1b' });
    const ddp = resolve({ strategy: 'ddp', world: 4, bucket_cap_mb: 1 }).parallel!;
    expect(ddp).toMatchObject({ world: 4, bucket_cap_mb: 1 });
    expect(ddp.schedule).toBeUndefined();
  });

  it('maps DeepSpeed names with the data-parallel ranks (tensor-parallel ranks share rows)', () => {
    const ds = (strategy: string, extra: JobRequest = {}) =>
      resolve({ strategy, ...extra }, { train_micro_batch_size_per_gpu: 2, gradient_accumulation_steps: 2 }).train.batch_size;
    expect(ds('tp', { tp: 2 })).toBe(4);
    expect(ds('ddp', { world: 2 })).toBe(8);
    expect(ds('3d', { dp: 2, tp: 2, pp: 2 })).toBe(8);
    expect(refusal({ strategy: 'ddp' }, { file: { zero_optimization: { stage: 0, offload_optimizer: { device: 'cpu' } } } })).toEqual({
      field: 'config',
      message:
        'config file c.json: zero_optimization.offload_optimizer.device "cpu" needs zero_optimization.stage 1 or higher: ZeRO-Offload moves the partitioned optimizer to the host',
    });
  });

  it('refuses with the field: strategy, preset, steps, the schema, the dataset', () => {
    expect(refusal({ strategy: 'fsdp' })).toEqual({
      field: 'strategy',
      message: 'unknown strategy "fsdp"; choose one of single, dp, ddp, zero1, zero2, zero3, tp, pp, 3d',
    });
    expect(refusal({ preset: 'huge' })).toMatchObject({
      field: 'preset',
      message: expect.stringMatching(/^unknown preset "huge".*tiny, small/),
    });
    expect(refusal({ steps: 0 }, { cli: true })).toEqual({
      field: 'steps',
      message: '--steps must be a positive integer (at most 1000000000), got 0',
    });
    expect(refusal({ strategy: 'ddp', world: 65, batch_size: 65 })).toEqual({
      field: 'world',
      message: 'world must be a positive integer (at most 64), got 65',
    });
    expect(refusal({ model: { block_size: 0 } })).toMatchObject({ field: 'model.block_size' });
    expect(refusal({ dataset: '/no/such/file.txt' })).toEqual({
      field: 'dataset',
      message: 'dataset file /no/such/file.txt does not exist; give a UTF-8 text file or builtin:grammar',
    });
  });

  it("refuses with the strategy table's rules, named as the caller names fields", () => {
    expect(refusal({ strategy: 'ddp', world: 2, micro_batches: 3 })).toEqual({
      field: 'micro_batches',
      message: 'batch size 8 is not divisible by world 2 x micro-batches 3; pick batch_size as a multiple of 6',
    });
    expect(refusal({ strategy: 'zero2', offload_optimizer: 'cpu', prefetch: true })).toMatchObject({
      field: 'prefetch',
      message: expect.stringMatching(/^prefetch applies to strategy zero3/),
    });
    expect(refusal({ strategy: 'pp', pp: 4 }, { cli: true })).toMatchObject({
      field: 'pp',
      message: expect.stringMatching(/^model\.n_layer 2 is smaller than --pp 4/),
    });
    expect(refusal({ strategy: 'ddp', partition: 'time' }, { cli: true })).toMatchObject({
      field: 'partition',
      message: expect.stringMatching(/^--partition \(parallel\.partition\) applies to --strategy pp/),
    });
    expect(refusal({ strategy: 'ddp' }, { file: { parallel: { partition_activations: true } }, cli: true })).toMatchObject({
      field: 'partition_activations',
      message: expect.stringMatching(/^activation_checkpointing\.partition_activations needs --strategy tp or 3d/),
    });
  });

  it('the command line parses into the same request the API sends', () => {
    const a = parseTrainArgs([
      '--strategy',
      'zero3',
      '--world',
      '4',
      '--prefetch',
      'off',
      '--micro-batches',
      '2',
      '--batch-size',
      '16',
      '--lr',
      '0.001',
    ]);
    expect(a.request).toMatchObject({ strategy: 'zero3', world: 4, prefetch: false, micro_batches: 2, batch_size: 16, lr: 0.001 });
    expect(resolve(a.request)).toEqual(
      resolve({ strategy: 'zero3', world: 4, prefetch: false, micro_batches: 2, batch_size: 16, lr: 0.001 }),
    );
    expect(() => parseTrainArgs(['--prefetch', 'maybe'])).toThrow(/--prefetch must be on or off, got "maybe"/);
    expect(() => parseTrainArgs(['--world', 'two'])).toThrow(/--world must be a positive integer, got "two"/);
  });
  it('precision: the request <- the file <- DeepSpeed bf16/fp16; fp16 gets DeepSpeed loss scaling, merged field by field', () => {
    expect(resolve({}).precision).toBe('fp32');
    expect(resolve({}).loss_scale).toBeUndefined();
    expect(resolve({ precision: 'bf16' }).loss_scale).toBeUndefined();
    const fp16 = resolve({ precision: 'fp16', loss_scale: { hysteresis: 4 } }, { fp16: { loss_scale_window: 500 } });
    expect(fp16).toMatchObject({ precision: 'fp16' });
    expect(fp16.loss_scale).toEqual({ initial_scale_power: 16, loss_scale_window: 500, hysteresis: 4, min_loss_scale: 1 });
    expect(resolve({}, { fp16: { enabled: true, loss_scale: 1024 } }).loss_scale).toMatchObject({ static_scale: 1024 });
    expect(resolve({}, { bf16: { enabled: true } }).precision).toBe('bf16');
    // a disabled section is ignored, as DeepSpeed does; the request overrides the file
    expect(resolve({}, { fp16: { enabled: false } }).precision).toBe('fp32');
    expect(resolve({ precision: 'fp32' }, { bf16: { enabled: true } }).precision).toBe('fp32');
  });

  it('refuses loss scaling outside fp16 and both 16-bit formats at once, naming the field', () => {
    expect(refusal({ precision: 'bf16', loss_scale: { hysteresis: 1 } })).toEqual({
      field: 'loss_scale',
      message: 'loss_scale applies to precision fp16 only, and this run trains in bf16; drop it or train in fp16',
    });
    expect(refusal({}, { file: { bf16: { enabled: true }, fp16: { enabled: true } } })).toEqual({
      field: 'precision',
      message: 'config file c.json: bf16.enabled and fp16.enabled are both true; enable one of them (bf16 needs no loss scaling)',
    });
    const a = parseTrainArgs(['--precision', 'bf16']);
    expect(resolve(a.request).precision).toBe('bf16');
    expect(() => parseTrainArgs(['--precision', 'fp8'])).toThrow(/--precision must be fp32 or bf16 or fp16, got "fp8"/);
  });

  it('a 16-bit job of every strategy launches (tp, pp and 3d too), so does ZeRO-Offload (zero1, zero2); gradient compression at 16 bits is refused at launch, naming its field', () => {
    expect(() => checkLaunchable(resolve({}))).not.toThrow();
    const refused = (job: ReturnType<typeof resolve>) => {
      try {
        checkLaunchable(job, FLAG_NAMES);
      } catch (err) {
        expect(err).toBeInstanceOf(JobError);
        return err as JobError;
      }
      throw new Error('not refused');
    };
    for (const precision of ['bf16', 'fp16'] as const) {
      expect(() => checkLaunchable(resolve({ precision }), FLAG_NAMES)).not.toThrow();
      for (const strategy of ['zero1', 'zero2'])
        expect(() => checkLaunchable(resolve({ precision, strategy, world: 2, offload_optimizer: 'cpu' }), FLAG_NAMES)).not.toThrow();
      // every strategy's ranks train at 16 bits
      for (const strategy of ['tp', 'pp'])
        expect(() => checkLaunchable(resolve({ precision, strategy, world: 2 }), FLAG_NAMES)).not.toThrow();
      expect(() => checkLaunchable(resolve({ precision, strategy: '3d', world: 8, dp: 2, tp: 2, pp: 2 }), FLAG_NAMES)).not.toThrow();
      const hook = refused(resolve({ precision, strategy: 'ddp', world: 2, grad_compression: { hook: 'fp16' } }));
      expect(hook.field).toBe('grad_compression');
      expect(hook.message).toMatch(/^--grad-compression fp16: a (bf|fp)16 run's gradients are 16-bit already/);
    }
  });
});

// one precedence rule, disagreeing keys refused, ignored keys noted, values at the edges
describe('resolveJob: precedence, conflicts, notes and edges', () => {
  it('defaults < preset < file < request for every setting: --steps, --lr, --batch-size, --seed and the rest beat the file', () => {
    const file: ConfigFile = {
      train: { steps: 3, lr: 1e-3, batch_size: 4, seed: 7, warmup_steps: 1, activation_checkpointing: true },
      parallel: { micro_batches: 2 },
      precision: 'bf16',
    };
    const job = resolve(
      { steps: 2, lr: 2e-3, batch_size: 8, seed: 9, warmup_steps: 0, activation_checkpointing: false, micro_batches: 1, precision: 'fp32' },
      file,
    );
    expect(job.train).toMatchObject({ steps: 2, lr: 2e-3, batch_size: 8, seed: 9, warmup_steps: 0, activation_checkpointing: false });
    expect(job.parallel?.micro_batches).toBe(1);
    expect(job.precision).toBe('fp32');
    // the file beats the preset; its learning rate's floor follows it
    const filed = resolve({}, file);
    expect(filed.train).toMatchObject({ steps: 3, lr: 1e-3, batch_size: 4, seed: 7 });
    expect(filed.train.min_lr).toBeCloseTo(1e-4, 12);
    // DeepSpeed's names lose to a flag the same way
    expect(
      resolve({ batch_size: 8, strategy: 'zero1', world: 2 }, { train_batch_size: 16, zero_optimization: { stage: 2 } }),
    ).toMatchObject({
      train: { batch_size: 8 },
      parallel: { strategy: 'zero1' },
    });
  });

  it('two keys of one file that set one thing to different values are refused, naming both (every pair at once); the same value is fine', () => {
    let err: JobError | undefined;
    try {
      resolve(
        { world: 2 },
        {
          train_batch_size: 16,
          train: { batch_size: 8, grad_clip: 1 },
          zero_optimization: { stage: 2 },
          strategy: 'ddp',
          bf16: { enabled: true },
          precision: 'fp32',
          gradient_accumulation_steps: 2,
          parallel: { micro_batches: 1 },
          gradient_clipping: 0.5,
        },
      );
    } catch (e) {
      err = e as JobError;
    }
    expect(err).toBeInstanceOf(JobError);
    expect(err!.errors.map((e) => e.message)).toEqual([
      'config file c.json: strategy "ddp" and zero_optimization.stage 2 (zero2) both set the strategy to different values; keep one of them',
      'config file c.json: precision "fp32" and bf16.enabled true (bf16) both set the precision to different values; keep one of them',
      'config file c.json: parallel.micro_batches 1 and gradient_accumulation_steps 2 both set the micro-batches to different values; keep one of them',
      'config file c.json: train.batch_size 8 and train_batch_size 16 both set the batch size to different values; keep one of them',
      'config file c.json: train.grad_clip 1 and gradient_clipping 0.5 both set gradient clipping to different values; keep one of them',
    ]);
    expect(err!.errors.map((e) => e.field)).toEqual(['strategy', 'precision', 'micro_batches', 'batch_size', 'grad_clip']);
    // agreeing keys resolve
    const same = resolve(
      { world: 2 },
      { train_batch_size: 8, train: { batch_size: 8 }, zero_optimization: { stage: 2 }, strategy: 'zero2' },
    );
    expect(same.parallel?.strategy).toBe('zero2');
    expect(same.train.batch_size).toBe(8);
  });

  it("every refused DeepSpeed key of a file at once, not only the first section's", () => {
    let err: JobError | undefined;
    try {
      resolve(
        {},
        { zero_optimization: { stage: 0, offload_optimizer: { device: 'nvme' } }, activation_checkpointing: { cpu_checkpointing: true } },
      );
    } catch (e) {
      err = e as JobError;
    }
    expect(err!.message.split('\n')).toEqual([
      'config file c.json: zero_optimization.offload_optimizer.device "nvme" is not supported; use "cpu" or "none"',
      'config file c.json: activation_checkpointing.cpu_checkpointing is not supported: checkpointed activations stay on the device',
    ]);
  });

  it('keys accepted without effect come back as notes, each with why', () => {
    const { notes } = resolveRun(
      { strategy: 'zero2', world: 2 },
      {
        runDir: '/tmp/run',
        configName: 'ds.json',
        file: {
          zero_optimization: {
            stage: 2,
            overlap_comm: false,
            contiguous_gradients: true,
            allgather_bucket_size: 5e8,
            offload_optimizer: { device: 'cpu', pin_memory: true, buffer_count: 4, ratio: 0.5, nvme_path: '/nvme' },
          },
        },
      },
    );
    expect(notes).toEqual([
      'config file ds.json: zero_optimization.overlap_comm false ignored: this build always overlaps gradient communication with backward',
      'config file ds.json: zero_optimization.contiguous_gradients true ignored: gradients are always kept in one contiguous buffer',
      'config file ds.json: zero_optimization.allgather_bucket_size 500000000 ignored: weights are gathered whole per layer, not in buckets of a set size',
      ...['pin_memory true', 'buffer_count 4', 'ratio 0.5', 'nvme_path "/nvme"'].map(
        (k) =>
          `config file ds.json: zero_optimization.offload_optimizer.${k} ignored: ZeRO-Offload here keeps the whole optimizer shard in ordinary host memory (no pinned buffers, partial ratio or NVMe)`,
      ),
    ]);
    expect(resolveRun({}, { runDir: '/tmp/run' }).notes).toEqual([]);
  });

  it('values out of range are refused with the range (a file key, a flag, an API field), all at once', () => {
    let err: JobError | undefined;
    try {
      resolveJob(
        { steps: 2e9, model: { n_layer: 5000 } },
        { runDir: '/tmp/run', configName: 'c.json', names: FLAG_NAMES, file: { parallel: { stage_delay_ms: 1e12 } } },
      );
    } catch (e) {
      err = e as JobError;
    }
    expect(err!.message.split('\n')).toEqual([
      '--steps must be a positive integer (at most 1000000000), got 2000000000',
      'config file c.json: parallel.stage_delay_ms must be a number from 0 to 60000, got 1000000000000',
      'model.n_layer must be a positive integer (at most 1024), got 5000',
    ]);
    expect(resolve({}, { parallel: { stage_delay_ms: 5 } }).parallel?.stage_delay_ms).toBe(5);
  });

  it('a folder as the dataset is refused at resolution, naming the field', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'shardwise-ds-'));
    expect(refusal({ dataset: dir }, { cli: true })).toEqual({
      field: 'dataset',
      message: `--dataset ${dir} is a folder, not a text file; give a UTF-8 text file or builtin:grammar`,
    });
    expect(refusal({}, { file: { data: { dataset: dir } } })).toEqual({
      field: 'dataset',
      message: `config file c.json: data.dataset ${dir} is a folder, not a text file; give a UTF-8 text file or builtin:grammar`,
    });
  });

  it("a model whose states exceed the machine's memory is refused with the formula line; ranks on agents are not bounded by it", () => {
    const gpt3 = { model: { n_layer: 96, n_head: 96, d_model: 12288, block_size: 2048 } };
    const at = (machineMemory: number | null, req: JobRequest = {}) =>
      resolveRun({ ...gpt3, ...req }, { runDir: '/tmp/run', machineMemory });
    expect(() => at(24 * 2 ** 30)).toThrow(
      'model states need 2.53 TiB per rank (16Ψ with Ψ = 173,987,880,960 parameters at a 96-character vocabulary, N = 1, fp32) but this machine has 24.0 GiB of memory',
    );
    expect(() => at(24 * 2 ** 30, { strategy: 'zero3', world: 8, batch_size: 8 })).toThrow(
      /^model states need 324 GiB per rank \(16Ψ\/N with .* N = 8, fp32\)/,
    );
    expect(at(4 * 2 ** 40).job.model.d_model).toBe(12288);
    expect(at(null).job.model.d_model).toBe(12288);
    // by default this machine's memory; a placement on agents leaves it to their machines
    expect(() => resolveRun(gpt3, { runDir: '/tmp/run' })).toThrow(/but this machine has/);
    expect(() => resolveRun({ ...gpt3, placement: [{ machine: '10.0.0.2:7000' }] }, { runDir: '/tmp/run' })).not.toThrow();
    expect(placedHere('local,local@1')).toBe(true);
    expect(placedHere('local,10.0.0.2:7000')).toBe(false);
  });

  it('flags: a negative number says what is allowed; two --config files merge in order (the last wins); an --out under /proc or over a file is refused at once', () => {
    expect(() => parseTrainArgs(['--steps', '-5'])).toThrow(/^--steps must be a positive integer, got -5$/);
    expect(() => parseTrainArgs(['--seed', '-1'])).toThrow(/^--seed must be a non-negative integer, got -1$/);
    expect(() => parseTrainArgs(['--lr', '-0.5'])).toThrow(/^--lr must be a positive number, got -0.5$/);
    expect(parseTrainArgs(['--steps', '5']).request.steps).toBe(5);
    const dir = mkdtempSync(path.join(tmpdir(), 'shardwise-cfg-'));
    const a = path.join(dir, 'a.json');
    writeFileSync(a, '{}');
    // several files merge in the order given: the last one's keys win, objects merge key by key
    writeFileSync(a, JSON.stringify({ model: { n_layer: 4, n_head: 2 }, train: { steps: 3, lr: 0.01 } }));
    const b = path.join(dir, 'b.json');
    writeFileSync(b, JSON.stringify({ model: { n_head: 4 }, train: { steps: 7 } }));
    const merged = parseTrainArgs(['--config', a, '--config', b]);
    expect(merged.file).toMatchObject({ model: { n_layer: 4, n_head: 4 }, train: { steps: 7, lr: 0.01 } });
    expect(merged.configName).toBe(`${a} + ${b}`);
    const t0 = Date.now();
    expect(() => parseTrainArgs(['--out', '/proc/nope'])).toThrow(
      '--out /proc/nope: /proc/nope is under /proc, a kernel file system; choose a folder on a disk',
    );
    expect(() => parseTrainArgs(['--out', '/sys/x/y'])).toThrow(/under \/sys/);
    expect(() => parseTrainArgs(['--out', path.join(a, 'run')])).toThrow(
      `${a} is a file, so ${path.join(a, 'run')} cannot be made under it`,
    );
    expect(() => parseTrainArgs(['--out', a])).toThrow(`${a} is a file, not a folder`);
    expect(Date.now() - t0).toBeLessThan(1000);
  });
});
