// `shardwise export --format torchrun`: a Shardwise run's checkpoint continued by real PyTorch
// processes (DistributedDataParallel and ZeroRedundancyOptimizer over gloo, launched as torchrun
// would) trains what Shardwise trained: the same losses step for step and the same final weights
// (fp32, within 1e-4 relative), into a run folder Shardwise's own commands read.
// One 20-step ddp 2 run of tiny is the reference of every layout here: Shardwise's strategies
// train the single-device numbers (their own tests), so its step-10 checkpoint continued as
// single, ddp 2 and zero1 2 must all end at its steps 11-20. bf16 and PowerSGD: npm run bench:torch-export.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { shardwise, tempDir } from '../cli/helpers.js';
import { connect, startServe, stopServe } from './helpers/serve.js';
import { launch, lossesByStep, maxRelativeLossDiff, NO_TORCH, relativeWeightRms, rowsOf, torchPython } from './helpers/torch-export.js';

const torch = torchPython();
if (!torch) console.warn(`torch-export tests skipped: ${NO_TORCH}`);
const LONG = 600_000;

describe.skipIf(!torch)(`export --format torchrun (PyTorch ${torch?.torch ?? 'absent'})`, () => {
  const root = tempDir('torch-export');
  const run = path.join(root, 'ddp2');
  const ckpt10 = path.join(run, 'checkpoints', 'step-000010');
  const ckpt20 = path.join(run, 'checkpoints', 'step-000020');
  let reference: Map<number, number>;

  beforeAll(() => {
    const r = shardwise(
      [
        'train',
        '--preset',
        'tiny',
        '--seed',
        '3',
        '--steps',
        '20',
        '--checkpoint-interval',
        '10',
        '--strategy',
        'ddp',
        '--world',
        '2',
        '--out',
        run,
        '--json',
      ],
      { timeoutMs: LONG },
    );
    expect(r.code, r.stderr).toBe(0);
    reference = lossesByStep(run);
  }, LONG);

  const layouts: [string, string[], RegExp][] = [
    ["ddp 2 (the run's own layout)", [], /DDP/],
    ['single', ['--strategy', 'single', '--world', '1'], /one process/],
    ['zero1 2 (ZeroRedundancyOptimizer)', ['--strategy', 'zero1', '--world', '2'], /ZeroRedundancyOptimizer/],
  ];
  for (const [name, flags, says] of layouts) {
    it(
      `${name}: steps 11-20 in PyTorch give Shardwise's losses and final weights within 1e-4`,
      () => {
        const out = path.join(root, `export-${flags[1] ?? 'own'}`);
        const x = shardwise(['export', ckpt10, '--format', 'torchrun', ...flags, '--out', out]);
        expect(x.code, x.stderr).toBe(0);
        expect(x.stdout).toMatch(says);
        const job = launch(out);
        expect(job.code, job.out).toBe(0);
        if (flags[3] !== '1') expect(job.out).toMatch(/launch\.sh: starting 2 rank process\(es\) with torchrun's environment|torchrun/);
        const losses = lossesByStep(path.join(out, 'run'));
        const { max, steps } = maxRelativeLossDiff(losses, reference);
        expect(steps).toEqual([11, 12, 13, 14, 15, 16, 17, 18, 19, 20]);
        console.log(`torch-export ${name}: max relative loss difference ${max.toExponential(2)}`);
        expect(max).toBeLessThan(1e-4);
        const rms = relativeWeightRms(path.join(out, 'run', 'hf', 'step-000020'), ckpt20);
        console.log(`torch-export ${name}: final weights relative RMS ${rms.toExponential(2)}`);
        expect(rms).toBeLessThan(1e-4);
      },
      LONG,
    );
  }

  it('the PyTorch job writes a run folder shardwise report reads', () => {
    const dir = path.join(root, 'export-own', 'run');
    const state = JSON.parse(readFileSync(path.join(dir, 'state.json'), 'utf8'));
    expect(state).toMatchObject({ status: 'completed', step: 20, steps: 20 });
    const summary = JSON.parse(readFileSync(path.join(dir, 'summary.json'), 'utf8'));
    expect(summary).toMatchObject({ strategy: 'ddp', world: 2, steps: 20 });
    expect(summary.engine).toMatch(/^pytorch /);
    // parameters, gradients and AdamW's two moments of 105,920 fp32 parameters on each rank
    for (const r of ['0', '1']) expect(summary.peak_bytes[r]).toMatchObject({ params: 423680, grads: 423680, optimizer: 847360 });
    expect(rowsOf(dir, 'eval').length).toBeGreaterThan(0);
    const html = path.join(root, 'report.html');
    const rep = shardwise(['report', dir, '--format', 'html', '--out', html]);
    expect(rep.code, rep.stderr).toBe(0);
    expect(existsSync(html)).toBe(true);
    expect(readFileSync(html, 'utf8')).toContain('ddp');
  });

  it('the runs list shows the PyTorch job beside the original, and their metrics overlay step for step (what Compare plots)', async () => {
    const runs = path.join(root, 'runs');
    mkdirSync(runs);
    symlinkSync(run, path.join(runs, 'original'));
    symlinkSync(path.join(root, 'export-own', 'run'), path.join(runs, 'pytorch'));
    const serve = await startServe(runs);
    try {
      const api = await connect(serve);
      const listed = (await api.call('runs.list', {})).runs;
      for (const id of ['original', 'pytorch'])
        expect(listed.find((r) => r.id === id)).toMatchObject({ status: 'completed', strategy: 'ddp', world: 2, step: 20 });
      const rows = async (id: string) =>
        new Map(
          (await api.call('runs.metrics', { runId: id })).rows
            .filter((r) => r.type === 'step')
            .map((r) => [(r as { step: number }).step, (r as { loss: number }).loss]),
        );
      const [a, b] = [await rows('original'), await rows('pytorch')];
      expect([...b.keys()]).toEqual([11, 12, 13, 14, 15, 16, 17, 18, 19, 20]);
      expect(maxRelativeLossDiff(b, a).max).toBeLessThan(1e-4);
      api.close();
    } finally {
      await stopServe(serve);
    }
  });

  it(
    "train --init-from the PyTorch job's saved folder: Shardwise's first loss is PyTorch's on the same batch within 1e-5",
    () => {
      const hf = path.join(root, 'export-own', 'run', 'hf', 'step-000020');
      const py = spawnSync(torch!.python, [path.join(root, 'export-own', 'train.py'), '--loss-at', '1', '--weights', hf], {
        encoding: 'utf8',
      });
      expect(py.status, py.stderr).toBe(0);
      const torchLoss = JSON.parse(py.stdout.trim().split('\n').at(-1)!).loss as number;
      const r = shardwise(
        [
          'train',
          '--preset',
          'tiny',
          '--seed',
          '3',
          '--steps',
          '1',
          '--eval-interval',
          '0',
          '--init-from',
          hf,
          '--out',
          path.join(root, 'init'),
          '--json',
        ],
        {
          timeoutMs: LONG,
        },
      );
      expect(r.code, r.stderr).toBe(0);
      const first = lossesByStep(path.join(root, 'init')).get(1)!;
      console.log(
        `torch-export --init-from: Shardwise ${first}, PyTorch ${torchLoss}, relative ${(Math.abs(first - torchLoss) / torchLoss).toExponential(2)}`,
      );
      expect(Math.abs(first - torchLoss) / torchLoss).toBeLessThan(1e-5);
      // trained weights, not a fresh start: tiny's first loss from its initialisation is ln(27) ≈ 3.3
      expect(first).toBeLessThan(2.6);
    },
    LONG,
  );

  it('train.py compiles (its FSDP path too, which this PyTorch cannot import) and refuses a launch of another world size', () => {
    const out = path.join(root, 'export-own');
    const c = spawnSync(torch!.python, ['-m', 'py_compile', path.join(out, 'train.py')], { encoding: 'utf8' });
    expect(c.status, c.stderr).toBe(0);
    const r = spawnSync(torch!.python, [path.join(out, 'train.py')], { encoding: 'utf8', env: { ...process.env, WORLD_SIZE: '3' } });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain('the layout has 2 ranks but WORLD_SIZE is 3');
  });

  it('bad input: a layout that does not divide the batch, the last checkpoint, an unknown strategy', () => {
    const out = path.join(root, 'bad');
    const w3 = shardwise(['export', ckpt10, '--format', 'torchrun', '--world', '3', '--out', out]);
    expect(w3.code).toBe(2);
    expect(w3.stderr).toMatch(/batch/);
    const last = shardwise(['export', run, '--format', 'torchrun', '--out', out]);
    expect(last.code).toBe(2);
    expect(last.stderr).toContain('nothing is left to train');
    const bad = shardwise(['export', ckpt10, '--format', 'torchrun', '--strategy', 'fsdp', '--world', '2', '--out', out]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--strategy must be one of');
    expect(existsSync(out)).toBe(false);
    const noHf = shardwise(['train', '--preset', 'tiny', '--steps', '1', '--init-from', root, '--out', path.join(root, 'bad-init')]);
    expect(noHf.code).toBe(2);
    expect(noHf.stderr).toContain('no model.safetensors');
  });
});
