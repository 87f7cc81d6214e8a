// Authentication: no peer gets anything before proving the run secret. A client without the
// secret, one replaying a recorded handshake, one sending garbage before or instead of the
// handshake — all are closed having received only the server's challenge, and a rank under
// that attack keeps serving its group with exact results.
import { createHmac } from 'node:crypto';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { StoreClient, StoreServer } from '../../workers/comm/index.js';
import { COMM_PROTOCOL_VERSION } from '../../workers/protocol/comm.js';
import { launchWorld, SECRET } from './fixtures/comm-launch.js';
import { TcpLink } from '../../workers/comm/transport/tcp-link.js';

type Seen = { messages: string[]; closeCode: number | null; binary: number };

/** Opens a raw ws, runs `script` on each received message, resolves when the server closes it. */
function rawSession(url: string, script: (ws: WebSocket, msg: string, i: number) => void, onOpen?: (ws: WebSocket) => void): Promise<Seen> {
  return new Promise((resolve) => {
    const seen: Seen = { messages: [], closeCode: null, binary: 0 };
    const ws = new WebSocket(url, { perMessageDeflate: false });
    ws.on('open', () => onOpen?.(ws));
    ws.on('message', (data, isBinary) => {
      if (isBinary) seen.binary++;
      const text = data.toString();
      seen.messages.push(text);
      script(ws, text, seen.messages.length - 1);
    });
    ws.on('error', () => {});
    ws.on('close', (code) => {
      seen.closeCode = code;
      resolve(seen);
    });
    setTimeout(() => ws.terminate(), 15_000).unref();
  });
}

/** The same over the raw-TCP data plane (TcpLink messages), as an attacker that knows the framing. */
function rawTcpSession(
  host: string,
  port: number,
  script: (l: TcpLink, msg: string, i: number) => void,
  onOpen?: (l: TcpLink) => void,
): Promise<Seen> {
  return new Promise((resolve) => {
    const seen: Seen = { messages: [], closeCode: null, binary: 0 };
    const link = new TcpLink(net.connect(port, host), 1 << 20, false);
    link.on('open', () => onOpen?.(link));
    link.on('message', (data: Buffer, isBinary: boolean) => {
      if (isBinary) seen.binary++;
      const text = data.toString();
      seen.messages.push(text);
      script(link, text, seen.messages.length - 1);
    });
    link.on('error', () => {});
    link.on('close', (code: number) => {
      seen.closeCode = code;
      resolve(seen);
    });
    setTimeout(() => link.terminate(), 15_000).unref();
  });
}

const transcript = (label: string, sn: string, cn: string, server: string, client: string) =>
  ['shardwise-comm', `v${COMM_PROTOCOL_VERSION}`, label, sn, cn, server, client].join('\n');
const mac = (secret: string, text: string) => createHmac('sha256', secret).update(text).digest('hex');
const NONCE = 'ab'.repeat(32);

