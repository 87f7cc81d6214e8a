// Errors cross a transport as {name, message} (no stacks: they name server paths).
import { z } from 'zod';

export const ApiErrorSchema = z.object({ name: z.string(), message: z.string() });
export type ApiErrorData = z.infer<typeof ApiErrorSchema>;

/** An error the controller answered; `name` says its kind (ValidationError, NotFound, Conflict, ...). */
export class ApiError extends Error {
  constructor(name: string, message: string) {
    super(message);
    this.name = name;
  }
  toJSON(): ApiErrorData {
    return { name: this.name, message: this.message };
  }
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
  if (e instanceof Error) return { name: e.name || 'Error', message: e.message.split('\n')[0] ?? '' };
  return { name: 'Error', message: String(e) };
}
