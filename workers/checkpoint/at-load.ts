// SHARDWISE_CHECKPOINT_AT_LOAD=DIR: the loop writes a checkpoint of the state it just loaded, at
// its start step, into DIR (DIR/checkpoints/step-N, the run's own checkpoints untouched), before
// it trains; then it trains on as usual. It is the proof that a resume in another layout took
// every tensor as it was: the loaded weights and AdamW moments, gathered back to the usual layout
// by the same path every checkpoint takes, equal the source checkpoint's bit for bit
// (tests/dist/reshard.test.ts and bench/reshard.ts compare them). Read here only.
import path from 'node:path';

export const CHECKPOINT_AT_LOAD_ENV = 'SHARDWISE_CHECKPOINT_AT_LOAD';

/** The folder the loaded state is checkpointed into, or null when the variable is unset (every ordinary run). */
export function checkpointAtLoadDir(runDir: string, env: NodeJS.ProcessEnv = process.env): string | null {
  const dir = env[CHECKPOINT_AT_LOAD_ENV];
  if (!dir) return null;
  const resolved = path.resolve(dir);
  if (resolved === path.resolve(runDir))
    throw new Error(
      `${CHECKPOINT_AT_LOAD_ENV}=${dir} is the run's own folder: its checkpoint at the start step would replace the one resumed from; give another folder`,
    );
  return resolved;
}
