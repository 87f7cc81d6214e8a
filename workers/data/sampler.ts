// Deterministic batches. Every batch is a pure function of (seed, stream, step): resuming at
// step k yields exactly the batches an uninterrupted run would have seen, and every rank of a
// data-parallel group can compute the same global batch and keep its own rows.
import { DataError } from './errors.js';
import { hashSeed, SplitMix32 } from './prng.js';

/** Fraction of the tokens (at the end) held out for validation. */
export const VAL_FRACTION = 0.1;

export interface Batch {
  /** (B, T) token ids, row-major */
  inputs: Uint32Array;
  /** (B, T) next-token ids: targets[b, t] = tokens[offset_b + t + 1] */
  targets: Uint32Array;
  B: number;
  T: number;
  /** start offset of each row's window in the token array, (B) */
  offsets: number[];
}

export interface TokenSplit {
  train: Uint32Array;
  val: Uint32Array;
}

/** Validation gets the last ceil(n/10) tokens (integer math: the same cut on every machine). */
function splitPoint(n: number): number {
  return n - Math.ceil(n / 10);
}

/** Smallest token count whose train and validation parts both hold blockSize+1 tokens. */
export function minTokensFor(blockSize: number): number {
  let n = 10 * blockSize + 1; // ceil(n/10) ≥ blockSize+1 ⇔ n > 10·blockSize
  while (splitPoint(n) < blockSize + 1 || n - splitPoint(n) < blockSize + 1) n++;
  return n;
}

/**
 * First 90% of the tokens for training, last 10% for validation. Each part must hold at least
 * one window (blockSize + 1 tokens); `source` names the dataset in the error.
 */
export function splitTokens(tokens: Uint32Array, blockSize: number, source = 'dataset'): TokenSplit {
  const n = tokens.length;
  const cut = splitPoint(n);
  if (cut < blockSize + 1 || n - cut < blockSize + 1) {
    throw new DataError(
      `${source} is too small: ${n} tokens, but block_size ${blockSize} needs ${blockSize + 1} tokens in both the training ` +
        `and the validation part (last ${VAL_FRACTION * 100}%), so at least ${minTokensFor(blockSize)} tokens: use a longer text or a smaller block size`,
    );
  }
  return { train: tokens.subarray(0, cut), val: tokens.subarray(cut) };
}

/** Stream ids: training and validation draw from independent sequences of the same seed. */
export const STREAM_TRAIN = 0;
export const STREAM_VAL = 1;

export interface SamplerOptions {
  /** global batch size (sequences per step, all ranks together) */
  batchSize: number;
  /** sequence length T (≤ the model's block_size) */
  blockSize: number;
  seed: number;
  /** STREAM_TRAIN or STREAM_VAL (or any other independent stream id) */
  stream?: number;
}

export class BatchSampler {
  readonly B: number;
  readonly T: number;
  readonly seed: number;
  readonly stream: number;

  constructor(
    readonly tokens: Uint32Array,
    opts: SamplerOptions,
  ) {
    const { batchSize: B, blockSize: T, seed } = opts;
    if (!Number.isInteger(B) || B < 1) throw new DataError(`batch size must be a positive integer, got ${B}`);
    if (!Number.isInteger(T) || T < 1) throw new DataError(`block size must be a positive integer, got ${T}`);
    if (!Number.isSafeInteger(seed) || seed < 0) throw new DataError(`seed must be a non-negative integer, got ${seed}`);
    if (tokens.length < T + 1) throw new DataError(`token array too small for one window: ${tokens.length} tokens < block size ${T} + 1`);
    this.B = B;
    this.T = T;
    this.seed = seed;
    this.stream = opts.stream ?? STREAM_TRAIN;
  }

  /** Window start offsets of the global batch at `step` (0-based): B values in [0, n-T-1]. */
  offsetsAt(step: number): number[] {
    if (!Number.isSafeInteger(step) || step < 0) throw new DataError(`batch step must be a non-negative integer, got ${step}`);
    const r = new SplitMix32(hashSeed(this.seed, this.stream, step));
    const windows = this.tokens.length - this.T; // valid starts: 0 .. n-T-1
    return Array.from({ length: this.B }, () => r.nextInt(windows));
  }

  /** The global batch of `step`. */
  batchAt(step: number): Batch {
    return this.rows(this.offsetsAt(step));
  }

