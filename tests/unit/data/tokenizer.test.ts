import { describe, expect, it } from 'vitest';
import { CharTokenizer } from '../../../workers/data/tokenizer.js';

describe('char tokenizer', () => {
  it('vocab is the sorted unique code points; "hello" has 4 tokens h<-e<-l<-o sorted as e,h,l,o', () => {
    const t = CharTokenizer.fromText('hello');
    expect(t.chars).toEqual(['e', 'h', 'l', 'o']);
    expect([...t.encode('hello')]).toEqual([1, 0, 2, 2, 3]);
  });

  it('round-trips text with non-BMP characters as single tokens (😀 is 1 token, not 2 UTF-16 units)', () => {
    const text = 'a😀b𝄞 é\n中文😀';
    const t = CharTokenizer.fromText(text);
    expect(t.vocabSize).toBe(9); // a b 😀 𝄞 space é \n 中 文
    const ids = t.encode(text);
    expect(ids.length).toBe([...text].length);
    expect(ids.length).toBe(10);
    expect(t.decode(ids)).toBe(text);
    // code-point order: U+1D11E 𝄞 sorts before U+1F600 😀, both after CJK (UTF-16 order would differ)
    expect(t.chars.slice(-3)).toEqual(['文', '𝄞', '😀']);
  });

  it('serialises to {"type":"char","chars":[...]} and back', () => {
    const t = CharTokenizer.fromText('ba😀');
    const json = JSON.parse(JSON.stringify(t));
    expect(json).toEqual({ type: 'char', chars: ['a', 'b', '😀'] });
    const u = CharTokenizer.fromJSON(json);
    expect([...u.encode('😀ab')]).toEqual([2, 0, 1]);
  });

  it('rejects malformed tokenizer JSON', () => {
    expect(() => CharTokenizer.fromJSON({ type: 'bpe' })).toThrow(/must be \{"type":"char"/);
    expect(() => CharTokenizer.fromJSON({ type: 'char', chars: ['ab'] })).toThrow(/chars\[0\] must be a single character/);
    expect(() => CharTokenizer.fromJSON({ type: 'char', chars: ['a', 'a'] })).toThrow(/appears twice/);
  });

  it('names the unknown character, its line and column on encode', () => {
    const t = CharTokenizer.fromText('abc\n');
    expect(() => t.encode('ab\nc😀')).toThrow(
      /character "😀" \(U\+1F600\) at line 2, column 2 is not in the model's vocabulary \(4 characters/,
    );
    expect(() => t.encode('a\tb')).toThrow(/character U\+0009 at line 1, column 2/);
  });
});
