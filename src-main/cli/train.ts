// `shardwise train`: resolve the job (defaults <- preset <- --config file <- flags), create the
// run folder, fork the rank process, and turn its messages into a progress bar (TTY), JSON
// lines (--json) and the run folder's state, metrics and summary.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { PRESETS } from '../../workers/protocol/presets.js';
import { validateGrid, validateThreeDJob } from '../../workers/protocol/grid.js';
import {
  AVAILABLE_STRATEGIES,
  DEFAULT_PARALLEL,
  ModelSpecSchema,
  ParallelSpecSchema,
  type RankMessage,
  STRATEGIES,
  type TrainJob,
  type TrainSpec,
  TrainJobSchema,
  TrainSpecSchema,
} from '../../workers/protocol/train.js';
import { LocalRanks } from '../launch/local-ranks.js';
import { connectPlacement as connectAgents, PlacementError } from '../launch/placement.js';
import { RunFolder } from '../runs/run-folder.js';
import { StepAggregator } from './step-aggregator.js';
import { bubbleMeterFor } from './bubble.js';
import { runSummary } from './run-summary.js';
import { DeepSpeedConfigError, DeepSpeedSchema, mapDeepSpeed } from './deepspeed-config.js';
import { CliError } from './errors.js';
import { Progress } from './progress.js';

// Shardwise's sections, plus DeepSpeed's top-level names (see deepspeed-config.ts)
const ConfigFileSchema = DeepSpeedSchema.strict()
  .extend({
    model: ModelSpecSchema.partial().optional(),
    train: TrainSpecSchema.partial().optional(),
    data: z.object({ dataset: z.string() }).strict().optional(),
    device: z.object({ adapter: z.string().optional() }).strict().optional(),
    parallel: ParallelSpecSchema.partial().optional(),
    strategy: z.string().optional(),
    telemetry: z.object({ spans: z.boolean() }).strict().optional(),
  })
  .strict();

const DEFAULT_TRAIN = {
  weight_decay: 0.1,
  beta1: 0.9,
  beta2: 0.95,
  eps: 1e-8,
  grad_clip: 1.0,
  seed: 1337,
  eval_batches: 4,
  keep_checkpoints: 3,
  activation_checkpointing: false,
};

function int(name: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v)) throw new CliError(`--${name} must be a non-negative integer, got "${v}"`);
  return Number(v);
}

function num(name: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n)) throw new CliError(`--${name} must be a number, got "${v}"`);
  return n;
}

function readConfigFile(file: string): z.infer<typeof ConfigFileSchema> {
  if (!existsSync(file) || !statSync(file).isFile()) throw new CliError(`config file ${file} does not exist`);
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new CliError(`config file ${file} is not valid JSON: ${(e as Error).message}`);
  }
  const r = ConfigFileSchema.safeParse(raw);
  if (!r.success) {
    const i = r.error.issues[0]!;
    throw new CliError(`config file ${file}: ${i.path.join('.') || '(top level)'}: ${i.message}`);
  }
  return r.data;
}

function zodMessage(e: z.ZodError): string {
  const i = e.issues[0]!;
  return `${i.path.join('.')}: ${i.message}`;
}

export function resolveJob(argv: string[]): { job: TrainJob; json: boolean; resumeDir?: string; strategy: string; placement?: string } {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        config: { type: 'string' },
        preset: { type: 'string' },
        strategy: { type: 'string' },
        world: { type: 'string' },
        tp: { type: 'string' },
        dp: { type: 'string' },
        'micro-batches': { type: 'string' },
        pp: { type: 'string' },
        schedule: { type: 'string' },
        partition: { type: 'string' },
        'bucket-cap-mb': { type: 'string' },
        'offload-optimizer': { type: 'string' },
        prefetch: { type: 'string' },
        steps: { type: 'string' },
        dataset: { type: 'string' },
        seed: { type: 'string' },
        out: { type: 'string' },
        json: { type: 'boolean' },
        'batch-size': { type: 'string' },
        'seq-len': { type: 'string' },
        lr: { type: 'string' },
        'min-lr': { type: 'string' },
        'warmup-steps': { type: 'string' },
        'weight-decay': { type: 'string' },
        'grad-clip': { type: 'string' },
        'eval-interval': { type: 'string' },
        'eval-batches': { type: 'string' },
        'checkpoint-interval': { type: 'string' },
        'keep-checkpoints': { type: 'string' },
        'activation-checkpointing': { type: 'boolean' },
        device: { type: 'string' },
        resume: { type: 'string' },
        placement: { type: 'string' },
      },
    });
  } catch (e) {
    throw new CliError(`${(e as Error).message.split('\n')[0]}. Run 'shardwise train --help' for the flags.`);
  }
  const v = parsed.values;
  const file = v.config ? readConfigFile(v.config) : undefined;

  if (v.resume) return { ...resolveResume(v.resume, v), placement: v.placement };
  return { ...resolveTrainFlags(v, file, v.config), placement: v.placement };
}

