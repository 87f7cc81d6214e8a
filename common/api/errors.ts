// Errors cross a transport as {name, message, field?} (no stacks: they name server paths). An
// error about one request field carries its path (`config.micro_batches`): a form highlights
// that field and shows fieldMessage() beside it, without reading the message.
import { z } from 'zod';

export const ApiErrorSchema = z.object({ name: z.string(), message: z.string(), field: z.string().optional() });
export type ApiErrorData = z.infer<typeof ApiErrorSchema>;

/** An error the controller answered; `name` says its kind (ValidationError, NotFound, Conflict, ...). */
export class ApiError extends Error {
  constructor(
    name: string,
    message: string,
    /** the request field it is about, as a dotted path in the method's params (`config.placement.1.machine`) */
    readonly field?: string,
  ) {
    super(message);
    this.name = name;
  }
  toJSON(): ApiErrorData {
    return { name: this.name, message: this.message, ...(this.field !== undefined ? { field: this.field } : {}) };
  }
}

/** An error about one field of a method's params: the message reads "where: field: what is wrong". */
export function fieldError(name: string, where: string, field: string, message: string): ApiError {
  return new ApiError(name, `${where}: ${field}: ${message}`, field);
}

/** What is wrong with the error's field, without the "where: field: " that fieldError put before it. */
export function fieldMessage(e: { message: string; field?: string }): string {
  if (e.field === undefined) return e.message;
  const at = e.message.indexOf(`${e.field}: `);
  return at < 0 ? e.message : e.message.slice(at + e.field.length + 2);
}

/** The dotted path of the first zod issue ('' at the top level). */
export function zodField(e: z.ZodError): string {
  return e.issues[0]?.path.map(String).join('.') ?? '';
}

/** "field.path: what is wrong" from the first zod issue, naming where it sits. */
export function describeZodError(where: string, e: z.ZodError): string {
  const i = e.issues[0];
  if (!i) return `${where}: invalid`;
  const field = i.path.length ? i.path.map(String).join('.') : '(top level)';
  let msg = i.message;
  if (i.code === 'unrecognized_keys')
    msg = `unknown field${i.keys.length > 1 ? 's' : ''} ${i.keys.map((k) => `"${k}"`).join(', ')}; remove ${i.keys.length > 1 ? 'them' : 'it'}`;
  return `${where}: ${field}: ${msg}`;
}

export function toErrorData(e: unknown): ApiErrorData {
  if (e instanceof ApiError) return e.toJSON();
  if (e instanceof Error) return { name: e.name || 'Error', message: e.message.split('\n')[0] ?? '' };
  return { name: 'Error', message: String(e) };
}
