// `shardwise export RUN|CKPT --format torchrun [layout flags] --out DIR`: a PyTorch job that
// continues the run from its checkpoint (or from its initial weights, where it has none) in the
// run's layout or another one, and trains what Shardwise trains:
//   train.py, launch.sh    the job (the same train.py for every export: template/), torchrun or its environment
//   job.json               what train.py reads: model, hyperparameters, data position, the layout in PyTorch's terms (plan.ts)
//   start/                 the weights (Hugging Face GPT-2 layout, as `--format hf` writes them) and AdamW's moments in that layout
//   data/text.txt, vocab.json   the dataset's text and the character vocabulary (train.py tokenizes and samples it as Shardwise does)
//   ds_config.json, megatron_args.txt   the layout for DeepSpeed and Megatron-LM (cluster-configs.ts)
//   README.md              how to run it, what maps to what, and what does not map
// The folder is written whole or not at all (commitDirAtomic).
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { latestCheckpoint, loadCheckpoint, type Manifest } from '../../checkpoint/checkpoint.js';
import { encodeSafetensors, type Tensor } from '../../checkpoint/safetensors.js';
import { CharTokenizer, loadDataset, loadDatasetText } from '../../data/index.js';
import { paramCount, paramSpecs, validateGptConfig, type GptConfig } from '../../model/config.js';
import { initialFullParams } from '../../model/tp-layout.js';
import { commitDirAtomic, writeFileAtomic } from '../../protocol/atomic-file.js';
import { DEFAULT_PARALLEL, type ParallelSpec, TrainJobSchema, type TrainJob } from '../../protocol/train.js';
import { TABLE } from '../../../common/strategies.js';
import { hfConfig, toHfTensors } from '../hf.js';
import { clusterConfigs } from './cluster-configs.js';
import { type TorchPlan, torchPlan } from './plan.js';
import { exportReadme, notMapped } from './readme.js';

const TEMPLATE = fileURLToPath(new URL('./template/', import.meta.url));

export class ExportError extends Error {
  override name = 'ExportError';
}

/** Where the export starts: a checkpoint folder, or a run folder's latest checkpoint (none: the run's step 0). */
interface Source {
  runDir: string | null;
  checkpointDir: string | null;
}

function resolveSource(target: string): Source {
  const dir = path.resolve(target);
  if (!existsSync(dir)) throw new ExportError(`${target} does not exist: give a run folder or one of its checkpoints/step-N folders`);
  if (existsSync(path.join(dir, 'manifest.json'))) {
    // a checkpoint: its run folder is two levels up (RUN/checkpoints/step-N)
    const run = path.dirname(path.dirname(dir));
    return { runDir: existsSync(path.join(run, 'config.json')) ? run : null, checkpointDir: dir };
  }
  if (!existsSync(path.join(dir, 'config.json')))
    throw new ExportError(`${target} is neither a run folder (no config.json) nor a checkpoint (no manifest.json)`);
  return { runDir: dir, checkpointDir: latestCheckpoint(dir) };
}

/** The run's job: its config.json, or what a lone checkpoint's manifest keeps (then the layout is single fp32). */
function jobOf(src: Source, manifest: Manifest | null): TrainJob {
  if (src.runDir) {
    const file = path.join(src.runDir, 'config.json');
    const parsed = TrainJobSchema.safeParse(JSON.parse(readFileSync(file, 'utf8')));
    if (!parsed.success) throw new ExportError(`${file} is not a Shardwise run config: ${parsed.error.issues[0]?.message}`);
    return parsed.data;
  }
  const m = manifest!;
  const { dataset, ...train } = m.config.training as Record<string, unknown>;
  const parsed = TrainJobSchema.safeParse({
    run_dir: '.',
    model: {
      n_layer: m.config.model.n_layer,
      n_head: m.config.model.n_head,
      d_model: m.config.model.d_model,
      block_size: m.config.model.block_size,
    },
    data: { dataset: typeof dataset === 'string' ? dataset : m.data.dataset },
    train,
    device: {},
  });
  if (!parsed.success)
    throw new ExportError(`${src.checkpointDir}/manifest.json lacks the run's settings: ${parsed.error.issues[0]?.message}`);
  return parsed.data;
}

export interface TorchExportOptions {
  /** the layout to export (absent keys: the run's own) */
  layout?: Partial<ParallelSpec>;
  /** where the job writes its run folder, relative to its own folder (default run) */
  runDir?: string;
}

export interface TorchExportResult {
  outDir: string;
  step: number;
  steps: number;
  plan: TorchPlan;
  files: string[];
  /** the README's "What does not map" lines */
  unmapped: string[];
}

/** Optimizer moments in the HF layout: exp_avg.NAME / exp_avg_sq.NAME, Conv1D weights transposed like the weights. */
function hfMoments(cfg: GptConfig, m: Map<string, Float32Array>, v: Map<string, Float32Array>): [string, Tensor][] {
  const shaped = (src: Map<string, Float32Array>) =>
    new Map(paramSpecs(cfg).map((p) => [p.name, { shape: p.shape, data: src.get(p.name)! }]));
  return [
    ...toHfTensors(cfg, shaped(m)).map(([n, t]): [string, Tensor] => [`exp_avg.${n}`, t]),
    ...toHfTensors(cfg, shaped(v)).map(([n, t]): [string, Tensor] => [`exp_avg_sq.${n}`, t]),
  ];
}