describe('rendezvous store authentication', () => {
  let store: StoreServer;
  let url: string;
  beforeAll(async () => {
    store = await StoreServer.start({ secret: SECRET });
    store.put('comm/addr/0', '127.0.0.1:1');
    url = `ws://127.0.0.1:${store.port}`;
  });
  afterAll(() => store.close());

  it('serves clients that know the secret (set/get/add/wait/barrier)', async () => {
    const a = await StoreClient.connect({ host: '127.0.0.1', port: store.port, secret: SECRET, name: 'a' });
    const b = await StoreClient.connect({ host: '127.0.0.1', port: store.port, secret: SECRET, name: 'b' });
    const got = b.get('late', 5000);
    await a.set('late', 'v');
    expect(await got).toBe('v');
    expect(await a.add('n', 2)).toBe(2);
    expect(await b.add('n', 3)).toBe(5);
    await Promise.all([a.barrier('x', 2), b.barrier('x', 2)]);
    await expect(a.get('never', 200)).rejects.toThrow(/timed out after 200 ms/);
    a.close();
    b.close();
  });

  it('a client with the wrong secret is closed (1008) after the challenge and gets no data', async () => {
    const seen = await rawSession(url, (ws, msg, i) => {
      if (i !== 0) return;
      const c = JSON.parse(msg);
      ws.send(
        JSON.stringify({
          t: 'auth',
          v: COMM_PROTOCOL_VERSION,
          nonce: NONCE,
          client: { role: 'store-client', name: 'x' },
          mac: mac('wrong-secret-0123456789', transcript('client', c.nonce, NONCE, 'store', 'store-client:x')),
        }),
      );
      ws.send(JSON.stringify({ id: 1, op: 'get', key: 'comm/addr/0', timeoutMs: 10 }));
    });
    expect(seen.closeCode).toBe(1008);
    expect(seen.messages).toHaveLength(1);
    expect(JSON.parse(seen.messages[0]).t).toBe('challenge');
  });

  it('a replayed handshake (valid for another connection) is refused and gets no data', async () => {
    let recorded = '';
    // a legitimate session, recorded by an eavesdropper
    await rawSession(url, (ws, msg, i) => {
      if (i === 0) {
        const c = JSON.parse(msg);
        recorded = JSON.stringify({
          t: 'auth',
          v: COMM_PROTOCOL_VERSION,
          nonce: NONCE,
          client: { role: 'store-client', name: 'x' },
          mac: mac(SECRET, transcript('client', c.nonce, NONCE, 'store', 'store-client:x')),
        });
        ws.send(recorded);
      } else if (JSON.parse(msg).t === 'auth-ok') {
        ws.send(JSON.stringify({ id: 1, op: 'get', key: 'comm/addr/0', timeoutMs: 10 }));
      } else ws.close();
    });
    expect(recorded).not.toBe('');
    const seen = await rawSession(url, (ws, _msg, i) => {
      if (i !== 0) return;
      ws.send(recorded);
      ws.send(JSON.stringify({ id: 1, op: 'get', key: 'comm/addr/0', timeoutMs: 10 }));
    });
    expect(seen.closeCode).toBe(1008);
    expect(seen.messages).toHaveLength(1);
  });

  it('garbage before the handshake: a 1 MiB binary frame is cut off (1009), text garbage refused (1008)', async () => {
    const big = await rawSession(
      url,
      () => {},
      (ws) => ws.send(Buffer.alloc(1 << 20, 7)),
    );
    expect(big.closeCode).toBe(1009);
    expect(big.messages.length).toBeLessThanOrEqual(1);
    const text = await rawSession(url, (ws, _m, i) => i === 0 && ws.send('{"id":1,"op":"numKeys"}'));
    expect(text.closeCode).toBe(1008);
    expect(text.messages).toHaveLength(1);
  });
});

