// The links from this machine to each agent it paired with, for `shardwise profile`: over the
// agent's own authenticated channel (the key proof first, then link-test requests), like the
// local links in workers/cli/profile-links.ts:
//
//   latency   a ping there and back, half the median round trip
//   bandwidth `bytes` up (to the agent's sink), then `bytes` down (its filler), each as requests
//             of at most LINK_TEST_MAX_BYTES sent back to back: bytes on the wire / time
//
// An agent that cannot be reached or does not finish within its share of the deadline is
// reported and skipped; the other links are kept.
import { randomBytes } from 'node:crypto';
import type { LinkError, LinkProfile } from '../../common/advisor/profile.js';
import { LINK_TEST_MAX_BYTES } from '../../workers/protocol/agent.js';
import { type AgentSession, connectAgent } from '../cluster/agent-client.js';
import type { ControllerIdentity } from '../cluster/controller-identity.js';
import { median } from '../../common/stats.js';

export interface AgentLinkPlan {
  /** round trips for the latency */
  pings: number;
  /** payload each way for the bandwidth */
  bytes: number;
}

/** the chunks of `bytes`, each at most one request's worth */
function chunks(bytes: number): number[] {
  const out: number[] = [];
  for (let left = bytes; left > 0; left -= LINK_TEST_MAX_BYTES) out.push(Math.min(left, LINK_TEST_MAX_BYTES));
  return out;
}

async function measure(s: AgentSession, plan: AgentLinkPlan): Promise<{ gbps: number; latency_us: number }> {
  await s.ping(); // the first request after the handshake pays for nothing the link does
  const rtts: number[] = [];
  for (let i = 0; i < plan.pings; i++) {
    const t0 = performance.now();
    await s.ping();
    rtts.push(performance.now() - t0);
  }
  const rtt = rtts.length ? median(rtts) : 0;

  const parts = chunks(plan.bytes);
  const uploads = parts.map((n) => randomBytes(n).toString('base64'));
  let t0 = performance.now();
  const up = await Promise.all(uploads.map((u) => s.linkTest(u, 0)));
  const upMs = performance.now() - t0;
  t0 = performance.now();
  const down = await Promise.all(parts.map((n) => s.linkTest('', n)));
  const downMs = performance.now() - t0;
  const wire = up.reduce((a, r) => a + r.received, 0) + down.reduce((a, r) => a + r.data.length, 0);
  return { gbps: wire / (Math.max(upMs + downMs, 1e-3) * 1e6), latency_us: (rtt / 2) * 1000 };
}

/** Rejects after ms, so one silent agent cannot eat the profile's 30 s. */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let t: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    t = setTimeout(() => reject(new Error(`${what} did not finish within ${(ms / 1000).toFixed(1)} s`)), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(t));
}

/** Every paired agent's link, one after another (so they do not share the wire), until `deadline` (performance.now() ms). */
export async function profileAgentLinks(
  me: ControllerIdentity,
  plan: AgentLinkPlan,
  deadline: number,
): Promise<{ links: LinkProfile[]; errors: LinkError[] }> {
  const links: LinkProfile[] = [];
  const errors: LinkError[] = [];
  const agents = me.state.agents;
  for (const [i, a] of agents.entries()) {
    const share = (deadline - performance.now()) / (agents.length - i);
    let session: AgentSession | null = null;
    let over = false;
    try {
      if (share < 200) throw new Error('no time left in the 30 s profile');
      const run = (async () => {
        const s = await connectAgent(a.address, me, a.agentId);
        session = s;
        if (over) s.close(); // connected after its deadline: leave at once
        return measure(s, plan);
      })();
      run.catch(() => {}); // a late failure after the deadline has nothing left to tell
      const r = await within(run, share, `the link test to ${a.agentName}`);
      links.push({ kind: 'agent', peer: a.address, gbps: r.gbps, latency_us: r.latency_us });
    } catch (e) {
      errors.push({ kind: 'agent', peer: a.address, error: `${a.agentName} (${a.address}): ${(e as Error).message}` });
    } finally {
      over = true;
      (session as AgentSession | null)?.close();
    }
  }
  return { links, errors };
}
