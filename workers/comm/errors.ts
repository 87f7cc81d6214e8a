// Errors of the communication layer. A failed collective always says which operation, which
// group, which sequence number and which peer rank, so a user can tell a dead rank from a bug.

export type CommErrorCode =
  | 'peer-lost' // a peer's connection closed or errored
  | 'timeout' // the operation's deadline passed
  | 'protocol' // a malformed, oversized or out-of-sequence frame
  | 'mismatch' // ranks called different collectives / sizes under one sequence number
  | 'aborted' // an earlier failure aborted the group
  | 'invalid' // bad arguments (caught before anything is sent)
  | 'closed'; // the process group was destroyed

export interface CommErrorInfo {
  code: CommErrorCode;
  op?: string;
  group?: string;
  seq?: number;
  /** global rank of the peer involved, when one is */
  peer?: number;
  cause?: unknown;
}

export class CommError extends Error {
  readonly code: CommErrorCode;
  readonly op?: string;
  readonly group?: string;
  readonly seq?: number;
  readonly peer?: number;

  constructor(message: string, info: CommErrorInfo) {
    super(message, info.cause !== undefined ? { cause: info.cause } : undefined);
    this.name = 'CommError';
    this.code = info.code;
    this.op = info.op;
    this.group = info.group;
    this.seq = info.seq;
    this.peer = info.peer;
  }

  /** The same failure, re-attributed to another operation of the group (for fail-all). */
  forOp(op: string, group: string, seq: number): CommError {
    const where = `${op} on group ${group} seq ${seq}`;
    const peer = this.peer !== undefined ? `, peer rank ${this.peer}` : '';
    const reason = this.reason();
    return new CommError(`${where} failed${peer}: ${reason}`, {
      code: this.code === 'aborted' ? 'aborted' : this.code,
      op,
      group,
      seq,
      peer: this.peer,
      cause: this,
    });
  }

  /** the message without the "<op> on group <g> seq <n> failed" prefix */
  reason(): string {
    // lazy up to the first "seq <n> failed": the reason itself may say "failed" (a link's error)
    const m = /^.*? on group .*? seq \d+ failed(?:, peer rank \d+)?: (.*)$/s.exec(this.message);
    return m ? m[1] : this.message;
  }
}

export function opError(
  code: CommErrorCode,
  op: string,
  group: string,
  seq: number,
  peer: number | undefined,
  reason: string,
  cause?: unknown,
): CommError {
  const p = peer !== undefined ? `, peer rank ${peer}` : '';
  return new CommError(`${op} on group ${group} seq ${seq} failed${p}: ${reason}`, { code, op, group, seq, peer, cause });
}

/** A frame that breaks the wire contract: the connection it came on is closed. */
export class FrameError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FrameError';
  }
}
