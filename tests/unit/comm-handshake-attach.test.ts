// A peer may send and close in the moment between its handshake finishing and the other side
// taking the link over (attach): a rank that leaves the run at once does exactly that. Whatever
// arrived in that window must reach the new owner in order, the close included, with its code
// and reason, over both link kinds (raw TCP and ws), on real loopback sockets.
import { describe, expect, it } from 'vitest';
import type { WebSocket } from 'ws';
import { connectAuthenticated, listenAuthenticated } from '../../workers/comm/transport/endpoint.js';
import { connectAuthenticatedTcp, listenAuthenticatedTcp } from '../../workers/comm/transport/tcp-endpoint.js';
import type { Authenticated, LinkEnd } from '../../workers/comm/transport/handshake.js';
import type { Link } from '../../workers/comm/transport/link.js';

const secret = 'a'.repeat(64);
const common = { host: '127.0.0.1', port: 0, secret, self: { role: 'rank' as const, rank: 0 }, admit: () => null, maxPayload: 1 << 20 };
const client = { secret, self: { role: 'rank' as const, rank: 1 }, expect: () => null, maxPayload: 1 << 20 };

/** The server side: takes each link over only after `delayMs`, recording what it then hears. */
function lateOwner(delayMs: number) {
  const got: { messages: string[]; ended: LinkEnd | null; closedLater: number | null } = { messages: [], ended: null, closedLater: null };
  let done!: () => void;
  const finished = new Promise<void>((res) => (done = res));
  const onPeer = (link: Link, auth: Authenticated) =>
    setTimeout(() => {
      link.on('close', (code) => ((got.closedLater = code), done()));
      auth.attach(
        (data) => got.messages.push(data.toString('utf8')),
        (e) => ((got.ended = e), done()),
      );
    }, delayMs);
  return { got, finished, onPeer };
}

describe('a link that closes before its owner attaches', { timeout: 10_000 }, () => {
  it('raw TCP: the messages, then the close with its code and reason', async () => {
    const owner = lateOwner(300);
    const server = await listenAuthenticatedTcp({ ...common, onPeer: owner.onPeer });
    const { link } = await connectAuthenticatedTcp({ ...client, host: '127.0.0.1', port: server.port });
    link.send(Buffer.from('first'), { binary: true });
    link.send(Buffer.from('second'), { binary: true });
    link.close(1000, 'process group destroyed');
    await owner.finished;
    expect(owner.got.messages).toEqual(['first', 'second']);
    expect(owner.got.ended?.close?.code).toBe(1000);
    expect(owner.got.ended?.close?.reason.toString()).toBe('process group destroyed');
    expect(owner.got.closedLater).toBeNull(); // told once, not twice
    await server.close();
  });

  it('ws: the same', async () => {
    const owner = lateOwner(300);
    const server = await listenAuthenticated({ ...common, onPeer: (ws: WebSocket, auth) => owner.onPeer(ws as unknown as Link, auth) });
    const { ws } = await connectAuthenticated({ ...client, url: `ws://127.0.0.1:${server.port}` });
    ws.send(Buffer.from('first'));
    ws.send(Buffer.from('second'));
    ws.close(1000, 'process group destroyed');
    await owner.finished;
    expect(owner.got.messages).toEqual(['first', 'second']);
    expect(owner.got.ended?.close?.code).toBe(1000);
    expect(owner.got.ended?.close?.reason.toString()).toBe('process group destroyed');
    await server.close();
  });

  it('a link still open at attach reports its close to its own listeners only', async () => {
    const owner = lateOwner(0);
    const server = await listenAuthenticatedTcp({ ...common, onPeer: owner.onPeer });
    const { link } = await connectAuthenticatedTcp({ ...client, host: '127.0.0.1', port: server.port });
    await new Promise((r) => setTimeout(r, 200));
    link.close(1000, 'bye');
    await owner.finished;
    expect(owner.got.ended).toBeNull();
    expect(owner.got.closedLater).toBe(1000);
    await server.close();
  });
});
