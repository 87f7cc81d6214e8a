// Worker-side commands on a finished or running run's latest checkpoint:
//   eval RUN_DIR --text FILE [--json]   mean cross-entropy over every full window of the file
//   sample RUN_DIR [--prompt TEXT] [--tokens N] [--temperature X] [--seed S]
//   export RUN_DIR --format hf [--out DIR]
//   export RUN_DIR|CHECKPOINT_DIR --format torchrun [--strategy S --world N --micro-batches M --bucket-cap-mb X --grad-compression G] [--out DIR]
// Errors: one line on stderr, exit code 2 for bad input, 1 otherwise.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { latestCheckpoint } from '../checkpoint/checkpoint.js';
import { loadTrainingCheckpoint } from '../checkpoint/training-state.js';
import { CharTokenizer, evalBatches, evalWindows, loadTextFile, SplitMix32 } from '../data/index.js';
import { exportHf } from '../export/hf.js';
import { exportTorchrunCommand, TORCHRUN_OPTIONS } from '../export/torchrun/command.js';
import { PRECISIONS, type Precision } from '../../common/precision.js';
import { openDevice } from '../gpu/device.js';
import { Runtime } from '../gpu/runtime.js';
import { Gpt } from '../model/gpt.js';

class UsageError extends Error {
  override name = 'UsageError';
}

function checkpointOf(target: string | undefined, command: string): string {
  if (!target) throw new UsageError(`${command} needs a run folder: shardwise ${command} RUN_DIR ...`);
  const dir = path.resolve(target);
  if (existsSync(path.join(dir, 'manifest.json'))) return dir;
  if (!existsSync(dir)) throw new UsageError(`run folder ${target} does not exist`);
  const latest = latestCheckpoint(dir);
  if (!latest) throw new UsageError(`${target} has no checkpoint yet (train with --checkpoint-interval, or wait for the first checkpoint)`);
  return latest;
}

async function loadModel(ckptDir: string, B: number) {
  const state = await loadTrainingCheckpoint(ckptDir, false);
  const tokenizer = CharTokenizer.fromJSON(state.manifest.tokenizer);
  const rt = new Runtime(await openDevice(process.env.SHARDWISE_DEVICE));
  const cfg = state.manifest.config;
  const model = new Gpt(rt, cfg, { B, T: cfg.block_size });
  model.params.writeParams(state.params);
  return { rt, model, tokenizer, cfg };
}

async function evalCommand(argv: string[]) {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: { text: { type: 'string' }, json: { type: 'boolean' } },
  });
  const ckpt = checkpointOf(positionals[0], 'eval');
  if (!values.text) throw new UsageError('eval needs --text FILE (a UTF-8 text file to score)');
  const text = loadTextFile(values.text);
  const B = 8;
  const { rt, model, tokenizer, cfg } = await loadModel(ckpt, B);
  const tokens = tokenizer.encode(text);
  const T = cfg.block_size;
  const info = evalWindows(tokens, T);
  let sum = 0;
  for (const batch of evalBatches(tokens, T, B)) {
    const inputs = new Uint32Array(B * T);
    const targets = new Uint32Array(B * T);
    inputs.set(batch.inputs);
    targets.set(batch.targets);
    model.setBatch(inputs, targets);
    await model.forward('eval');
    const losses = await model.readLosses();
    for (let i = 0; i < batch.B * T; i++) sum += losses[i]!;
  }
  const loss = sum / info.tokens;
  if (values.json) process.stdout.write(`${JSON.stringify({ loss, tokens: info.tokens, windows: info.count, checkpoint: ckpt })}\n`);
  else process.stdout.write(`loss ${loss.toFixed(4)} over ${info.tokens} tokens (${info.count} windows of ${T}), checkpoint ${ckpt}\n`);
  rt.destroy();
}

