// Shared-memory payloads between two ranks on the same machine: NCCL's SHM transport, in the
// only form plain Node allows (no mmap): a file on /dev/shm (tmpfs, memory) that the sender
// writes payloads into with pwrite and the receiver reads them out of with pread, straight into
// their destination. That is two memory copies a byte, as over loopback TCP, but none of the
// TCP stack, which was two thirds of a world-2 all-reduce's CPU time on loopback.
//
// Each direction of a connection has its own ring, created and written by its sender only:
//
//   file = RING_HEAD_BYTES: 32-byte nonce, then zeros | ring of `ringBytes`
//
// The sender offers the ring over the authenticated TCP link (name, nonce, size); the receiver
// opens it read-only, and accepts only if the file holds the nonce (proof that both see the
// same /dev/shm) and the sender's network namespace is its own. Two network namespaces of one
// host (containers, or the LAN harness's emulated machines) share /dev/shm but are separate
// machines to everything else: their payloads must cross their network link, as between real
// machines, so a ring from another namespace is declined. Then the sender unlinks the name: both keep their file
// descriptors, so nothing is left behind whatever way the processes end. Frames still travel
// on TCP, in order; a payload frame carries its position in the ring instead of its bytes, and
// the receiver gives ring space back (a credit: how many payloads it has read) as it goes.
// A payload is contiguous in the ring (the sender skips the tail when it does not fit).
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';

export const SHM_DIR = '/dev/shm';
/** bytes before the ring: the nonce (then zeros) */
export const RING_HEAD_BYTES = 4096;
const NONCE_BYTES = 32;
/** shardwise-<creator pid>-<random>: the pid says whose ring it is (a leak is attributable, and swept once its creator is gone) */
const NAME_RE = /^shardwise-(\d+)-[0-9a-f]{32}$/;
/**
 * A ring's name lives only from its offer to the peer's answer (milliseconds); one older than
 * this was left by a process that died in between, and is removed by the next sender.
 */
const STALE_RING_MS = 60_000;
/** a ring whose creator no longer runs (same pid namespace) goes sooner, once surely past any handshake */
const ORPHAN_RING_MS = 2_000;

/** the pid that created a ring file, from its name (null: not a ring's name) */
export function ringCreator(name: string): number | null {
  const m = NAME_RE.exec(name);
  return m ? Number(m[1]) : null;
}

const running = (pid: number) => fs.existsSync(`/proc/${pid}`);

/** Removes ring files that outlived any handshake (their creator died before the peer answered). */
export function sweepStaleRings(now = Date.now()): number {
  let removed = 0;
  let names: string[];
  try {
    names = fs.readdirSync(SHM_DIR);
  } catch {
    return 0;
  }
  for (const name of names) {
    const creator = ringCreator(name);
    if (creator === null) continue;
    try {
      const st = fs.lstatSync(`${SHM_DIR}/${name}`);
      const age = now - st.mtimeMs;
      if (st.isFile() && (age > STALE_RING_MS || (age > ORPHAN_RING_MS && !running(creator)))) {
        fs.unlinkSync(`${SHM_DIR}/${name}`);
        removed++;
      }
    } catch {
      // gone meanwhile, or another user's
    }
  }
  return removed;
}

/** Whether this process can use shared-memory rings (Linux with /dev/shm; SHARDWISE_COMM_SHM=0 turns them off). */
export function shmSupported(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.SHARDWISE_COMM_SHM === '0' || process.platform !== 'linux') return false;
  try {
    return fs.statSync(SHM_DIR).isDirectory();
  } catch {
    return false;
  }
}

/** Bytes free on /dev/shm (0 when unknown). */
function shmFreeBytes(): number {
  try {
    const s = fs.statfsSync(SHM_DIR);
    return s.bavail * s.bsize;
  } catch {
    return 0;
  }
}

