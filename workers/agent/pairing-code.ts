// The agent's pairing code: shown to the user, good for one pairing, retired after a few wrong
// codes, as a Bluetooth passkey or a Matter setup code is.
//
// Threat model. Anyone who can reach the agent's port (its LAN, or loopback users) may try to
// pair. What they must not get: a pairing without the code on the agent's screen (the code is 50
// random bits and each guess costs the guesser a connection and the agent one scrypt), and any
// way to keep the owner from pairing with the code the agent shows. What they can do, and we
// accept: guess a handful of times per code, make the agent show new codes (visible: it says
// why), and from many addresses at once (a host owning a whole subnet) use up a code's ceiling.
//   - A code is checked when the proof arrives, against the codes live at that moment: a
//     connection opened before a code was retired cannot pair with it later.
//   - MAX_FAILURES wrong codes from one source retire the code for that source at once (it never
//     pairs from there again) and the agent shows a new one. Other sources may still pair with the
//     old one for COOL_OFF_MS if they sent no wrong code against it: the owner who read the code
//     a second before a flood is not locked out by it.
//   - SOFT_CEILING wrong codes in total against the shown code rotate it the same way (a flood
//     from several addresses); HARD_CEILING retire it everywhere at once. So no code is ever
//     checked against more than HARD_CEILING wrong guesses: a 30 / 2^50 chance per code.
//   - Per source, PairingBackoff (pairing-backoff.ts) delays each proof after the first few
//     wrong ones exponentially, and refuses early ones unchecked with the time left to wait.
//   - A success retires every live code: a code pairs once.
// The challenge before the proof carries no agent id or name (connection.ts), so a port scan
// learns only that a Shardwise agent listens there; mDNS, when on, announces the name on purpose.
import { newPairingCode, normalizePairingCode } from '../protocol/pairing-crypto.js';
import { formatWait, PairingBackoff, sourceOf } from './pairing-backoff.js';

export const MAX_FAILURES = 3;
export const SOFT_CEILING = 10;
export const HARD_CEILING = 30;
export const COOL_OFF_MS = 60_000;
/** the shown code and at most this many retired ones still cooling off */
const MAX_COOLING = 2;

interface LiveCode {
  /** as displayed, XXXXX-XXXXX */
  display: string;
  /** when it stopped being the shown code; null while shown */
  retiredAt: number | null;
  /** wrong proofs checked against it, per source and in total */
  wrong: Map<string, number>;
  total: number;
}

export type ProofCheck = { ok: true } | { ok: false; reason: string };

export interface PairingCodeOptions {
  now?: () => number;
  coolOffMs?: number;
}

export class PairingCode {
  private live: LiveCode[] = [];
  private readonly backoff: PairingBackoff;
  private readonly now: () => number;
  private readonly coolOffMs: number;

  /** onNewCode: the code to show, and why it changed ('start' for the first) */
  constructor(
    private readonly onNewCode: (display: string, why: string) => void,
    o: PairingCodeOptions = {},
  ) {
    this.now = o.now ?? Date.now;
    this.coolOffMs = o.coolOffMs ?? COOL_OFF_MS;
    this.backoff = new PairingBackoff(this.now);
    this.show('start');
  }

  /** the code on the agent's screen */
  shown(): string {
    return this.live.at(-1)!.display;
  }

  /** Before any work for a pair-hello: null when the address may try now, else why not. */
  admit(address: string): string | null {
    const source = sourceOf(address);
    const wait = this.backoff.waitMs(source);
    if (!wait) return null;
    return `pairing refused: ${this.backoff.failures(source)} wrong codes from ${source}; wait ${formatWait(wait)} before the next try`;
  }

  /** A pair-proof from address: matches(code) says whether it proves that code (10 characters). */
  check(address: string, matches: (code: string) => boolean): ProofCheck {
    const refused = this.admit(address);
    if (refused) return { ok: false, reason: refused };
    const source = sourceOf(address);
    const candidates = this.liveFor(source);
    if (candidates.some((c) => matches(normalizePairingCode(c.display)!))) {
      this.backoff.succeeded(source);
      this.live = [];
      this.show('the previous one was used');
      return { ok: true };
    }
    for (const c of candidates) {
      c.wrong.set(source, (c.wrong.get(source) ?? 0) + 1);
      c.total++;
    }
    this.backoff.failed(source);
    const shown = this.live.at(-1)!;
    let exhausted = false;
    if (shown.total >= HARD_CEILING) this.show(`the previous one was retired after ${HARD_CEILING} wrong codes`);
    else if ((shown.wrong.get(source) ?? 0) >= MAX_FAILURES) {
      exhausted = true;
      this.show(
        `the previous one was retired for ${source} after ${MAX_FAILURES} wrong codes from it; from elsewhere it pairs for ${formatWait(this.coolOffMs)} more`,
      );
    } else if (shown.total >= SOFT_CEILING)
      this.show(
        `the previous one was retired after ${SOFT_CEILING} wrong codes; from addresses that sent none it pairs for ${formatWait(this.coolOffMs)} more`,
      );
    this.live = this.live.filter((c) => c.total < HARD_CEILING);
    const wait = this.backoff.waitMs(source);
    const next = wait ? `; next try in ${formatWait(wait)}` : '';
    return {
      ok: false,
      reason: exhausted
        ? `pairing refused: wrong code, ${MAX_FAILURES} of ${MAX_FAILURES} from ${source}: the agent now shows a new code${next}`
        : `pairing refused: wrong code, or one the agent retired; use the code it shows now${next}`,
    };
  }

  /** the codes a proof from source is checked against: the shown one unless source used up its tries on it, and cooling ones it never failed */
  private liveFor(source: string): LiveCode[] {
    const now = this.now();
    this.live = this.live.filter((c) => c.retiredAt === null || now - c.retiredAt < this.coolOffMs);
    return this.live.filter((c) => (c.retiredAt === null ? (c.wrong.get(source) ?? 0) < MAX_FAILURES : !c.wrong.has(source)));
  }

  private show(why: string) {
    const now = this.now();
    for (const c of this.live) c.retiredAt ??= now;
    this.live = this.live.slice(-MAX_COOLING);
    const display = newPairingCode();
    this.live.push({ display, retiredAt: null, wrong: new Map(), total: 0 });
    this.onNewCode(display, why);
  }
}
