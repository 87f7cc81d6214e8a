import { spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { BIN, type CliResult, jsonLines, shardwise, stepLosses, tempDir } from './helpers.js';

// SwiftShader shares the CPU with the rest of the suite: generous per-test limits
const LONG = 900_000;

// One 200-step run of the tiny preset on the built-in dataset is shared by the learning,
// determinism, resume, eval, sample and export checks (SwiftShader is slow: ~1-2 min a run), and
// is the fp32 reference of the same seed's bf16 and fp16 runs (mixed precision's training criterion).
describe('shardwise train --preset tiny (200 steps, builtin:grammar)', () => {
  const root = tempDir('train');
  const runA = path.join(root, 'a');
  const runB = path.join(root, 'b');
  const args = (out: string) => [
    'train',
    '--preset',
    'tiny',
    '--steps',
    '200',
    '--seed',
    '7',
    '--checkpoint-interval',
    '100',
    '--eval-interval',
    '50',
    '--out',
    out,
    '--json',
  ];
  let a: ReturnType<typeof shardwise>;

  // Mixed precision (16-bit weights, activations and gradients; fp32 master weights and AdamW
  // moments): the same seed, data and 200 steps in bf16 and in fp16 at DeepSpeed's default dynamic
  // loss scaling (2^16, window 1000, hysteresis 2). Started before run A and awaited by the last
  // test, so they overlap runs A-C; run A itself is their fp32 reference (no third 200-step run):
  // evals and checkpoints do not change the weights (fixed eval batches, read-only forwards), so
  // they are off here and run A's losses are still the fp32 losses of this seed.
  let mixedRuns: Promise<CliResult[]>;
  beforeAll(() => {
    const mixed = (precision: 'bf16' | 'fp16') => {
      const flags = ['--preset', 'tiny', '--steps', '200', '--seed', '7', '--eval-interval', '0', '--checkpoint-interval', '0'];
      const out = path.join(root, precision);
      return inBackground(['train', ...flags, '--precision', precision, '--out', out, '--json'], `${out}-output`);
    };
    mixedRuns = Promise.all([mixed('bf16'), mixed('fp16')]);
  });

  it(
    'halves its starting loss (first step ~ln(27)=3.30, last 10 steps at most half of it)',
    () => {
      a = shardwise(args(runA));
      expect(a.code, a.stderr).toBe(0);
      const losses = stepLosses(a.stdout);
      expect(losses).toHaveLength(200);
      const first = losses[0]!;
      const last10 = losses.slice(-10).reduce((x, y) => x + y, 0) / 10;
      expect(first).toBeGreaterThan(3.0);
      expect(last10).toBeLessThan(first / 2);
      const summary = jsonLines(a.stdout).at(-1)!;
      expect(summary.type).toBe('summary');
      expect(summary.steps).toBe(200);
      expect(summary.strategy).toBe('single');
      expect(summary.world).toBe(1);
      const peak = (summary.peak_bytes as Record<string, Record<string, number>>)['0']!;
      expect(peak.params).toBeGreaterThan(0);
      expect(peak.optimizer).toBe(2 * peak.params!);
      // run folder
      expect(JSON.parse(readFileSync(path.join(runA, 'state.json'), 'utf8')).status).toBe('completed');
      const metrics = readFileSync(path.join(runA, 'metrics.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      expect(metrics.filter((m) => m.type === 'step')).toHaveLength(200);
      expect(metrics.filter((m) => m.type === 'eval').map((m) => m.step)).toEqual([50, 100, 150, 200]);
      expect(readdirSync(path.join(runA, 'checkpoints')).sort()).toEqual(['step-000100', 'step-000200']);
    },
    LONG,
  );

  // The second run of the seed: its steps 1-100 uninterrupted, then (stopped as Ctrl-C would,
  // once its step-100 checkpoint is on disk) steps 101-200 resumed from that checkpoint. Together
  // they are the whole sequence again, at half a run's cost instead of a whole one.
  let b: { losses: number[]; code: number | null; stderr: string };
  const ckptB = path.join(runB, 'checkpoints', 'step-000100');
  let c: ReturnType<typeof shardwise>;

  it(
    'the same seed gives the identical loss sequence twice',
    async () => {
      b = await stopOnceExists(args(runB), ckptB);
      expect(b.code, `stopped with SIGINT after the step-100 checkpoint: ${b.stderr}`).toBe(130);
      expect(b.losses.length).toBeGreaterThanOrEqual(100);
      c = shardwise(['train', '--resume', ckptB, '--json']);
      expect(c.code, c.stderr).toBe(0);
      expect([...b.losses.slice(0, 100), ...stepLosses(c.stdout)]).toEqual(stepLosses(a.stdout));
    },
    LONG,
  );

  it(
    'resuming from the step-100 checkpoint reproduces steps 101-200 exactly',
    () => {
      const resumed = jsonLines(c.stdout).filter((m) => m.type === 'step');
      expect(resumed[0]!.step).toBe(101);
      expect(resumed.map((m) => m.loss)).toEqual(stepLosses(a.stdout).slice(100));
      // steps the stopped run recorded past 100 were dropped by the resume before it replayed them
      const metrics = readFileSync(path.join(runB, 'metrics.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      expect(metrics.filter((m) => m.type === 'step').map((m) => m.step)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
    },
    LONG,
  );

  it(
    'eval scores every full window of a file, sample generates text, export writes the HF layout',
    () => {
      const text = path.join(root, 'held-out.txt');
      // the built-in validation text is not on disk: score the model's own sample, which it finds likely
      const s = shardwise(['sample', runA, '--prompt', 'the ', '--tokens', '300', '--seed', '3']);
      expect(s.code, s.stderr).toBe(0);
      expect(s.stdout.startsWith('the ')).toBe(true);
      expect(s.stdout.trim().length).toBeGreaterThan(250);
      writeFileSync(text, s.stdout);
      const e = shardwise(['eval', runA, '--text', text, '--json']);
      expect(e.code, e.stderr).toBe(0);
      const r = JSON.parse(e.stdout.trim()) as { loss: number; tokens: number };
      // windows of 64 tokens: floor((n-1)/64) windows
      const n = [...s.stdout].length;
      expect(r.tokens).toBe(Math.floor((n - 1) / 64) * 64);
      expect(r.loss).toBeGreaterThan(0);
      expect(r.loss).toBeLessThan(2.0); // the model's own samples are likely under it
      const out = path.join(root, 'hf');
      const x = shardwise(['export', runA, '--format', 'hf', '--out', out]);
      expect(x.code, x.stderr).toBe(0);
      const cfg = JSON.parse(readFileSync(path.join(out, 'config.json'), 'utf8'));
      expect(cfg.model_type).toBe('gpt2');
      expect(cfg.n_layer).toBe(2);
      expect(cfg.n_embd).toBe(64);
      expect(Object.keys(JSON.parse(readFileSync(path.join(out, 'vocab.json'), 'utf8'))).length).toBe(cfg.vocab_size);
      expect(existsSync(path.join(out, 'model.safetensors'))).toBe(true);
    },
    LONG,
  );

  it(
    'bf16 and fp16 (DeepSpeed default dynamic loss scale 2^16) mixed precision, 200 steps of the same seed: the last loss at most half the first, the final loss within 3% of fp32 run A',
    async () => {
      const runs = await mixedRuns;
      const fp32Final = stepLosses(a.stdout).at(-1)!;
      for (const [precision, run] of [
        ['bf16', runs[0]!],
        ['fp16', runs[1]!],
      ] as const) {
        expect(run.code, `${precision}: ${run.stderr}`).toBe(0);
        const steps = jsonLines(run.stdout).filter((m) => m.type === 'step');
        const losses = steps.map((m) => m.loss as number);
        expect(losses, precision).toHaveLength(200);
        const summary = jsonLines(run.stdout).at(-1)!;
        expect([summary.type, summary.precision], precision).toEqual(['summary', precision]);
        const [first, last] = [losses[0]!, losses.at(-1)!];
        expect(summary.final_loss, precision).toBe(last);
        expect(last, `${precision}: first loss ${first}, last ${last}`).toBeLessThanOrEqual(first / 2);
        const off = Math.abs(last - fp32Final) / fp32Final;
        expect(off, `${precision} final ${last} vs fp32 ${fp32Final}: ${(100 * off).toFixed(2)}% apart`).toBeLessThanOrEqual(0.03);
        if (precision === 'fp16') {
          // dynamic scaling ran from DeepSpeed's 2^16, and the summary counts the steps it skipped
          expect(steps[0]!.loss_scale).toBe(2 ** 16);
          expect(summary.skipped_steps).toBe(steps.at(-1)!.skipped_steps);
        } else expect(summary.loss_scale, 'bf16 needs no loss scaling').toBeUndefined();
      }
    },
    LONG,
  );
});

/**
 * `shardwise ARGS` in the background, its output into files under `dir` (a pipe would fill and
 * stall it while a spawnSync run above blocks this process); its exit code and output.
 */
function inBackground(args: string[], dir: string): Promise<CliResult> {
  mkdirSync(dir, { recursive: true });
  const [out, err] = [path.join(dir, 'stdout'), path.join(dir, 'stderr')];
  const fds = [openSync(out, 'w'), openSync(err, 'w')] as const;
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { ...process.env, SHARDWISE_DEBUG: '' },
    stdio: ['ignore', fds[0], fds[1]],
  });
  return new Promise((resolve) =>
    child.on('exit', (code) => {
      fds.forEach((fd) => closeSync(fd));
      resolve({ code: code ?? -1, stdout: readFileSync(out, 'utf8'), stderr: readFileSync(err, 'utf8') });
    }),
  );
}

/**
 * `shardwise ARGS` in the background, sent SIGINT (as Ctrl-C) at the first step line after
 * `file` exists; its exit code, stderr and the step losses it printed.
 */
function stopOnceExists(args: string[], file: string): Promise<{ losses: number[]; code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, SHARDWISE_DEBUG: '' } });
    let out = '';
    let err = '';
    let stopped = false;
    child.stdout.on('data', (d) => {
      out += d;
      if (!stopped && /"type":"step"/.test(String(d)) && existsSync(file)) {
        stopped = true;
        child.kill('SIGINT');
      }
    });
    child.stderr.on('data', (d) => (err += d));
    // complete lines only: the signal may cut the last one short
    child.on('exit', (code) => resolve({ losses: stepLosses(out.slice(0, out.lastIndexOf('\n') + 1)), code, stderr: err }));
  });
}
