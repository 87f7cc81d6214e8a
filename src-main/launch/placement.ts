// Where each rank runs, one entry per rank in rank order: `local` (this machine) or the address
// of a paired agent, optionally with an adapter (index or name, as --device takes it) for the
// device there; several ranks may share one. Rank 0 is always local: it hosts the run's
// rendezvous, so remote ranks dial this machine. The CLI writes it as
// `--placement local,192.168.1.20:7341@1,...`; the API as `config.placement: [{machine, device}]`.
// Both go through checkPlacement and connectPlacementEntries.
import { selectAdapter } from '../../workers/protocol/adapter-select.js';
import { AgentError, type AgentSession, connectAgent } from '../cluster/agent-client.js';
import { ControllerIdentity } from '../cluster/controller-identity.js';
import type { RankPlacement } from './local-ranks.js';

export class PlacementError extends Error {
  override name = 'PlacementError';
  /** the rank whose entry is wrong and which part of it, where one is */
  constructor(
    message: string,
    readonly at?: { rank: number; part: 'machine' | 'device' },
  ) {
    super(message);
  }
}

export interface PlacementEntry {
  /** 'local' or HOST:PORT of an agent */
  where: string;
  /** adapter index or name on that machine; absent: the run's --device (or the default) */
  adapter?: string;
}

const entryText = (e: PlacementEntry) => (e.adapter !== undefined ? `${e.where}@${e.adapter}` : e.where);

/** One entry per rank, rank 0 here. `field` names the list in messages (--placement, config.placement). */
export function checkPlacement(entries: PlacementEntry[], world: number, field: string, entryHint: string) {
  if (entries.length !== world)
    throw new PlacementError(
      `${field} names ${entries.length} rank(s), the run has world ${world}; give one entry per rank (${entryHint})`,
    );
  if (entries[0]!.where !== 'local') {
    throw new PlacementError(`${field}: rank 0 must be "local" (it hosts the run's rendezvous), got "${entryText(entries[0]!)}"`, {
      rank: 0,
      part: 'machine',
    });
  }
}

export function parsePlacement(spec: string, world: number): PlacementEntry[] {
  const raw = spec.split(',').map((s) => s.trim());
  if (raw.some((e) => !e))
    throw new PlacementError(`--placement "${spec}" has an empty entry; give one entry per rank: local or HOST:PORT, optionally @ADAPTER`);
  const entries = raw.map((e) => {
    const at = e.lastIndexOf('@');
    const where = at >= 0 ? e.slice(0, at) : e;
    const adapter = at >= 0 ? e.slice(at + 1) : undefined;
    if (adapter === '') throw new PlacementError(`--placement entry "${e}": give an adapter index or name after @`);
    return adapter === undefined ? { where } : { where, adapter };
  });
  checkPlacement(entries, world, '--placement', 'local or HOST:PORT, optionally @ADAPTER');
  return entries;
}

export interface ConnectedPlacement {
  ranks: RankPlacement[];
  close(): void;
}

/**
 * Connect to every agent the entries name (each proves the stored key) and check that each
 * entry's adapter exists on its machine, before anything runs. `me`: null when every entry is
 * local. `localAdapters`: this machine's
 * adapters, to check local entries too (omitted: the rank checks when it opens its device).
 */
export async function connectPlacementEntries(
  entries: PlacementEntry[],
  me: ControllerIdentity | null,
  localAdapters?: { vendor: string; device: string; description: string }[],
): Promise<ConnectedPlacement> {
  const sessions = new Map<string, { session: AgentSession; machine: string }>();
  const close = () => {
    for (const s of sessions.values()) s.session.close();
  };
  try {
    for (const where of new Set(entries.map((x) => x.where).filter((x) => x !== 'local'))) {
      let session: AgentSession;
      try {
        if (!me) throw new AgentError(`no controller identity to prove to the agent at ${where}`);
        session = await connectAgent(where, me);
      } catch (e) {
        throw e instanceof AgentError
          ? new PlacementError(e.message, { rank: entries.findIndex((x) => x.where === where), part: 'machine' })
          : e;
      }
      sessions.set(where, { session, machine: `${session.agentName} (${where})` });
      const wanted = entries.map((x, rank) => ({ ...x, rank })).filter((x) => x.where === where && x.adapter !== undefined);
      if (wanted.length) {
        const { adapters } = await session.request('devices').catch((e: unknown) => {
          throw e instanceof AgentError ? new PlacementError(e.message, { rank: wanted[0]!.rank, part: 'machine' }) : e;
        });
        for (const w of wanted) {
          const r = selectAdapter(w.adapter!, adapters);
          if ('error' in r)
            throw new PlacementError(
              `rank ${w.rank} on agent ${session.agentName} (${where}): ${r.error.replace("Run 'shardwise devices' to list them.", `peers.inspect or shardwise peer ${where} lists them.`)}`,
              { rank: w.rank, part: 'device' },
            );
        }
      }
    }
    if (localAdapters) {
      entries.forEach((x, rank) => {
        if (x.where !== 'local' || x.adapter === undefined) return;
        const r = selectAdapter(x.adapter, localAdapters);
        if ('error' in r) throw new PlacementError(`rank ${rank} on this machine: ${r.error}`, { rank, part: 'device' });
      });
    }
  } catch (err) {
    close();
    throw err;
  }
  return {
    ranks: entries.map((e) => ({
      ...(e.where === 'local' ? { kind: 'local' as const } : { kind: 'agent' as const, ...sessions.get(e.where)! }),
      ...(e.adapter !== undefined ? { adapter: e.adapter } : {}),
    })),
    close,
  };
}

/** Agents of a placement reached again (an elastic run's scale-up): every entry names an agent. */
export function reconnectEntries(entries: PlacementEntry[]): Promise<ConnectedPlacement> {
  return connectPlacementEntries(entries, new ControllerIdentity());
}

/** The CLI's `--placement SPEC`: parsed, checked, connected. */
export async function connectPlacement(spec: string, world: number): Promise<ConnectedPlacement> {
  const entries = parsePlacement(spec, world);
  return connectPlacementEntries(entries, entries.some((e) => e.where !== 'local') ? new ControllerIdentity() : null);
}
