import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { type MachineProfile, MachineProfileSchema } from '../../common/advisor/profile.js';
import { AdviseResultSchema } from '../../common/advisor/types.js';
import { tempDir } from '../cli/helpers.js';
import { type AgentProcess, controller, startAgent } from './agent-helpers.js';

// `shardwise profile` on a controller paired with a real agent process on loopback: the link to
// the agent is measured over its authenticated channel and stored as links[kind 'agent'], an
// agent that is gone is reported without failing the profile, a peer that has not proven a key
// gets no link-test answer, and `shardwise plan` across the agent prices the layout with that link.

/** One frame before any handshake; everything the agent sends back, and how it closes. */
function unauthenticated(port: number, frame: string): Promise<{ frames: string[]; closeCode: number }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}`);
    const frames: string[] = [];
    ws.on('open', () => ws.send(frame));
    ws.on('message', (d: Buffer) => frames.push(d.toString()));
    ws.on('close', (closeCode) => resolve({ frames, closeCode }));
    ws.on('error', reject);
    setTimeout(() => ws.terminate(), 10_000);
  });
}

const comm = (planJson: string) =>
  AdviseResultSchema.parse(JSON.parse(planJson))
    .layouts.filter((l) => l.layout.world === 2)
    .reduce((a, l) => a + l.time.comm_exposed_ms, 0);

describe('the link to a paired agent (real agent processes on loopback)', () => {
  let agent: AgentProcess;
  let gone: AgentProcess;
  let addr: string;
  let goneAddr: string;
  const home = tempDir('controller-link');

  beforeAll(async () => {
    [agent, gone] = await Promise.all([startAgent(['--port', '0']), startAgent(['--port', '0'])]);
    addr = `127.0.0.1:${agent.port}`;
    goneAddr = `127.0.0.1:${gone.port}`;
    for (const [a, at] of [
      [agent, addr],
      [gone, goneAddr],
    ] as const) {
      const p = controller(home, ['pair', at, '--code', a.codes.at(-1)!]);
      expect(p.code, p.stderr).toBe(0);
    }
    await gone.stop();
  });
  afterAll(() => agent?.stop());

  it('a peer that has not proven a key gets no link-test answer: the socket is closed', async () => {
    const r = await unauthenticated(agent.port, JSON.stringify({ id: 0, method: 'link-test', data: '', reply_bytes: 1024 }));
    expect(r.frames).toEqual([]);
    expect(r.closeCode).toBe(4002);
  });

  it('profile --json measures the agent link; the stopped agent is reported, not fatal; plan across the agent uses the link', () => {
    const r = controller(home, ['profile', '--json', '--quick', '--refresh']);
    expect(r.code, r.stderr).toBe(0);
    const p = MachineProfileSchema.parse(JSON.parse(r.stdout));
    expect(p.duration_ms!).toBeLessThanOrEqual(30_000);
    const link = p.links.find((l) => l.kind === 'agent' && l.peer === addr);
    expect(link, JSON.stringify(p.links)).toBeDefined();
    expect(link!.gbps).toBeGreaterThan(0);
    expect(link!.latency_us).toBeGreaterThan(0);
    // the local links are kept beside it, and the agent that is gone is named with why
    expect(p.links.some((l) => l.kind === 'shm' || l.kind === 'tcp')).toBe(true);
    expect(p.links.some((l) => l.peer === goneAddr)).toBe(false);
    expect(p.link_errors).toEqual([
      expect.objectContaining({ kind: 'agent', peer: goneAddr, error: expect.stringMatching(/cannot reach/) }),
    ]);

    const plan = ['plan', '--preset', 'tiny', '--batch-size', '8', '--seq-len', '64', '--placement', `local,${addr}`, '--json'];
    const measured = controller(home, plan);
    expect(measured.code, measured.stderr).toBe(0);
    const notes = AdviseResultSchema.parse(JSON.parse(measured.stdout)).notes;
    expect(notes).toContain(
      `the link to ${addr}: ${link!.gbps.toFixed(3)} GB/s, ${link!.latency_us.toFixed(0)} µs, measured by 'shardwise profile' at ${p.machine.measured_at}`,
    );
    expect(notes.join('\n')).not.toMatch(/default link speed/);

    // the same plan with that link made 1000x slower in the stored profile: communication costs more
    const file = path.join(home, 'machine-profile.json');
    const slow: MachineProfile = JSON.parse(readFileSync(file, 'utf8'));
    slow.links = slow.links.map((l) => (l.peer === addr ? { ...l, gbps: l.gbps / 1000 } : l));
    writeFileSync(file, JSON.stringify(slow));
    const slower = controller(home, plan);
    expect(slower.code, slower.stderr).toBe(0);
    expect(comm(slower.stdout)).toBeGreaterThan(comm(measured.stdout));
  });
});
