// W in-process ranks for the communication hooks' tests: every all-reduce (op sum) sums the
// ranks' buffers exactly, in float64, then rounds to the payload's dtype.
import { bfloat16ToFloat, floatToBfloat16, floatToHalf, halfToFloat, type ProcessGroup } from '../../../workers/comm/index.js';

/** W in-process ranks whose all-reduces (op sum) meet by sequence number, as a real group's do. */
export function simulatedGroups(W: number): ProcessGroup[] {
  const slots: { bufs: (Float32Array | Uint16Array)[]; dtype?: string; waiters: (() => void)[] }[] = [];
  const seqs = new Array<number>(W).fill(0);
  const finish = (s: (typeof slots)[number]) => {
    const n = s.bufs[0].length;
    const widen = s.dtype === 'bfloat16' ? bfloat16ToFloat : halfToFloat;
    const narrow = s.dtype === 'bfloat16' ? floatToBfloat16 : floatToHalf;
    for (let i = 0; i < n; i++) {
      let sum = 0;
      for (const b of s.bufs) sum += b instanceof Float32Array ? b[i] : widen(b[i]);
      for (const b of s.bufs) b[i] = b instanceof Float32Array ? sum : narrow(sum);
    }
    for (const w of s.waiters) w();
  };
  return Array.from({ length: W }, (_, rank) => {
    const pg = {
      size: W,
      rank,
      allReduce(buf: Float32Array | Uint16Array, o: { op?: string; dtype?: string } = {}) {
        if (o.op !== 'sum') throw new Error(`the hooks sum; got op ${o.op}`);
        const s = (slots[seqs[rank]++] ??= { bufs: [], waiters: [] });
        const posted = s.bufs.find(Boolean);
        if (posted && posted.length !== buf.length) throw new Error('ranks posted different collectives under one sequence number');
        s.bufs[rank] = buf;
        s.dtype = o.dtype;
        const arrived = new Promise<void>((res) => s.waiters.push(res));
        if (s.bufs.filter(Boolean).length === W) finish(s);
        return { wait: () => arrived.then(() => buf) };
      },
    };
    return pg as unknown as ProcessGroup;
  });
}
