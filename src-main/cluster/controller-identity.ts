// The controller's side of pairing: its own id and name, and for each paired agent the key and
// the last address it answered on. One JSON file beside the agent's state, owner-readable only.
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { PeerIdSchema } from '../../workers/protocol/agent.js';
import { newPeerId } from '../../workers/protocol/pairing-crypto.js';
import { writeFileAtomic } from '../../workers/protocol/atomic-file.js';

const PairedAgentSchema = z.object({
  agentId: PeerIdSchema,
  agentName: z.string(),
  key: z.string().regex(/^[0-9a-f]{64}$/),
  address: z.string(),
  pairedAt: z.string(),
});
export type PairedAgent = z.infer<typeof PairedAgentSchema>;

const ControllerStateSchema = z.object({
  controllerId: PeerIdSchema,
  controllerName: z.string().min(1).max(64),
  agents: z.array(PairedAgentSchema),
});
export type ControllerState = z.infer<typeof ControllerStateSchema>;

export function defaultHome(): string {
  return process.env.SHARDWISE_HOME ?? path.join(os.homedir(), '.shardwise');
}

/**
 * The agents paired from `home`, read only (no identity is made where there is none): what a
 * running elastic run checks for machines paired after it began. [] while there is no readable file.
 */
export function pairedAgents(home = defaultHome()): PairedAgent[] {
  const file = path.join(home, 'controller.json');
  try {
    const r = ControllerStateSchema.safeParse(JSON.parse(readFileSync(file, 'utf8')));
    return r.success ? r.data.agents : [];
  } catch {
    return [];
  }
}

export class ControllerIdentity {
  readonly file: string;
  state: ControllerState;

  constructor(home = defaultHome()) {
    this.file = path.join(home, 'controller.json');
    if (existsSync(this.file)) {
      const r = ControllerStateSchema.safeParse(JSON.parse(readFileSync(this.file, 'utf8')));
      if (!r.success)
        throw new Error(
          `${this.file} is not a controller state file (${r.error.issues[0]?.message}) ---> HINT: move it away and pair the agents again`,
        );
      this.state = r.data;
    } else {
      this.state = { controllerId: newPeerId(), controllerName: os.hostname().slice(0, 64) || 'controller', agents: [] };
      mkdirSync(home, { recursive: true, mode: 0o700 });
      this.save();
    }
  }

  agent(agentId: string): PairedAgent | null {
    return this.state.agents.find((a) => a.agentId === agentId) ?? null;
  }

  remember(a: Omit<PairedAgent, 'pairedAt'> & { pairedAt?: string }) {
    const old = this.agent(a.agentId);
    this.state.agents = this.state.agents.filter((x) => x.agentId !== a.agentId);
    this.state.agents.push({ ...a, pairedAt: a.pairedAt ?? old?.pairedAt ?? new Date().toISOString() });
    this.save();
  }

  private save() {
    writeFileAtomic(this.file, `${JSON.stringify(this.state, null, 2)}\n`, 0o600);
  }
}
