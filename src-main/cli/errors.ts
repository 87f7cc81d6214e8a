// A CLI error is one line on stderr and a non-zero exit: what was wrong and what to do.
export class CliError extends Error {
  override name = 'CliError';
  constructor(
    message: string,
    readonly exitCode = 2,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}
