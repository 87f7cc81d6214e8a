// The raw-TCP message link under the rank-to-rank data plane, in-process over loopback:
// messages of every size arrive whole and in order however the kernel splits them, a receive
// target gets the bytes in place, a close carries its code and reason to the peer (the
// "lost rank N" path), and oversized or unknown messages close the link instead of allocating.
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import {
  adoptReusingReads,
  connectReusingReads,
  READ_BUFFER_BYTES,
  TcpLink,
  type ReadSink,
} from '../../workers/comm/transport/tcp-link.js';

async function pair(maxPayload = 64 << 20): Promise<{ a: TcpLink; b: TcpLink; server: net.Server }> {
  let accept!: (l: TcpLink) => void;
  const accepted = new Promise<TcpLink>((r) => (accept = r));
  const server = net.createServer((s) => accept(new TcpLink(s, maxPayload, true)));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const a = new TcpLink(net.connect((server.address() as net.AddressInfo).port, '127.0.0.1'), maxPayload, false);
  await new Promise((r) => a.once('open', r));
  return { a, b: await accepted, server };
}

/** A pair whose reads go where the link says (the rank mesh's setup): a reused buffer, or a receive target itself. */
async function pairReusing(): Promise<{ a: TcpLink; b: TcpLink; bReads: ReadSink; server: net.Server }> {
  let accept!: (v: { b: TcpLink; bReads: ReadSink }) => void;
  const accepted = new Promise<{ b: TcpLink; bReads: ReadSink }>((r) => (accept = r));
  const server = net.createServer({ pauseOnConnect: true }, (s) => {
    const bReads: ReadSink = { onChunk: null };
    const sock = adoptReusingReads(s, bReads);
    if (!sock) throw new Error('adoptReusingReads: Node internals changed');
    accept({ b: new TcpLink(sock, 64 << 20, true, bReads), bReads });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const aReads: ReadSink = { onChunk: null };
  const a = new TcpLink(connectReusingReads('127.0.0.1', (server.address() as net.AddressInfo).port, aReads), 64 << 20, false, aReads);
  await new Promise((r) => a.once('open', r));
  return { a, server, ...(await accepted) };
}

function pattern(n: number, seed: number): Buffer {
  const b = Buffer.allocUnsafe(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + seed) & 0xff;
  return b;
}

describe('TcpLink', () => {
  it('delivers 0 B, 1 B, 70 000 B, 3 MiB binary and text messages whole and in order; a receive target gets its message in place', async () => {
    const { a, b, server } = await pair();
    const sizes = [0, 1, 70_000, 3 << 20, 5];
    const got: { data: Buffer; isBinary: boolean }[] = [];
    const target = Buffer.alloc(70_000);
    let targetSet = false;
    const all = new Promise<void>((resolve) =>
      b.on('message', (data: Buffer, isBinary: boolean) => {
        got.push({ data: Buffer.from(data), isBinary });
        // after the 1-byte message, the next one (70 000 B) goes straight into `target`
        if (got.length === 2 && !targetSet) {
          targetSet = true;
          b.setNextBody(target);
        }
        if (got.length === sizes.length + 1) resolve();
      }),
    );
    for (const [k, n] of sizes.entries()) a.send(pattern(n, k));
    a.send('{"t":"text"}');
    await all;
    sizes.forEach((n, k) => expect(got[k].data.equals(pattern(n, k)), `message ${k} (${n} B)`).toBe(true));
    expect(target.equals(pattern(70_000, 2))).toBe(true);
    expect(got[sizes.length]).toEqual({ data: Buffer.from('{"t":"text"}'), isBinary: false });
    a.terminate();
    server.close();
  });

  it('reads land in the receive target itself: 3 MiB, 3 MiB and 2 MiB targeted bodies after 40-byte announcements, interleaved with untargeted 7 B and 1 MiB messages, arrive whole, in order, and all but the first read of a body go straight into the target', async () => {
    const { a, b, bReads, server } = await pairReusing();
    // [announce, body] pairs as PeerConnection sends them (header message, then the payload)
    const plan: { n: number; target: boolean }[] = [
      { n: 40, target: false },
      { n: 3 << 20, target: true },
      { n: 40, target: false },
      { n: 3 << 20, target: true },
      { n: 7, target: false },
      { n: 1 << 20, target: false },
      { n: 40, target: false },
      { n: 2 << 20, target: true },
      { n: 5, target: false },
    ];
    const targets = plan.map((m) => (m.target ? Buffer.alloc(m.n) : null));
    // count the bytes the kernel wrote into each target directly (chunks that are views of it)
    const direct = plan.map(() => 0);
    const onChunk = bReads.onChunk!;
    bReads.onChunk = (chunk) => {
      const k = targets.findIndex((t) => t && chunk.buffer === t.buffer);
      if (k >= 0) direct[k] += chunk.length;
      onChunk(chunk);
    };
    const got: Buffer[] = [];
    const all = new Promise<void>((resolve) =>
      b.on('message', (data: Buffer) => {
        const k = got.length;
        got.push(data);
        // an announcement names the next message's target, as bodyTarget does
        if (plan[k + 1]?.target) b.setNextBody(targets[k + 1]!);
        if (got.length === plan.length) resolve();
      }),
    );
    for (const [k, m] of plan.entries()) a.send(pattern(m.n, k));
    await all;
    plan.forEach((m, k) => {
      expect(got[k].equals(pattern(m.n, k)), `message ${k} (${m.n} B)`).toBe(true);
      if (m.target) expect(got[k], `message ${k} is delivered in its target`).toBe(targets[k]);
    });
    // messages 1 and 7 follow untargeted messages: the read that brings their announcement
    // may bring up to a read buffer of the body too (copied); right after a targeted body the
    // link peeks only the next headers (64 bytes), so message 3 loses at most the few bytes
    // that came with its announcement
    for (const k of [1, 7]) expect(direct[k], `message ${k}: bytes read in place`).toBeGreaterThanOrEqual(plan[k].n - READ_BUFFER_BYTES);
    expect(direct[3], 'message 3 (after a targeted body): bytes read in place').toBeGreaterThanOrEqual(plan[3].n - 64);
    a.terminate();
    server.close();
  });

  it('a close reaches the peer with its code and reason, after the data sent before it', async () => {
    const { a, b, server } = await pair();
    const order: string[] = [];
    const closed = new Promise<[number, string]>((r) => b.on('close', (code: number, reason: Buffer) => r([code, reason.toString()])));
    b.on('message', (d: Buffer) => order.push(`message ${d.length}`));
    a.send(Buffer.alloc(2 << 20, 1));
    a.close(4001, 'lost rank 2');
    expect(await closed).toEqual([4001, 'lost rank 2']);
    expect(order).toEqual([`message ${2 << 20}`]);
    server.close();
  });

  it('closes on a message over the limit (1009) or of an unknown kind (1002) without allocating it', async () => {
    for (const [bytes, code] of [
      [Buffer.from([0xff, 0xff, 0xff, 0x7f, 1]), 1009],
      [Buffer.from([0, 0, 0, 0, 9]), 1002],
    ] as const) {
      const { a, b, server } = await pair(1024);
      const closed = new Promise<number>((r) => b.on('close', (c: number) => r(c)));
      (a as unknown as { sock: net.Socket }).sock.write(bytes);
      expect(await closed).toBe(code);
      a.terminate();
      server.close();
    }
  });
});