  /**
   * Data-parallel view: rank r of n gets rows [r*B/n, (r+1)*B/n) of the global batch, so the
   * ranks' rows concatenated in rank order are exactly `batchAt(step)`.
   */
  rankBatchAt(step: number, rank: number, world: number): Batch {
    const [lo, hi] = rankRows(this.B, rank, world);
    return this.rows(this.offsetsAt(step).slice(lo, hi));
  }

  /**
   * Gradient accumulation: micro-batch `micro` of `numMicro` of this rank's rows (its rows
   * split evenly in order). The rank's rows must be divisible by numMicro.
   */
  microBatchAt(step: number, rank: number, world: number, micro: number, numMicro: number): Batch {
    const [lo, hi] = rankRows(this.B, rank, world);
    const [mlo, mhi] = microRows(hi - lo, micro, numMicro);
    return this.rows(this.offsetsAt(step).slice(lo + mlo, lo + mhi));
  }

  private rows(offsets: number[]): Batch {
    const T = this.T;
    const inputs = new Uint32Array(offsets.length * T);
    const targets = new Uint32Array(offsets.length * T);
    offsets.forEach((o, b) => {
      inputs.set(this.tokens.subarray(o, o + T), b * T);
      targets.set(this.tokens.subarray(o + 1, o + T + 1), b * T);
    });
    return { inputs, targets, B: offsets.length, T, offsets };
  }
}

/** Rows [lo, hi) of a global batch of B rows that DP rank `rank` of `world` owns. */
export function rankRows(B: number, rank: number, world: number): [number, number] {
  if (!Number.isInteger(world) || world < 1) throw new DataError(`data-parallel world size must be a positive integer, got ${world}`);
  if (!Number.isInteger(rank) || rank < 0 || rank >= world)
    throw new DataError(`rank ${rank} is outside the data-parallel group of ${world}`);
  if (B % world !== 0) {
    throw new DataError(
      `global batch size ${B} is not divisible by the data-parallel size ${world}: choose a batch size that is a multiple of ${world}`,
    );
  }
  const per = B / world;
  return [rank * per, (rank + 1) * per];
}

function microRows(rows: number, micro: number, numMicro: number): [number, number] {
  if (!Number.isInteger(numMicro) || numMicro < 1)
    throw new DataError(`number of micro-batches must be a positive integer, got ${numMicro}`);
  if (!Number.isInteger(micro) || micro < 0 || micro >= numMicro) throw new DataError(`micro-batch ${micro} is outside 0..${numMicro - 1}`);
  if (rows % numMicro !== 0) {
    throw new DataError(
      `${rows} rows per rank are not divisible into ${numMicro} micro-batches: make the per-rank batch a multiple of ${numMicro}`,
    );
  }
  const per = rows / numMicro;
  return [micro * per, (micro + 1) * per];
}

/**
 * Windows for `shardwise eval`: window i starts at i*T, reads inputs tokens[i*T, i*T+T) and
 * predicts targets tokens[i*T+1, i*T+T+1). Consecutive windows share one token (the last
 * target of one is the first input of the next), so every token from position 1 up to the end
 * of the last full window is predicted exactly once; a tail shorter than a full window is
 * not scored. count = floor((n-1)/T), predicted tokens = count*T.
 */
export function evalWindows(tokens: Uint32Array, T: number): { starts: number[]; count: number; tokens: number } {
  if (!Number.isInteger(T) || T < 1) throw new DataError(`block size must be a positive integer, got ${T}`);
  const count = tokens.length >= 1 ? Math.floor((tokens.length - 1) / T) : 0;
  if (count === 0) {
    throw new DataError(
      `text too short to evaluate: ${tokens.length} tokens, but one window of block size ${T} needs ${T + 1}: use a longer text`,
    );
  }
  return { starts: Array.from({ length: count }, (_, i) => i * T), count, tokens: count * T };
}

/** Batches of up to `B` eval windows each (the last may be smaller). */
export function* evalBatches(tokens: Uint32Array, T: number, B: number): Generator<Batch> {
  const { starts } = evalWindows(tokens, T);
  for (let i = 0; i < starts.length; i += B) {
    const offsets = starts.slice(i, i + B);
    const inputs = new Uint32Array(offsets.length * T);
    const targets = new Uint32Array(offsets.length * T);
    offsets.forEach((o, b) => {
      inputs.set(tokens.subarray(o, o + T), b * T);
      targets.set(tokens.subarray(o + 1, o + T + 1), b * T);
    });
    yield { inputs, targets, B: offsets.length, T, offsets };
  }
}