/** What a sender tells its peer about its ring. */
export interface ShmOffer {
  name: string;
  nonce: string;
  ringBytes: number;
  /** the sender's network namespace (`net:[inode]`); null where the kernel does not say */
  netns: string | null;
}

/** This process's network namespace, as /proc names it (`net:[4026531840]`); null where unknown. */
export function networkNamespace(): string | null {
  try {
    return fs.readlinkSync('/proc/self/ns/net');
  } catch {
    return null;
  }
}

/**
 * Free space of a ring whose payloads are released in the order they were placed: a FIFO of
 * [position, length] and the next write position. Pure bookkeeping, no I/O (unit tested).
 */
export class RingSpace {
  private readonly live: [number, number][] = [];
  private head = 0;
  constructor(readonly size: number) {}

  /** Where a payload of `len` bytes goes, or -1 if the ring has no contiguous room for it now. */
  reserve(len: number): number {
    if (len <= 0 || len > this.size) return -1;
    let pos: number;
    if (this.live.length === 0) pos = 0;
    else {
      const tail = this.live[0][0];
      if (this.head > tail) {
        if (this.head + len <= this.size) pos = this.head;
        else if (len <= tail) pos = 0;
        else return -1;
      } else if (this.head < tail) {
        if (this.head + len <= tail) pos = this.head;
        else return -1;
      } else return -1; // head == tail with payloads live: full
    }
    this.live.push([pos, len]);
    this.head = pos + len;
    return pos;
  }

  /** Frees the `count` oldest payloads (the receiver has read them). False if fewer are live. */
  release(count: number): boolean {
    if (count > this.live.length) return false;
    this.live.splice(0, count);
    if (this.live.length === 0) this.head = 0;
    return true;
  }

  get livePayloads(): number {
    return this.live.length;
  }
}

/** The sending end: owns the file, writes payloads into free ring space. */
export class ShmSender {
  private constructor(
    private fd: number | null,
    private path: string | null,
    readonly offer: ShmOffer,
    private readonly space: RingSpace,
  ) {}

  /** Creates a ring file (mode 0600, a fresh random name); null where /dev/shm lacks the room. */
  static create(ringBytes: number): ShmSender | null {
    sweepStaleRings();
    if (shmFreeBytes() < 2 * (ringBytes + RING_HEAD_BYTES)) return null;
    const name = `shardwise-${process.pid}-${randomBytes(16).toString('hex')}`;
    const path = `${SHM_DIR}/${name}`;
    const nonce = randomBytes(NONCE_BYTES);
    let fd: number | null = null;
    try {
      fd = fs.openSync(path, fs.constants.O_RDWR | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW, 0o600);
      fs.ftruncateSync(fd, RING_HEAD_BYTES + ringBytes);
      fs.writeSync(fd, nonce, 0, NONCE_BYTES, 0);
      return new ShmSender(
        fd,
        path,
        { name, nonce: nonce.toString('hex'), ringBytes, netns: networkNamespace() },
        new RingSpace(ringBytes),
      );
    } catch {
      if (fd !== null) fs.closeSync(fd);
      try {
        fs.unlinkSync(path);
      } catch {
        // never created
      }
      return null;
    }
  }

  /** The peer has opened the file: the name can go (the descriptors keep the memory). */
  unlink(): void {
    if (!this.path) return;
    try {
      fs.unlinkSync(this.path);
    } catch {
      // already gone
    }
    this.path = null;
  }

  /**
   * Copies `payload` into free ring space and returns its position; -1 when the ring is full
   * for now (wait for a credit). Throws on an I/O error (e.g. /dev/shm full): the caller then
   * stops using the ring.
   */
  put(payload: Buffer): number {
    if (this.fd === null) throw new Error('the shared-memory ring is closed');
    const pos = this.space.reserve(payload.length);
    if (pos < 0) return -1;
    let done = 0;
    while (done < payload.length) done += fs.writeSync(this.fd, payload, done, payload.length - done, RING_HEAD_BYTES + pos + done);
    return pos;
  }

