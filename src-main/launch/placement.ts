// `--placement local,192.168.1.20:7341@1,...`: where each rank runs, one entry per rank in rank
// order — `local` (this machine) or the address of a paired agent, optionally `@ADAPTER` (index
// or name, as --device takes it) for the device there; several ranks may share one. Rank 0 is
// always local: it hosts the run's rendezvous, so remote ranks dial this machine.
import { AgentError, type AgentSession, connectAgent } from '../cluster/agent-client.js';
import { ControllerIdentity } from '../cluster/controller-identity.js';
import type { RankPlacement } from './local-ranks.js';

export class PlacementError extends Error {
  override name = 'PlacementError';
}

export interface PlacementEntry {
  /** 'local' or HOST:PORT of an agent */
  where: string;
  /** adapter index or name on that machine; absent: the run's --device (or the default) */
  adapter?: string;
}

export function parsePlacement(spec: string, world: number): PlacementEntry[] {
  const raw = spec.split(',').map((s) => s.trim());
  if (raw.some((e) => !e)) throw new PlacementError(`--placement "${spec}" has an empty entry; give one entry per rank: local or HOST:PORT, optionally @ADAPTER`);
  if (raw.length !== world) throw new PlacementError(`--placement names ${raw.length} rank(s), the run has world ${world}; give one entry per rank (local or HOST:PORT, optionally @ADAPTER)`);
  const entries = raw.map((e) => {
    const at = e.lastIndexOf('@');
    const where = at >= 0 ? e.slice(0, at) : e;
    const adapter = at >= 0 ? e.slice(at + 1) : undefined;
    if (adapter === '') throw new PlacementError(`--placement entry "${e}": give an adapter index or name after @`);
    return adapter === undefined ? { where } : { where, adapter };
  });
  if (entries[0]!.where !== 'local') throw new PlacementError(`--placement: rank 0 must be "local" (it hosts the run's rendezvous), got "${raw[0]}"`);
  return entries;
}

export interface ConnectedPlacement {
  ranks: RankPlacement[];
  close(): void;
}

export async function connectPlacement(spec: string, world: number): Promise<ConnectedPlacement> {
  const entries = parsePlacement(spec, world);
  const remote = entries.some((e) => e.where !== 'local');
  const me = remote ? new ControllerIdentity() : null;
  const sessions = new Map<string, { session: AgentSession; machine: string }>();
  try {
    for (const e of new Set(entries.map((x) => x.where).filter((x) => x !== 'local'))) {
      const session = await connectAgent(e, me!);
      sessions.set(e, { session, machine: `${session.agentName} (${e})` });
    }
  } catch (err) {
    for (const s of sessions.values()) s.session.close();
    throw err instanceof AgentError ? new PlacementError(err.message) : err;
  }
  return {
    ranks: entries.map((e) => ({ ...(e.where === 'local' ? { kind: 'local' as const } : { kind: 'agent' as const, ...sessions.get(e.where)! }), ...(e.adapter !== undefined ? { adapter: e.adapter } : {}) })),
    close: () => {
      for (const s of sessions.values()) s.session.close();
    },
  };
}
