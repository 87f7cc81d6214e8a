// Tags and notes on runs: runs.annotate writes them to the run folder's meta.json, runs.list
// shows them (with the run's precision) to a controller started afterwards, and bad input is
// refused with the rule it broke.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ControllerService } from '../../src-main/controller/service.js';
import { copyThreeDRun, writeFailedRun, writePipelineRun } from '../e2e/run-fixtures.js';

const root = mkdtempSync(path.join(tmpdir(), 'annotate-'));
writePipelineRun(path.join(root, 'pp-fixture'));
writeFailedRun(path.join(root, 'failed-fixture'));
copyThreeDRun(path.join(root, 'run-3d'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const item = async (s: ControllerService, id: string) => (await s.call<'runs.list'>('runs.list', {})).runs.find((r) => r.id === id)!;

describe('runs.annotate', () => {
  it('stores tags and a note in meta.json; the list shows them, also to a controller started later', async () => {
    const s = new ControllerService({ runsRoot: root });
    const r = await s.call<'runs.annotate'>('runs.annotate', {
      runId: 'pp-fixture',
      tags: ['baseline', ' pipeline ', 'baseline'],
      note: 'GPipe, 4 micro-batches',
    });
    expect(r).toEqual({ tags: ['baseline', 'pipeline'], note: 'GPipe, 4 micro-batches' });
    expect(JSON.parse(readFileSync(path.join(root, 'pp-fixture', 'meta.json'), 'utf8'))).toEqual(r);
    // written through a temp file renamed over it: none left behind
    expect(readdirSync(path.join(root, 'pp-fixture')).filter((f) => f.includes('.tmp'))).toEqual([]);

    const restarted = new ControllerService({ runsRoot: root });
    const listed = await item(restarted, 'pp-fixture');
    expect(listed.tags).toEqual(['baseline', 'pipeline']);
    expect(listed.note).toBe('GPipe, 4 micro-batches');
    expect(listed.precision).toBe('fp32');
    // an unannotated run lists empty tags and note
    expect(await item(restarted, 'failed-fixture')).toMatchObject({ tags: [], note: '' });
  });

  it('changes only what it is given: a note alone keeps the tags, an empty list clears them', async () => {
    const s = new ControllerService({ runsRoot: root });
    await s.call('runs.annotate', { runId: 'run-3d', tags: ['3d', 'swiftshader'] });
    expect(await s.call('runs.annotate', { runId: 'run-3d', note: 'kept as the 8-rank fixture' })).toEqual({
      tags: ['3d', 'swiftshader'],
      note: 'kept as the 8-rank fixture',
    });
    expect(await s.call('runs.annotate', { runId: 'run-3d', tags: [] })).toEqual({ tags: [], note: 'kept as the 8-rank fixture' });
  });

  it('refuses bad input with a clear error and leaves meta.json as it was', async () => {
    const s = new ControllerService({ runsRoot: root });
    const before = readFileSync(path.join(root, 'pp-fixture', 'meta.json'), 'utf8');
    await expect(s.call('runs.annotate', { runId: 'pp-fixture', tags: ['<script>'] })).rejects.toThrow(
      /runs\.annotate params: tags\.0: a tag is letters, digits, spaces and/,
    );
    await expect(s.call('runs.annotate', { runId: 'pp-fixture', tags: [''] })).rejects.toThrow(/a tag cannot be empty/);
    await expect(s.call('runs.annotate', { runId: 'pp-fixture', note: 'x'.repeat(2001) })).rejects.toThrow(
      /a note is at most 2000 characters/,
    );
    await expect(s.call('runs.annotate', { runId: 'pp-fixture', tags: Array.from({ length: 21 }, (_, i) => `t${i}`) })).rejects.toThrow(
      /at most 20 tags/,
    );
    await expect(s.call('runs.annotate', { runId: 'pp-fixture' })).rejects.toThrow(/give tags, a note or both/);
    await expect(s.call('runs.annotate', { runId: 'pp-fixture', note: 'x', color: 'red' })).rejects.toThrow(/unknown field "color"/);
    await expect(s.call('runs.annotate', { runId: '../pp-fixture', note: 'x' })).rejects.toThrow(/a run id is a run folder name/);
    await expect(s.call('runs.annotate', { runId: 'no-such-run', note: 'x' })).rejects.toMatchObject({ name: 'NotFound' });
    expect(readFileSync(path.join(root, 'pp-fixture', 'meta.json'), 'utf8')).toBe(before);
    expect(existsSync(path.join(root, 'no-such-run'))).toBe(false);
  });

  it('a damaged meta.json costs the run its tags, not its place in the list', async () => {
    writeFileSync(path.join(root, 'failed-fixture', 'meta.json'), '{"tags": [1, 2');
    const s = new ControllerService({ runsRoot: root });
    expect(await item(s, 'failed-fixture')).toMatchObject({ status: 'failed', tags: [], note: '' });
    // and annotating it again writes a good file
    await s.call('runs.annotate', { runId: 'failed-fixture', tags: ['oom'] });
    expect((await item(s, 'failed-fixture')).tags).toEqual(['oom']);
  });
});
