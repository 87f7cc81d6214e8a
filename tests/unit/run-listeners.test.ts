// The per-run subscriber fan-out both API clients use (src-renderer/src/api/run-listeners.ts):
// one controller subscription per run however many subscribers, closed when the last leaves,
// and a refused subscription leaves nothing behind.
import { describe, expect, it } from 'vitest';
import { RunListeners } from '../../src-renderer/src/api/run-listeners.js';
import type { RunEvent } from '../../common/api/index.js';

describe('RunListeners', () => {
  it('opens one subscription per run, delivers to every subscriber of that run only, and closes it when the last leaves', async () => {
    const l = new RunListeners();
    const calls: string[] = [];
    const remote = (run: string) => ({
      open: async () => void calls.push(`open ${run}`),
      close: async () => void calls.push(`close ${run}`),
    });
    const got: string[] = [];
    const a = await l.add('r1', () => got.push('a'), remote('r1'));
    const b = await l.add('r1', () => got.push('b'), remote('r1'));
    await l.add('r2', () => got.push('c'), remote('r2'));
    l.dispatch('r1', { type: 'status' } as unknown as RunEvent);
    expect(got).toEqual(['a', 'b']);
    await a();
    expect(calls).toEqual(['open r1', 'open r2']);
    await b();
    expect(calls).toEqual(['open r1', 'open r2', 'close r1']);
    l.dispatch('r1', { type: 'status' } as unknown as RunEvent);
    expect(got).toEqual(['a', 'b']);
  });
  it('a refused subscription throws and leaves no subscriber, so the next one tries again', async () => {
    const l = new RunListeners();
    let opens = 0;
    const refuse = { open: async () => (opens++, Promise.reject(new Error('NotFound'))), close: async () => undefined };
    await expect(l.add('gone', () => undefined, refuse)).rejects.toThrow(/NotFound/);
    await expect(l.add('gone', () => undefined, refuse)).rejects.toThrow(/NotFound/);
    expect(opens).toBe(2);
  });
});
