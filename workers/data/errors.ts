/** A problem with a dataset or text input. The message is one line: what was wrong and what to do. */
export class DataError extends Error {
  override name = 'DataError';
}
