import { describe, expect, it } from 'vitest';
import { CommError, opError } from '../../workers/comm/errors.js';
import { closeLingerMs } from '../../workers/comm/transport/connection.js';

describe('comm errors keep their cause when re-attributed to another op', () => {
  it('a link error that itself says "failed" survives forOp whole', () => {
    const first = opError('peer-lost', 'recv[tag 4]', 'world', 7, 0, 'connection to peer rank 0 failed: write EPIPE');
    const other = first.forOp('allReduce', 'dp[0,2]', 3);
    expect(other.message).toBe('allReduce on group dp[0,2] seq 3 failed, peer rank 0: connection to peer rank 0 failed: write EPIPE');
    expect(other).toMatchObject({ code: 'peer-lost', op: 'allReduce', group: 'dp[0,2]', seq: 3, peer: 0 });
    // and once more: the prefix never grows or eats the reason
    expect(other.forOp('barrier', 'world', 9).reason()).toBe('connection to peer rank 0 failed: write EPIPE');
  });

  it('an op name with spaces and a group without a peer', () => {
    const e = opError('timeout', 'send[tag 3]', 'pp stage 1', 0, undefined, 'deadline of 1500 ms passed');
    expect(e.reason()).toBe('deadline of 1500 ms passed');
    expect(e.forOp('recv[tag 9]', 'pp stage 1', 1).message).toBe(
      'recv[tag 9] on group pp stage 1 seq 1 failed: deadline of 1500 ms passed',
    );
  });

  it('a plain CommError (no op prefix) is its own reason', () => {
    expect(new CommError('process group world was destroyed', { code: 'closed' }).reason()).toBe('process group world was destroyed');
  });
});

describe('a closing rank lingers as long as its peers would wait for it', () => {
  it('the heartbeat window, at least 3 s', () => {
    expect(closeLingerMs({ intervalMs: 1000, missed: 15 })).toBe(15_000);
    expect(closeLingerMs({ intervalMs: 250, missed: 4 })).toBe(3000);
    expect(closeLingerMs({ intervalMs: 0, missed: 15 })).toBe(3000);
  });
});
