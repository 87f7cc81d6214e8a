// Training checkpoints: RUN_DIR/checkpoints/step-000100/ holding
//   model.safetensors      parameters, nanoGPT names, float32 (a mixed-precision run's fp32 master weights)
//   optimizer.safetensors  AdamW moments: exp_avg.<param>, exp_avg_sq.<param>
//   comm_hook.safetensors  a gradient-compression run's hook state, every data-parallel rank's own
//                          (PowerSGD: rank<r>.error.<bucket>, rank<r>.q.<bucket>); only such runs
//   manifest.json          config, step, data position, RNG state, fp16's loss scaler, tokenizer, file sizes + sha256
// Written with commitDirAtomic, so a directory named step-N is always complete; loading checks
// every byte (size, sha256) and every tensor name and shape against the model config.
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import type { CharTokenizerJson } from '../data/tokenizer.js';
import { paramSpecs, type GptConfig } from '../model/config.js';
import type { LossScalerState } from '../precision/loss-scaler.js';
import { commitDirAtomic, isTmpDirName, writeFileAtomic } from '../protocol/atomic-file.js';
import type { GradCompression } from '../protocol/train.js';
import { CheckpointError } from './errors.js';
import { decodeSafetensors, encodeSafetensors, type Tensor } from './safetensors.js';

export const CHECKPOINT_FORMAT_VERSION = 1;
const STEP_DIR_RE = /^step-(\d+)$/;

export interface TensorData {
  shape: number[];
  data: Float32Array;
}
export type TensorMap = Map<string, TensorData>;

export interface OptimizerState {
  /** AdamW first moments by parameter name */
  m: TensorMap;
  /** AdamW second moments by parameter name */
  v: TensorMap;
  /** AdamW's step count t (for bias correction) */
  step: number;
}

/** One data-parallel rank's communication-hook state: named float32 tensors and the hook's iteration. */
export interface RankHookState {
  iter: number;
  tensors: Map<string, Float32Array>;
}

/** A gradient-compression run's hooks (workers/comm-hooks/): the setting, then every rank's state in rank order. */
export interface CommHookCheckpoint {
  /** the job's parallel.grad_compression */
  setting: GradCompression;
  ranks: RankHookState[];
}

/** What the trainer supplies besides the tensors. */
export interface ManifestInput {
  config: { model: GptConfig; training: Record<string, unknown> };
  /** dataset spec and sampler position: the next global batch to draw is `position` */
  data: { dataset: string; seed: number; position: number };
  /** any RNG state the run needs to continue bit-exactly (e.g. dropout or sampling streams) */
  rng?: Record<string, unknown>;
  /** fp16: the dynamic loss scaler's state, so the resumed run scales its next step alike */
  loss_scaler?: LossScalerState;
  tokenizer: CharTokenizerJson;
}

export interface Manifest extends ManifestInput {
  format_version: number;
  /** optimizer steps completed */
  step: number;
  optimizer: { type: 'adamw'; step: number };
  /** a gradient-compression run: its setting, the ranks whose states comm_hook.safetensors holds, and each one's iteration */
  comm_hook?: { setting: CommHookCheckpoint['setting']; world: number; iters: number[] };
  created_at: string;
  files: Record<string, { bytes: number; sha256: string }>;
}

export interface SaveInput {
  step: number;
  params: TensorMap;
  optimizer: OptimizerState;
  manifest: ManifestInput;
  commHook?: CommHookCheckpoint;
}

export interface SaveOptions {
  /** keep only the newest K checkpoints of the run (older step-N directories are deleted) */
  keepLast?: number;
}

export interface LoadedCheckpoint {
  dir: string;
  manifest: Manifest;
  params: TensorMap;
  /** absent when loaded with { optimizer: false } */
  optimizer?: OptimizerState;
  /** a gradient-compression run's hook states (absent with { optimizer: false }) */
  commHook?: CommHookCheckpoint;
}

export function checkpointsDir(runDir: string): string {
  return path.join(runDir, 'checkpoints');
}

export function stepDirName(step: number): string {
  return `step-${String(step).padStart(6, '0')}`;
}

function sha256(b: Uint8Array): string {
  return createHash('sha256').update(b).digest('hex');
}

