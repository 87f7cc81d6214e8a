// runs.export's checks before anything is written (src-main/controller/export-job.ts and the
// service): the checkpoint it continues from, the layout against the run's batch with the field
// the dialog outlines, the folder names it picks (never one the client names), and the flags the
// worker gets. The export itself (a worker writing the job) runs in tests/e2e/export-job.test.ts.
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ApiError } from '../../common/api/index.js';
import {
  exportCheckpoint,
  exportCommand,
  exportFlags,
  exportLayout,
  exportName,
  ExportRequestError,
} from '../../src-main/controller/export-job.js';
import { ControllerService } from '../../src-main/controller/service.js';
import { resolveJob } from '../../src-main/launch/resolve-job.js';
import { writeFailedRun } from '../e2e/run-fixtures.js';

/** a ddp 2 run of tiny: batch 8, 10 steps (the job `shardwise train --preset tiny --strategy ddp --world 2 --steps 10` resolves to) */
const ddp2Job = (runDir: string) => resolveJob({ preset: 'tiny', strategy: 'ddp', world: 2, steps: 10 }, { runDir });

const refusal = (f: () => unknown) => {
  try {
    f();
  } catch (e) {
    if (e instanceof ExportRequestError) return { field: e.field, message: e.message };
    throw e;
  }
  throw new Error('not refused');
};

