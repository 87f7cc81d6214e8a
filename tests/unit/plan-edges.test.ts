import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ApiError } from '../../common/api/index.js';
import { ControllerService } from '../../src-main/controller/service.js';

// runs.plan and runs.launch resolve through the CLI's resolver (src-main/launch/resolve-job.ts):
// values at the edges come back as a ValidationError naming the config field, before any run folder.
const runsRoot = mkdtempSync(path.join(tmpdir(), 'shardwise-plan-edges-'));
const service = new ControllerService({ runsRoot });
const refusal = (method: 'runs.plan' | 'runs.launch', config: Record<string, unknown>) =>
  service.call(method, { config }).then(
    () => null,
    (e: unknown) => e as ApiError,
  );

describe('runs.plan / runs.launch: the resolver refusals with their field', () => {
  it('a folder as the dataset', async () => {
    for (const method of ['runs.plan', 'runs.launch'] as const) {
      const e = await refusal(method, { dataset: runsRoot });
      expect(e).toBeInstanceOf(ApiError);
      expect(e!.field).toBe('config.dataset');
      expect(e!.message).toContain(`dataset ${runsRoot} is a folder, not a text file`);
    }
  });

  it("a model whose states exceed this machine's memory, with the formula line", async () => {
    const e = await refusal('runs.launch', { model: { n_layer: 96, n_head: 96, d_model: 12288, block_size: 2048 } });
    expect(e!.field).toBe('config.strategy');
    expect(e!.message).toMatch(/model states need 2\.53 TiB per rank \(16Ψ with Ψ = 173,987,880,960 parameters.*\) but this machine has/);
  });

  it('a value past its maximum, with the range', async () => {
    const e = await refusal('runs.plan', { steps: 2_000_000_000 });
    expect(e!.field).toBe('config.steps');
    expect(e!.message).toContain('steps must be a positive integer (at most 1000000000), got 2000000000');
  });
});