function toTensors(map: TensorMap, prefix = ''): [string, Tensor][] {
  return [...map].map(([name, t]) => [prefix + name, { dtype: 'F32', shape: t.shape, data: t.data }]);
}

/** Writes RUN_DIR/checkpoints/step-NNNNNN atomically and returns its path. */
export function saveCheckpoint(runDir: string, s: SaveInput, opts: SaveOptions = {}): string {
  if (!Number.isSafeInteger(s.step) || s.step < 0)
    throw new CheckpointError(`checkpoint step must be a non-negative integer, got ${s.step}`);
  const expected = paramSpecs(s.manifest.config.model);
  checkTensors(expected, s.params, 'params', '(the model being saved)');
  checkTensors(expected, s.optimizer.m, 'optimizer exp_avg', '(the optimizer being saved)');
  checkTensors(expected, s.optimizer.v, 'optimizer exp_avg_sq', '(the optimizer being saved)');
  const order = expected.map((p) => p.name); // forward order, whatever the maps' order
  const ordered = (m: TensorMap) => new Map(order.map((n) => [n, m.get(n)!]));
  const model = encodeSafetensors(toTensors(ordered(s.params)), { format: 'pt', step: String(s.step) });
  const optim = encodeSafetensors([...toTensors(ordered(s.optimizer.m), 'exp_avg.'), ...toTensors(ordered(s.optimizer.v), 'exp_avg_sq.')], {
    format: 'pt',
    step: String(s.step),
    optimizer: 'adamw',
    optimizer_step: String(s.optimizer.step),
  });
  const hook = s.commHook ? encodeHookStates(s.commHook, s.step) : null;
  const manifest: Manifest = {
    format_version: CHECKPOINT_FORMAT_VERSION,
    step: s.step,
    ...s.manifest,
    optimizer: { type: 'adamw', step: s.optimizer.step },
    ...(s.commHook
      ? { comm_hook: { setting: s.commHook.setting, world: s.commHook.ranks.length, iters: s.commHook.ranks.map((r) => r.iter) } }
      : {}),
    created_at: new Date().toISOString(),
    files: {
      'model.safetensors': { bytes: model.length, sha256: sha256(model) },
      'optimizer.safetensors': { bytes: optim.length, sha256: sha256(optim) },
      ...(hook ? { [HOOK_FILE]: { bytes: hook.length, sha256: sha256(hook) } } : {}),
    },
  };
  const dir = path.join(checkpointsDir(runDir), stepDirName(s.step));
  commitDirAtomic(dir, (tmp) => {
    writeFileAtomic(path.join(tmp, 'model.safetensors'), model);
    writeFileAtomic(path.join(tmp, 'optimizer.safetensors'), optim);
    if (hook) writeFileAtomic(path.join(tmp, HOOK_FILE), hook);
    // the manifest last: it is what marks the directory as a checkpoint
    writeFileAtomic(path.join(tmp, 'manifest.json'), JSON.stringify(manifest, null, 2) + '\n');
  });
  if (opts.keepLast !== undefined) pruneCheckpoints(runDir, opts.keepLast);
  return dir;
}

const HOOK_FILE = 'comm_hook.safetensors';
const HOOK_NAME_RE = /^rank(\d+)\.(.+)$/;