export function exportTorchrun(target: string, outDir: string, opts: TorchExportOptions = {}): TorchExportResult {
  const src = resolveSource(target);
  const ckpt = src.checkpointDir ? loadCheckpoint(src.checkpointDir, { optimizer: true }) : null;
  const job = jobOf(src, ckpt?.manifest ?? null);
  const par: ParallelSpec = { ...DEFAULT_PARALLEL, ...job.parallel, ...opts.layout };
  if (opts.layout?.strategy && opts.layout.strategy !== job.parallel?.strategy && opts.layout.world === undefined)
    throw new ExportError(`--strategy ${opts.layout.strategy} needs --world N (the ranks of the exported layout)`);
  const broken = TABLE[par.strategy].validate({ ...job, parallel: par });
  if (broken.length > 0) throw new ExportError(`the layout is not valid: ${broken[0]!.message}`);

  const T = job.train.seq_len ?? job.model.block_size;
  const tokenizer = ckpt ? CharTokenizer.fromJSON(ckpt.manifest.tokenizer) : loadDataset(job.data.dataset, T).tokenizer;
  const cfg = validateGptConfig({ ...job.model, vocab_size: tokenizer.vocabSize });
  const strip = ({ n_layer, n_head, d_model, block_size, vocab_size }: GptConfig) => ({ n_layer, n_head, d_model, block_size, vocab_size });
  if (ckpt && JSON.stringify(strip(ckpt.manifest.config.model)) !== JSON.stringify(strip(cfg)))
    throw new ExportError(`checkpoint ${src.checkpointDir} holds another model than its run's config.json`);
  const step = ckpt?.manifest.step ?? 0;
  if (step >= job.train.steps)
    throw new ExportError(
      `the checkpoint is at step ${step}, the run's last (train.steps ${job.train.steps}): nothing is left to train; export an earlier checkpoint (RUN/checkpoints/step-N)`,
    );
  const params = ckpt ? new Map([...ckpt.params].map(([k, t]) => [k, t.data])) : initialFullParams(cfg, job.train.seed);
  const hookIters = ckpt?.manifest.comm_hook?.iters;
  const plan = torchPlan(job, par, { hookIter: hookIters?.[0] ?? step, scaler: ckpt?.manifest.loss_scaler });
  const rows = job.train.batch_size / plan.world;
  if (!Number.isInteger(rows) || rows % par.micro_batches !== 0)
    throw new ExportError(
      `batch_size ${job.train.batch_size} does not split into ${plan.world} rank(s) x ${par.micro_batches} micro-batch(es): choose a layout that divides it`,
    );

  const runConfig = { ...job, run_dir: '.', parallel: par, resume_from: undefined };
  const jobJson = {
    source: { run: src.runDir, checkpoint: src.checkpointDir, step },
    model: cfg,
    train: job.train,
    seq_len: T,
    tokenizer: { chars: [...tokenizer.chars] },
    params: paramCount(cfg),
    start: { step, optimizer_step: ckpt?.optimizer?.step ?? step, optimizer: ckpt?.optimizer != null },
    plan,
    run_config: runConfig,
    run_dir: opts.runDir ?? 'run',
  };
  const shaped = new Map(paramSpecs(cfg).map((p) => [p.name, { shape: p.shape, data: params.get(p.name)! }]));
  const weights = encodeSafetensors(toHfTensors(cfg, shaped), { format: 'pt' });
  const moments = ckpt?.optimizer
    ? encodeSafetensors(
        hfMoments(
          cfg,
          new Map([...ckpt.optimizer.m].map(([k, t]) => [k, t.data])),
          new Map([...ckpt.optimizer.v].map(([k, t]) => [k, t.data])),
        ),
        {
          format: 'pt',
        },
      )
    : null;
  const vocab = Object.fromEntries(tokenizer.chars.map((c, i) => [c, i]));
  // every layout: DeepSpeed and Megatron-LM take data-parallel and ZeRO layouts as well as the splits
  const cluster = clusterConfigs(job, par);
  const files: string[] = [];
  commitDirAtomic(outDir, (tmp) => {
    const put = (rel: string, data: Uint8Array | string, mode?: number) => {
      writeFileAtomic(path.join(tmp, rel), data, mode);
      files.push(rel);
    };
    put('train.py', readFileSync(path.join(TEMPLATE, 'train.py')), 0o755);
    put('launch.sh', readFileSync(path.join(TEMPLATE, 'launch.sh'), 'utf8').replace('__WORLD__', String(plan.world)), 0o755);
    put('job.json', `${JSON.stringify(jobJson, null, 2)}\n`);
    put('vocab.json', `${JSON.stringify(vocab, null, 2)}\n`);
    put('data/text.txt', loadDatasetText(job.data.dataset));
    put('start/model.safetensors', weights);
    put('start/config.json', `${JSON.stringify(hfConfig(cfg, tokenizer.chars), null, 2)}\n`);
    if (moments) put('start/optimizer.safetensors', moments);
    put('ds_config.json', `${JSON.stringify(cluster.deepspeed, null, 2)}\n`);
    put('megatron_args.txt', cluster.megatron);
    put('README.md', exportReadme({ job, par, plan, step, cfg, cluster: true, ...(opts.runDir ? { runDir: opts.runDir } : {}) }));
  });
  return { outDir, step, steps: job.train.steps, plan, files, unmapped: notMapped(plan) };
}
