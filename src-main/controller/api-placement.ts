// `config.placement` of runs.launch / runs.plan / a resumed run: the API's list of
// {machine: 'local' | 'HOST:PORT', device?} checked and connected with the CLI's code
// (src-main/launch/placement.ts), its errors named by field. Agents must be paired (their keys
// are the PeerRegistry's, the ones `peers.pair` stored).
import { ApiError, fieldError, type LaunchConfig } from '../../common/api/index.js';
import {
  type ConnectedPlacement,
  checkPlacement,
  connectPlacementEntries,
  type PlacementEntry,
  PlacementError,
} from '../launch/placement.js';
import type { PeerRegistry } from './peers.js';

export type PlacementList = NonNullable<LaunchConfig['placement']>;

const ADDRESS = /^(\[[0-9a-fA-F:]+\]|[^:\s/]+):\d{1,5}$/;

/** Checks that need no connection: one entry per rank, rank 0 local, every agent paired. */
export function checkPlacementList(method: string, list: PlacementList, world: number, peers: PeerRegistry): PlacementEntry[] {
  const entries = list.map((e) => ({ where: e.machine, ...(e.device !== undefined ? { adapter: e.device } : {}) }));
  try {
    checkPlacement(
      entries,
      world,
      'config.placement',
      '{machine: "local" or a paired agent\'s HOST:PORT, device?: adapter index or name}, rank order',
    );
  } catch (e) {
    if (e instanceof PlacementError) throw new ApiError('ValidationError', `${method} params: ${e.message}`, 'config.placement');
    throw e;
  }
  if (entries.every((e) => e.where === 'local')) return entries;
  const paired = new Set(peers.me().state.agents.map((a) => a.address));
  entries.forEach((e, rank) => {
    if (e.where === 'local') return;
    const field = `config.placement.${rank}.machine`;
    if (!ADDRESS.test(e.where))
      throw fieldError(
        'ValidationError',
        `${method} params`,
        field,
        `"${e.where}" is neither "local" nor an agent's HOST:PORT (e.g. 192.168.1.20:7341)`,
      );
    if (!paired.has(e.where))
      throw fieldError(
        'ValidationError',
        `${method} params`,
        field,
        `${e.where} is not a paired peer; pair it first with peers.pair (the code its agent prints)`,
      );
  });
  return entries;
}

/** Every check, then the connections (each agent proves its key; adapters checked on their machine). */
export async function connectPlacementList(
  method: string,
  list: PlacementList,
  world: number,
  peers: PeerRegistry,
  localAdapters: () => Promise<{ vendor: string; device: string; description: string }[]>,
): Promise<ConnectedPlacement> {
  const entries = checkPlacementList(method, list, world, peers);
  const local = entries.some((e) => e.where === 'local' && e.adapter !== undefined) ? await localAdapters() : undefined;
  try {
    return await connectPlacementEntries(entries, entries.some((e) => e.where !== 'local') ? peers.me() : null, local);
  } catch (e) {
    if (!(e instanceof PlacementError)) throw e;
    const at = e.at ? `config.placement.${e.at.rank}.${e.at.part}` : 'config.placement';
    // an unreachable or unproven agent is the peer's fault, a missing adapter the request's
    throw fieldError(e.at?.part === 'machine' ? 'PeerError' : 'ValidationError', `${method} params`, at, e.message);
  }
}

/** "this machine" / "NAME (HOST:PORT)" per rank, and the adapter asked for */
export function placementView(p: ConnectedPlacement): { rank: number; machine: string; device?: string }[] {
  return p.ranks.map((r, rank) => ({
    rank,
    machine: r.kind === 'local' ? 'this machine' : r.machine,
    ...(r.adapter !== undefined ? { device: r.adapter } : {}),
  }));
}
