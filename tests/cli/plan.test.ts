import { describe, expect, it } from 'vitest';
import { AdviseResultSchema } from '../../common/advisor/types.js';
import { shardwise } from './helpers.js';

// `shardwise plan`: the ranked layouts of this machine's devices as the AdviseResult (--json),
// and bad input refused field by field (one line on stderr naming the flag, exit 2). The refusals
// plan a what-if machine, so they need no device probe.
const WHAT_IF = ['--what-if', 'devices=2,memory_gb=1,tflops=10,link_gbps=10,latency_us=5'];

function refused(args: string[], pattern: RegExp) {
  const r = shardwise(['plan', ...args], { timeoutMs: 60_000 });
  expect(r.code, r.stderr).toBe(2);
  const lines = r.stderr.trim().split('\n');
  expect(lines, r.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(pattern);
  expect(r.stdout).toBe('');
}

describe('shardwise plan', () => {
  it('--json: every layout of this machine, ranked, fitting first; the launch config of each; the speeds named', () => {
    const r = shardwise(['plan', '--preset', 'tiny', '--batch-size', '8', '--seq-len', '64', '--devices', '2', '--json'], {
      timeoutMs: 120_000,
    });
    expect(r.code, r.stderr).toBe(0);
    const res = AdviseResultSchema.parse(JSON.parse(r.stdout));
    expect(res.model).toMatchObject({ n_layer: 2, n_head: 2, d_model: 64, block_size: 64 });
    // tiny at 2 ranks: 15 layouts (single, dp, ddp, zero1/2/3, two offloads, tp 2, 6 pipelines), each with and without checkpointing
    expect(res.layouts).toHaveLength(30);
    expect(res.layouts[0]!.fits).toBe(true);
    expect(res.layouts[0]!.reason).toMatch(/^fastest layout that fits: /);
    for (const l of res.layouts) {
      expect(l.launch).toMatchObject({ preset: 'tiny', strategy: l.layout.strategy, world: l.layout.world, batch_size: 8, seq_len: 64 });
      expect(l.ranks).toHaveLength(l.layout.world);
    }
    expect(['measured', 'defaults']).toContain(res.profile.source);
  });

  it('refuses a batch that does not divide, a sequence longer than the block, an unknown preset or device class, a model too large for every layout', () => {
    // one head and one block: no tp 2 or pp 2 takes 7 rows whole either
    refused(
      ['--model', '{"n_layer":1,"n_head":1,"d_model":64,"block_size":64}', '--batch-size', '7', '--seq-len', '64', ...WHAT_IF],
      /^shardwise: plan: --batch-size: batch_size 7 does not split over 2 ranks/,
    );
    refused(
      ['--preset', 'tiny', '--batch-size', '8', '--seq-len', '65', ...WHAT_IF],
      /^shardwise: plan: --seq-len: seq_len 65 is longer than the model's block_size 64/,
    );
    refused(
      ['--preset', 'huge', '--batch-size', '8', '--seq-len', '64', ...WHAT_IF],
      /^shardwise: plan: --preset: unknown preset "huge"; the presets are tiny, small/,
    );
    refused(
      ['--preset', 'tiny', '--batch-size', '8', '--seq-len', '64', '--what-if', 'devices=2,device_class=nope,link_gbps=10,latency_us=5'],
      /^shardwise: plan: --what-if \(device_class\): unknown device class "nope"/,
    );
    refused(
      ['--model', '{"n_layer":48,"n_head":25,"d_model":1600,"block_size":1024}', '--batch-size', '8', '--seq-len', '1024', ...WHAT_IF],
      /^shardwise: plan: --model: the model \(Ψ = \d+\) fits no layout of these devices; .* the smallest missing resource is [\d.]+ [GT]iB of memory per device/,
    );
    refused(['--preset', 'tiny', '--seq-len', '64'], /^shardwise: plan: --batch-size is required/);
  });
});
