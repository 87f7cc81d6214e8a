// The reshard matrix's one case: a source run of `shardwise train` in layout A (a small model,
// a few steps, a checkpoint at step K), and the same run resumed from that checkpoint in layout B
// (`train --resume CKPT` with B's flags). Two things are measured: the resumed run's losses after
// K against the uninterrupted source's (fp32: within 1e-5 relative), and the state it loaded,
// gathered straight back to the usual layout before its first step (SHARDWISE_CHECKPOINT_AT_LOAD,
// workers/checkpoint/at-load.ts) against the source's checkpoint, tensor by tensor, bit for bit
// (workers/checkpoint/compare.ts). Used by `npm run bench:reshard` (every source x every other
// layout, JSON) and the suite's subset (tests/dist/reshard.test.ts). dist/ must be built.
import { spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { compareCheckpoints } from '../../workers/checkpoint/compare.js';
import { CHECKPOINT_AT_LOAD_ENV } from '../../workers/checkpoint/at-load.js';

/** bin/shardwise.js of this checkout: from dist/bench/reshard/ (the bench) or bench/reshard/ (the suite, from source) */
const BIN = (() => {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!existsSync(path.join(dir, 'bin/shardwise.js'))) {
    const up = path.dirname(dir);
    if (up === dir) throw new Error('bench/reshard: no bin/shardwise.js above this file');
    dir = up;
  }
  return path.join(dir, 'bin/shardwise.js');
})();

/** A layout of the matrix: the flags of a new run in it, and of a resume into it. */
export interface Layout {
  name: LayoutName;
  world: number;
  /** `train` flags of a source run in this layout */
  source: string[];
  /**
   * `train --resume` flags that move a run into this layout. Micro-batches are given only where
   * the layout names them (pp m4, 3d m2); elsewhere the run's own stay or are recomputed.
   * zero1 says --offload-optimizer none: it takes the knob, so an offloaded source's would follow.
   */
  target: string[];
}

export const LAYOUT_NAMES = ['single', 'ddp2', 'zero1-2', 'zero3-2', 'zero2-offload-2', 'tp2', 'pp2-1f1b-m4', '3d-2x2x2'] as const;
export type LayoutName = (typeof LAYOUT_NAMES)[number];

const PP = ['--strategy', 'pp', '--pp', '2', '--schedule', '1f1b', '--micro-batches', '4'];
const THREE_D = ['--strategy', '3d', '--dp', '2', '--tp', '2', '--pp', '2', '--schedule', '1f1b', '--micro-batches', '2'];
export const LAYOUTS: Record<LayoutName, Layout> = {
  single: { name: 'single', world: 1, source: ['--strategy', 'single'], target: ['--strategy', 'single'] },
  ddp2: { name: 'ddp2', world: 2, source: ['--strategy', 'ddp', '--world', '2'], target: ['--strategy', 'ddp', '--world', '2'] },
  'zero1-2': {
    name: 'zero1-2',
    world: 2,
    source: ['--strategy', 'zero1', '--world', '2'],
    target: ['--strategy', 'zero1', '--world', '2', '--offload-optimizer', 'none'],
  },
  'zero3-2': {
    name: 'zero3-2',
    world: 2,
    source: ['--strategy', 'zero3', '--world', '2'],
    target: ['--strategy', 'zero3', '--world', '2'],
  },
  'zero2-offload-2': {
    name: 'zero2-offload-2',
    world: 2,
    source: ['--strategy', 'zero2', '--world', '2', '--offload-optimizer', 'cpu'],
    target: ['--strategy', 'zero2', '--world', '2', '--offload-optimizer', 'cpu'],
  },
  tp2: { name: 'tp2', world: 2, source: ['--strategy', 'tp', '--tp', '2'], target: ['--strategy', 'tp', '--tp', '2'] },
  'pp2-1f1b-m4': { name: 'pp2-1f1b-m4', world: 2, source: PP, target: PP },
  '3d-2x2x2': { name: '3d-2x2x2', world: 8, source: THREE_D, target: THREE_D },
};

export function isLayoutName(s: string): s is LayoutName {
  return (LAYOUT_NAMES as readonly string[]).includes(s);
}

/**
 * The matrix's model and run: 2 blocks (one per pipeline stage), 2 heads (one per tensor-parallel
 * rank), d_model 32, T 16, global batch 8 (4 rows per replica at dp 2; 4 micro-batches of 2 on a
 * pipeline), STEPS steps, checkpoints every RESUME_AT: the resume continues from step RESUME_AT.
 */
export const MODEL = { n_layer: 2, n_head: 2, d_model: 32, block_size: 16 };
export const STEPS = 5;
export const RESUME_AT = 2;
const RUN = [
  '--steps',
  String(STEPS),
  '--seed',
  '3',
  '--batch-size',
  '8',
  '--checkpoint-interval',
  String(RESUME_AT),
  '--eval-interval',
  '0',
];

export interface SourceRun {
  layout: LayoutName;
  precision: 'fp32' | 'bf16';
  dir: string;
  /** the loss of every step, 1..STEPS */
  losses: number[];
  seconds: number;
}

