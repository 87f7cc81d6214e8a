import { describe, expect, it } from 'vitest';
import { shardwise } from './helpers.js';

// Pipeline flags that cannot work: one line naming the field and what to do, before any rank starts.
function expectError(args: string[], pattern: RegExp) {
  const r = shardwise(['train', '--preset', 'tiny', '--steps', '1', ...args]);
  expect(r.code).not.toBe(0);
  const lines = r.stderr.trim().split('\n');
  expect(lines, r.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(pattern);
}

describe('train --strategy pp rejects impossible pipelines', () => {
  it('fewer layers than stages: the tiny preset has 2 blocks', () => {
    expectError(['--strategy', 'pp', '--pp', '4'], /model.n_layer 2 is smaller than --pp 4/);
  });
  it('micro-batches that do not divide the batch', () => {
    expectError(['--strategy', 'pp', '--pp', '2', '--micro-batches', '3'], /batch size 8 is not divisible by --micro-batches 3/);
  });
  it('world different from pp', () => {
    expectError(['--strategy', 'pp', '--pp', '2', '--world', '3'], /--world 3 must equal --pp 2/);
  });
  it('one stage', () => {
    expectError(['--strategy', 'pp', '--pp', '1'], /--pp must be at least 2/);
  });
  it('an unknown schedule, and pipeline flags on another strategy', () => {
    expectError(['--strategy', 'pp', '--schedule', 'interleaved'], /--schedule must be gpipe or 1f1b, got "interleaved"/);
    expectError(['--strategy', 'ddp', '--pp', '2'], /--pp applies to --strategy pp/);
    expectError(['--strategy', 'ddp', '--schedule', 'gpipe'], /--schedule applies to --strategy pp/);
  });
});
