// The message-stream surface the handshake and the peer connections need from a socket: the
// subset of ws's WebSocket they use, so a `ws` socket and a TcpLink (raw TCP, length-prefixed
// messages) are interchangeable behind the same HMAC handshake.
export interface Link {
  readonly readyState: number;
  readonly OPEN: number;
  readonly CONNECTING: number;
  /** Strings go as text messages, Buffers as binary; `cb` fires once the bytes are handed to the kernel. */
  send(data: Buffer | string, opts?: { binary?: boolean; compress?: boolean }, cb?: (err?: Error) => void): void;
  /** A liveness probe the peer sees as a 'ping' event (it costs the peer no answer). */
  ping(): void;
  /**
   * Sends a close and keeps reading until the peer answers; `graceMs` bounds the wait (TcpLink;
   * ws keeps its own closing-handshake timeout and the caller terminates it).
   */
  close(code?: number, reason?: string, graceMs?: number): void;
  terminate(): void;
  on(event: 'message', fn: (data: Buffer, isBinary: boolean) => void): this;
  on(event: 'close', fn: (code: number, reason: Buffer) => void): this;
  on(event: 'error', fn: (err: Error) => void): this;
  on(event: 'ping' | 'pong', fn: () => void): this;

  off(event: string, fn: (...args: any[]) => void): this;
}

/** Raises a link's per-message limit once its peer is authenticated (tiny before). */
export function setLinkMaxPayload(link: Link, bytes: number): void {
  const own = (link as unknown as { setMaxPayload?: (n: number) => void }).setMaxPayload;
  if (typeof own === 'function') return own.call(link, bytes);
  // ws keeps the limit in its receiver
  const receiver = (link as unknown as { _receiver?: { _maxPayload?: number } })._receiver;
  if (!receiver || typeof receiver._maxPayload !== 'number')
    throw new Error('ws internals changed: cannot set the per-connection payload limit');
  receiver._maxPayload = bytes;
}
