// The launch form's Ψ (common/model-params.ts) against the model's own parameter list.
import { describe, expect, it } from 'vitest';
import { gptParamCount } from '../../common/model-params.js';
import { type GptConfig, paramCount } from '../../workers/model/config.js';
import { PRESETS } from '../../workers/protocol/presets.js';

describe('gptParamCount', () => {
  it('equals paramCount of workers/model for the presets and odd sizes; tiny with the grammar vocabulary (27) is 105 920', () => {
    expect(gptParamCount(PRESETS.tiny!, 27)).toBe(105_920);
    const cases: [Omit<GptConfig, 'vocab_size'>, number][] = [
      [PRESETS.tiny!, 27],
      [PRESETS.small!, 96],
      [{ n_layer: 3, n_head: 3, d_model: 48, block_size: 17 }, 5],
    ];
    for (const [sizes, vocab] of cases) {
      expect(gptParamCount(sizes, vocab)).toBe(
        paramCount({
          n_layer: sizes.n_layer,
          n_head: sizes.n_head,
          d_model: sizes.d_model,
          block_size: sizes.block_size,
          vocab_size: vocab,
        }),
      );
    }
  });
});
