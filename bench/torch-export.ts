// npm run bench:torch-export — the PyTorch export's whole matrix, too long for the suite: a
// Shardwise run of tiny (seed 3) per row, its step-10 checkpoint (or, for PowerSGD, its step 0)
// exported with `--format torchrun` and continued by `bash launch.sh` in real PyTorch processes.
// Per row: the largest relative difference of the per-step losses, the final weights' relative
// RMS difference (where Shardwise checkpointed the last step), and whether it is within the row's
// bound: 1e-4 for fp32; for bf16 the mixed-precision bound (Shardwise computes in bf16 storage,
// autocast in bf16 matrix products on fp32 weights); for PowerSGD 2% on the final loss (error
// feedback and Q start afresh in PyTorch's buckets). Prints one JSON object; `pass` is every row's.
// BENCH_ROWS picks rows by name (comma-separated).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadCheckpoint } from '../workers/checkpoint/checkpoint.js';
import { readSafetensors } from '../workers/checkpoint/safetensors.js';
import { toHfTensors } from '../workers/export/hf.js';

const BIN = fileURLToPath(new URL('../../bin/shardwise.js', import.meta.url));
const root = mkdtempSync(path.join(tmpdir(), 'shardwise-bench-torch-export-'));

interface Row {
  name: string;
  train: string[];
  steps: number;
  /** export the step-10 checkpoint, or the run's step 0 (a run without checkpoints) */
  from: 'step-10' | 'start';
  exportFlags: string[];
  lossBound: number;
  /** 'final': only the last step's loss is held to the bound (PowerSGD); 'each': every step's */
  lossCheck: 'each' | 'final';
  weightBound: number | null;
}

const ROWS: Row[] = [
  { name: 'single', train: [], steps: 20, from: 'step-10', exportFlags: [], lossBound: 1e-4, lossCheck: 'each', weightBound: 1e-4 },
  {
    name: 'ddp2',
    train: ['--strategy', 'ddp', '--world', '2'],
    steps: 20,
    from: 'step-10',
    exportFlags: [],
    lossBound: 1e-4,
    lossCheck: 'each',
    weightBound: 1e-4,
  },
  {
    name: 'zero1-2',
    train: ['--strategy', 'zero1', '--world', '2'],
    steps: 20,
    from: 'step-10',
    exportFlags: [],
    lossBound: 1e-4,
    lossCheck: 'each',
    weightBound: 1e-4,
  },
  // bf16 twice rounded per product over 10 steps: the equivalence tests' order of bound (tests/dist/helpers/mixed-precision.ts)
  {
    name: 'bf16-ddp2',
    train: ['--strategy', 'ddp', '--world', '2', '--precision', 'bf16'],
    steps: 20,
    from: 'step-10',
    exportFlags: [],
    lossBound: 2e-3,
    lossCheck: 'each',
    weightBound: 2e-2,
  },
  {
    name: 'powersgd4-ddp2',
    train: ['--strategy', 'ddp', '--world', '2', '--grad-compression', 'powersgd:4', '--checkpoint-interval', '0'],
    steps: 50,
    from: 'start',
    exportFlags: [],
    lossBound: 0.02,
    lossCheck: 'final',
    weightBound: null,
  },
];

function run(cmd: string, args: string[], cwd?: string) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', cwd, timeout: 1_200_000 });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: exit ${r.status}\n${r.stderr}`);
  return r.stdout;
}

const losses = (dir: string) =>
  new Map(
    readFileSync(path.join(dir, 'metrics.jsonl'), 'utf8')
      .split('\n')
      .filter((l) => l.includes('"type":"step"') || l.includes('"type": "step"'))
      .map((l) => JSON.parse(l) as { step: number; loss: number })
      .map((r) => [r.step, r.loss]),
  );

function weightRms(hfDir: string, ckptDir: string): number {
  const ck = loadCheckpoint(ckptDir, { optimizer: false });
  const got = readSafetensors(path.join(hfDir, 'model.safetensors')).tensors;
  let d = 0;
  let n = 0;
  for (const [name, r] of toHfTensors(ck.manifest.config.model, ck.params)) {
    const g = got.get(name)!.data;
    for (let i = 0; i < r.data.length; i++) {
      d += (g[i]! - r.data[i]!) ** 2;
      n += r.data[i]! ** 2;
    }
  }
  return Math.sqrt(d / n);
}

const only = process.env.BENCH_ROWS?.split(',');
const results = [];
for (const row of ROWS.filter((r) => !only || only.includes(r.name))) {
  const runDir = path.join(root, row.name);
  const t0 = performance.now();
  run(process.execPath, [
    BIN,
    'train',
    '--preset',
    'tiny',
    '--seed',
    '3',
    '--steps',
    String(row.steps),
    // a step-0 export needs a run without checkpoints (its row passes --checkpoint-interval 0)
    ...(row.from === 'start' ? [] : ['--checkpoint-interval', '10']),
    ...row.train,
    '--out',
    runDir,
    '--json',
  ]);
  const shardwiseS = (performance.now() - t0) / 1000;
  const out = path.join(root, `${row.name}-torch`);
  const source = row.from === 'start' ? runDir : path.join(runDir, 'checkpoints', 'step-000010');
  run(process.execPath, [BIN, 'export', source, '--format', 'torchrun', ...row.exportFlags, '--out', out]);
  const t1 = performance.now();
  run('bash', [path.join(out, 'launch.sh')]);
  const torchS = (performance.now() - t1) / 1000;
  const ref = losses(runDir);
  const got = losses(path.join(out, 'run'));
  const rel = (s: number) => Math.abs(got.get(s)! - ref.get(s)!) / Math.abs(ref.get(s)!);
  const maxRel = Math.max(...[...got.keys()].map(rel));
  const finalRel = rel(row.steps);
  const rms =
    row.weightBound !== null
      ? weightRms(
          path.join(out, 'run', 'hf', `step-${String(row.steps).padStart(6, '0')}`),
          path.join(runDir, 'checkpoints', `step-${String(row.steps).padStart(6, '0')}`),
        )
      : null;
  const pass = (row.lossCheck === 'each' ? maxRel : finalRel) < row.lossBound && (rms === null || rms < row.weightBound!);
  results.push({
    name: row.name,
    steps: `${Math.min(...got.keys())}-${row.steps}`,
    max_relative_loss_diff: maxRel,
    final_relative_loss_diff: finalRel,
    final_loss: { shardwise: ref.get(row.steps), pytorch: got.get(row.steps) },
    weights_relative_rms: rms,
    loss_bound: row.lossBound,
    weight_bound: row.weightBound,
    shardwise_s: shardwiseS,
    pytorch_s: torchS,
    pass,
  });
}
process.stdout.write(
  `${JSON.stringify({ bench: 'torch-export', dir: root, rows: results, pass: results.every((r) => r.pass) }, null, 2)}\n`,
);
