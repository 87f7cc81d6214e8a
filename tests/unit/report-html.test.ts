// The pieces of the HTML report that keep it one safe, offline file: JSON embedded in a
// <script> cannot close it, and an option's function travels only by name.
import { describe, expect, it } from 'vitest';
import { renderSpanBlock } from '../../common/charts/index.js';
import { escapeHtml, jsonForScript } from '../../src-main/reports/html.js';

describe('report HTML embedding', () => {
  it('JSON for a <script>: no "<", ">" or "&" survive, and it parses back to the same value', () => {
    const value = { name: '</script><script>alert(1)</script><!-- & \u2028', n: 1.5 };
    const json = jsonForScript(value);
    expect(json).not.toMatch(/[<>&\u2028]/);
    expect(JSON.parse(json)).toEqual(value);
  });
  it('renderSpanBlock travels as {"$fn":"renderSpanBlock"}; any other function is refused', () => {
    expect(JSON.parse(jsonForScript({ renderItem: renderSpanBlock }))).toEqual({ renderItem: { $fn: 'renderSpanBlock' } });
    expect(() => jsonForScript({ formatter: (x: number) => x })).toThrow(/holds a function the report cannot ship \(formatter\)/);
  });
  it('escapeHtml', () => {
    expect(escapeHtml(`<a href="x">'&'</a>`)).toBe('&#60;a href=&#34;x&#34;&#62;&#39;&#38;&#39;&#60;/a&#62;');
  });
});