describe('exportCheckpoint', () => {
  it("defaults to the latest checkpoint before the run's last step (10 of 10, 20 with steps 20)", () => {
    expect(exportCheckpoint([10, 20], 20, undefined)).toBe(10);
    expect(exportCheckpoint([5, 10, 15], 20, undefined)).toBe(15);
    expect(exportCheckpoint([10, 20], 20, 10)).toBe(10);
  });
  it('refuses a missing checkpoint, one at the last step, and a run without one, on field checkpoint', () => {
    expect(refusal(() => exportCheckpoint([10, 20], 20, 5))).toEqual({
      field: 'checkpoint',
      message: 'the run has no checkpoint at step 5; its checkpoints are at steps 10, 20',
    });
    expect(refusal(() => exportCheckpoint([10, 20], 20, 20)).message).toMatch(/step 20 is the run's last .*pick an earlier one \(10\)/);
    expect(refusal(() => exportCheckpoint([20], 20, undefined)).message).toMatch(/only checkpoints are at its last step/);
    expect(refusal(() => exportCheckpoint([], 20, undefined))).toEqual({
      field: 'checkpoint',
      message: 'the run has no checkpoint to export (train with a checkpoint interval, or resume it until it saves one)',
    });
  });
});

describe('exportLayout', () => {
  // a ddp 2 run of tiny, batch 8
  const job = ddp2Job('.');
  it("keeps the run's layout where none is given, and takes another that divides the batch", () => {
    expect(exportLayout(job)).toMatchObject({ strategy: 'ddp', world: 2, micro_batches: 1 });
    expect(exportLayout(job, { strategy: 'zero1', world: 4, micro_batches: 2 })).toMatchObject({
      strategy: 'zero1',
      world: 4,
      micro_batches: 2,
    });
    expect(exportLayout(job, { grad_compression: { hook: 'powersgd', matrix_approximation_rank: 2 } }).grad_compression).toEqual({
      hook: 'powersgd',
      matrix_approximation_rank: 2,
    });
  });
  it('refuses a layout that does not divide the batch of 8, naming layout.world or layout.micro_batches', () => {
    expect(refusal(() => exportLayout(job, { world: 3 }))).toEqual({
      field: 'layout.world',
      message: 'batch size 8 is not divisible by world 3 x micro-batches 1; pick batch_size as a multiple of 3',
    });
    expect(refusal(() => exportLayout(job, { micro_batches: 3 })).field).toBe('layout.micro_batches');
  });
  it('refuses an unknown strategy, and another strategy without its ranks', () => {
    expect(refusal(() => exportLayout(job, { strategy: 'warp', world: 2 })).field).toBe('layout.strategy');
    expect(refusal(() => exportLayout(job, { strategy: 'single' }))).toEqual({
      field: 'layout.world',
      message: 'strategy single needs world (the ranks of the exported layout)',
    });
  });
});

describe('export folder names and the worker flags', () => {
  it('<runId>-pytorch-<n>, the smallest n free as a job folder or a run', () => {
    const taken = new Set(['r-pytorch-1', 'r-pytorch-2']);
    expect(exportName('r', (n) => taken.has(n))).toBe('r-pytorch-3');
    expect(exportName('r', () => false)).toBe('r-pytorch-1');
  });
  it('a 120-character run id is shortened so the name stays a run id', () => {
    const name = exportName('a'.repeat(120), () => false);
    expect(name).toHaveLength(120);
    expect(name.endsWith('-pytorch-1')).toBe(true);
  });
  it('the command runs launch.sh by its path, quoted where the path needs it', () => {
    expect(exportCommand('/runs/exports/r-pytorch-1')).toBe('bash /runs/exports/r-pytorch-1/launch.sh');
    expect(exportCommand("/my runs/it's")).toBe(`bash '/my runs/it'\\''s'/launch.sh`);
  });
  it('the layout becomes the flags of shardwise export --format torchrun', () => {
    expect(exportFlags({ strategy: 'zero1', world: 2, micro_batches: 2, bucket_cap_mb: 1 })).toEqual([
      '--strategy',
      'zero1',
      '--world',
      '2',
      '--micro-batches',
      '2',
      '--bucket-cap-mb',
      '1',
    ]);
    expect(exportFlags({ grad_compression: { hook: 'powersgd', matrix_approximation_rank: 4, start_powerSGD_iter: 3 } })).toEqual([
      '--grad-compression',
      'powersgd:4',
      '--powersgd-start-iter',
      '3',
    ]);
    expect(exportFlags()).toEqual([]);
  });
});

describe('runs.export refusals through the API (nothing written)', () => {
  const root = mkdtempSync(path.join(tmpdir(), 'export-job-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  // a ddp 2 run of 10 steps, batch 8, with a checkpoint at step 5 (only its manifest: the checks never load it)
  for (const id of ['failed-fixture', 'with-ckpt']) {
    writeFailedRun(path.join(root, id));
    writeFileSync(path.join(root, id, 'config.json'), JSON.stringify(ddp2Job(path.join(root, id))));
  }
  mkdirSync(path.join(root, 'with-ckpt', 'checkpoints', 'step-000005'), { recursive: true });
  writeFileSync(path.join(root, 'with-ckpt', 'checkpoints', 'step-000005', 'manifest.json'), '{}');
  const s = new ControllerService({ runsRoot: root });
  const answer = async (params: unknown) => {
    try {
      await s.call('runs.export', params);
    } catch (e) {
      if (e instanceof ApiError) return { name: e.name, field: e.field, message: e.message };
      throw e;
    }
    throw new Error('not refused');
  };

  it('an unknown run, a run without a checkpoint, a layout that does not divide the batch: ValidationError on the field', async () => {
    expect(await answer({ runId: 'nope', format: 'torchrun' })).toMatchObject({ name: 'ValidationError', field: 'runId' });
    expect(await answer({ runId: 'failed-fixture', format: 'torchrun' })).toMatchObject({
      name: 'ValidationError',
      field: 'checkpoint',
    });
    expect(await answer({ runId: 'with-ckpt', format: 'torchrun', checkpoint: 7 })).toMatchObject({ field: 'checkpoint' });
    expect(await answer({ runId: 'with-ckpt', format: 'torchrun', layout: { micro_batches: 3 } })).toEqual({
      name: 'ValidationError',
      field: 'layout.micro_batches',
      message:
        'runs.export params: layout.micro_batches: batch size 8 is not divisible by world 2 x micro-batches 3; pick batch_size as a multiple of 6',
    });
    expect(await answer({ runId: 'with-ckpt', format: 'torchrun', layout: { world: 3 } })).toMatchObject({ field: 'layout.world' });
    expect(readdirSync(root).sort()).toEqual(['failed-fixture', 'with-ckpt']);
  });
  it('the schema: an unknown format, a client-named folder, a bad world are refused on their field', async () => {
    expect(await answer({ runId: 'with-ckpt', format: 'hf' })).toMatchObject({ name: 'ValidationError', field: 'format' });
    expect(await answer({ runId: 'with-ckpt', format: 'torchrun', out: '/tmp/x' })).toMatchObject({ name: 'ValidationError' });
    expect(await answer({ runId: '../x', format: 'torchrun' })).toMatchObject({ name: 'ValidationError', field: 'runId' });
    expect(await answer({ runId: 'with-ckpt', format: 'torchrun', layout: { world: 0 } })).toMatchObject({ field: 'layout.world' });
  });
});