export interface PairResult {
  source: LayoutName;
  target: LayoutName;
  precision: 'fp32' | 'bf16';
  /** steps RESUME_AT+1..STEPS, the resumed run's and the uninterrupted source's */
  losses: number[];
  sourceLosses: number[];
  /** largest |resumed - source| / |source| over those steps */
  maxRelLossDiff: number;
  /** the moments (AdamW's m and v) and the optimizer step after loading, gathered back: bit for bit the source checkpoint's */
  momentsExact: boolean;
  momentsMaxAbsDiff: number;
  /** the weights too (the fp32 master) */
  paramsExact: boolean;
  /** tensors compared (weights and both moments) and those that differ */
  tensors: number;
  differing: string[];
  /** the resumed run's notes (summary.json): what changed, what was reset */
  notes: string[];
  /** wall seconds of the resume */
  seconds: number;
}

/** `shardwise ARGS --json` with `env` added: exit code, step losses, stderr */
function run(args: string[], env: Record<string, string> = {}): Promise<{ code: number; losses: number[]; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args, '--json'], { env: { ...process.env, SHARDWISE_DEBUG: '', ...env } });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('exit', (code) => {
      const losses = out
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { type: string; loss: number })
        .filter((m) => m.type === 'step')
        .map((m) => m.loss);
      resolve({ code: code ?? -1, losses, stderr: err });
    });
  });
}

const ckpt = (dir: string, step: number) => path.join(dir, 'checkpoints', `step-${String(step).padStart(6, '0')}`);

/** The model file every run of the matrix shares, in `root`. */
function modelFile(root: string): string {
  const file = path.join(root, 'model.json');
  if (!existsSync(file)) {
    mkdirSync(root, { recursive: true });
    writeFileSync(file, JSON.stringify({ model: MODEL }));
  }
  return file;
}

/** The uninterrupted run in `layout`, in root/src-LAYOUT[-bf16]. */
export async function trainSource(root: string, layout: LayoutName, precision: 'fp32' | 'bf16' = 'fp32'): Promise<SourceRun> {
  const dir = path.join(root, `src-${layout}${precision === 'fp32' ? '' : `-${precision}`}`);
  const t0 = performance.now();
  const r = await run([
    'train',
    '--config',
    modelFile(root),
    ...RUN,
    ...LAYOUTS[layout].source,
    ...(precision === 'fp32' ? [] : ['--precision', precision]),
    '--out',
    dir,
  ]);
  if (r.code !== 0 || r.losses.length !== STEPS) throw new Error(`source ${layout} ${precision}: exit ${r.code}: ${r.stderr.trim()}`);
  return { layout, precision, dir, losses: r.losses, seconds: (performance.now() - t0) / 1000 };
}

/** The source resumed from its step-RESUME_AT checkpoint in `target`, in a copy of its folder (root/PAIR). */
export async function resumePair(root: string, source: SourceRun, target: LayoutName): Promise<PairResult> {
  const name = `${source.layout}-to-${target}${source.precision === 'fp32' ? '' : `-${source.precision}`}`;
  const dir = path.join(root, name);
  const proof = path.join(root, `${name}-at-load`);
  cpSync(source.dir, dir, { recursive: true });
  const t0 = performance.now();
  const r = await run(['train', '--resume', ckpt(dir, RESUME_AT), ...LAYOUTS[target].target], { [CHECKPOINT_AT_LOAD_ENV]: proof });
  const seconds = (performance.now() - t0) / 1000;
  if (r.code !== 0) throw new Error(`${name}: exit ${r.code}: ${r.stderr.trim()}`);
  const sourceLosses = source.losses.slice(RESUME_AT);
  const maxRelLossDiff = Math.max(
    ...sourceLosses.map((l, i) => (r.losses[i] === undefined ? Infinity : Math.abs(r.losses[i]! - l) / Math.abs(l))),
  );
  const diff = compareCheckpoints(ckpt(source.dir, RESUME_AT), ckpt(proof, RESUME_AT));
  const summary = JSON.parse(readFileSync(path.join(dir, 'summary.json'), 'utf8')) as { notes?: string[] };
  return {
    source: source.layout,
    target,
    precision: source.precision,
    losses: r.losses,
    sourceLosses,
    maxRelLossDiff: r.losses.length === sourceLosses.length ? maxRelLossDiff : Infinity,
    momentsExact: diff.momentsExact,
    momentsMaxAbsDiff: diff.momentsMaxAbs,
    paramsExact: diff.exact,
    tensors: diff.tensors,
    differing: diff.differing.map((d) => `${d.name}: ${d.differing}/${d.elements} elements, max |diff| ${d.maxAbs}`),
    notes: summary.notes ?? [],
    seconds,
  };
}

/** Runs `tasks` with at most `jobs` at a time, results in the tasks' order. */
export async function limited<T>(jobs: number, tasks: (() => Promise<T>)[]): Promise<T[]> {
  const out: T[] = new Array(tasks.length);
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) {
      const i = next++;
      out[i] = await tasks[i]!();
    }
  };
  await Promise.all(Array.from({ length: Math.min(jobs, tasks.length) }, worker));
  return out;
}
