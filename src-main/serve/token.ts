// The serve token: random per start, compared in constant time (hashing both sides first makes
// the lengths equal, so timingSafeEqual never throws and length leaks nothing either).
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

export function newToken(): string {
  return randomBytes(24).toString('base64url');
}

export function tokenMatches(expected: string, given: unknown): boolean {
  if (typeof given !== 'string') return false;
  const h = (s: string) => createHash('sha256').update(s, 'utf8').digest();
  return timingSafeEqual(h(expected), h(given));
}
