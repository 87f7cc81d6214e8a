// What an agent remembers across restarts: its own id and name, and the controllers it paired
// with and their keys. One JSON file, written atomically and readable by its owner only.
import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { writeFileAtomic } from '../protocol/atomic-file.js';
import { PeerIdSchema } from '../protocol/agent.js';
import { newPeerId } from '../protocol/pairing-crypto.js';

const AgentStateSchema = z.object({
  agentId: PeerIdSchema,
  agentName: z.string().min(1).max(64),
  controllers: z.array(
    z.object({
      controllerId: PeerIdSchema,
      controllerName: z.string(),
      key: z.string().regex(/^[0-9a-f]{64}$/),
      pairedAt: z.string(),
    }),
  ),
});
export type AgentState = z.infer<typeof AgentStateSchema>;

export function defaultStateDir(): string {
  return process.env.SHARDWISE_HOME ?? path.join(os.homedir(), '.shardwise');
}

export class AgentStateFile {
  readonly file: string;
  state: AgentState;

  constructor(stateDir: string, name?: string) {
    this.file = path.join(stateDir, 'agent.json');
    if (existsSync(this.file)) {
      const parsed = AgentStateSchema.safeParse(JSON.parse(readFileSync(this.file, 'utf8')));
      if (!parsed.success)
        throw new Error(
          `${this.file} is not an agent state file (${parsed.error.issues[0]?.message}) ---> HINT: move it away to start as a new, unpaired agent`,
        );
      this.state = parsed.data;
      if (name && name !== this.state.agentName) {
        this.state.agentName = name;
        this.save();
      }
    } else {
      this.state = { agentId: newPeerId(), agentName: (name ?? os.hostname()).slice(0, 64) || 'agent', controllers: [] };
      this.save();
    }
  }

  keyOf(controllerId: string): string | null {
    return this.state.controllers.find((c) => c.controllerId === controllerId)?.key ?? null;
  }

  addController(controllerId: string, controllerName: string, key: string) {
    this.state.controllers = this.state.controllers.filter((c) => c.controllerId !== controllerId);
    this.state.controllers.push({ controllerId, controllerName, key, pairedAt: new Date().toISOString() });
    this.save();
  }

  private save() {
    writeFileAtomic(this.file, `${JSON.stringify(this.state, null, 2)}\n`, 0o600);
  }
}
