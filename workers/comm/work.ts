// The handle a collective returns (c10d's Work): wait() resolves with the result when the
// operation is done on this rank (its buffers may then be reused), and rejects with a
// CommError that names the operation, group, sequence number and peer otherwise.
import type { CommError } from './errors.js';

export class Work<T = void> {
  private state: 'pending' | 'ok' | 'failed' = 'pending';
  private error: CommError | undefined;
  private readonly promise: Promise<T>;
  private settle!: { resolve: (v: T) => void; reject: (e: CommError) => void };
  /** epoch ms when the operation was posted, and when it finished (NaN while pending) */
  readonly startTime: number;
  endTime = NaN;

  constructor(
    readonly op: string,
    readonly group: string,
    readonly seq: number,
    startTime: number,
    private readonly onWaitTimeout?: (ms: number) => void,
  ) {
    this.startTime = startTime;
    this.promise = new Promise<T>((resolve, reject) => (this.settle = { resolve, reject }));
    this.promise.catch(() => {}); // a failure nobody waits for must not crash the process
  }

  /**
   * Resolves when the operation has completed. With `timeoutMs`, an operation still pending
   * after that long is failed (and its group aborted), like c10d's wait(timeout).
   */
  wait(timeoutMs?: number): Promise<T> {
    if (timeoutMs !== undefined && this.state === 'pending') {
      const t = setTimeout(() => this.onWaitTimeout?.(timeoutMs), timeoutMs);
      t.unref();
      this.promise.then(
        () => clearTimeout(t),
        () => clearTimeout(t),
      );
    }
    return this.promise;
  }

  isCompleted(): boolean {
    return this.state !== 'pending';
  }
  isSuccess(): boolean {
    return this.state === 'ok';
  }
  exception(): CommError | undefined {
    return this.error;
  }
  get durationMs(): number {
    return this.endTime - this.startTime;
  }

  /**
   * A Work that settles once this one has, with `f` of its result (a wrapper that finishes the
   * operation on the host: copying a padded result back); a wait with a timeout fails both alike.
   */
  map<U>(f: (value: T) => U): Work<U> {
    const w = new Work<U>(this.op, this.group, this.seq, this.startTime, this.onWaitTimeout);
    this.promise.then(
      (v) => w._resolve(f(v), this.endTime),
      (e: CommError) => w._reject(e, this.endTime),
    );
    return w;
  }

  /** @internal */
  _resolve(value: T, end: number): void {
    if (this.state !== 'pending') return;
    this.state = 'ok';
    this.endTime = end;
    this.settle.resolve(value);
  }
  /** @internal */
  _reject(err: CommError, end: number): void {
    if (this.state !== 'pending') return;
    this.state = 'failed';
    this.error = err;
    this.endTime = end;
    this.settle.reject(err);
  }
}