/** The flags of `shardwise train` (as parseArgs gives them), shared with the controller's launch. */
export interface TrainFlags {
  [flag: string]: string | boolean | undefined;
  json?: boolean;
  'activation-checkpointing'?: boolean;
}
export type ConfigFile = z.infer<typeof ConfigFileSchema>;

/**
 * Flags + optional config file -> the validated job (defaults <- preset <- file <- flags).
 * Throws CliError naming the flag. The controller's `runs.launch` comes through here too.
 */
export function resolveTrainFlags(
  flags: TrainFlags,
  file: ConfigFile | undefined,
  configName?: string,
): { job: TrainJob; json: boolean; strategy: string } {
  const v = flags as Record<string, string | undefined> & { json?: boolean; 'activation-checkpointing'?: boolean };
  let ds: ReturnType<typeof mapDeepSpeed> = { parallel: {}, train: {} };
  try {
    // DeepSpeed's batch arithmetic counts data-parallel ranks: tensor-parallel ranks share rows
    const tpOnly = (v.strategy ?? file?.parallel?.strategy ?? file?.strategy) === 'tp';
    const threeD = (v.strategy ?? file?.parallel?.strategy ?? file?.strategy) === '3d';
    if (file)
      ds = mapDeepSpeed(
        file,
        tpOnly ? 1 : threeD ? (int('dp', v.dp) ?? file.parallel?.dp ?? 1) : (int('world', v.world) ?? file.parallel?.world),
      );
  } catch (e) {
    if (e instanceof DeepSpeedConfigError) throw new CliError(`config file ${configName}: ${e.message}`);
    throw e;
  }
  const strategy = v.strategy ?? file?.parallel?.strategy ?? ds.parallel.strategy ?? file?.strategy ?? 'single';
  if (!(STRATEGIES as readonly string[]).includes(strategy))
    throw new CliError(`unknown strategy "${strategy}"; choose one of ${STRATEGIES.join(', ')}`);
  if (!(AVAILABLE_STRATEGIES as readonly string[]).includes(strategy)) {
    throw new CliError(`strategy ${strategy} is not available in this build yet; choose one of ${AVAILABLE_STRATEGIES.join(', ')}`);
  }
  const tp = int('tp', v.tp) ?? file?.parallel?.tp;
  if (tp !== undefined && strategy !== 'tp' && strategy !== '3d')
    throw new CliError(`--tp applies to --strategy tp (tensor parallelism); got --strategy ${strategy}`);
  const pp = int('pp', v.pp) ?? file?.parallel?.pp;
  if (pp !== undefined && strategy !== 'pp' && strategy !== '3d')
    throw new CliError(`--pp applies to --strategy pp (pipeline stages); got --strategy ${strategy}`);
  if (v.schedule !== undefined && strategy !== 'pp' && strategy !== '3d')
    throw new CliError(`--schedule applies to --strategy pp; got --strategy ${strategy}`);
  if (v.schedule !== undefined && v.schedule !== 'gpipe' && v.schedule !== '1f1b')
    throw new CliError(`--schedule must be gpipe or 1f1b, got "${v.schedule}"`);
  // 3d: --dp x --tp x --pp ranks (Megatron's grid); each defaults to 1
  const dp = int('dp', v.dp) ?? file?.parallel?.dp;
  if (dp !== undefined && strategy !== '3d')
    throw new CliError(
      `--dp applies to --strategy 3d (data-parallel replicas of a tensor- and pipeline-parallel model); got --strategy ${strategy}`,
    );
  const grid3d = strategy === '3d' ? { dp: dp ?? 1, tp: tp ?? 1, pp: pp ?? 1 } : null;
  const world =
    int('world', v.world) ??
    file?.parallel?.world ??
    (grid3d ? grid3d.dp * grid3d.tp * grid3d.pp : undefined) ??
    (strategy === 'tp' ? tp : undefined) ??
    (strategy === 'single' ? 1 : strategy === 'pp' ? (pp ?? 2) : 2);
  if (world < 1) throw new CliError('--world must be at least 1');
  if (strategy === 'pp') {
    if (pp !== undefined && pp !== world)
      throw new CliError(`--world ${world} must equal --pp ${pp} (every rank is one pipeline stage); leave out --world`);
    if (world < 2) throw new CliError(`--pp must be at least 2 (pipeline stages), got ${world}`);
  }
  if (strategy === 'single' && world !== 1)
    throw new CliError(`--world ${world} needs a distributed strategy (dp or ddp); --strategy single runs one rank`);
  const parallel = {
    ...DEFAULT_PARALLEL,
    ...ds.parallel,
    ...file?.parallel,
    strategy,
    world,
  };
  if (parallel.partition_activations && strategy !== 'tp' && strategy !== '3d') {
    throw new CliError(
      `activation_checkpointing.partition_activations needs --strategy tp: it splits checkpointed activations over the tensor-parallel ranks (got --strategy ${strategy})`,
    );
  }
  if (strategy === 'tp') {
    if (tp !== undefined && tp < 1) throw new CliError('--tp must be at least 1');
    if (tp !== undefined && tp !== world)
      throw new CliError(
        `--world ${world} must equal --tp ${tp}: with --strategy tp every rank holds one tensor-parallel shard (data parallelism on top is --strategy 3d)`,
      );
    Object.assign(parallel, { tp: world });
  }
  const mb = int('micro-batches', v['micro-batches']);
  if (mb !== undefined) parallel.micro_batches = mb;
  if (grid3d) {
    try {
      validateGrid(grid3d, world);
    } catch (e) {
      throw new CliError((e as Error).message.replace(/parallel\.(dp|tp|pp|world)/g, '--$1'));
    }
    Object.assign(parallel, grid3d);
    if (v.schedule !== undefined) parallel.schedule = v.schedule as 'gpipe' | '1f1b';
    parallel.schedule ??= '1f1b';
  }
  if (strategy === 'pp') {
    parallel.pp = world;
    if (v.schedule !== undefined) parallel.schedule = v.schedule as 'gpipe' | '1f1b';
    parallel.schedule ??= '1f1b';
  }
  // how pipeline stages are split: by parameter count, or by time measured on rank 0's device
  if (v.partition !== undefined && v.partition !== 'params' && v.partition !== 'time')
    throw new CliError(`--partition must be params or time, got "${v.partition}"`);
  if (v.partition !== undefined) parallel.partition = v.partition as 'params' | 'time';
  if (parallel.partition !== undefined && strategy !== 'pp') {
    throw new CliError(
      `--partition (parallel.partition) applies to --strategy pp (how blocks are split into pipeline stages); got --strategy ${strategy}${strategy === '3d' ? ': 3d stages are split by parameter count' : ''}`,
    );
  }
  const cap = num('bucket-cap-mb', v['bucket-cap-mb']);
  if (cap !== undefined) parallel.bucket_cap_mb = cap;
  if (v.prefetch !== undefined) {
    if (v.prefetch !== 'on' && v.prefetch !== 'off') throw new CliError(`--prefetch must be on or off, got "${v.prefetch}"`);
    if (strategy !== 'zero3')
      throw new CliError(`--prefetch applies to --strategy zero3 (it gathers the next layer's weights early); got --strategy ${strategy}`);
    parallel.prefetch = v.prefetch === 'on';
  }
  const off = v['offload-optimizer'];
  if (off !== undefined) {
    if (off !== 'cpu' && off !== 'none') throw new CliError(`--offload-optimizer must be cpu or none, got "${off}"`);
    if (off === 'cpu' && strategy !== 'zero1' && strategy !== 'zero2') {
      throw new CliError(
        `--offload-optimizer cpu needs --strategy zero1 or zero2 (ZeRO-Offload moves the sharded optimizer to the host); got --strategy ${strategy}`,
      );
    }
    parallel.offload_optimizer = off;
  }

  const presetName = v.preset ?? file?.model?.preset ?? 'tiny';
  const preset = PRESETS[presetName];
  if (!preset) throw new CliError(`unknown preset "${presetName}"; choose one of ${Object.keys(PRESETS).join(', ')}`);
  const steps = int('steps', v.steps) ?? file?.train?.steps ?? 200;
  const model = {
    preset: presetName,
    n_layer: preset.n_layer,
    n_head: preset.n_head,
    d_model: preset.d_model,
    block_size: preset.block_size,
    ...file?.model,
  };
  const train: Omit<TrainSpec, 'seq_len'> & { seq_len?: number } = {
    ...DEFAULT_TRAIN,
    steps,
    batch_size: preset.batch_size,
    lr: preset.lr,
    min_lr: preset.lr / 10,
    warmup_steps: Math.min(100, Math.floor(steps / 10)),
    eval_interval: Math.max(1, Math.floor(steps / 10)),
    checkpoint_interval: Math.max(1, Math.floor(steps / 2)),
    ...ds.train,
    ...file?.train,
  };
  const set = <K extends keyof typeof train>(k: K, x: (typeof train)[K] | undefined) => {
    if (x !== undefined) train[k] = x;
  };
  set('batch_size', int('batch-size', v['batch-size']));
  set('seq_len', int('seq-len', v['seq-len']));
  set('lr', num('lr', v.lr));
  set('min_lr', num('min-lr', v['min-lr']));
  set('warmup_steps', int('warmup-steps', v['warmup-steps']));
  set('weight_decay', num('weight-decay', v['weight-decay']));
  set('grad_clip', num('grad-clip', v['grad-clip']));
  set('seed', int('seed', v.seed));
  set('eval_interval', int('eval-interval', v['eval-interval']));
  set('eval_batches', int('eval-batches', v['eval-batches']));
  set('checkpoint_interval', int('checkpoint-interval', v['checkpoint-interval']));
  set('keep_checkpoints', int('keep-checkpoints', v['keep-checkpoints']));
  if (v['activation-checkpointing']) train.activation_checkpointing = true;
  if (v.lr !== undefined && v['min-lr'] === undefined && file?.train?.min_lr === undefined) train.min_lr = train.lr / 10;
  if (train.steps < 1) throw new CliError('--steps must be at least 1');

  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\..*/, '').replace('T', '-');
  const runDir = path.resolve(v.out ?? path.join('runs', `${stamp}-${presetName}-${process.pid}`));
  const job = {
    run_dir: runDir,
    model,
    data: { dataset: v.dataset ?? file?.data?.dataset ?? 'builtin:grammar' },
    train,
    device: { adapter: v.device ?? file?.device?.adapter },
    parallel,
    ...(file?.telemetry ? { telemetry: file.telemetry } : {}),
  };
  if (file?.telemetry?.spans === false && (strategy === 'pp' || strategy === '3d')) {
    throw new CliError(
      `${configName ? `config file ${configName}: ` : ''}telemetry.spans false does not apply to --strategy ${strategy}: the pipeline bubble is measured from its spans`,
    );
  }
  const r = TrainJobSchema.safeParse(job);
  if (!r.success) throw new CliError(`invalid training config: ${zodMessage(r.error)}`);
  const p = r.data.parallel!;
  if (p.strategy === '3d') {
    // the grid's own checks (heads, layers, micro-batches per replica), named like the flags
    try {
      validateThreeDJob(r.data);
    } catch (e) {
      throw new CliError((e as Error).message);
    }
  } else if (p.strategy === 'pp') {
    // every stage sees the whole batch: only the micro-batches split it
    if (r.data.model.n_layer < p.world)
      throw new CliError(
        `model.n_layer ${r.data.model.n_layer} is smaller than --pp ${p.world}: every pipeline stage needs at least one block; lower --pp or raise model.n_layer`,
      );
    if (r.data.train.batch_size % p.micro_batches !== 0) {
      throw new CliError(
        `batch size ${r.data.train.batch_size} is not divisible by --micro-batches ${p.micro_batches}; pick --batch-size as a multiple of ${p.micro_batches}`,
      );
    }
  } else {
    // tensor-parallel ranks share every row: only data-parallel ranks split the batch
    const dpRanks = p.strategy === 'tp' ? 1 : p.world;
    if (r.data.train.batch_size % (dpRanks * p.micro_batches) !== 0) {
      throw new CliError(
        `batch size ${r.data.train.batch_size} is not divisible by world ${dpRanks} x micro-batches ${p.micro_batches}; pick --batch-size as a multiple of ${dpRanks * p.micro_batches}`,
      );
    }
  }
  if (p.strategy === 'tp') {
    const m = r.data.model;
    if (m.n_head % p.world !== 0)
      throw new CliError(
        `model.n_head (${m.n_head}) must be divisible by --tp ${p.world}: each rank computes whole attention heads; pick --tp among the divisors of ${m.n_head} or a model with more heads`,
      );
  }
  if (r.data.data.dataset.startsWith('builtin:') === false && !existsSync(r.data.data.dataset)) {
    throw new CliError(`dataset file ${r.data.data.dataset} does not exist; give a UTF-8 text file or builtin:grammar`);
  }
  return { job: r.data, json: v.json ?? false, strategy };
}

