// The raw-TCP message link under the rank-to-rank data plane, in-process over loopback:
// messages of every size arrive whole and in order however the kernel splits them, a receive
// target gets the bytes in place, a close carries its code and reason to the peer (the
// "lost rank N" path), and oversized or unknown messages close the link instead of allocating.
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { TcpLink } from '../../workers/comm/tcp-link.js';

async function pair(maxPayload = 64 << 20): Promise<{ a: TcpLink; b: TcpLink; server: net.Server }> {
  let accept!: (l: TcpLink) => void;
  const accepted = new Promise<TcpLink>((r) => (accept = r));
  const server = net.createServer((s) => accept(new TcpLink(s, maxPayload, true)));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const a = new TcpLink(net.connect((server.address() as net.AddressInfo).port, '127.0.0.1'), maxPayload, false);
  await new Promise((r) => a.once('open', r));
  return { a, b: await accepted, server };
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
        if (got.length === 2 && !targetSet) ((targetSet = true), b.setNextBody(target));
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
    for (const [bytes, code] of [[Buffer.from([0xff, 0xff, 0xff, 0x7f, 1]), 1009], [Buffer.from([0, 0, 0, 0, 9]), 1002]] as const) {
      const { a, b, server } = await pair(1024);
      const closed = new Promise<number>((r) => b.on('close', (c: number) => r(c)));
      (a as unknown as { sock: net.Socket }).sock.write(bytes);
      expect(await closed).toBe(code);
      a.terminate();
      server.close();
    }
  });
});
