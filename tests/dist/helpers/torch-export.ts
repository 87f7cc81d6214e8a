// The exported PyTorch job's side of the torch-export checks: the interpreter that has torch
// (Debian's python3-torch lives in /usr/bin/python3, not in a pyenv python3 earlier on PATH),
// running launch.sh, and the losses and final weights it wrote, against Shardwise's own.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { loadCheckpoint } from '../../../workers/checkpoint/checkpoint.js';
import { readSafetensors } from '../../../workers/checkpoint/safetensors.js';
import { toHfTensors } from '../../../workers/export/hf.js';

/** The first of SHARDWISE_PYTHON, /usr/bin/python3, python3 that imports torch, with its version; null when none does. */
export function torchPython(): { python: string; torch: string } | null {
  for (const python of [process.env.SHARDWISE_PYTHON, '/usr/bin/python3', 'python3']) {
    if (!python) continue;
    const r = spawnSync(python, ['-c', 'import torch; print(torch.__version__)'], { encoding: 'utf8', timeout: 60_000 });
    if (r.status === 0) return { python, torch: r.stdout.trim() };
  }
  return null;
}

export const NO_TORCH =
  'no Python with PyTorch (tried $SHARDWISE_PYTHON, /usr/bin/python3, python3): scripts/setup.sh installs python3-torch';

export function launch(dir: string, timeoutMs = 300_000): { code: number; out: string } {
  const r = spawnSync('bash', [path.join(dir, 'launch.sh')], { encoding: 'utf8', timeout: timeoutMs, env: { ...process.env } });
  return { code: r.status ?? -1, out: `${r.stdout}\n${r.stderr}` };
}

export function rowsOf(runDir: string, type: string): Record<string, number>[] {
  return readFileSync(path.join(runDir, 'metrics.jsonl'), 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as Record<string, number> & { type: string })
    .filter((r) => (r.type as unknown as string) === type);
}

/** loss by step of a run folder's metrics.jsonl */
export function lossesByStep(runDir: string): Map<number, number> {
  return new Map(rowsOf(runDir, 'step').map((r) => [r.step!, r.loss!]));
}

/** The largest |a-b|/|b| over the steps PyTorch trained. */
export function maxRelativeLossDiff(torch: Map<number, number>, shardwise: Map<number, number>): { max: number; steps: number[] } {
  let max = 0;
  for (const [step, loss] of torch) {
    const ref = shardwise.get(step);
    if (ref === undefined) throw new Error(`Shardwise has no loss at step ${step}`);
    max = Math.max(max, Math.abs(loss - ref) / Math.abs(ref));
  }
  return { max, steps: [...torch.keys()] };
}

/** ||torch - shardwise|| / ||shardwise|| over every weight: the PyTorch job's HF folder against a Shardwise checkpoint. */
export function relativeWeightRms(hfDir: string, checkpointDir: string): number {
  const ck = loadCheckpoint(checkpointDir, { optimizer: false });
  const ref = new Map(toHfTensors(ck.manifest.config.model, ck.params));
  const got = readSafetensors(path.join(hfDir, 'model.safetensors')).tensors;
  let diff = 0;
  let norm = 0;
  for (const [name, r] of ref) {
    const g = got.get(name);
    if (!g) throw new Error(`the PyTorch job's weights lack ${name}`);
    if (g.shape.join() !== r.shape.join()) throw new Error(`${name}: shape ${g.shape} in PyTorch's weights, ${r.shape} in Shardwise's`);
    for (let i = 0; i < r.data.length; i++) {
      diff += (g.data[i]! - r.data[i]!) ** 2;
      norm += r.data[i]! ** 2;
    }
  }
  return Math.sqrt(diff / norm);
}
