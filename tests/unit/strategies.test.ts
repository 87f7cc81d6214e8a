// The strategy table (common/strategies.ts): each strategy's knobs, world-size rule, grid and
// data-parallel divisor, and validate(job)'s field-tagged errors, one rule at a time.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { coordsOf } from '../../workers/protocol/grid.js';
import { type FieldNames, type JobShape, STRATEGY_NAMES, strategyAtZeroStage, strategyOf, TABLE } from '../../common/strategies.js';

/** a tiny-sized job (2 layers, 2 heads, batch 8) with the parallel fields given */
function job(parallel: Partial<JobShape['parallel']>, model: Partial<JobShape['model']> = {}, batch = 8, spans?: boolean): JobShape {
  return {
    model: { n_layer: 2, n_head: 2, d_model: 64, ...model },
    train: { batch_size: batch },
    parallel: { strategy: 'ddp', world: 2, micro_batches: 1, ...parallel },
    ...(spans !== undefined ? { telemetry: { spans } } : {}),
  };
}
const errors = (j: JobShape, names?: FieldNames) => TABLE[j.parallel.strategy as keyof typeof TABLE].validate(j, names);
/** every strategy name, and those that are no knob's name too (tp, pp and dp are also the grid's axes) */
const ANY = '(?:single|dp|ddp|zero[123]|tp|pp|3d)';
const ONLY = '(?:single|ddp|zero[123]|3d)';
const lit = (n: string) => `['"]${n}['"]`;
/**
 * The ways code outside common/strategies.ts decides by a strategy's name: a switch's case, a
 * comparison (of a name no knob shares, or of a `strategy` value with any name), a list (array,
 * set, union type) of two names or more one of which no knob shares, an object keyed by names,
 * and taking a name apart (`strategy.slice(4)`, `startsWith('zero')`).
 */
