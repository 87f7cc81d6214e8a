// The controller's LAN peers for the API: agents announced over mDNS (src-main/cluster/
// discovery.ts), addresses a user added, and agents paired earlier (ControllerIdentity). mDNS
// starts on first use and is optional: where multicast is unavailable the list still holds the
// added and paired peers.
import { ApiError, type Peer, type PeerDetail } from '../../common/api/index.js';
import { AgentError, connectAgent, pairAgent } from '../cluster/agent-client.js';
import { ControllerIdentity } from '../cluster/controller-identity.js';
import { type Discovery, discoverAgents } from '../cluster/discovery.js';

export class PeerRegistry {
  private discovery: Discovery | null = null;
  private identity: ControllerIdentity | null = null;
  private readonly added = new Map<string, { name: string | null }>();

  constructor(private readonly useMdns = process.env.SHARDWISE_NO_MDNS !== '1') {}

  /** this controller's identity and the keys of the agents it paired with */
  me(): ControllerIdentity {
    if (!this.identity) {
      try {
        this.identity = new ControllerIdentity();
      } catch (e) {
        throw new ApiError('ConfigError', (e as Error).message);
      }
    }
    return this.identity;
  }

  private discover(): Discovery | null {
    if (!this.useMdns) return null;
    if (!this.discovery) {
      try {
        this.discovery = discoverAgents();
      } catch {
        return null; // no multicast here: added and paired peers only
      }
    }
    return this.discovery;
  }

  list(): Peer[] {
    const me = this.me();
    const announced = this.discover()?.agents() ?? [];
    const byAddress = new Map<string, Peer>();
    for (const a of me.state.agents) {
      byAddress.set(a.address, {
        address: a.address,
        name: a.agentName,
        agentId: a.agentId,
        state: 'paired',
        announced: false,
        pairedAt: a.pairedAt,
      });
    }
    for (const d of announced) {
      const paired = me.agent(d.agentId);
      const key = paired?.address ?? d.address;
      const prev = byAddress.get(key);
      byAddress.set(
        key,
        prev
          ? { ...prev, announced: true }
          : { address: d.address, name: d.name, agentId: d.agentId, state: 'discovered', announced: true, pairedAt: null },
      );
    }
    for (const [address, a] of this.added) {
      if (!byAddress.has(address))
        byAddress.set(address, { address, name: a.name, agentId: null, state: 'added', announced: false, pairedAt: null });
    }
    const order = { paired: 0, discovered: 1, added: 2 } as const;
    return [...byAddress.values()].sort((a, b) => order[a.state] - order[b.state] || a.address.localeCompare(b.address));
  }

  add(address: string): Peer {
    if (!this.added.has(address)) this.added.set(address, { name: null });
    return this.list().find((p) => p.address === address)!;
  }

  async pair(address: string, code: string): Promise<Peer> {
    try {
      const s = await pairAgent(address, code, this.me());
      s.close();
    } catch (e) {
      if (e instanceof AgentError) throw new ApiError('PairingError', e.message);
      throw e;
    }
    this.added.delete(address);
    return this.list().find((p) => p.address === address)!;
  }

  async inspect(address: string): Promise<PeerDetail> {
    try {
      const s = await connectAgent(address, this.me());
      try {
        const machine = await s.request('machine');
        const devices = await s.request('devices');
        const pings = [];
        for (let i = 0; i < 4; i++) pings.push(await s.ping());
        const clock = pings.reduce((a, b) => (b.rttMs < a.rttMs ? b : a));
        const adapters = devices.adapters.map((a) => ({
          index: a.index,
          description: a.description || a.device,
          backend: a.backend,
          isSoftware: a.isSoftware,
        }));
        return { address, machine, adapters, clock };
      } finally {
        s.close();
      }
    } catch (e) {
      if (e instanceof AgentError) throw new ApiError('PeerError', e.message);
      throw e;
    }
  }

  async close() {
    await this.discovery?.stop();
    this.discovery = null;
  }
}
