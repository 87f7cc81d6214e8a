// `--placement local,192.168.1.20:7341,...`: where each rank runs, one entry per rank in rank
// order — `local` (this machine) or the address of a paired agent. Rank 0 is always local: it
// hosts the run's rendezvous, so remote ranks dial this machine.
import { AgentError, type AgentSession, connectAgent } from '../cluster/agent-client.js';
import { ControllerIdentity } from '../cluster/controller-identity.js';
import type { RankPlacement } from './local-ranks.js';

export class PlacementError extends Error {
  override name = 'PlacementError';
}

export function parsePlacement(spec: string, world: number): string[] {
  const entries = spec.split(',').map((s) => s.trim());
  if (entries.some((e) => !e)) throw new PlacementError(`--placement "${spec}" has an empty entry; give one entry per rank: local or HOST:PORT`);
  if (entries.length !== world) throw new PlacementError(`--placement names ${entries.length} rank(s), the run has world ${world}; give one entry per rank (local or HOST:PORT)`);
  if (entries[0] !== 'local') throw new PlacementError(`--placement: rank 0 must be "local" (it hosts the run's rendezvous), got "${entries[0]}"`);
  return entries;
}

export interface ConnectedPlacement {
  ranks: RankPlacement[];
  close(): void;
}

export async function connectPlacement(spec: string, world: number): Promise<ConnectedPlacement> {
  const entries = parsePlacement(spec, world);
  const me = new ControllerIdentity();
  const sessions = new Map<string, { session: AgentSession; machine: string }>();
  try {
    for (const e of new Set(entries.filter((x) => x !== 'local'))) {
      const session = await connectAgent(e, me);
      sessions.set(e, { session, machine: `${session.agentName} (${e})` });
    }
  } catch (err) {
    for (const s of sessions.values()) s.session.close();
    throw err instanceof AgentError ? new PlacementError(err.message) : err;
  }
  return {
    ranks: entries.map((e) => (e === 'local' ? { kind: 'local' as const } : { kind: 'agent' as const, ...sessions.get(e)! })),
    close: () => {
      for (const s of sessions.values()) s.session.close();
    },
  };
}
