// Runtime boundaries (ARCHITECTURE.md, section Boundaries), checked by the test suite
// (tests/unit/boundaries.test.ts) and by `npm run lint:boundaries`.
// The concerns that cut across strategies, each in its own folder beside the core (ARCHITECTURE.md,
// Where to add): the core uses them and they never use it (concerns-below-the-core).
const CONCERN_FOLDERS = ['comm-hooks', 'precision', 'telemetry', 'run-control', 'elastic'];
const CORE_FOLDERS = ['model', 'train', 'parallel'];

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'renderer-no-node-or-electron',
      comment: 'src-renderer runs in a sandboxed renderer or a browser: no Node builtins, no Electron',
      severity: 'error',
      from: { path: '^src-renderer/' },
      to: { dependencyTypes: ['core'] },
    },
    {
      name: 'renderer-only-own-code-and-common',
      comment: 'the renderer talks to the controller only through the typed API in common/',
      severity: 'error',
      from: { path: '^src-renderer/' },
      to: { path: '^(src-main|workers)/|(^|/)node_modules/(electron|ws|systeminformation|webgpu|bufferutil)/' },
    },
    {
      name: 'workers-no-electron-no-main',
      comment: 'workers/ are plain Node processes on any machine: no Electron, no controller code',
      severity: 'error',
      from: { path: '^workers/' },
      to: { path: '^(src-main|src-renderer)/|^electron(/|$)|(^|/)node_modules/electron/' },
    },
    {
      name: 'main-only-worker-protocol',
      comment: 'the controller spawns ranks; it may share their wire protocol and types, not their engine',
      severity: 'error',
      from: { path: '^src-main/' },
      to: { path: '^workers/', pathNot: '^workers/protocol/' },
    },
    {
      name: 'common-is-pure',
      comment:
        'common/ holds shared types, schemas and chart-option builders: nothing runtime-specific (echarts for its option types only, see common-echarts-types-only)',
      severity: 'error',
      from: { path: '^common/' },
      to: { pathNot: '^common/|(^|/)node_modules/(zod|echarts)/' },
    },
    {
      name: 'common-echarts-types-only',
      comment: 'common/charts builds plain ECharts option objects; the echarts runtime (DOM, canvas) belongs to whoever renders them',
      severity: 'error',
      from: { path: '^common/' },
      to: { path: '(^|/)node_modules/echarts/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'comm-only-through-index',
      comment:
        'the communication layer is used through workers/comm/index.ts only; its folders (algorithms, transport, shm, host-memory) are internals',
      severity: 'error',
      from: { pathNot: '^workers/comm/' },
      to: { path: '^workers/comm/', pathNot: '^workers/comm/index\\.ts$' },
    },
    {
      name: 'concerns-below-the-core',
      comment:
        'gradient compression, mixed precision and telemetry are used by the core (workers/model, train, parallel) and never use it (ARCHITECTURE.md, Where to add: a concern that cuts across strategies); precision/rank-weights.ts, which lays checkpoints out as the model shards them, is the one exception',
      severity: 'error',
      from: { path: `^workers/(${CONCERN_FOLDERS.join('|')})/`, pathNot: '^workers/precision/rank-weights\\.ts$' },
      to: { path: `^workers/(${CORE_FOLDERS.join('|')})/` },
    },
    {
      name: 'cli-is-an-entry',
      comment:
        'src-main/cli/ parses command lines and prints: nothing else imports it (the controller, the run launch, reports and the benchmarks use the libraries it uses: src-main/machine, src-main/launch, src-main/terminal)',
      severity: 'error',
      from: { pathNot: '^src-main/cli/' },
      to: { path: '^src-main/cli/' },
    },
    {
      name: 'electron-only-in-shell',
      comment: 'only the Electron shell files import electron',
      severity: 'error',
      from: { pathNot: '^src-main/shell/' },
      to: { path: '^electron(/|$)|(^|/)node_modules/electron/' },
    },
  ],
  options: {
    // Electron's runtime provides 'electron' (the npm package only locates the binary), so it
    // counts as a built-in: renderer-no-node-or-electron then catches it like node:fs.
    builtInModules: { add: ['electron'] },
    doNotFollow: { path: 'node_modules' },
    // Build outputs only, anchored at the root: excluding node_modules here would drop every
    // dependency that resolves into it (electron, ws, ...), so the rules about packages could
    // never fire. doNotFollow already keeps the cruise out of node_modules.
    exclude: { path: '^(dist|out)/' },
    tsConfig: { fileName: 'tsconfig.json' },
    tsPreCompilationDeps: true,
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      extensions: ['.ts', '.js', '.vue', '.mjs', '.cjs'],
    },
  },
};