async function sampleCommand(argv: string[]) {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: { prompt: { type: 'string' }, tokens: { type: 'string' }, temperature: { type: 'string' }, seed: { type: 'string' } },
  });
  const ckpt = checkpointOf(positionals[0], 'sample');
  const n = values.tokens === undefined ? 200 : Number(values.tokens);
  if (!Number.isInteger(n) || n < 1) throw new UsageError(`--tokens must be a positive integer, got "${values.tokens}"`);
  const temperature = values.temperature === undefined ? 0.8 : Number(values.temperature);
  if (!(temperature >= 0)) throw new UsageError(`--temperature must be a number >= 0, got "${values.temperature}"`);
  const { rt, model, tokenizer, cfg } = await loadModel(ckpt, 1);
  const rng = new SplitMix32(values.seed === undefined ? 1234 : Number(values.seed));
  const prompt = values.prompt ?? tokenizer.decode(Uint32Array.of(0));
  const ids = [...tokenizer.encode(prompt)];
  if (ids.length === 0) throw new UsageError('--prompt must not be empty');
  process.stdout.write(prompt);
  const T = cfg.block_size;
  for (let i = 0; i < n; i++) {
    const ctx = ids.slice(-T);
    const input = new Uint32Array(T);
    input.set(ctx);
    model.setBatch(input, new Uint32Array(T));
    await model.forward('eval');
    const [logits] = await model.readLogitsAt(ctx.length - 1);
    const next = pick(logits!, temperature, rng);
    ids.push(next);
    process.stdout.write(tokenizer.decode(Uint32Array.of(next)));
  }
  process.stdout.write('\n');
  rt.destroy();
}

function pick(logits: Float32Array, temperature: number, rng: SplitMix32): number {
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i]! > logits[best]!) best = i;
  if (temperature === 0) return best;
  const max = logits[best]!;
  const p = Array.from(logits, (x) => Math.exp((x - max) / temperature));
  const z = p.reduce((a, b) => a + b, 0);
  let u = rng.nextFloat() * z;
  for (let i = 0; i < p.length; i++) {
    u -= p[i]!;
    if (u <= 0) return i;
  }
  return p.length - 1;
}

async function exportCommand(argv: string[]) {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: { format: { type: 'string' }, out: { type: 'string' }, dtype: { type: 'string' }, ...TORCHRUN_OPTIONS },
  });
  if (values.format === 'torchrun') return exportTorchrunCommand(positionals[0], values);
  const ckpt = checkpointOf(positionals[0], 'export');
  if (values.format !== 'hf')
    throw new UsageError(
      `export needs --format hf (Hugging Face GPT-2 layout) or --format torchrun (a PyTorch job)${values.format ? `, got "${values.format}"` : ''}`,
    );
  const dtype = values.dtype ?? 'fp32';
  if (!(PRECISIONS as readonly string[]).includes(dtype))
    throw new UsageError(`--dtype must be fp32 (the master weights), bf16 or fp16, got "${dtype}"`);
  const out = path.resolve(values.out ?? path.join(positionals[0]!, 'export-hf'));
  exportHf(ckpt, out, dtype as Precision);
  process.stdout.write(`exported ${ckpt} to ${out} (model.safetensors in ${dtype}, config.json, vocab.json)\n`);
}

const commands: Record<string, (argv: string[]) => Promise<void>> = { eval: evalCommand, sample: sampleCommand, export: exportCommand };

const [command, ...rest] = process.argv.slice(2);
const run = commands[command ?? ''];
if (!run) {
  process.stderr.write(`shardwise: unknown tool "${command}"\n`);
  process.exit(2);
}
run(rest).then(
  () => process.exit(0),
  (e: unknown) => {
    const err = e instanceof Error ? e : new Error(String(e));
    process.stderr.write(`shardwise: ${err.message.split('\n')[0]}\n`);
    if (process.env.SHARDWISE_DEBUG) process.stderr.write(`${err.stack}\n`);
    const usage =
      err.name === 'UsageError' ||
      err.name === 'DataError' ||
      err.name === 'CheckpointError' ||
      err.name === 'ExportError' ||
      (err as NodeJS.ErrnoException).code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION';
    process.exit(usage ? 2 : 1);
  },
);
