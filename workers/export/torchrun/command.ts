// `shardwise export RUN|CKPT --format torchrun [layout flags] [--out DIR]`: the flags of the
// layout to export (absent: the run's own), checked here, then export.ts writes the folder.
import path from 'node:path';
import { parseGradCompression } from '../../../common/grad-compression.js';
import { STRATEGY_NAMES } from '../../../common/strategies.js';
import type { ParallelSpec } from '../../protocol/train.js';
import { ExportError, exportTorchrun } from './export.js';

export const TORCHRUN_OPTIONS = {
  strategy: { type: 'string' },
  world: { type: 'string' },
  'micro-batches': { type: 'string' },
  'bucket-cap-mb': { type: 'string' },
  'grad-compression': { type: 'string' },
  'powersgd-start-iter': { type: 'string' },
  'run-dir': { type: 'string' },
  json: { type: 'boolean' },
} as const;

type Values = Partial<Record<keyof typeof TORCHRUN_OPTIONS | 'out', string | boolean>>;

function int(v: string | boolean | undefined, flag: string, min: number): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new ExportError(`--${flag} must be an integer >= ${min}, got "${v}"`);
  return n;
}

/** The layout flags as a partial ParallelSpec (bad values refused, naming the flag). */
export function layoutFromFlags(v: Values): Partial<ParallelSpec> {
  const out: Partial<ParallelSpec> = {};
  if (v.strategy !== undefined) {
    if (!(STRATEGY_NAMES as readonly unknown[]).includes(v.strategy))
      throw new ExportError(`--strategy must be one of ${STRATEGY_NAMES.join(', ')}, got "${v.strategy}"`);
    out.strategy = v.strategy as ParallelSpec['strategy'];
  }
  const world = int(v.world, 'world', 1);
  if (world !== undefined) out.world = world;
  const micro = int(v['micro-batches'], 'micro-batches', 1);
  if (micro !== undefined) out.micro_batches = micro;
  if (v['bucket-cap-mb'] !== undefined) {
    const x = Number(v['bucket-cap-mb']);
    if (!(x >= 0)) throw new ExportError(`--bucket-cap-mb must be a number >= 0, got "${v['bucket-cap-mb']}"`);
    out.bucket_cap_mb = x;
  }
  if (v['grad-compression'] !== undefined) {
    const g = parseGradCompression(String(v['grad-compression']));
    if (!g) throw new ExportError(`--grad-compression must be none, fp16, bf16 or powersgd[:R], got "${v['grad-compression']}"`);
    out.grad_compression = g;
  }
  const start = int(v['powersgd-start-iter'], 'powersgd-start-iter', 0);
  if (start !== undefined) {
    if (out.grad_compression?.hook !== 'powersgd') throw new ExportError('--powersgd-start-iter needs --grad-compression powersgd[:R]');
    out.grad_compression = { ...out.grad_compression, start_powerSGD_iter: start };
  }
  return out;
}

export async function exportTorchrunCommand(target: string | undefined, v: Values): Promise<void> {
  if (!target) throw new ExportError('export needs a run folder or a checkpoint: shardwise export RUN_DIR --format torchrun --out DIR');
  const out = path.resolve(typeof v.out === 'string' ? v.out : path.join(target, 'export-torchrun'));
  const runDir = typeof v['run-dir'] === 'string' ? v['run-dir'] : undefined;
  if (runDir !== undefined && (runDir === '' || path.isAbsolute(runDir)))
    throw new ExportError(`--run-dir must be a path relative to the export folder, got "${runDir}"`);
  const r = exportTorchrun(target, out, { layout: layoutFromFlags(v), ...(runDir ? { runDir } : {}) });
  const p = r.plan;
  if (v.json) {
    // one line for a caller (the controller's runs.export): what was written and what does not map
    const { outDir, step, steps, files, unmapped } = r;
    process.stdout.write(`${JSON.stringify({ outDir, step, steps, files, unmapped, world: p.world })}\n`);
    return;
  }
  process.stdout.write(
    `exported step ${r.step} of ${r.steps} to ${out}: ${p.world} rank(s), ${p.wrapper === 'none' ? 'one process' : p.wrapper.toUpperCase()}` +
      `${p.optimizer === 'zero' ? ' + ZeroRedundancyOptimizer' : ''}${p.comm_hook ? ` + ${p.comm_hook.name} hook` : ''}${p.autocast ? ` + autocast ${p.autocast}` : ''}\n` +
      `run it: bash ${path.join(out, 'launch.sh')}\n`,
  );
}
