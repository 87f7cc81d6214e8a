import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { type MemoryLayout, predictMemory } from '../../common/advisor/memory.js';
import { MEMORY_CATEGORIES } from '../../common/memory-categories.js';
import { predictModelStateBytes } from '../../common/model-state.js';
import { lastJsonLine, tempDir } from '../cli/helpers.js';

// The launch form's prediction of model-state bytes per rank (common/model-state.ts) against
// what real runs' allocators measured (train --json's summary.peak_bytes, content bytes per
// category): tensor parallel (T=2), a 2-stage pipeline with 3 blocks (uneven stages) and 3D
// (D=2 x T=2 x P=2, ZeRO-1 over DP). One step each on real rank processes, real WebGPU and
// real sockets; builtin:grammar's 27-character vocabulary (wte padded to 28 rows under T=2).
const LONG = 300_000;
const root = tempDir('predict');
const VOCAB = 27;

interface Case {
  name: string;
  model: { n_layer: number; n_head: number; d_model: number; block_size: number };
  flags: string[];
  query: { strategy: string; world: number; tp?: number; pp?: number; dp?: number };
  /** the same run as the advisor lays it out (common/advisor/memory.ts predicts every category) */
  layout: MemoryLayout;
}

const CASES: Case[] = [
  {
    name: 'tp2',
    model: { n_layer: 2, n_head: 2, d_model: 32, block_size: 16 },
    flags: ['--strategy', 'tp', '--world', '2', '--tp', '2'],
    query: { strategy: 'tp', world: 2, tp: 2 },
    layout: { strategy: 'tp', world: 2, tp: 2, micro_batches: 1 },
  },
  {
    name: 'pp2',
    model: { n_layer: 3, n_head: 2, d_model: 32, block_size: 16 },
    flags: ['--strategy', 'pp', '--world', '2', '--pp', '2', '--schedule', 'gpipe', '--micro-batches', '2'],
    query: { strategy: 'pp', world: 2, pp: 2 },
    layout: { strategy: 'pp', world: 2, pp: 2, micro_batches: 2, schedule: 'gpipe' },
  },
  {
    name: '3d',
    model: { n_layer: 2, n_head: 2, d_model: 32, block_size: 16 },
    flags: ['--strategy', '3d', '--dp', '2', '--tp', '2', '--pp', '2', '--micro-batches', '2'],
    query: { strategy: '3d', world: 8, dp: 2, tp: 2, pp: 2 },
    layout: { strategy: '3d', world: 8, dp: 2, tp: 2, pp: 2, micro_batches: 2, schedule: '1f1b' },
  },
];

function train(c: Case): Promise<Record<string, any>> {
  const file = path.join(root, `${c.name}.json`);
  writeFileSync(file, JSON.stringify({ model: c.model }));
  const args = [
    'train',
    '--preset',
    'tiny',
    '--config',
    file,
    '--steps',
    '1',
    '--batch-size',
    '8',
    '--seed',
    '3',
    '--eval-interval',
    '0',
    '--checkpoint-interval',
    '0',
    '--out',
    path.join(root, c.name),
    '--json',
    ...c.flags,
  ];
  return lastJsonLine(c.name, args);
}

describe('predicted model-state bytes per rank equal the allocator of real tp, pp and 3d runs', () => {
  it(
    'params, grads and optimizer bytes of every rank, exactly',
    async () => {
      // tp and pp together (4 ranks), then 3d (8 ranks): at most 8 rank processes at a time
      const summaries = [...(await Promise.all(CASES.slice(0, 2).map(train))), await train(CASES[2]!)];
      CASES.forEach((c, i) => {
        const s = summaries[i]!;
        expect(s.type).toBe('summary');
        const peak = s.peak_bytes as Record<string, Record<string, number>>;
        expect(Object.keys(peak)).toHaveLength(c.query.world);
        for (let rank = 0; rank < c.query.world; rank++) {
          const predicted = predictModelStateBytes({ ...c.query, params: s.params, rank, model: { ...c.model, vocab_size: VOCAB } });
          const measured = peak[String(rank)]!;
          expect({ params: measured.params, grads: measured.grads, optimizer: measured.optimizer }, `${c.name} rank ${rank}`).toEqual(
            predicted,
          );
        }
        // the advisor's prediction of every category: activations, comm buffers and workspace within 5%
        const all = predictMemory({
          model: { ...c.model, vocab_size: VOCAB },
          batch_size: 8,
          seq_len: c.model.block_size,
          layout: c.layout,
        });
        all.forEach((pr, rank) => {
          for (const cat of MEMORY_CATEGORIES) {
            const m = peak[String(rank)]![cat] ?? 0;
            expect(
              Math.abs(pr.device[cat] - m),
              `${c.name} rank ${rank} ${cat}: advisor ${pr.device[cat]}, measured ${m}`,
            ).toBeLessThanOrEqual(0.05 * m);
          }
        });
      });
    },
    LONG,
  );
});