function encodeHookStates(h: CommHookCheckpoint, step: number): Uint8Array {
  const tensors: [string, Tensor][] = [];
  h.ranks.forEach((r, rank) => {
    for (const [name, data] of [...r.tensors].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      tensors.push([`rank${rank}.${name}`, { dtype: 'F32', shape: [data.length], data }]);
  });
  return encodeSafetensors(tensors, { format: 'pt', step: String(step), hook: h.setting.hook });
}

/** comm_hook.safetensors back into every rank's state, checked against the manifest's record. */
function decodeHookStates(dir: string, manifest: Manifest): CommHookCheckpoint {
  const record = manifest.comm_hook!;
  const file = path.join(dir, HOOK_FILE);
  const bad = (what: string): never => {
    throw new CheckpointError(`corrupt checkpoint file ${file}: ${what}`);
  };
  if (!Number.isSafeInteger(record.world) || record.world < 1 || !Array.isArray(record.iters) || record.iters.length !== record.world)
    throw new CheckpointError(
      `corrupt checkpoint manifest ${path.join(dir, 'manifest.json')}: comm_hook needs world and one iteration per rank`,
    );
  const ranks: RankHookState[] = record.iters.map((iter) => ({ iter, tensors: new Map() }));
  for (const [name, data] of f32Map(decodeSafetensors(readVerified(dir, manifest, HOOK_FILE), file).tensors, file)) {
    const m = HOOK_NAME_RE.exec(name);
    if (!m) bad(`unexpected tensor ${name} (names must be rank<r>.<name>)`);
    const rank = Number(m![1]);
    if (rank >= record.world) bad(`tensor ${name} belongs to rank ${rank}, but the manifest records ${record.world} ranks`);
    ranks[rank]!.tensors.set(m![2]!, data.data);
  }
  return { setting: record.setting, ranks };
}

/** Finished checkpoints of a run, oldest first. Temp directories and directories without a manifest are skipped. */
export function listCheckpoints(runDir: string): { step: number; dir: string }[] {
  const root = checkpointsDir(runDir);
  if (!existsSync(root)) return [];
  const out: { step: number; dir: string }[] = [];
  for (const name of readdirSync(root)) {
    const m = STEP_DIR_RE.exec(name);
    if (!m || isTmpDirName(name)) continue;
    const dir = path.join(root, name);
    if (!statSync(dir).isDirectory() || !existsSync(path.join(dir, 'manifest.json'))) continue;
    out.push({ step: Number(m[1]), dir });
  }
  return out.sort((a, b) => a.step - b.step);
}

/** The newest finished checkpoint directory of a run, or null when there is none. */
export function latestCheckpoint(runDir: string): string | null {
  const all = listCheckpoints(runDir);
  return all.length ? all[all.length - 1].dir : null;
}

/** Deletes all but the newest `keep` checkpoints (keep ≥ 1). */
export function pruneCheckpoints(runDir: string, keep: number): void {
  if (!Number.isInteger(keep) || keep < 1) throw new CheckpointError(`keep-last must be a positive integer, got ${keep}`);
  const all = listCheckpoints(runDir);
  for (const c of all.slice(0, Math.max(0, all.length - keep))) rmSync(c.dir, { recursive: true, force: true });
}

function checkTensors(
  expected: { name: string; shape: number[] }[],
  got: Map<string, { shape: number[]; data?: { length: number } }>,
  what: string,
  where: string,
): void {
  for (const p of expected) {
    const t = got.get(p.name);
    if (!t)
      throw new CheckpointError(`${what} ${where}: tensor ${p.name} is missing (the model config expects ${expected.length} tensors)`);
    if (t.shape.length !== p.shape.length || t.shape.some((d, i) => d !== p.shape[i])) {
      throw new CheckpointError(`${what} ${where}: tensor ${p.name} has shape [${t.shape}] but the model config needs [${p.shape}]`);
    }
    const n = p.shape.reduce((a, x) => a * x, 1);
    if (t.data && t.data.length !== n)
      throw new CheckpointError(`${what} ${where}: tensor ${p.name} has ${t.data.length} values, shape [${p.shape}] needs ${n}`);
  }
  if (got.size !== expected.length) {
    const names = new Set(expected.map((p) => p.name));
    const extra = [...got.keys()].filter((k) => !names.has(k));
    throw new CheckpointError(`${what} ${where}: unexpected tensor ${extra[0]} (not a parameter of this model config)`);
  }
}

function readManifest(dir: string): Manifest {
  const file = path.join(dir, 'manifest.json');
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' && !existsSync(dir)) throw new CheckpointError(`checkpoint not found: ${dir}`);
    if (code === 'ENOENT')
      throw new CheckpointError(`not a checkpoint: ${dir} has no manifest.json (an unfinished save, or the wrong directory)`);
    throw new CheckpointError(`cannot read ${file}: ${(e as Error).message}`);
  }
  let m: Manifest;
  try {
    m = JSON.parse(text);
  } catch (e) {
    throw new CheckpointError(`corrupt checkpoint manifest ${file}: not valid JSON (${(e as Error).message})`);
  }
  const bad = (what: string): never => {
    throw new CheckpointError(`corrupt checkpoint manifest ${file}: ${what}`);
  };
  if (!m || typeof m !== 'object') bad('not a JSON object');
  if (m.format_version !== CHECKPOINT_FORMAT_VERSION) {
    bad(
      `format_version ${JSON.stringify(m.format_version)} is not supported (this version of shardwise reads ${CHECKPOINT_FORMAT_VERSION})`,
    );
  }
  if (!Number.isSafeInteger(m.step) || m.step < 0) bad('step must be a non-negative integer');
  if (!m.config || typeof m.config.model !== 'object' || m.config.model === null) bad('config.model is missing');
  if (!m.files || typeof m.files !== 'object') bad('files is missing');
  if (!m.tokenizer || m.tokenizer.type !== 'char') bad('tokenizer is missing or not {"type":"char",...}');
  if (!m.data || typeof m.data.dataset !== 'string') bad('data is missing');
  return m;
}

