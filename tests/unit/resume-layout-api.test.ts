// runs.resume's `layout` refused as the form needs it: a ValidationError whose field is
// `layout.FIELD`, the message saying why, the run folder as it was and its lock released (the
// same call again gets the same refusal, not "in use"). A real resume in another layout, through
// the CLI and the ranks: tests/dist/reshard.test.ts.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ControllerService } from '../../src-main/controller/service.js';
import { RunFolder } from '../../src-main/runs/run-folder.js';
import { tinyJob } from './tiny-job.js';

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

/** a stopped run of 2 blocks and 2 heads, global batch 8, with a checkpoint at step 2 (its manifest: enough to choose it) */
function stoppedRun(root: string, id: string, placement?: { machine: string }[]) {
  const dir = path.join(root, id);
  const job = tinyJob({
    run_dir: dir,
    model: { n_layer: 2, n_head: 2, d_model: 32, block_size: 16 },
    train: { steps: 6, batch_size: 8, checkpoint_interval: 2 },
  });
  const folder = RunFolder.create(dir, job, 6);
  folder.updateState({ status: 'stopped', step: 3, ...(placement ? { placement } : {}) });
  const c = path.join(dir, 'checkpoints', 'step-000002');
  mkdirSync(c, { recursive: true });
  writeFileSync(path.join(c, 'manifest.json'), '{}\n');
  return dir;
}

const bytes = (dir: string) => ['config.json', 'state.json'].map((f) => readFileSync(path.join(dir, f), 'utf8'));

describe('runs.resume with a layout', () => {
  const root = mkdtempSync(path.join(tmpdir(), 'shardwise-resume-layout-'));
  dirs.push(root);
  const service = new ControllerService({ runsRoot: root });

  it.each([
    [{ strategy: '3d', dp: 2, tp: 2, pp: 2, world: 4 }, 'layout.world', /dp x tp x pp = 2 x 2 x 2 = 8 must equal world \(4\)/],
    [{ strategy: 'tp', tp: 4 }, 'layout.tp', /^runs\.resume params: layout\.tp: model\.n_head \(2\) must be divisible by tp 4/],
    [{ strategy: 'pp', pp: 4 }, 'layout.pp', /model\.n_layer 2 is smaller than pp 4: every pipeline stage needs at least one block/],
    [{ strategy: 'ddp', world: 3 }, 'layout.world', /batch size 8 is not divisible by world 3/],
    [{ strategy: 'zero9' }, 'layout.strategy', /unknown strategy "zero9"/],
  ])('%j: refused on %s, the folder as it was, its lock released', async (layout, field, message) => {
    const dir = stoppedRun(root, `r-${field.replace('.', '-')}-${Object.keys(layout).length}`);
    const before = bytes(dir);
    const runId = path.basename(dir);
    for (let i = 0; i < 2; i++)
      await expect(service.call('runs.resume', { runId, layout })).rejects.toMatchObject({ name: 'ValidationError', field, message });
    expect(bytes(dir)).toEqual(before);
  });

  it('a run placed on agents, resumed at another world without a placement: refused on layout.placement', async () => {
    const dir = stoppedRun(root, 'placed', [{ machine: 'local' }, { machine: '10.0.0.2:7420' }]);
    const before = bytes(dir);
    await expect(service.call('runs.resume', { runId: 'placed', layout: { strategy: 'single' } })).rejects.toMatchObject({
      name: 'ValidationError',
      field: 'layout.placement',
      message:
        'runs.resume params: layout.placement: the run was placed on 2 ranks (local, 10.0.0.2:7420) and the new layout has 1: give layout.placement, one entry per rank',
    });
    expect(bytes(dir)).toEqual(before);
  });
});
