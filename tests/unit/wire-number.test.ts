// Non-finite numbers on the rank's wire (workers/protocol/wire-number.ts): JSON turns NaN and
// ±Infinity into null, which the message schemas refused ("expected number, received null");
// encoded as strings they cross and decode to the same numbers. And the divergence verdict's words.
import { expect, it } from 'vitest';
import { divergedWhat, divergenceVerdict } from '../../workers/protocol/divergence.js';
import { RankMessageSchema } from '../../workers/protocol/train.js';
import { encodeNonFinite, WireNumber } from '../../workers/protocol/wire-number.js';
import { tinyJob } from './tiny-job.js';

const step = (loss: number, grad_norm: number) => ({
  type: 'step' as const,
  rank: 0,
  step: 7,
  loss,
  lr: 1000,
  grad_norm,
  tokens: 512,
  step_ms: 3,
  tokens_per_s: 1e5,
  memory: { params: 4 },
});

it('a step with loss NaN and gradient norm ±Infinity crosses JSON and the schema as those numbers (plain JSON: null, refused)', () => {
  for (const [loss, norm] of [
    [NaN, Infinity],
    [3.1, -Infinity],
    [NaN, NaN],
  ] as const) {
    const plain = RankMessageSchema.safeParse(JSON.parse(JSON.stringify(step(loss, norm))));
    expect(plain.success).toBe(false);
    expect(plain.error?.issues[0]?.path, 'the first null field').toEqual([Number.isFinite(loss) ? 'grad_norm' : 'loss']);
    const wire = JSON.parse(JSON.stringify(encodeNonFinite(step(loss, norm))));
    expect([wire.loss, wire.grad_norm]).toEqual([Number.isFinite(loss) ? loss : String(loss), String(norm)]);
    const m = RankMessageSchema.parse(wire);
    expect(m.type === 'step' && [m.loss, m.grad_norm]).toEqual([loss, norm]);
  }
});

it('encodeNonFinite reaches nested objects and arrays and leaves finite numbers, strings, null and booleans as they are', () => {
  expect(encodeNonFinite({ a: [1, NaN, { b: -Infinity }], s: 'NaN', n: null, t: true, x: -0.5 })).toEqual({
    a: [1, 'NaN', { b: '-Infinity' }],
    s: 'NaN',
    n: null,
    t: true,
    x: -0.5,
  });
  expect(WireNumber.parse('Infinity')).toBe(Infinity);
  expect(WireNumber.safeParse('inf').success).toBe(false);
  expect(WireNumber.safeParse(null).success).toBe(false);
});

it('the verdict names what diverged at which step, the last finite loss and what to change for the job', () => {
  expect(divergedWhat({ loss: 3, grad_norm: Infinity })).toBe('gradient norm became Infinity');
  expect(divergedWhat({ loss: NaN, grad_norm: NaN })).toBe('loss became NaN');
  expect(divergedWhat({ loss: 3, grad_norm: 0, val_loss: null })).toBeNull();
  const job = tinyJob({ train: { lr: 1000, grad_clip: 0 }, precision: 'fp16' });
  expect(divergenceVerdict(job, 'loss became NaN', 7, { loss: 3.14159, step: 6 })).toBe(
    "loss became NaN at step 7 (last finite loss 3.1416 at step 6); lower the learning rate (train.lr = 1000), clip gradients (train.grad_clip = 1; 0 turns clipping off) or use bf16/fp32 (fp16's range ends at 65504)",
  );
  expect(divergenceVerdict(tinyJob({ train: { lr: 0.5 } }), 'gradient norm became Infinity', 1, null)).toBe(
    'gradient norm became Infinity at step 1 (no finite loss before it); lower the learning rate (train.lr = 0.5)',
  );
});
