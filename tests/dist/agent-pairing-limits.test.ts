import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { AGENT_PROTOCOL_VERSION } from '../../workers/protocol/agent.js';
import { ephemeralKey, newPeerId, nonce, normalizePairingCode, pairingKeys, sharedSecret } from '../../workers/protocol/pairing-crypto.js';
import { type AgentProcess, startAgent } from './agent-helpers.js';

// Pairing limits on a real agent process, from several loopback source addresses (127.0.0.2 and
// 127.0.0.3 reach the agent on 127.0.0.1 through the loopback interface): a flood of wrong codes
// from one address backs off and does not take the shown code from another, and the challenge
// before the proof names nothing.

interface Attempt {
  frames: Record<string, unknown>[];
  closeCode: number;
  closeReason: string;
}

/** One full pairing attempt with `code` from `from`: hello, the proof once challenged, then the agent's answer. */
function pairFrom(port: number, from: string, code: string, proveAfter?: Promise<unknown>): Promise<Attempt> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}`, { localAddress: from });
    const eph = ephemeralKey();
    const hello = {
      t: 'pair-hello',
      v: AGENT_PROTOCOL_VERSION,
      controllerId: newPeerId(),
      controllerName: `from ${from}`,
      pub: eph.pub,
      nonce: nonce(),
    };
    const frames: Record<string, unknown>[] = [];
    ws.on('open', () => ws.send(JSON.stringify(hello)));
    ws.on('message', (d: Buffer) => {
      const m = JSON.parse(d.toString());
      frames.push(m);
      if (m.t !== 'pair-challenge') return ws.close();
      const t = {
        controllerId: hello.controllerId,
        controllerName: hello.controllerName,
        controllerPub: eph.pub,
        controllerNonce: hello.nonce,
        agentPub: m.pub,
        agentNonce: m.nonce,
      };
      const proof = JSON.stringify({
        t: 'pair-proof',
        mac: pairingKeys(t, sharedSecret(eph, m.pub), normalizePairingCode(code)!).controllerMac,
      });
      void (proveAfter ?? Promise.resolve()).then(() => ws.send(proof));
    });
    ws.on('close', (closeCode, reason) => resolve({ frames, closeCode, closeReason: reason.toString() }));
    ws.on('error', reject);
    setTimeout(() => ws.terminate(), 20_000);
  });
}

describe('pairing limits per source address (real agent process on loopback)', () => {
  let agent: AgentProcess;
  beforeAll(async () => {
    agent = await startAgent(['--port', '0']);
  });
  afterAll(() => agent?.stop());

  it('the challenge before the proof carries only a public key and a nonce: no agent id, no hostname', async () => {
    const agentId8 = agent.stdout().match(/shardwise agent ([0-9a-f]{8}) listening/)![1]!;
    const r = await pairFrom(agent.port, '127.0.0.1', 'ZZZZZ-ZZZZZ');
    expect(Object.keys(r.frames[0]!).sort()).toEqual(['nonce', 'pub', 't']);
    const text = JSON.stringify(r.frames[0]);
    expect(text).not.toContain(agentId8);
    expect(text).not.toContain(os.hostname());
    expect(r.closeReason).toBe('pairing refused: wrong code, or one the agent retired; use the code it shows now');
  });

  it('a flood of wrong codes from 127.0.0.2 backs off and does not stop 127.0.0.3 pairing with the code shown before it', async () => {
    const shown = agent.codes.at(-1)!;
    const seen: string[] = [];
    for (let k = 0; k < 6; k++) seen.push((await pairFrom(agent.port, '127.0.0.2', `WRONG-0000${k}`)).closeReason);
    expect(seen.slice(0, 2)).toEqual(Array(2).fill('pairing refused: wrong code, or one the agent retired; use the code it shows now'));
    expect(seen[2]).toBe('pairing refused: wrong code, 3 of 3 from 127.0.0.2: the agent now shows a new code; next try in 1 s');
    // the rest are refused unchecked, before any challenge, with the wait
    expect(seen.slice(3)).toEqual(
      Array(3).fill(expect.stringMatching(/^pairing refused: 3 wrong codes from 127\.0\.0\.2; wait 1 s before the next try$/)),
    );
    await agent.waitFor(/the previous one was retired for 127\.0\.0\.2 after 3 wrong codes from it; from elsewhere it pairs for 60 s more/);
    expect(agent.codes.at(-1)).not.toBe(shown);

    // the backoff doubles: after 1 s the next wrong code is checked, then 2 s
    await sleep(1100);
    const fourth = await pairFrom(agent.port, '127.0.0.2', 'WRONG-00009');
    expect(fourth.frames.map((f) => f.t)).toEqual(['pair-challenge']);
    expect(fourth.closeReason).toBe('pairing refused: wrong code, or one the agent retired; use the code it shows now; next try in 2 s');
    // even the right code from there is not checked while it waits
    const early = await pairFrom(agent.port, '127.0.0.2', agent.codes.at(-1)!);
    expect(early.frames).toEqual([]);
    expect(early.closeReason).toMatch(/^pairing refused: 4 wrong codes from 127\.0\.0\.2; wait [12] s before the next try$/);

    // the owner at 127.0.0.3 types the code it read before the flood: it pairs
    const owner = await pairFrom(agent.port, '127.0.0.3', shown);
    expect(owner.frames.map((f) => f.t)).toEqual(['pair-challenge', 'pair-done']);
    expect(owner.frames[1]).toMatchObject({ agentId: expect.stringMatching(/^[0-9a-f]{32}$/), agentName: os.hostname().slice(0, 64) });
    await agent.waitFor(/\(the previous one was used\)/);
  });

  it('the shown code once used pairs nowhere again, and the fresh one pairs', async () => {
    const fresh = agent.codes.at(-1)!;
    const used = agent.codes.at(-2)!;
    const again = await pairFrom(agent.port, '127.0.0.3', used);
    expect(again.closeReason).toBe('pairing refused: wrong code, or one the agent retired; use the code it shows now');
    const ok = await pairFrom(agent.port, '127.0.0.3', fresh);
    expect(ok.frames.map((f) => f.t)).toEqual(['pair-challenge', 'pair-done']);
  });

  it('a connection opened before 3 wrong codes from its address cannot pair with the retired code afterwards', async () => {
    const before = agent.codes.at(-1)!;
    let release!: () => void;
    const held = pairFrom(agent.port, '127.0.0.4', before, new Promise<void>((r) => (release = r)));
    await sleep(300);
    for (let k = 0; k < 3; k++) await pairFrom(agent.port, '127.0.0.4', `WRONG-1111${k}`);
    await agent.waitFor(/retired for 127\.0\.0\.4 after 3 wrong codes/);
    await sleep(1100);
    release();
    const r = await held;
    expect(r.frames.map((f) => f.t)).toEqual(['pair-challenge']);
    expect(r.closeReason).toBe('pairing refused: wrong code, or one the agent retired; use the code it shows now; next try in 2 s');
  });
});