function resolveResume(target: string, v: Record<string, unknown>): { job: TrainJob; json: boolean; resumeDir: string; strategy: string } {
  // target: a run folder (latest checkpoint) or one checkpoint folder inside it
  let runDir = path.resolve(target);
  let ckpt: string | undefined;
  if (path.basename(path.dirname(runDir)) === 'checkpoints') {
    ckpt = runDir;
    runDir = path.dirname(path.dirname(runDir));
  }
  const run = RunFolder.open(runDir);
  const job = TrainJobSchema.parse(run.readConfig());
  if (!ckpt) {
    const dir = path.join(runDir, 'checkpoints');
    const names = existsSync(dir)
      ? readdirSync(dir)
          .filter((n) => /^step-\d+$/.test(n))
          .sort()
      : [];
    if (names.length === 0) throw new CliError(`run ${runDir} has no checkpoint to resume from`);
    ckpt = path.join(dir, names[names.length - 1]!);
  }
  if (!existsSync(path.join(ckpt, 'manifest.json'))) throw new CliError(`${ckpt} is not a checkpoint (no manifest.json)`);
  const steps = int('steps', v.steps as string | undefined);
  if (steps !== undefined) job.train.steps = steps;
  job.resume_from = ckpt;
  return { job, json: (v.json as boolean | undefined) ?? false, resumeDir: runDir, strategy: job.parallel?.strategy ?? 'single' };
}

