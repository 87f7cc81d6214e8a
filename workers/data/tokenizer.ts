// Character-level tokenizer: one token per Unicode code point (not per UTF-16 unit, so
// emoji and other non-BMP characters are single tokens). Ids follow code-point order.
import { DataError } from './errors.js';

export interface CharTokenizerJson {
  type: 'char';
  /** the vocabulary in id order: chars[id] is the token's text (one code point) */
  chars: string[];
}

/** Describes a character for an error message: 'x' (U+0078), or U+000A for control chars. */
export function describeChar(ch: string): string {
  const cp = ch.codePointAt(0)!;
  const hex = 'U+' + cp.toString(16).toUpperCase().padStart(4, '0');
  return cp < 0x20 || cp === 0x7f || (cp >= 0x80 && cp < 0xa0) ? hex : `${JSON.stringify(ch)} (${hex})`;
}

export class CharTokenizer {
  readonly chars: readonly string[];
  private readonly ids: Map<number, number>;

  private constructor(chars: string[]) {
    this.chars = Object.freeze(chars);
    this.ids = new Map(chars.map((c, i) => [c.codePointAt(0)!, i]));
  }

  /** Vocabulary = the sorted unique code points of `text`. */
  static fromText(text: string): CharTokenizer {
    const cps = new Set<number>();
    for (const ch of text) cps.add(ch.codePointAt(0)!);
    if (cps.size === 0) throw new DataError('cannot build a vocabulary from empty text (give the tokenizer some characters)');
    return new CharTokenizer([...cps].sort((a, b) => a - b).map((cp) => String.fromCodePoint(cp)));
  }

  /** Rebuilds a tokenizer from `toJSON()` output; validates it (a checkpoint may be hand-edited). */
  static fromJSON(json: unknown): CharTokenizer {
    const j = json as Partial<CharTokenizerJson> | null;
    if (!j || typeof j !== 'object' || j.type !== 'char' || !Array.isArray(j.chars)) {
      throw new DataError('tokenizer JSON must be {"type":"char","chars":[...]} (the checkpoint\'s tokenizer entry is malformed)');
    }
    const seen = new Set<number>();
    j.chars.forEach((c, i) => {
      if (typeof c !== 'string' || [...c].length !== 1) {
        throw new DataError(`tokenizer JSON: chars[${i}] must be a single character, got ${JSON.stringify(c)}`);
      }
      const cp = c.codePointAt(0)!;
      if (seen.has(cp)) throw new DataError(`tokenizer JSON: chars[${i}] ${describeChar(c)} appears twice`);
      seen.add(cp);
    });
    return new CharTokenizer([...j.chars]);
  }

  get vocabSize(): number {
    return this.chars.length;
  }

  /** Token ids of `text`; throws a DataError naming the first character not in the vocabulary. */
  encode(text: string): Uint32Array {
    const out = new Uint32Array(text.length); // ≥ the number of code points
    let n = 0;
    let line = 1;
    let col = 1;
    for (const ch of text) {
      const id = this.ids.get(ch.codePointAt(0)!);
      if (id === undefined) {
        throw new DataError(
          `character ${describeChar(ch)} at line ${line}, column ${col} is not in the model's vocabulary ` +
            `(${this.vocabSize} characters learned from its training data): remove or replace it, or train on text that contains it`,
        );
      }
      out[n++] = id;
      if (ch === '\n') {
        line++;
        col = 1;
      } else col++;
    }
    return out.slice(0, n);
  }

  decode(ids: ArrayLike<number>): string {
    let s = '';
    for (let i = 0; i < ids.length; i++) {
      const c = this.chars[ids[i]];
      if (c === undefined) throw new DataError(`token id ${ids[i]} is outside the vocabulary (0..${this.vocabSize - 1})`);
      s += c;
    }
    return s;
  }

  toJSON(): CharTokenizerJson {
    return { type: 'char', chars: [...this.chars] };
  }
}
