// Seeded random numbers for weight init and sampling: the data layer's splitmix32 (one
// integer of state, the same numbers on every machine) plus a standard normal.
import { SplitMix32 } from '../data/prng.js';

export class Rng extends SplitMix32 {
  /** uniform in [0, 1) */
  next(): number {
    return this.nextFloat();
  }

  /** standard normal (Box-Muller) */
  normal(): number {
    let u = this.nextFloat();
    while (u <= 1e-12) u = this.nextFloat();
    const v = this.nextFloat();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }
}
