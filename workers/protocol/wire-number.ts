// Numbers that may be non-finite on the wire. A rank's messages cross as JSON (its IPC channel,
// an agent's link), where NaN and ±Infinity become null; a diverged loss or an overflowed
// gradient norm must arrive as what it was. The sender writes every non-finite number as one of
// the strings "NaN", "Infinity", "-Infinity" (encodeNonFinite); the fields that may hold one
// accept either form (WireNumber) and decode it back to the number on receipt.
import { z } from 'zod';

const NON_FINITE = ['NaN', 'Infinity', '-Infinity'] as const;

/** A number, or one of "NaN", "Infinity", "-Infinity", decoded to its number. */
export const WireNumber = z.union([z.number(), z.enum(NON_FINITE)]).transform((v) => (typeof v === 'number' ? v : Number(v)));

/** `value` with every non-finite number inside it (objects and arrays, any depth) written as its string. */
export function encodeNonFinite<T>(value: T): T {
  if (typeof value === 'number') return (Number.isFinite(value) ? value : String(value)) as T;
  if (Array.isArray(value)) return value.map(encodeNonFinite) as T;
  if (value !== null && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = encodeNonFinite(v);
    return out as T;
  }
  return value;
}
