// The shared-memory side of one peer connection (rings: shm-ring.ts): this side's ring for the
// payloads it sends, once the peer accepted it, and the peer's ring for the payloads it
// receives. The connection owns the link and the frame sequence; it hands this channel the
// control frames and the ring payload headers, and sends what the channel asks for.
//
//   offer  --->  (peer opens the file, checks the nonce)  <---  accept | decline (reason)
//   payload header (ringPos)  --->  (peer reads the ring)  <---  credit (payloads read)
import { FrameError } from '../errors.js';
import type { FrameHeader } from '../transport/frames.js';
import { ShmReceiver, ShmSender, type ShmOffer } from './shm-ring.js';

/** Payloads through a shared-memory ring when the peer is on this machine. */
export interface ShmOptions {
  /** bytes of the ring this side offers for its own payloads */
  ringBytes: number;
  /** largest ring accepted from the peer */
  maxPeerRingBytes: number;
}

/** control frames (kind Control, the type in `step`) */
export const enum Ctl {
  Offer = 1,
  Accept = 2,
  Decline = 3,
  /** `offset` = how many more ring payloads the receiver has read */
  Credit = 4,
}

/** What the channel needs from its connection. */
export interface ShmHost {
  readonly peer: number;
  /** writes a control frame now (past the queue and the window) */
  writeControl(type: Ctl, value: number, body?: Buffer | null): void;
  /** where a payload announced by `h` should land (null: a fresh buffer) */
  bodyTarget(h: FrameHeader): Buffer | null;
  /** ring space came free or the ring became usable: retry queued frames */
  pump(): void;
  log(line: string): void;
}

export class ShmChannel {
  private out: ShmSender | null = null;
  private outActive = false;
  /** this side's offer awaits the peer's answer: ring payloads wait for it rather than take the link */
  private outPending = false;
  private in: ShmReceiver | null = null;
  framesSent = 0;
  bytesSent = 0;
  framesReceived = 0;

  /** `opts` null: shared memory is off here (offers nothing, declines the peer's). */
  constructor(
    private readonly opts: ShmOptions | null,
    private readonly host: ShmHost,
  ) {}

  /** Offers the peer this side's ring (where /dev/shm has room for one). */
  offer(): void {
    if (!this.opts) return;
    this.out = ShmSender.create(this.opts.ringBytes);
    if (!this.out) return;
    this.outPending = true;
    this.host.writeControl(Ctl.Offer, 0, Buffer.from(JSON.stringify(this.out.offer)));
  }

  /** Whether payloads to the peer go through this side's ring now. */
  get active(): boolean {
    return this.outActive;
  }

  /** The name this side's ring had on /dev/shm (unlinked once the peer opened it). */
  get ringName(): string | null {
    return this.out?.offer.name ?? null;
  }

  /**
   * Puts a payload into this side's ring: its position; -1 when the ring is full for now (wait
   * for a credit); -2 when the ring is not for it (not accepted, too large, or it just failed:
   * e.g. /dev/shm full, after which everything goes over the link).
   */
  put(payload: Buffer): number {
    // until the peer answers the offer, a payload the ring could take waits (-1): otherwise the
    // first step's payloads would race the answer onto the link whenever the peer is slow to read
    if (this.outPending) return this.out!.fits(payload.length) ? -1 : -2;
    if (!this.outActive || !this.out!.fits(payload.length)) return -2;
    let pos: number;
    try {
      pos = this.out!.put(payload);
    } catch (err) {
      this.host.log(
        `comm: shared memory to peer rank ${this.host.peer} failed (${(err as Error).message}): payloads go over the link from now on`,
      );
      this.outActive = false;
      return -2;
    }
    if (pos >= 0) {
      this.framesSent++;
      this.bytesSent += payload.length;
    }
    return pos;
  }

  /** A control frame from the peer. Throws FrameError on one that breaks the protocol. */
  onControl(h: FrameHeader, body: Buffer): void {
    switch (h.step) {
      case Ctl.Offer:
        return this.onOffer(body);
      case Ctl.Accept:
        if (!this.out || this.outActive) throw new FrameError('an unexpected shared-memory ring acceptance');
        this.out.unlink();
        this.outPending = false;
        this.outActive = true;
        return this.host.pump();
      case Ctl.Decline:
        // harmless whenever it comes (nothing changes but this side's ring going unused)
        if (!this.out || this.outActive) return;
        this.host.log(
          `comm: peer rank ${this.host.peer} declined this rank's shared-memory ring (${body.toString('utf8').slice(0, 200)}): payloads go over the link`,
        );
        this.out.close();
        this.out = null;
        this.outPending = false;
        return this.host.pump();
      case Ctl.Credit:
        if (!this.out || !this.out.release(h.offset)) throw new FrameError(`a credit for ${h.offset} ring payloads never sent`);
        return this.host.pump();
      default:
        throw new FrameError(`unknown control frame type ${h.step}`);
    }
  }

  private onOffer(body: Buffer) {
    if (this.in) throw new FrameError('a second shared-memory ring offer');
    let why: string;
    if (!this.opts) why = 'shared memory is off on this rank';
    else {
      let offer: ShmOffer | null = null;
      try {
        offer = JSON.parse(body.toString('utf8')) as ShmOffer;
      } catch {
        // declined below
      }
      const r = offer && typeof offer === 'object' ? ShmReceiver.open(offer, this.opts.maxPeerRingBytes) : 'malformed offer';
      if (typeof r !== 'string') {
        this.in = r;
        return this.host.writeControl(Ctl.Accept, 0);
      }
      why = r;
    }
    this.host.log(`comm: declined peer rank ${this.host.peer}'s shared-memory ring: ${why}`);
    this.host.writeControl(Ctl.Decline, 0, Buffer.from(why.slice(0, 200)));
  }

  /** A payload in the peer's ring: read into its destination (or a fresh buffer), then credited back. */
  readPayload(h: FrameHeader): Buffer {
    if (!this.in) throw new FrameError('a shared-memory payload, but no ring was set up');
    const pos = h.ringPos ?? 0;
    if (!this.in.contains(pos, h.bytes))
      throw new FrameError(
        `a ${h.bytes}-byte shared-memory payload at ring position ${pos} lies outside the ${this.in.ringBytes}-byte ring`,
      );
    const target = this.host.bodyTarget(h);
    const into = target && target.length === h.bytes ? target : Buffer.allocUnsafe(h.bytes);
    if (!this.in.read(pos, into)) throw new FrameError(`could not read a ${h.bytes}-byte shared-memory payload at ring position ${pos}`);
    this.host.writeControl(Ctl.Credit, 1);
    this.framesReceived++;
    return into;
  }

  close(): void {
    this.out?.close();
    this.in?.close();
    this.outActive = false;
    this.outPending = false;
  }
}
