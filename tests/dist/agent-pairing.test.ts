import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { AGENT_PROTOCOL_VERSION } from '../../workers/protocol/agent.js';
import {
  authMac,
  ephemeralKey,
  newPeerId,
  nonce,
  normalizePairingCode,
  pairingKeys,
  sharedSecret,
} from '../../workers/protocol/pairing-crypto.js';
import { tempDir } from '../cli/helpers.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { type AgentProcess, controller, startAgent } from './agent-helpers.js';

// A real agent process on loopback and controllers that are real CLI processes or raw sockets:
// nothing but the handshake is answered before pairing, codes are one-time and retired after
// wrong guesses, recorded handshakes cannot be replayed, and a paired controller gets the
// machine, its devices and a clock offset.

interface RawResult {
  /** every frame the agent sent */
  frames: string[];
  closeCode: number;
  closeReason: string;
}

/** Send frames one after another (each after the agent's previous answer, or at once) and record everything until the close. */
function raw(port: number, frames: (string | Buffer | ((received: string[]) => string))[]): Promise<RawResult> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}`);
    const got: string[] = [];
    let i = 0;
    const sendNext = () => {
      const f = frames[i++];
      if (f === undefined) return;
      ws.send(typeof f === 'function' ? f(got) : f);
    };
    ws.on('open', sendNext);
    ws.on('message', (d: Buffer) => {
      got.push(d.toString());
      sendNext();
    });
    ws.on('close', (code, reason) => resolve({ frames: got, closeCode: code, closeReason: reason.toString() }));
    ws.on('error', reject);
    setTimeout(() => ws.terminate(), 15_000);
  });
}

describe('LAN agent pairing and authentication (real agent process on loopback)', () => {
  let agent: AgentProcess;
  let addr: string;
  const home = tempDir('controller');

  beforeAll(async () => {
    agent = await startAgent(['--port', '0']);
    addr = `127.0.0.1:${agent.port}`;
  });
  afterAll(() => agent?.stop());

  it('an unpaired client gets nothing but a close: requests, unknown controllers, garbage and oversized frames', async () => {
    const request = await raw(agent.port, [JSON.stringify({ id: 0, method: 'machine' })]);
    expect(request.frames).toEqual([]);
    expect(request.closeCode).toBe(4002);

    const unknown = await raw(agent.port, [
      JSON.stringify({ t: 'auth-hello', v: AGENT_PROTOCOL_VERSION, controllerId: newPeerId(), nonce: nonce() }),
    ]);
    expect(unknown.frames).toEqual([]);
    expect(unknown.closeCode).toBe(4003);
    expect(unknown.closeReason).toMatch(/not paired/);

    const garbage = await raw(agent.port, [Buffer.from([0xde, 0xad, 0xbe, 0xef])]);
    expect(garbage.frames).toEqual([]);
    expect(garbage.closeCode).toBe(4002);
    const big = await raw(agent.port, ['x'.repeat(10_000)]);
    expect(big.frames).toEqual([]);

    // the CLI says so in one line and exits non-zero
    const r = controller(home, ['peer', addr]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/not paired/);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    // and the agent keeps serving
    expect(agent.child.exitCode).toBeNull();
  });

  it('a wrong code is refused, and 3 wrong codes retire the code the agent shows: the old one never pairs from there', async () => {
    const before = agent.codes.at(-1)!;
    for (let k = 0; k < 3; k++) {
      const r = controller(home, ['pair', addr, '--code', k === 0 ? 'AAAAA-AAAAA' : `BBBBB-BBBB${k}`]);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toMatch(
        k < 2
          ? /pairing refused: wrong code, or one the agent retired/
          : /wrong code, 3 of 3 from 127\.0\.0\.1: the agent now shows a new code; next try in 1 s/,
      );
    }
    await agent.waitFor(/pairing code: \S+ \(the previous one was retired for 127\.0\.0\.1 after 3 wrong codes from it/);
    expect(agent.codes.at(-1)).not.toBe(before);
    await sleep(1100);
    // the retired code no longer pairs from this address, though it is the right one
    const old = controller(home, ['pair', addr, '--code', before]);
    expect(old.code).not.toBe(0);
    expect(old.stderr).toMatch(/pairing refused: wrong code, or one the agent retired; use the code it shows now; next try in 2 s/);
    // malformed codes never reach the agent
    const bad = controller(home, ['pair', addr, '--code', 'xyz']);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/not a pairing code/);
    await sleep(2100);
  });

  it('a recorded successful pairing replayed on a new connection is refused, and the code is one-time', async () => {
    const code = normalizePairingCode(agent.codes.at(-1)!)!;
    const eph = ephemeralKey();
    const hello = {
      t: 'pair-hello',
      v: AGENT_PROTOCOL_VERSION,
      controllerId: newPeerId(),
      controllerName: 'recorder',
      pub: eph.pub,
      nonce: nonce(),
    };
    let proofFrame = '';
    const first = await raw(agent.port, [
      JSON.stringify(hello),
      (got) => {
        const ch = JSON.parse(got[0]!);
        const t = {
          controllerId: hello.controllerId,
          controllerName: hello.controllerName,
          controllerPub: eph.pub,
          controllerNonce: hello.nonce,
          agentPub: ch.pub,
          agentNonce: ch.nonce,
        };
        proofFrame = JSON.stringify({ t: 'pair-proof', mac: pairingKeys(t, sharedSecret(eph, ch.pub), code).controllerMac });
        return proofFrame;
      },
      // after pair-done the session is open: ask something, then leave
      JSON.stringify({ id: 1, method: 'ping', t0: 0 }),
      () => '{"id":2,"method":"nope"}',
    ]);
    expect(first.frames.map((f) => JSON.parse(f).t ?? 'reply')).toEqual(['pair-challenge', 'pair-done', 'reply']);
    await agent.waitFor(/\(the previous one was used\)/);

    const replay = await raw(agent.port, [JSON.stringify(hello), proofFrame]);
    expect(replay.frames.map((f) => JSON.parse(f).t)).toEqual(['pair-challenge']);
    expect(replay.closeCode).toBe(4003);
    expect(replay.closeReason).toMatch(/wrong code/);
  });

  it('pairing with the shown code, then machine, devices (SwiftShader, software) and a clock offset with the stored key', async () => {
    const code = agent.codes.at(-1)!;
    const p = controller(home, ['pair', addr, '--code', code.toLowerCase(), '--json']);
    expect(p.code, p.stderr).toBe(0);
    const paired = JSON.parse(p.stdout);
    expect(paired.paired).toBe(true);

    // the same code does not pair a second controller
    const again = controller(tempDir('controller2'), ['pair', addr, '--code', code]);
    expect(again.code).not.toBe(0);

    const info = controller(home, ['peer', addr, '--json']);
    expect(info.code, info.stderr).toBe(0);
    const j = JSON.parse(info.stdout);
    expect(j.machine.agentId).toBe(paired.agentId);
    expect(j.machine.cpus).toBeGreaterThan(0);
    expect(j.devices.adapters.length).toBeGreaterThan(0);
    expect(j.devices.adapters[0].isSoftware).toBe(true);
    // one machine: the estimated offset is within the round trip of zero
    expect(Math.abs(j.clock.offsetMs)).toBeLessThanOrEqual(j.clock.rttMs / 2 + 2);

    // an unpaired controller gets nothing
    const stranger = controller(tempDir('controller3'), ['peer', addr]);
    expect(stranger.code).not.toBe(0);
    expect(agent.child.exitCode).toBeNull();
  });

  it('a recorded successful authentication replayed is refused; a wrong key is refused', async () => {
    const me = JSON.parse(readFileSync(path.join(home, 'controller.json'), 'utf8'));
    const key: string = me.agents[0].key;
    const hello = { t: 'auth-hello', v: AGENT_PROTOCOL_VERSION, controllerId: me.controllerId, nonce: nonce() };
    let proofFrame = '';
    const proof = (k: string) => (got: string[]) => {
      const ch = JSON.parse(got[0]!);
      proofFrame = JSON.stringify({
        t: 'auth-proof',
        mac: authMac(k, 'controller', me.controllerId, me.agents[0].agentId, hello.nonce, ch.nonce),
      });
      return proofFrame;
    };
    const ok = await raw(agent.port, [JSON.stringify(hello), proof(key), JSON.stringify({ id: 7, method: 'machine' }), '{}']);
    expect(ok.frames.map((f) => JSON.parse(f).t ?? `reply ${JSON.parse(f).id}`)).toEqual(['auth-challenge', 'auth-ok', 'reply 7']);

    const replay = await raw(agent.port, [JSON.stringify(hello), proofFrame]);
    expect(replay.frames.map((f) => JSON.parse(f).t)).toEqual(['auth-challenge']);
    expect(replay.closeCode).toBe(4003);

    const wrongKey = await raw(agent.port, [JSON.stringify({ ...hello, nonce: nonce() }), proof('ab'.repeat(32))]);
    expect(wrongKey.frames.map((f) => JSON.parse(f).t)).toEqual(['auth-challenge']);
    expect(wrongKey.closeReason).toMatch(/authentication failed/);
  });

  it('a DDP run with rank 1 on the agent (device picked by index) trains; placement errors name the entry', () => {
    const out = path.join(tempDir('placed'), 'run');
    const r = controller(home, [
      'train',
      '--preset',
      'tiny',
      '--steps',
      '3',
      '--strategy',
      'ddp',
      '--world',
      '2',
      '--eval-interval',
      '0',
      '--json',
      '--out',
      out,
      '--placement',
      `local@0,${addr}@0`,
    ]);
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines.find((m) => m.type === 'ranks').ranks.map((x: { machine: string }) => x.machine)).toEqual([
      'this machine',
      `${JSON.parse(readFileSync(path.join(home, 'controller.json'), 'utf8')).agents[0].agentName} (${addr})`,
    ]);
    expect(lines.filter((m) => m.type === 'step')).toHaveLength(3);
    // the run folder records it as API-launched runs do
    expect(JSON.parse(readFileSync(path.join(out, 'state.json'), 'utf8')).ranks.map((x: { machine: string }) => x.machine)).toEqual(
      lines.find((m) => m.type === 'ranks').ranks.map((x: { machine: string }) => x.machine),
    );

    const wrongCount = controller(home, ['train', '--strategy', 'ddp', '--world', '2', '--placement', 'local']);
    expect(wrongCount.code).not.toBe(0);
    expect(wrongCount.stderr).toMatch(/names 1 rank\(s\), the run has world 2/);
    const remoteZero = controller(home, ['train', '--strategy', 'ddp', '--world', '2', '--placement', `${addr},local`]);
    expect(remoteZero.stderr).toMatch(/rank 0 must be "local"/);
    const unpaired = controller(tempDir('controller4'), ['train', '--strategy', 'ddp', '--world', '2', '--placement', `local,${addr}`]);
    expect(unpaired.code).not.toBe(0);
    expect(unpaired.stderr).toMatch(/not paired/);
    const noAdapter = controller(home, ['train', '--strategy', 'ddp', '--world', '2', '--placement', `local,${addr}@no-such-gpu`]);
    expect(noAdapter.code).not.toBe(0);
    expect(noAdapter.stderr).toMatch(/rank 1 on agent .*: no adapter matches "no-such-gpu"; available: .*SwiftShader/);
  });

  it('bad command lines: one clear line and a non-zero exit', () => {
    const port = controller(home, ['agent', '--port', 'abc']);
    expect(port.code).toBe(2);
    expect(port.stderr).toMatch(/--port must be an integer/);
    const addrBad = controller(home, ['peer', 'not an address']);
    expect(addrBad.code).not.toBe(0);
    expect(addrBad.stderr).toMatch(/HOST:PORT/);
    const noCode = controller(home, ['pair', addr]);
    expect(noCode.code).not.toBe(0);
    expect(noCode.stderr).toMatch(/--code/);
  });
});
