// Pipeline-parallel training runs of one small model through the built CLI, for the pipeline
// test files (equivalence matrix, bubble): a 4-block model (d_model 32, T 16, global batch 8
// rows, seed 5) so pp 4 has one block per stage and a run takes seconds on SwiftShader.
import { spawn } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'vitest';
import { loadCheckpoint } from '../../../workers/checkpoint/checkpoint.js';
import { BIN, jsonLines, shardwise, tempDir } from '../../cli/helpers.js';

export const B = 8;
export const T = 16;
export const C = 32;
export const V = 27; // builtin:grammar

export interface PipelineRun {
  losses: number[];
  summary: PipelineSummary;
  weights: Map<string, Float32Array>;
  dir: string;
}

export interface PipelineSummary {
  peak_bytes: Record<string, Record<string, number>>;
  bytes_moved_per_step: Record<string, number>;
  p2p_bytes_per_step: Record<string, number>;
  embedding_allreduce_bytes_per_step: Record<string, number>;
  bubble: { measured: number[]; theory: number; schedule: string };
  stages: {
    rank: number;
    index: number;
    from: number;
    to: number;
    slots: number;
    params: number;
    partition?: string;
    profiled_ms?: number;
  }[];
  params: number;
  /** achieved TFLOP/s per rank (model FLOPs; hardware with recomputation), MFU where the peak is known */
  tflops: Record<string, { model: number; hardware: number; mfu?: number }>;
}

export interface RunSpec {
  /** the run folder's name under root */
  name: string;
  steps: number;
  /** flags after the common ones (a later --config or --checkpoint-interval wins) */
  extra: string[];
}

/** Runs of the small model in one temp folder (root), with its model config written there. */
export class PipelineRuns {
  readonly root = tempDir('pp');
  /** the model config: { n_layer: 4, d_model: C, n_head: 2 } */
  readonly model = path.join(this.root, 'model.json');

  constructor() {
    writeFileSync(this.model, JSON.stringify({ model: { n_layer: 4, d_model: C, n_head: 2 } }));
  }

  args({ name, steps, extra }: RunSpec): string[] {
    return [
      'train',
      '--preset',
      'tiny',
      '--config',
      this.model,
      '--seq-len',
      String(T),
      '--steps',
      String(steps),
      '--batch-size',
      String(B),
      '--seed',
      '5',
      '--eval-interval',
      '0',
      '--checkpoint-interval',
      String(steps),
      '--out',
      path.join(this.root, name),
      '--json',
      ...extra,
    ];
  }

  /** One run, waited for (the CLI must exit 0). */
  train(name: string, steps: number, extra: string[]): PipelineRun {
    const r = shardwise(this.args({ name, steps, extra }));
    expect(r.code, r.stderr).toBe(0);
    return this.parse(name, steps, r.stdout);
  }

  /** Several runs at once (their stages mostly wait on each other or sleep). */
  concurrently(runs: RunSpec[]): Promise<PipelineRun[]> {
    return Promise.all(
      runs.map(
        (r) =>
          new Promise<PipelineRun>((resolve, reject) => {
            const child = spawn(process.execPath, [BIN, ...this.args(r)], { env: { ...process.env, SHARDWISE_DEBUG: '' } });
            let out = '';
            let err = '';
            child.stdout.on('data', (d) => (out += d));
            child.stderr.on('data', (d) => (err += d));
            child.on('exit', (code) => {
              try {
                if (code !== 0) throw new Error(`${r.name}: exit ${code}: ${err}`);
                resolve(this.parse(r.name, r.steps, out));
              } catch (e) {
                reject(e);
              }
            });
          }),
      ),
    );
  }

  /** Losses and summary from the --json output; the final weights where the last step was checkpointed. */
  private parse(name: string, steps: number, stdout: string): PipelineRun {
    const dir = path.join(this.root, name);
    const lines = jsonLines(stdout);
    const ckptDir = path.join(dir, 'checkpoints', `step-${String(steps).padStart(6, '0')}`);
    const ckpt = existsSync(ckptDir) ? loadCheckpoint(ckptDir, { optimizer: false }) : null;
    return {
      losses: lines.filter((m) => m.type === 'step').map((m) => m.loss as number),
      summary: lines.at(-1)! as unknown as PipelineSummary,
      weights: new Map([...(ckpt?.params ?? [])].map(([k, v]) => [k, v.data])),
      dir,
    };
  }
}
