// One entry point for the trainer: a dataset spec ('builtin:NAME' or a file path) becomes a
// tokenizer, the token ids and their train/validation split.
import { builtinText, DEFAULT_DATASET, isBuiltinName } from './builtin.js';
import { splitTokens } from './sampler.js';
import { loadTextFile } from './text-file.js';
import { CharTokenizer } from './tokenizer.js';

export interface Dataset {
  /** the spec as given: 'builtin:grammar' or the file path */
  spec: string;
  text: string;
  tokenizer: CharTokenizer;
  /** all token ids, (N) */
  tokens: Uint32Array;
  /** first 90% of tokens */
  train: Uint32Array;
  /** last 10% of tokens */
  val: Uint32Array;
}

/** The text of a dataset spec: built-in by name, otherwise a UTF-8 file by path. */
export function loadDatasetText(spec: string = DEFAULT_DATASET): string {
  return isBuiltinName(spec) ? builtinText(spec) : loadTextFile(spec);
}

/**
 * Loads, tokenizes and splits a dataset. With `tokenizer` (e.g. from a checkpoint being
 * resumed) the text is encoded with that vocabulary instead of building a new one.
 */
export function loadDataset(spec: string, blockSize: number, tokenizer?: CharTokenizer): Dataset {
  const text = loadDatasetText(spec);
  const tok = tokenizer ?? CharTokenizer.fromText(text);
  const tokens = tok.encode(text);
  const { train, val } = splitTokens(tokens, blockSize, isBuiltinName(spec) ? `dataset ${spec}` : `dataset file ${spec}`);
  return { spec, text, tokenizer: tok, tokens, train, val };
}