const DECISIONS: [string, RegExp][] = [
  ['case', new RegExp(`\\bcase\\s+${lit(ANY)}\\s*:`)],
  ['comparison', new RegExp(`(?:===|!==)\\s*${lit(ONLY)}|${lit(ONLY)}\\s*(?:===|!==)`)],
  ['comparison', new RegExp(`(?:strategy|\\.name)\\)?\\s*(?:===|!==)\\s*${lit(ANY)}`)],
  ['list', new RegExp(`\\[(?=[^\\[\\]]*${lit(ONLY)})(?:[^\\[\\]]*${lit(ANY)}){2}[^\\[\\]]*\\]`)],
  ['list', new RegExp(`(?=(?:${lit(ANY)}\\s*\\|\\s*)*${lit(ONLY)})${lit(ANY)}(?:\\s*\\|\\s*${lit(ANY)})+`)],
  ['object key', new RegExp(`(?:^|\\{)\\s*(?:${ONLY}|${lit(ANY)})\\s*:(?!:)`)],
  [
    'name parsing',
    /strategy\w*\??\.(?:slice|substring|substr|startsWith|endsWith|split|match|replace)\(|(?:startsWith|endsWith)\(['"]zero/,
  ],
];
/** Lines the rules above catch that decide nothing by a strategy's name, each with why (file, the line's text). */
const NOT_DECISIONS: { file: string; text: RegExp; why: string }[] = [
  {
    file: 'workers/export/torchrun/plan.ts',
    text: /wrapper === 'ddp'/,
    why: "PyTorch's wrapper of the exported job (DistributedDataParallel), not a Shardwise strategy",
  },
];

/** A bench script's lists and objects of strategies are the cases it measures, not decisions. */
const BENCH_DATA = ['list', 'object key'];

/** `file:line rule: text` of every decision by a strategy's name outside the table (app code, and the bench scripts). */
function strategyNameDecisions(): string[] {
  const files = execFileSync('git', ['ls-files', 'common', 'src-main', 'src-renderer', 'workers', 'bench'], { encoding: 'utf8' })
    .split('\n')
    .filter((f) => /\.(ts|vue)$/.test(f) && f !== 'common/strategies.ts');
  return files.flatMap((file) => {
    const bench = file.startsWith('bench/');
    return readFileSync(file, 'utf8')
      .split('\n')
      .flatMap((text, i) => {
        if (/^\s*(\/\/|\*|\/\*)/.test(text)) return [];
        const rule = DECISIONS.find(([r, re]) => (!bench || !BENCH_DATA.includes(r)) && re.test(text))?.[0];
        if (!rule || NOT_DECISIONS.some((x) => x.file === file && x.text.test(text))) return [];
        return [`${file}:${i + 1} ${rule}: ${text.trim()}`];
      });
  });
}
/** names as a command line spells them (the CLI's own table is src-main/cli/train-flags.ts) */
const flags: FieldNames = (f) => (f === 'spans' ? 'telemetry.spans' : f.startsWith('model.') ? f : `--${f.replace(/_/g, '-')}`);

describe('strategy table', () => {
  it('has every strategy, and unknown names are not in it', () => {
    expect(Object.keys(TABLE)).toEqual([...STRATEGY_NAMES]);
    expect(strategyOf('zero4')).toBeUndefined();
    expect(strategyOf('3d')?.name).toBe('3d');
  });

  it('world-size rule: the world each strategy makes from its knobs', () => {
    expect(TABLE.single.worldOf({ world: 5 })).toBe(1);
    expect(TABLE.ddp.worldOf({})).toBe(2);
    expect(TABLE.zero3.worldOf({ world: 4 })).toBe(4);
    expect(TABLE.tp.worldOf({ tp: 4 })).toBe(4);
    expect(TABLE.pp.worldOf({ pp: 3 })).toBe(3);
    expect(TABLE['3d'].worldOf({ dp: 2, tp: 2, pp: 3 })).toBe(12);
    expect(TABLE['3d'].worldOf({ tp: 2 })).toBe(2);
  });

  it('data-parallel divisor: the grid.dp that splits the batch (tp shares rows, pp stages see every row)', () => {
    expect(TABLE.ddp.grid({ world: 4 })).toEqual({ dp: 4, tp: 1, pp: 1 });
    expect(TABLE.single.grid({ world: 1 })).toEqual({ dp: 1, tp: 1, pp: 1 });
    expect(TABLE.tp.grid({ world: 4 })).toEqual({ dp: 1, tp: 4, pp: 1 });
    expect(TABLE.pp.grid({ world: 3 })).toEqual({ dp: 1, tp: 1, pp: 3 });
    expect(TABLE['3d'].grid({ world: 8, dp: 2, tp: 2, pp: 2 })).toEqual({ dp: 2, tp: 2, pp: 2 });
  });

  it('roles follow the rank grid (tp, then dp, then pp)', () => {
    const g = { dp: 2, tp: 2, pp: 2 };
    for (let r = 0; r < 8; r++) {
      const c = coordsOf(g, r);
      expect(TABLE['3d'].role(g, r)).toBe(`dp ${c.dp} · tp ${c.tp} · stage ${c.pp}`);
    }
    expect(TABLE.ddp.role(TABLE.ddp.grid({ world: 2 }), 1)).toBe('replica 1');
  });

  it('ZeRO stage, optimizer ranks and labels: what callers ask the table instead of comparing names', () => {
    expect(STRATEGY_NAMES.map((n) => TABLE[n].zeroStage)).toEqual([0, 0, 0, 1, 2, 3, 0, 0, 0]);
    expect(STRATEGY_NAMES.filter((n) => TABLE[n].optimizerRanks === 'rank0')).toEqual(['dp']);
    expect(STRATEGY_NAMES.filter((n) => TABLE[n].oneRank)).toEqual(['single']);
    expect(STRATEGY_NAMES.filter((n) => TABLE[n].bucketAllReduce)).toEqual(['ddp']);
    expect(STRATEGY_NAMES.filter((n) => TABLE[n].tensorParallel)).toEqual(['tp', '3d']);
    expect([0, 1, 2, 3, 4].map(strategyAtZeroStage)).toEqual(['ddp', 'zero1', 'zero2', 'zero3', undefined]);
    // an elastic run's survivors: replicas at the world, tp/pp as many shards/stages, 3d whole tp x pp cells only
    expect([TABLE.zero2.atWorld({}, 3), TABLE.tp.atWorld({ tp: 4 }, 2), TABLE.pp.atWorld({ pp: 4 }, 3)]).toEqual([
      { world: 3 },
      { world: 2, tp: 2 },
      { world: 3, pp: 3 },
    ]);
    expect([TABLE['3d'].atWorld({ tp: 2, pp: 2 }, 8), TABLE['3d'].atWorld({ tp: 2, pp: 2 }, 6), TABLE.single.atWorld({}, 2)]).toEqual([
      { world: 8, dp: 2 },
      null,
      { world: 2 },
    ]);
    const pp = { world: 2, pp: 2, micro_batches: 4, schedule: 'gpipe' };
    const d3 = { world: 8, dp: 2, tp: 2, pp: 2, micro_batches: 2 };
    expect([TABLE.single.label({ world: 1 }, 'short'), TABLE.single.label({ world: 1 }, 'grid')]).toEqual(['single', null]);
    expect(TABLE.zero2.label({ world: 4, offload_optimizer: true }, 'short')).toBe('zero2+offload x4');
    expect(TABLE.zero2.label({ world: 4, offload_optimizer: 'cpu' }, 'form')).toBe('zero2 × 4');
    expect([TABLE.tp.label({ world: 2, tp: 2 }, 'short'), TABLE.tp.label({ world: 2, tp: 2 }, 'form')]).toEqual(['tp 2', 'tp T 2']);
    expect([TABLE.pp.label(pp, 'short'), TABLE.pp.label(pp, 'form'), TABLE.pp.label(pp, 'grid')]).toEqual([
      'pp 2 m4 gpipe',
      'pp P 2',
      '2 ranks',
    ]);
    expect(['short', 'form', 'grid'].map((st) => TABLE['3d'].label(d3, st as 'short'))).toEqual([
      '3d 2x2x2 m2 1f1b',
      '3d D 2 × T 2 × P 2',
      'DP 2 × TP 2 × PP 2',
    ]);
  });

  it('no strategy-name switch, comparison, list or name parsing outside the table (what differs is a field of the table)', () => {
    expect(strategyNameDecisions()).toEqual([]);
  });

  it('the guard catches each way of deciding by a name, and leaves the grid axes and knob names alone', () => {
    const rule = (line: string) => DECISIONS.find(([, re]) => re.test(line))?.[0] ?? null;
    expect(
      [
        "    case 'ddp':",
        "if (par.strategy === 'tp')",
        "gradSquares(lay.strategy === '3d', x)",
        "const ZERO = new Set(['zero1', 'zero2', 'zero3']);",
        "for (const strategy of ['dp', 'ddp'] as const)",
        "const KINDS: Record<'pp' | '3d', Kind> = {",
        '  single: { alone: true },',
        'const ZERO_STAGE = { zero1: 1, zero2: 2, zero3: 3 };',
        '<p>ZeRO stage {{ f.strategy.slice(4) }}</p>',
      ].map(rule),
    ).toEqual(['case', 'comparison', 'comparison', 'list', 'list', 'list', 'object key', 'object key', 'name parsing']);
    for (const line of [
      "for (const k of ['tp', 'pp', 'dp'] as const)",
      "if (k === 'tp') x = 1;",
      "const has = (k: 'tp' | 'pp' | 'dp') => true;",
      "mapping.push([par.strategy, 'one process'])",
    ])
      expect(rule(line), line).toBeNull();
  });

  it('a valid job of every strategy has no errors', () => {
    expect(errors(job({ strategy: 'single', world: 1 }))).toEqual([]);
    for (const s of ['dp', 'ddp', 'zero1', 'zero2', 'zero3']) expect(errors(job({ strategy: s }))).toEqual([]);
    expect(errors(job({ strategy: 'zero1', offload_optimizer: 'cpu' }))).toEqual([]);
    expect(errors(job({ strategy: 'tp', tp: 2, partition_activations: true }))).toEqual([]);
    expect(errors(job({ strategy: 'pp', pp: 2, schedule: 'gpipe', partition: 'time', micro_batches: 4 }))).toEqual([]);
    expect(errors(job({ strategy: '3d', world: 8, dp: 2, tp: 2, pp: 2, micro_batches: 2 }))).toEqual([]);
  });
});

describe('validate: one field-tagged error per broken rule', () => {
  it('a knob on a strategy that does not take it names the knob and its strategies', () => {
    expect(errors(job({ tp: 2 }), flags)).toEqual([
      { field: 'tp', message: '--tp applies to --strategy tp or 3d (tensor parallelism); got --strategy ddp' },
    ]);
    expect(errors(job({ pp: 2 }))[0]).toMatchObject({ field: 'pp', message: expect.stringMatching(/^pp applies to strategy pp or 3d/) });
    expect(errors(job({ dp: 2 }))[0]).toMatchObject({ field: 'dp', message: expect.stringMatching(/^dp applies to strategy 3d/) });
    expect(errors(job({ schedule: 'gpipe' }))[0]?.field).toBe('schedule');
    expect(errors(job({ strategy: 'zero2', prefetch: true }))[0]).toMatchObject({
      field: 'prefetch',
      message: expect.stringMatching(/^prefetch applies to strategy zero3/),
    });
    expect(errors(job({ strategy: 'zero3', offload_optimizer: 'cpu' }), flags)[0]).toMatchObject({
      field: 'offload_optimizer',
      message: expect.stringMatching(/^--offload-optimizer cpu needs --strategy zero1 or zero2 \(ZeRO-Offload/),
    });
    expect(errors(job({ partition_activations: true }))[0]?.field).toBe('partition_activations');
    expect(errors(job({ strategy: '3d', world: 8, dp: 2, tp: 2, pp: 2, partition: 'time' }), flags)[0]).toEqual({
      field: 'partition',
      message:
        '--partition applies to --strategy pp (how blocks are split into pipeline stages); got --strategy 3d: 3d stages are split by parameter count',
    });
    // an offload of 'none' sets nothing
    expect(errors(job({ offload_optimizer: 'none' }))).toEqual([]);
  });

  it('gradient compression: every hook on ddp, fp16/bf16 on zero1/zero2 (16-bit reduce-scatter), PowerSGD refused on ZeRO with the reason, none elsewhere', () => {
    for (const hook of ['fp16', 'bf16', 'powersgd']) expect(errors(job({ grad_compression: { hook } }))).toEqual([]);
    for (const strategy of ['zero1', 'zero2'])
      for (const hook of ['fp16', 'bf16', 'none']) expect(errors(job({ strategy, grad_compression: { hook } }))).toEqual([]);
    expect(errors(job({ strategy: 'zero2', grad_compression: { hook: 'powersgd' } }), flags)).toEqual([
      {
        field: 'grad_compression',
        message:
          "--grad-compression powersgd does not apply to --strategy zero2: ZeRO reduce-scatters the gradients so each rank receives only the sum of its own shard, while PowerSGD's low-rank factors P and Q must be all-reduced whole (every rank needs all of them to rebuild any shard); use fp16 or bf16 with zero2, or --strategy ddp for PowerSGD",
      },
    ]);
    expect(errors(job({ strategy: 'zero1', grad_compression: { hook: 'powersgd' } }))[0]?.field).toBe('grad_compression');
    expect(errors(job({ strategy: 'zero3', grad_compression: { hook: 'fp16' } }), flags)).toEqual([
      {
        field: 'grad_compression',
        message:
          "--grad-compression applies to --strategy ddp or zero1 or zero2 (it compresses DDP's gradient all-reduce or ZeRO-1/2's gradient reduce-scatter); got --strategy zero3",
      },
    ]);
    expect(errors(job({ strategy: 'dp', grad_compression: { hook: 'none' } }))).toEqual([]);
  });

  it('world rules: single runs one rank, tp and pp are their world, 3d is D x T x P', () => {
    expect(errors(job({ world: 0 }))[0]).toEqual({ field: 'world', message: 'world must be at least 1' });
    expect(errors(job({ strategy: 'single', world: 2 }), flags)).toEqual([
      { field: 'world', message: '--world 2 needs a distributed strategy (dp or ddp); --strategy single runs one rank' },
    ]);
    expect(errors(job({ strategy: 'tp', world: 4, tp: 2 }), flags)[0]).toMatchObject({
      field: 'world',
      message: expect.stringMatching(/^--world 4 must equal --tp 2/),
    });
    expect(errors(job({ strategy: 'pp', world: 3, pp: 2 }), flags)[0]).toMatchObject({
      field: 'world',
      message: expect.stringMatching(/^--world 3 must equal --pp 2/),
    });
    expect(errors(job({ strategy: 'pp', world: 1, pp: 1 }), flags)[0]).toEqual({
      field: 'pp',
      message: '--pp must be at least 2 (pipeline stages), got 1',
    });
    expect(errors(job({ strategy: '3d', world: 6, dp: 2, tp: 2, pp: 2 }), flags)[0]).toMatchObject({
      field: 'world',
      message: expect.stringMatching(/^--dp x --tp x --pp = 2 x 2 x 2 = 8 must equal --world \(6\)/),
    });
    expect(errors(job({ strategy: '3d', world: 0, dp: 0, tp: 2, pp: 2 }))[0]).toMatchObject({ field: 'world' });
    expect(errors(job({ strategy: '3d', world: 4, dp: 1.5, tp: 2, pp: 2 }))[0]).toEqual({
      field: 'dp',
      message: 'dp must be a positive integer, got 1.5',
    });
  });

  it('model rules: heads split over tp, layers over pp, spans kept for a pipeline', () => {
    expect(errors(job({ strategy: 'tp', world: 4, tp: 4 }), flags)[0]).toMatchObject({
      field: 'tp',
      message: expect.stringMatching(/^model\.n_head \(2\) must be divisible by --tp 4: each rank computes whole attention heads/),
    });
    expect(errors(job({ strategy: '3d', world: 4, dp: 1, tp: 4, pp: 1 }))[0]?.field).toBe('tp');
    expect(errors(job({ strategy: 'pp', world: 4, pp: 4 }), flags)[0]).toEqual({
      field: 'pp',
      message: 'model.n_layer 2 is smaller than --pp 4: every pipeline stage needs at least one block; lower --pp or raise model.n_layer',
    });
    expect(errors(job({ strategy: '3d', world: 3, dp: 1, tp: 1, pp: 3 }))[0]?.field).toBe('pp');
    expect(errors(job({ strategy: 'pp', world: 2, pp: 2 }, {}, 8, false), flags)[0]).toEqual({
      field: 'spans',
      message: 'telemetry.spans false does not apply to --strategy pp: the pipeline bubble is measured from its spans',
    });
    expect(errors(job({}, {}, 8, false))).toEqual([]);
  });

  it('the batch splits over the data-parallel ranks, then into micro-batches: one rule for every strategy', () => {
    expect(errors(job({ micro_batches: 3 }))).toEqual([
      { field: 'micro_batches', message: 'batch size 8 is not divisible by world 2 x micro-batches 3; pick batch_size as a multiple of 6' },
    ]);
    expect(errors(job({ world: 3 }))[0]).toMatchObject({
      field: 'world',
      message: expect.stringMatching(/^batch size 8 is not divisible by world 3 x micro-batches 1/),
    });
    expect(errors(job({ strategy: 'pp', world: 2, pp: 2, micro_batches: 3 }), flags)).toEqual([
      { field: 'micro_batches', message: 'batch size 8 is not divisible by --micro-batches 3; pick --batch-size as a multiple of 3' },
    ]);
    // tensor-parallel ranks share every row: only the micro-batches split the batch
    expect(errors(job({ strategy: 'tp', world: 2, tp: 2, micro_batches: 4 }))).toEqual([]);
    expect(errors(job({ strategy: 'tp', world: 2, tp: 2, micro_batches: 3 }))[0]?.field).toBe('micro_batches');
    expect(errors(job({ strategy: '3d', world: 8, dp: 2, tp: 2, pp: 2, micro_batches: 3 }))[0]).toEqual({
      field: 'micro_batches',
      message: 'batch size 8 is not divisible by dp 2 x micro-batches 3; pick batch_size as a multiple of 6',
    });
    expect(errors(job({ strategy: '3d', world: 8, dp: 2, tp: 2, pp: 2 }, {}, 7))[0]?.field).toBe('dp');
  });

  it('lists every broken rule, world before model before batch', () => {
    const all = errors(job({ strategy: 'pp', world: 3, pp: 2, micro_batches: 3 }, { n_layer: 1 }));
    expect(all.map((e) => e.field)).toEqual(['world', 'pp', 'micro_batches']);
  });
});