describe('a rank under attack', () => {
  it('world 3 over raw TCP (the default): garbage bytes, frames instead of the handshake, a wrong-secret, a forged and a replayed handshake at rank 0 get nothing and leave it serving exact collectives', async () => {
    const w = await launchWorld(3, 'garbage');
    await Promise.all([0, 1, 2].map((r) => waitKey(w.store, `garbage/ready/${r}`)));
    const url = w.store.peek('comm/addr/0')!;
    expect(url).toMatch(/^tcp:\/\//);
    const addr = url.slice('tcp://'.length);
    const [host, port] = [addr.slice(0, addr.lastIndexOf(':')), Number(addr.slice(addr.lastIndexOf(':') + 1))];
    // 1. raw garbage: its "length prefix" is far over the pre-authentication limit
    const junk = await rawTcpSession(
      host,
      port,
      () => {},
      (l) => (l as unknown as { sock: net.Socket }).sock.write(Buffer.alloc(70_000, 0xab)),
    );
    expect(junk.messages.length).toBeLessThanOrEqual(1); // at most the challenge
    // 2. a binary data frame instead of the handshake
    const frame = await rawTcpSession(
      host,
      port,
      (l) => l.send(Buffer.from('SWC1 not really a frame')),
      (l) => l.send(Buffer.alloc(64, 1)),
    );
    expect(frame.closeCode).toBe(1008);
    expect(frame.binary).toBe(0);
    // 3. wrong secret, 4. a forged MAC claiming rank 2
    for (const secret of ['wrong-secret-0123456789', '']) {
      const seen = await rawTcpSession(host, port, (l, msg, i) => {
        if (i !== 0) return;
        const c = JSON.parse(msg);
        l.send(
          JSON.stringify({
            t: 'auth',
            v: COMM_PROTOCOL_VERSION,
            nonce: NONCE,
            client: { role: 'rank', rank: 2 },
            mac: secret ? mac(secret, transcript('client', c.nonce, NONCE, 'rank:0', 'rank:2')) : '00'.repeat(32),
          }),
        );
        l.send(Buffer.alloc(64, 2));
      });
      expect(seen.closeCode).toBe(1008);
      expect(seen.messages).toHaveLength(1);
      expect(seen.binary).toBe(0);
    }
    // 5. replay: an answer made with the real secret for one connection's challenge, sent on another
    let recorded = '';
    await rawTcpSession(host, port, (l, msg, i) => {
      if (i !== 0) return;
      recorded = JSON.stringify({
        t: 'auth',
        v: COMM_PROTOCOL_VERSION,
        nonce: NONCE,
        client: { role: 'rank', rank: 2 },
        mac: mac(SECRET, transcript('client', JSON.parse(msg).nonce, NONCE, 'rank:0', 'rank:2')),
      });
      l.close(1000);
    });
    const replay = await rawTcpSession(host, port, (l, _m, i) => {
      if (i !== 0) return;
      l.send(recorded);
      l.send(Buffer.alloc(64, 3));
    });
    expect(replay.closeCode).toBe(1008);
    expect(replay.messages).toHaveLength(1);
    w.store.put('garbage/done', '1');
    const res = await w.done;
    for (const r of res) {
      expect(
        r.lines.find((l) => l.type === 'ok'),
        JSON.stringify(r.lines) + r.stderr,
      ).toBeTruthy();
      expect(r.code).toBe(0);
    }
    expect(res[0].stderr).toMatch(/refused a connection/);
    expect(res[0].stderr).toMatch(/wrong MAC/);
  });

  it('world 3 over ws: garbage TCP, unauthenticated ws frames, a wrong-secret and a forged-rank handshake at rank 0 leave it serving exact collectives', async () => {
    const w = await launchWorld(3, 'garbage', {}, { env: { SHARDWISE_COMM_TRANSPORT: 'ws' } });
    await Promise.all([0, 1, 2].map((r) => waitKey(w.store, `garbage/ready/${r}`)));
    const url0 = w.store.peek('comm/addr/0')!;
    expect(url0).toMatch(/^ws:\/\//);
    const addr = url0.slice('ws://'.length);
    const [host, port] = [addr.slice(0, addr.lastIndexOf(':')), Number(addr.slice(addr.lastIndexOf(':') + 1))];
    // 1. raw TCP garbage
    await new Promise<void>((resolve) => {
      const s = net.connect(port, host, () => s.write(Buffer.alloc(70_000, 0xab)));
      s.on('error', () => resolve());
      s.on('close', () => resolve());
      s.on('data', () => {});
    });
    const url = `ws://${addr}`;
    // 2. binary frames instead of the handshake
    const garbage = await rawSession(
      url,
      (ws) => ws.send(Buffer.from('SWC1 not really a frame')),
      (ws) => ws.send(Buffer.alloc(64, 1)),
    );
    expect(garbage.closeCode).toBe(1008);
    expect(garbage.binary).toBe(0);
    // 3. wrong secret, 4. right format claiming to be rank 2 with a forged MAC
    for (const secret of ['wrong-secret-0123456789', '']) {
      const seen = await rawSession(url, (ws, msg, i) => {
        if (i !== 0) return;
        const c = JSON.parse(msg);
        ws.send(
          JSON.stringify({
            t: 'auth',
            v: COMM_PROTOCOL_VERSION,
            nonce: NONCE,
            client: { role: 'rank', rank: 2 },
            mac: secret ? mac(secret, transcript('client', c.nonce, NONCE, 'rank:0', 'rank:2')) : '00'.repeat(32),
          }),
        );
      });
      expect(seen.closeCode).toBe(1008);
      expect(seen.messages).toHaveLength(1);
    }
    w.store.put('garbage/done', '1');
    const res = await w.done;
    for (const r of res) {
      expect(
        r.lines.find((l) => l.type === 'ok'),
        JSON.stringify(r.lines) + r.stderr,
      ).toBeTruthy();
      expect(r.code).toBe(0);
    }
    expect(res[0].stderr).toMatch(/refused a connection/);
  });
});

async function waitKey(store: StoreServer, key: string) {
  for (let i = 0; i < 600 && store.peek(key) === undefined; i++) await new Promise((r) => setTimeout(r, 50));
}
