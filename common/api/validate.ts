// Boundary checks shared by both ends: a request is checked before it is sent and again on
// receipt; a result and an event are checked on receipt.
import { ApiError, describeZodError, zodField } from './errors.js';
import { type RunEvent, RunEventSchema } from './events.js';
import { API_METHODS, METHOD_NAMES, type MethodName, type MethodParams, type MethodResult } from './methods.js';

export function isMethodName(m: string): m is MethodName {
  return Object.prototype.hasOwnProperty.call(API_METHODS, m);
}

/** The params of `method`, parsed; throws ValidationError naming the method and the field. */
export function parseParams<M extends MethodName>(method: string, params: unknown): { method: M; params: MethodResultParams<M> } {
  if (!isMethodName(method))
    throw new ApiError('ValidationError', `unknown method "${method}"; the methods are ${METHOD_NAMES.join(', ')}`);
  const r = API_METHODS[method].params.safeParse(params ?? {});
  if (!r.success) throw new ApiError('ValidationError', describeZodError(`${method} params`, r.error), zodField(r.error) || undefined);
  return { method: method as M, params: r.data as MethodResultParams<M> };
}
/** params after parsing (defaults applied) */
export type MethodResultParams<M extends MethodName> = MethodParams<M>;

export function parseResult<M extends MethodName>(method: M, result: unknown): MethodResult<M> {
  const r = API_METHODS[method].result.safeParse(result);
  if (!r.success) throw new ApiError('ProtocolError', describeZodError(`${method} result`, r.error));
  return r.data as MethodResult<M>;
}

export function parseEvent(data: unknown): RunEvent {
  const r = RunEventSchema.safeParse(data);
  if (!r.success) throw new ApiError('ProtocolError', describeZodError('run event', r.error));
  return r.data;
}