async function connectPlacement(spec: string, world: number) {
  try {
    return await connectAgents(spec, world);
  } catch (e) {
    throw e instanceof PlacementError ? new CliError(e.message) : e;
  }
}

export async function trainCommand(argv: string[]): Promise<number> {
  const { job, json, resumeDir, strategy, placement: placementArg } = resolveJob(argv);
  const world0 = job.parallel?.world ?? 1;
  // connect to the agents before anything is written: a wrong address or an unpaired agent is a usage error
  const placement = placementArg ? await connectPlacement(placementArg, world0) : undefined;
  let run: RunFolder;
  let startedSteps = false;
  if (resumeDir) {
    run = RunFolder.open(resumeDir);
    const fromStep = Number(/step-(\d+)$/.exec(job.resume_from!)?.[1] ?? 0);
    run.truncateMetrics(fromStep);
    run.writeState({
      ...run.readState(),
      status: 'running',
      step: fromStep,
      steps: job.train.steps,
      error: undefined,
      updated_at: new Date().toISOString(),
      pid: process.pid,
    });
    startedSteps = true; // never delete a resumed run
    run.writeConfig({ ...job, resume_from: undefined });
  } else {
    try {
      run = RunFolder.create(job.run_dir, job, job.train.steps);
    } catch (e) {
      throw new CliError((e as Error).message);
    }
  }
  const world = job.parallel?.world ?? 1;
  const progress = new Progress(job.train.steps, json);
  let lastVal: number | undefined;
  const done = new Map<number, Extract<RankMessage, { type: 'done' }>>();
  const tokensPerS: number[] = [];
  const steps = new StepAggregator(world);
  const bubble = bubbleMeterFor(job.parallel);

  const commTimeout = process.env.SHARDWISE_COMM_TIMEOUT_MS ? Number(process.env.SHARDWISE_COMM_TIMEOUT_MS) : undefined;
  const ranks = new LocalRanks(
    job,
    (m, rank) => {
      switch (m.type) {
        case 'ready':
          if (rank === 0) {
            run.updateState({ status: 'running' });
            progress.info(
              `training on ${m.adapter.description}${m.adapter.isSoftware ? ' (software adapter)' : ''}: ${m.params.toLocaleString('en-US')} parameters, vocab ${m.vocab_size}, ` +
                `${strategy}${world > 1 ? ` x ${world} ranks` : ''}, run folder ${run.dir}`,
            );
          }
          break;
        case 'step': {
          const s = steps.add(rank, m);
          if (!s) break;
          startedSteps = true;
          tokensPerS.push(s.tokens_per_s);
          run.appendMetric(s);
          progress.step(s.step, s.loss, s.tokens_per_s, lastVal);
          if (json) process.stdout.write(`${JSON.stringify(s)}\n`);
          if (s.step % 10 === 0 || s.step === job.train.steps) run.updateState({ step: s.step });
          break;
        }
        case 'eval': {
          lastVal = m.val_loss;
          const line = { type: 'eval', step: m.step, val_loss: m.val_loss };
          run.appendMetric(line);
          if (json) process.stdout.write(`${JSON.stringify(line)}\n`);
          else progress.info(`step ${m.step}: validation loss ${m.val_loss.toFixed(4)}`);
          break;
        }
        case 'checkpoint':
          run.appendMetric({ type: 'checkpoint', step: m.step, path: m.path });
          run.updateState({ step: m.step });
          break;
        case 'spans':
          run.appendSpans(m.spans.map((s) => ({ rank, step: m.step, ...s })));
          bubble?.add(m.step, rank, m.spans);
          break;
        case 'done':
          done.set(rank, m);
          break;
      }
    },
    commTimeout,
    {
      placement: placement?.ranks,
      onRanksStarted: (started) => {
        if (placement) run.updateState({ ranks: started.map(({ rank, machine, pid }) => ({ rank, machine, pid })) }); // as API-launched runs record it
        if (json && placement) process.stdout.write(`${JSON.stringify({ type: 'ranks', ranks: started })}\n`);
      },
    },
  );

  const interrupted = (why = 'interrupted by the user') => {
    ranks.stop();
    run.updateState({ status: 'interrupted', error: why });
    progress.finish();
    process.stderr.write(`shardwise: ${why}; continue with: shardwise train --resume ${run.dir}\n`);
    process.exit(130);
  };
  const onSignal = () => interrupted();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  // `shardwise train --json | head`: the reader went away; stop like an interrupt, resumable
  process.stdout.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'EPIPE') interrupted('standard output was closed');
  });
  const failure = await ranks.result;
  placement?.close();
  process.off('SIGINT', onSignal);
  process.off('SIGTERM', onSignal);
  progress.finish();

  if (failure || done.size !== world) {
    const reason = failure?.message ?? `only ${done.size} of ${world} ranks finished`;
    if (!startedSteps) run.remove();
    else run.updateState({ status: 'failed', error: reason });
    throw new CliError(reason, 1);
  }
  const d0 = done.get(0)!;
  const summary = runSummary({ job, runDir: run.dir, done, tokensPerS, lastLoss: steps.lastLoss, lastVal, bubble });
  const mean = summary.tokens_per_s as number;
  run.writeSummary(summary);
  run.updateState({ status: 'completed', step: d0.steps });
  if (json) process.stdout.write(`${JSON.stringify(summary)}\n`);
  else {
    process.stdout.write(
      `done: ${d0.steps} steps, final loss ${steps.lastLoss.toFixed(4)}${lastVal !== undefined ? `, validation loss ${lastVal.toFixed(4)}` : ''}, ${Math.round(mean)} tokens/s. Run folder: ${run.dir}\n`,
    );
  }
  return 0;
}