  /** Whether a payload of `bytes` can ever go through this ring. */
  fits(bytes: number): boolean {
    return bytes <= this.space.size;
  }

  /** The receiver has read `count` more payloads. False on a credit for payloads never sent. */
  release(count: number): boolean {
    return this.space.release(count);
  }

  close(): void {
    this.unlink();
    if (this.fd !== null) fs.closeSync(this.fd);
    this.fd = null;
  }
}

/** The receiving end: reads payloads out of the peer's ring. */
export class ShmReceiver {
  private constructor(
    private fd: number | null,
    readonly ringBytes: number,
  ) {}

  /**
   * Opens a peer's ring after checking everything the peer said: a name of the expected form
   * (no path), from this network namespace, a regular file of exactly the announced size,
   * holding the announced nonce. Returns the receiver, or why the offer is declined.
   */
  static open(offer: ShmOffer, maxRingBytes: number, netns = networkNamespace()): ShmReceiver | string {
    if (typeof offer.name !== 'string' || !NAME_RE.test(offer.name)) return 'malformed ring name';
    if (typeof offer.nonce !== 'string' || !/^[0-9a-f]{64}$/.test(offer.nonce)) return 'malformed nonce';
    if (!Number.isInteger(offer.ringBytes) || offer.ringBytes <= 0 || offer.ringBytes > maxRingBytes)
      return `ring of ${offer.ringBytes} bytes (at most ${maxRingBytes})`;
    if (offer.netns !== null && typeof offer.netns !== 'string') return 'malformed network namespace';
    if (offer.netns !== netns)
      return `the peer is in another network namespace (${offer.netns ?? 'unknown'}, this rank ${netns ?? 'unknown'}): another machine as far as the network goes, so payloads cross the link`;
    let fd: number;
    try {
      fd = fs.openSync(`${SHM_DIR}/${offer.name}`, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
    } catch (err) {
      return `cannot open it (${(err as NodeJS.ErrnoException).code ?? 'error'}): another machine or another /dev/shm, or the peer already closed its link`;
    }
    try {
      const st = fs.fstatSync(fd);
      if (!st.isFile() || st.size !== RING_HEAD_BYTES + offer.ringBytes)
        throw new Error(`a ${st.isFile() ? `${st.size}-byte file` : 'non-file'}, not the announced ring`);
      const nonce = Buffer.alloc(NONCE_BYTES);
      if (fs.readSync(fd, nonce, 0, NONCE_BYTES, 0) !== NONCE_BYTES || nonce.toString('hex') !== offer.nonce)
        throw new Error('it does not hold the announced nonce');
      // the name is of no more use to anyone: unlinking it here too means a sender that dies
      // before it hears the acceptance leaves nothing behind
      try {
        fs.unlinkSync(`${SHM_DIR}/${offer.name}`);
      } catch {
        // the sender was first
      }
      return new ShmReceiver(fd, offer.ringBytes);
    } catch (err) {
      fs.closeSync(fd);
      return (err as Error).message;
    }
  }

  /** Whether `len` bytes at `pos` lie inside the ring. */
  contains(pos: number, len: number): boolean {
    return Number.isInteger(pos) && pos >= 0 && len >= 0 && pos + len <= this.ringBytes;
  }

  /** Reads `into.length` bytes at ring position `pos` into `into`; false if out of the ring. */
  read(pos: number, into: Buffer): boolean {
    if (this.fd === null || !this.contains(pos, into.length)) return false;
    let done = 0;
    while (done < into.length) {
      const n = fs.readSync(this.fd, into, done, into.length - done, RING_HEAD_BYTES + pos + done);
      if (n <= 0) return false;
      done += n;
    }
    return true;
  }

  close(): void {
    if (this.fd !== null) fs.closeSync(this.fd);
    this.fd = null;
  }
}
