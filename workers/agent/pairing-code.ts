// The agent's one-time pairing code: shown to the user, good for one successful pairing, and
// retired after MAX_FAILURES wrong proofs so nobody can guess it online.
import { newPairingCode, normalizePairingCode } from '../protocol/pairing-crypto.js';

export const MAX_FAILURES = 3;

export class PairingCode {
  private code = newPairingCode();
  private failures = 0;

  constructor(private readonly onNewCode: (display: string, why: string) => void) {
    onNewCode(this.code, 'start');
  }

  /** the code's 10 characters, as both sides feed them to scrypt */
  current(): string {
    return normalizePairingCode(this.code)!;
  }

  succeeded() {
    this.rotate('used');
  }

  failed() {
    if (++this.failures >= MAX_FAILURES) this.rotate(`${MAX_FAILURES} wrong attempts`);
  }

  private rotate(why: string) {
    this.code = newPairingCode();
    this.failures = 0;
    this.onNewCode(this.code, why);
  }
}
