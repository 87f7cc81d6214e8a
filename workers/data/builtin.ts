// Built-in datasets: generated text that needs no download. Each generator is a pure function
// of a fixed seed (integer-only PRNG), so every machine gets byte-identical text, and a tiny
// char-level model learns it visibly within a few hundred steps (small alphabet, small lexicon,
// strong local structure).
import { DataError } from './errors.js';
import { SplitMix32 } from './prng.js';

export interface BuiltinDataset {
  /** full name as given on the command line, e.g. 'builtin:grammar' */
  name: string;
  description: string;
  /** generates the corpus; deterministic */
  generate(): string;
}

export const DEFAULT_DATASET = 'builtin:grammar';
const TARGET_CHARS = 300_000;

// ---- builtin:grammar: English-like sentences from a small grammar --------------------------
const NOUNS: [string, string][] = [
  ['cat', 'cats'],
  ['dog', 'dogs'],
  ['bird', 'birds'],
  ['child', 'children'],
  ['king', 'kings'],
  ['robot', 'robots'],
];
const THINGS = ['ball', 'apple', 'book', 'river', 'house', 'tree'];
const ADJS = ['small', 'big', 'red', 'old', 'happy'];
// [third-person singular, plural/base, past]
const VERBS: [string, string, string][] = [
  ['sees', 'see', 'saw'],
  ['finds', 'find', 'found'],
  ['likes', 'like', 'liked'],
  ['takes', 'take', 'took'],
];
const MOVES: [string, string, string][] = [
  ['runs', 'run', 'ran'],
  ['walks', 'walk', 'walked'],
  ['sleeps', 'sleep', 'slept'],
  ['sings', 'sing', 'sang'],
];
const PREPS = ['near', 'under', 'over'];
const ADVS = ['slowly', 'quickly', 'today'];
const NAMES = ['anna', 'tom', 'max'];

function grammarText(): string {
  const r = new SplitMix32(0x5eed_0001);
  const chance = (p: number) => r.nextFloat() < p;
  const adj = () => (chance(0.4) ? r.pick(ADJS) + ' ' : '');
  // subject: [text, plural]
  const subject = (): [string, boolean] => {
    if (chance(0.2)) return [r.pick(NAMES), false];
    const plural = chance(0.4);
    const [sg, pl] = r.pick(NOUNS);
    const det = plural ? r.pick(['the', 'some', 'two', 'many']) : r.pick(['the', 'a', 'one', 'that']);
    return [`${det} ${adj()}${plural ? pl : sg}`, plural];
  };
  const object = (): string => {
    const a = adj();
    const det = r.pick(['the', 'a', 'her', 'his', 'their']);
    return `${det === 'a' && /^[aeiou]/.test(a || 'x') ? 'an' : det} ${a}${r.pick(THINGS)}`.replace(/^a ([aeiou])/, 'an $1');
  };
  const clause = (): string => {
    const [subj, plural] = subject();
    const past = chance(0.3);
    const tense = (v: [string, string, string]) => (past ? v[2] : plural ? v[1] : v[0]);
    switch (r.nextInt(3)) {
      case 0:
        return `${subj} ${tense(r.pick(VERBS))} ${object()}`;
      case 1:
        return `${subj} ${tense(r.pick(MOVES))} ${r.pick(PREPS)} ${object()}`;
      default:
        return `${subj} ${tense(r.pick(MOVES))} ${r.pick(ADVS)}`;
    }
  };
  const lines: string[] = [];
  let n = 0;
  while (n < TARGET_CHARS) {
    let s = clause();
    if (chance(0.25)) s += ` ${r.pick(['and', 'but', 'because', 'while'])} ${clause()}`;
    s += '.\n';
    lines.push(s);
    n += s.length;
  }
  return lines.join('');
}

// ---- builtin:arith: additions, one per line -----------------------------------------------
function arithText(): string {
  const r = new SplitMix32(0x5eed_0002);
  const lines: string[] = [];
  let n = 0;
  while (n < TARGET_CHARS) {
    const a = r.nextInt(100);
    const b = r.nextInt(100);
    const s = `${a}+${b}=${a + b}\n`;
    lines.push(s);
    n += s.length;
  }
  return lines.join('');
}

const REGISTRY: BuiltinDataset[] = [
  {
    name: 'builtin:grammar',
    description: 'English-like sentences from a small seeded grammar (~300 KB, 27 characters); the default',
    generate: grammarText,
  },
  {
    name: 'builtin:arith',
    description: 'two-digit additions like "12+35=47" one per line (~300 KB, 13 characters)',
    generate: arithText,
  },
];

export function builtinDatasetNames(): string[] {
  return REGISTRY.map((d) => d.name);
}

export function isBuiltinName(spec: string): boolean {
  return spec.startsWith('builtin:');
}

const cache = new Map<string, string>();

/** The text of a built-in dataset ('builtin:grammar' or just 'grammar'); unknown names list the known ones. */
export function builtinText(name: string): string {
  const full = isBuiltinName(name) ? name : `builtin:${name}`;
  const d = REGISTRY.find((x) => x.name === full);
  if (!d)
    throw new DataError(
      `unknown built-in dataset '${full}': choose one of ${builtinDatasetNames().join(', ')}, or pass a path to a UTF-8 text file`,
    );
  let text = cache.get(full);
  if (text === undefined) {
    text = d.generate();
    cache.set(full, text);
  }
  return text;
}

export function builtinDatasets(): readonly Pick<BuiltinDataset, 'name' | 'description'>[] {
  return REGISTRY.map(({ name, description }) => ({ name, description }));
}
