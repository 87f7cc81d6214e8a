import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempDir } from '../cli/helpers.js';
import { type AgentProcess, controller, startAgent } from './agent-helpers.js';
import { netnsUnavailable, type TwoMachines, twoMachines } from './netns.js';

// Two machines as two network namespaces joined by a veth pair: an agent in A announces itself
// over mDNS, a controller in B discovers it within 5 s, pairs with the code and reads its
// devices. Skipped, with the reason printed, where namespaces cannot be made.
const why = netnsUnavailable();
if (why) console.warn(`agent-netns tests skipped: ${why}`);

describe.skipIf(why !== null)('LAN agent across two network namespaces (mDNS discovery, pairing)', () => {
  let net: TwoMachines;
  let agent: AgentProcess;
  const home = tempDir('controller-ns');

  beforeAll(async () => {
    net = twoMachines();
    agent = await startAgent(['--host', '0.0.0.0', '--port', '7341', '--name', 'machine-a'], net.exec(net.a.ns));
    await agent.waitFor(/announcing _shardwise\._tcp/);
  });
  afterAll(async () => {
    await agent?.stop();
    net?.destroy();
  });

  it('the controller in B finds the agent in A over mDNS within 5 s, at its address in A', () => {
    const r = controller(home, ['peers', '--wait', '5', '--json'], net.exec(net.b.ns));
    expect(r.code, r.stderr).toBe(0);
    const { agents } = JSON.parse(r.stdout);
    const found = agents.find((x: { name: string }) => x.name.startsWith('machine-a'));
    expect(found, `announced agents: ${r.stdout}`).toBeDefined();
    expect(found.address).toBe(`${net.a.ip}:7341`);
    expect(found.paired).toBe(false);
  });

  it('pairs across the link with the code, then reads machine and devices; unpaired it got nothing', () => {
    const addr = `${net.a.ip}:7341`;
    const before = controller(home, ['peer', addr], net.exec(net.b.ns));
    expect(before.code).not.toBe(0);
    expect(before.stderr).toMatch(/not paired/);

    const p = controller(home, ['pair', addr, '--code', agent.codes.at(-1)!], net.exec(net.b.ns));
    expect(p.code, p.stderr).toBe(0);
    const info = controller(home, ['peer', addr, '--json'], net.exec(net.b.ns));
    expect(info.code, info.stderr).toBe(0);
    const j = JSON.parse(info.stdout);
    expect(j.machine.agentName).toBe('machine-a');
    expect(j.devices.adapters.length).toBeGreaterThan(0);

    const listed = controller(home, ['peers', '--wait', '3', '--json'], net.exec(net.b.ns));
    expect(JSON.parse(listed.stdout).agents.find((x: { name: string }) => x.name.startsWith('machine-a')).paired).toBe(true);
  });
});
