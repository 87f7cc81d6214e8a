import { expect, it } from 'vitest';
import { loadDataset } from '../../workers/data/index.js';
import { BUILTIN_VOCAB } from '../../workers/protocol/builtin-vocab.js';

it("the controller's table of built-in vocabularies is what the tokenizer learns from each built-in dataset", () => {
  for (const [name, vocab] of Object.entries(BUILTIN_VOCAB))
    expect([name, loadDataset(name, 64).tokenizer.vocabSize]).toEqual([name, vocab]);
  expect(Object.keys(BUILTIN_VOCAB).sort()).toEqual(['builtin:arith', 'builtin:grammar']);
});
