import { describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { builtinDatasetNames, builtinText, DEFAULT_DATASET } from '../../../workers/data/builtin.js';
import { loadDataset } from '../../../workers/data/dataset.js';

const sha = (s: string) => createHash('sha256').update(s).digest('hex').slice(0, 16);

describe('built-in datasets', () => {
  it('lists grammar (the default) and arith', () => {
    expect(builtinDatasetNames()).toEqual(['builtin:grammar', 'builtin:arith']);
    expect(DEFAULT_DATASET).toBe('builtin:grammar');
  });

  it('builtin:grammar is ~300 KB of lowercase sentences over 27 characters, same bytes every time', () => {
    const t = builtinText('builtin:grammar');
    expect(t.length).toBeGreaterThan(200_000);
    expect(t.length).toBeLessThan(500_000);
    expect(new Set(t).size).toBe(27);
    expect(t.split('\n')[0]).toBe('the king sleeps over their tree.');
    // pinned: a change to the generator changes every run's numbers, so it must be deliberate
    expect(sha(t)).toBe(sha(builtinText('grammar')));
    expect(sha(t)).toMatchInlineSnapshot(`"b37641c507a83473"`);
  });

  it('builtin:arith lines are correct sums', () => {
    const lines = builtinText('builtin:arith').trimEnd().split('\n');
    expect(lines.length).toBeGreaterThan(20_000);
    for (const l of lines.slice(0, 1000)) {
      const m = /^(\d+)\+(\d+)=(\d+)$/.exec(l)!;
      expect(Number(m[1]) + Number(m[2])).toBe(Number(m[3]));
    }
  });

  it('an unknown name lists the known ones', () => {
    expect(() => builtinText('builtin:shakespeare')).toThrow(
      "unknown built-in dataset 'builtin:shakespeare': choose one of builtin:grammar, builtin:arith, or pass a path to a UTF-8 text file",
    );
  });

  it('loadDataset splits 90/10 and tokenizes with the dataset vocabulary', () => {
    const d = loadDataset('builtin:grammar', 64);
    expect(d.tokenizer.vocabSize).toBe(27);
    expect(d.val.length).toBe(Math.ceil(d.tokens.length / 10));
    expect(d.train.length + d.val.length).toBe(d.tokens.length);
    expect(d.tokenizer.decode(d.tokens.subarray(0, 10))).toBe('the king s');
  });
});