function readVerified(dir: string, manifest: Manifest, name: string): Uint8Array {
  const file = path.join(dir, name);
  const entry = manifest.files[name];
  if (!entry) throw new CheckpointError(`corrupt checkpoint manifest ${path.join(dir, 'manifest.json')}: files has no entry for ${name}`);
  let bytes: Buffer;
  try {
    bytes = readFileSync(file);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new CheckpointError(
      `corrupt checkpoint ${dir}: ${name} ${code === 'ENOENT' ? 'is missing' : `cannot be read (${(e as Error).message})`}`,
    );
  }
  if (bytes.length !== entry.bytes) {
    throw new CheckpointError(
      `corrupt checkpoint file ${file}: ${bytes.length} bytes but the manifest says ${entry.bytes} (${bytes.length < entry.bytes ? 'truncated' : 'extra bytes'}); use an earlier checkpoint`,
    );
  }
  if (sha256(bytes) !== entry.sha256) {
    throw new CheckpointError(
      `corrupt checkpoint file ${file}: sha256 does not match the manifest (the file was modified or damaged); use an earlier checkpoint`,
    );
  }
  return bytes;
}

function f32Map(tensors: Map<string, Tensor>, file: string, prefix = ''): TensorMap {
  const out: TensorMap = new Map();
  for (const [name, t] of tensors) {
    if (!name.startsWith(prefix)) continue;
    if (t.dtype !== 'F32') throw new CheckpointError(`corrupt checkpoint file ${file}: tensor ${name} is ${t.dtype}, expected F32`);
    out.set(name.slice(prefix.length), { shape: t.shape, data: t.data as Float32Array });
  }
  return out;
}

/**
 * Loads and verifies a checkpoint directory: manifest, byte sizes, sha256, safetensors
 * structure, and every tensor's name and shape against the manifest's model config.
 */
export function loadCheckpoint(dir: string, opts: { optimizer?: boolean } = {}): LoadedCheckpoint {
  const manifest = readManifest(dir);
  const expected = paramSpecs(manifest.config.model);
  const modelFile = path.join(dir, 'model.safetensors');
  const model = decodeSafetensors(readVerified(dir, manifest, 'model.safetensors'), modelFile);
  const params = f32Map(model.tensors, modelFile);
  checkTensors(expected, params, 'model weights', modelFile);
  if (opts.optimizer === false) return { dir, manifest, params };
  const optFile = path.join(dir, 'optimizer.safetensors');
  const opt = decodeSafetensors(readVerified(dir, manifest, 'optimizer.safetensors'), optFile);
  const m = f32Map(opt.tensors, optFile, 'exp_avg.');
  const v = f32Map(opt.tensors, optFile, 'exp_avg_sq.');
  if (m.size + v.size !== opt.tensors.size) {
    const stray = [...opt.tensors.keys()].find((k) => !k.startsWith('exp_avg.') && !k.startsWith('exp_avg_sq.'));
    throw new CheckpointError(
      `corrupt checkpoint file ${optFile}: unexpected tensor ${stray} (names must be exp_avg.<param> or exp_avg_sq.<param>)`,
    );
  }
  checkTensors(expected, m, 'optimizer exp_avg', optFile);
  checkTensors(expected, v, 'optimizer exp_avg_sq', optFile);
  const optimizer = { m, v, step: manifest.optimizer?.step ?? manifest.step };
  return { dir, manifest, params, optimizer, ...(manifest.comm_hook ? { commHook: decodeHookStates(dir, manifest) } : {}) };
}
