// The vocabulary of each built-in dataset (workers/data/builtin.ts: the characters of its text),
// for the controller, which never reads a dataset: the advisor's prediction of a run on a
// built-in dataset plans its real vocabulary, not the assumed printable-ASCII one. A unit test
// checks these against the tokenizer (tests/unit/builtin-vocab.test.ts).
export const BUILTIN_VOCAB: Readonly<Record<string, number>> = { 'builtin:grammar': 27, 'builtin:arith': 13 };
