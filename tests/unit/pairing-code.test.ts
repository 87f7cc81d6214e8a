import { describe, expect, it } from 'vitest';
import { PairingCode } from '../../workers/agent/pairing-code.js';
import { sourceOf } from '../../workers/agent/pairing-backoff.js';
import { normalizePairingCode } from '../../workers/protocol/pairing-crypto.js';

// The pairing code's limits with a hand-driven clock: what each source and the agent's screen see.
function setup() {
  let t = 1_000_000;
  const shown: string[] = [];
  const whys: string[] = [];
  const code = new PairingCode(
    (c, why) => {
      shown.push(c);
      whys.push(why);
    },
    { now: () => t },
  );
  const tryCode = (from: string, c: string) => code.check(from, (x) => x === normalizePairingCode(c));
  return { code, shown, whys, tryCode, advance: (ms: number) => (t += ms) };
}

describe('PairingCode', () => {
  it('3 wrong codes from one address retire the code there at once, elsewhere after the 60 s cool-off', () => {
    const { shown, whys, tryCode, advance } = setup();
    const first = shown[0]!;
    for (let k = 0; k < 3; k++) expect(tryCode('10.0.0.9', 'AAAAA-AAAAA').ok).toBe(false);
    expect(shown).toHaveLength(2);
    expect(whys[1]).toBe('the previous one was retired for 10.0.0.9 after 3 wrong codes from it; from elsewhere it pairs for 60 s more');
    advance(1000);
    expect(tryCode('10.0.0.9', first)).toEqual({
      ok: false,
      reason: 'pairing refused: wrong code, or one the agent retired; use the code it shows now; next try in 2 s',
    });
    advance(60_000);
    expect(tryCode('10.0.0.7', first).ok).toBe(false);
    expect(tryCode('10.0.0.7', shown[1]!).ok).toBe(true);
    expect(whys.at(-1)).toBe('the previous one was used');
  });

  it('10 wrong codes from 10 addresses rotate with a cool-off; no code is checked against more than 30 wrong guesses', () => {
    const { code, shown, whys, tryCode } = setup();
    for (let k = 0; k < 10; k++) tryCode(`10.0.1.${k}`, 'AAAAA-AAAAA');
    expect(whys[1]).toBe('the previous one was retired after 10 wrong codes; from addresses that sent none it pairs for 60 s more');
    expect(tryCode('10.0.2.1', shown[0]!).ok).toBe(true);
    // a flood of 200 wrong guesses from 200 addresses: each code meets at most 30 of them
    const checks = new Map<string, number>();
    for (let k = 0; k < 200; k++)
      code.check(`10.1.${k >> 8}.${k & 255}`, (c) => {
        checks.set(c, (checks.get(c) ?? 0) + 1);
        return false;
      });
    expect(Math.max(...checks.values())).toBe(30);
    expect(whys.at(-1)).toBe('the previous one was retired after 10 wrong codes; from addresses that sent none it pairs for 60 s more');
    // the code shown before the flood pairs nowhere now
    expect(tryCode('10.0.4.1', shown[2]!).ok).toBe(false);
  });

  it('backoff: 3 free, then 1 s, 2 s, 4 s; an early proof is refused unchecked', () => {
    const { code, tryCode, advance } = setup();
    for (let k = 0; k < 3; k++) tryCode('10.0.0.5', 'AAAAA-AAAAA');
    let checked = false;
    expect(code.check('10.0.0.5', () => (checked = true))).toEqual({
      ok: false,
      reason: 'pairing refused: 3 wrong codes from 10.0.0.5; wait 1 s before the next try',
    });
    expect(checked).toBe(false);
    advance(1000);
    tryCode('10.0.0.5', 'AAAAA-AAAAA');
    expect(code.admit('10.0.0.5')).toBe('pairing refused: 4 wrong codes from 10.0.0.5; wait 2 s before the next try');
    advance(2000);
    tryCode('10.0.0.5', 'AAAAA-AAAAA');
    expect(code.admit('::ffff:10.0.0.5')).toBe('pairing refused: 5 wrong codes from 10.0.0.5; wait 4 s before the next try');
    expect(code.admit('10.0.0.6')).toBeNull();
  });

  it('an IPv6 source is its /64', () => {
    expect(sourceOf('fd00:1:2:3:aaaa::1')).toBe('fd00:1:2:3::/64');
    expect(sourceOf('fd00:1:2:3:bbbb:cccc:dddd:eeee')).toBe('fd00:1:2:3::/64');
    expect(sourceOf('fe80::1')).toBe('fe80:0:0:0::/64');
    expect(sourceOf('::1')).toBe('::1');
  });
});
