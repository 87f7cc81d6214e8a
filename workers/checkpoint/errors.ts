/** A checkpoint or weights file that cannot be used. The message is one line naming the file and the problem. */
export class CheckpointError extends Error {
  override name = 'CheckpointError';
}
