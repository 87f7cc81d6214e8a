// Finds agents on the LAN over mDNS/DNS-SD (_shardwise._tcp). What an announcement says is only
// a hint of where to connect: an agent is believed after it proves its pairing key.
import { Bonjour, type Service } from 'bonjour-service';
import { AGENT_SERVICE_TYPE } from '../../workers/protocol/agent.js';

export interface DiscoveredAgent {
  agentId: string;
  name: string;
  /** HOST:PORT to connect to (the first IPv4 address announced) */
  address: string;
  addresses: string[];
  port: number;
  host: string;
}

function toAgent(s: Service): DiscoveredAgent | null {
  const id = typeof s.txt?.id === 'string' ? s.txt.id : '';
  if (!/^[0-9a-f]{32}$/.test(id)) return null;
  const addresses = s.addresses ?? [];
  const v4 = addresses.find((a) => /^\d+\.\d+\.\d+\.\d+$/.test(a));
  const host = v4 ?? (addresses[0] ? `[${addresses[0]}]` : s.host);
  return { agentId: id, name: s.name, address: `${host}:${s.port}`, addresses, port: s.port, host: s.host };
}

export interface Discovery {
  agents(): DiscoveredAgent[];
  onFound(cb: (a: DiscoveredAgent) => void): void;
  stop(): Promise<void>;
}

export function discoverAgents(): Discovery {
  const bonjour = new Bonjour();
  const found = new Map<string, DiscoveredAgent>();
  const listeners: ((a: DiscoveredAgent) => void)[] = [];
  const browser = bonjour.find({ type: AGENT_SERVICE_TYPE });
  browser.on('up', (s: Service) => {
    const a = toAgent(s);
    if (!a || found.has(a.agentId)) return;
    found.set(a.agentId, a);
    for (const l of listeners) l(a);
  });
  browser.on('down', (s: Service) => {
    const a = toAgent(s);
    if (a) found.delete(a.agentId);
  });
  return {
    agents: () => [...found.values()],
    onFound: (cb) => listeners.push(cb),
    stop: () =>
      new Promise<void>((resolve) => {
        browser.stop();
        bonjour.destroy(() => resolve());
      }),
  };
}
