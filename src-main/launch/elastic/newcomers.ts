// Machines that may join an elastic run while it runs below MAX: agents paired on this controller
// after the run began (`shardwise pair` from another shell, or the dashboard's pairing). An agent
// paired before the run began and left out of its placement was left out on purpose, and stays
// out. Each newcomer gets one rank, on its default device.
import { defaultHome, pairedAgents } from '../../cluster/controller-identity.js';
import type { PlacementEntry } from '../placement.js';

/** The placement entries of agents paired at or after `since` (ms since the epoch), from the controller's pairings under `home`. */
export function pairedSince(since: number, home = defaultHome()): PlacementEntry[] {
  return pairedAgents(home)
    .filter((a) => Date.parse(a.pairedAt) >= since)
    .map((a) => ({ where: a.address }));
}
