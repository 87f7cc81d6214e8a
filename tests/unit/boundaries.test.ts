// The boundaries of ARCHITECTURE.md (section Boundaries), enforced by dependency-cruiser
// (.dependency-cruiser.cjs): the real tree has no violation, and each rule fires on a throwaway
// tree that breaks it.
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const LAYERS = ['common', 'workers', 'src-main', 'src-renderer'];
/** what the cruise reads: the runtime layers and the benchmarks (which use workers/ like a caller) */
const CRUISED = [...LAYERS, 'bench'];

interface Violation {
  from: string;
  to: string;
  rule: { name: string; severity: string };
}
interface CruiseResult {
  modules: { source: string; dependencies: { resolved: string }[] }[];
  summary: { violations: Violation[]; totalCruised: number };
}

/** Run the dependency-cruiser CLI in `cwd` with the config found there; JSON result. */
function cruise(cwd: string): CruiseResult {
  const bin = path.join(root, 'node_modules/dependency-cruiser/bin/dependency-cruise.mjs');
  const r = spawnSync(process.execPath, [bin, '--config', '.dependency-cruiser.cjs', '--output-type', 'json', ...CRUISED], {
    cwd,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  if (!r.stdout) throw new Error(`dependency-cruiser printed nothing (exit ${r.status}): ${r.stderr}`);
  return JSON.parse(r.stdout) as CruiseResult;
}

const describeViolation = (v: Violation): string => `${v.rule.name}: ${v.from} -> ${v.to}`;

describe('runtime boundaries (dependency-cruiser)', () => {
  it('the source tree has 0 violations across common, workers, src-main, src-renderer and bench', () => {
    const result = cruise(root);
    expect(result.summary.violations.map(describeViolation)).toEqual([]);
    // It really looked: every layer, .vue files included, was cruised.
    const sources = result.modules.map((m) => m.source);
    for (const layer of CRUISED)
      expect(
        sources.some((s) => s.startsWith(`${layer}/`)),
        `no module cruised under ${layer}/`,
      ).toBe(true);
    expect(sources).toContain('src-renderer/src/App.vue');
    // ...and saw the shell's electron import, so the electron rules had something to judge.
    const shellMain = result.modules.find((m) => m.source === 'src-main/shell/main.ts');
    expect(shellMain?.dependencies.map((d) => d.resolved)).toContain('electron');
    // ...and callers of the communication layer from workers/ and bench/, so comm-only-through-index had some to judge.
    const commCallers = result.modules.filter(
      (m) => !m.source.startsWith('workers/comm/') && m.dependencies.some((d) => d.resolved === 'workers/comm/index.ts'),
    );
    expect(commCallers.map((m) => m.source)).toContain('bench/comm.ts');
    expect(commCallers.some((m) => m.source.startsWith('workers/parallel/'))).toBe(true);
  });

  describe('each rule fires on a tree that breaks it', () => {
    let fixture: string;
    let violations: Violation[];
    const bad: Record<string, string> = {
      // file -> its one import
      'src-renderer/bad.ts': "import { readFileSync } from 'node:fs';\nexport const x = readFileSync;\n",
      'src-renderer/bad-electron.ts': "import { ipcRenderer } from 'electron';\nexport const x = ipcRenderer;\n",
      'src-renderer/bad-ws.ts': "import { WebSocket } from 'ws';\nexport const x = WebSocket;\n",
      'src-renderer/bad-main.ts': "import { x } from '../src-main/cli/ok.js';\nexport const y = x;\n",
      'workers/bad.ts': "import { app } from 'electron';\nexport const x = app;\n",
      'src-main/bad.ts': "import { listAdapters } from '../workers/gpu/device.js';\nexport const x = listAdapters;\n",
      'src-main/cli/bad-electron.ts': "import { app } from 'electron';\nexport const x = app;\n",
      'src-main/controller/bad-cli.ts': "import { x } from '../cli/ok.js';\nexport const y = x;\n",
      'src-main/launch/bad-cli.ts': "import { x } from '../cli/ok.js';\nexport const y = x;\n",
      'common/bad.ts': "import path from 'node:path';\nexport const x = path.sep;\n",
      'common/bad-echarts.ts': "import { init } from 'echarts';\nexport const x = init;\n",
      'common/api/bad-ws.ts': "import { WebSocket } from 'ws';\nexport const x = WebSocket;\n",
      'common/api/bad-main.ts': "import { x } from '../../src-main/cli/ok.js';\nexport const y = x;\n",
      'workers/parallel/bad-comm.ts': "import type { Link } from '../comm/transport/link.js';\nexport type L = Link;\n",
      'bench/bad-comm.ts': "import { ring } from '../workers/comm/algorithms/ring.js';\nexport const x = ring;\n",
      'workers/comm-hooks/bad-core.ts': "import { x } from '../parallel/ok-comm.js';\nexport const y = x;\n",
      'workers/precision/bad-core.ts': "import { x } from '../parallel/ok-comm.js';\nexport const y = x;\n",
    };
    const good: Record<string, string> = {
      'workers/gpu/device.ts': 'export async function listAdapters(): Promise<void> {}\n',
      'workers/protocol/ok.ts': 'export const PROTOCOL = 1;\n',
      'src-main/cli/ok.ts': "import { PROTOCOL } from '../../workers/protocol/ok.js';\nexport const x = PROTOCOL;\n",
      'src-main/shell/ok.ts': "import { app } from 'electron';\nexport const x = app;\n",
      'common/ok.ts': "import { z } from 'zod';\nexport const s = z.string();\n",
      'common/ok-echarts.ts': "import type { EChartsOption } from 'echarts';\nexport const o: EChartsOption = {};\n",
      'src-renderer/ok-api.ts': "import { s } from '../common/ok.js';\nimport { z } from 'zod';\nexport const t = z.array(s);\n",
      'workers/comm/transport/link.ts': 'export interface Link {\n  send(data: Buffer): void;\n}\n',
      'workers/comm/algorithms/ring.ts':
        "import type { Link } from '../transport/link.js';\nexport const ring = (l: Link): void => l.send(Buffer.alloc(0));\n",
      'workers/comm/index.ts': "export { ring } from './algorithms/ring.js';\nexport type { Link } from './transport/link.js';\n",
      'workers/parallel/ok-comm.ts': "import { ring } from '../comm/index.js';\nexport const x = ring;\n",
    };

    beforeAll(() => {
      fixture = mkdtempSync(path.join(tmpdir(), 'shardwise-boundaries-'));
      for (const f of ['.dependency-cruiser.cjs', 'tsconfig.json', 'tsconfig.base.json', 'package.json'])
        cpSync(path.join(root, f), path.join(fixture, f));
      symlinkSync(path.join(root, 'node_modules'), path.join(fixture, 'node_modules'), 'dir');
      for (const [file, text] of Object.entries({ ...good, ...bad })) {
        mkdirSync(path.dirname(path.join(fixture, file)), { recursive: true });
        writeFileSync(path.join(fixture, file), text);
      }
      violations = cruise(fixture).summary.violations;
    });
    afterAll(() => rmSync(fixture, { recursive: true, force: true }));

    const fired = (rule: string, from: string): boolean => violations.some((v) => v.rule.name === rule && v.from === from);

    it('renderer-no-node-or-electron: src-renderer/bad.ts importing node:fs', () => {
      expect(fired('renderer-no-node-or-electron', 'src-renderer/bad.ts'), violations.map(describeViolation).join('\n')).toBe(true);
    });
    it('renderer-no-node-or-electron: src-renderer/bad-electron.ts importing electron', () => {
      expect(fired('renderer-no-node-or-electron', 'src-renderer/bad-electron.ts'), violations.map(describeViolation).join('\n')).toBe(
        true,
      );
    });
    it('renderer-only-own-code-and-common: src-renderer importing src-main and ws', () => {
      expect(fired('renderer-only-own-code-and-common', 'src-renderer/bad-main.ts'), violations.map(describeViolation).join('\n')).toBe(
        true,
      );
      expect(fired('renderer-only-own-code-and-common', 'src-renderer/bad-ws.ts'), violations.map(describeViolation).join('\n')).toBe(true);
    });
    it('workers-no-electron-no-main: workers/bad.ts importing electron', () => {
      expect(fired('workers-no-electron-no-main', 'workers/bad.ts'), violations.map(describeViolation).join('\n')).toBe(true);
    });
    it('main-only-worker-protocol: src-main/bad.ts importing workers/gpu/device', () => {
      expect(fired('main-only-worker-protocol', 'src-main/bad.ts'), violations.map(describeViolation).join('\n')).toBe(true);
    });
    it('common-is-pure: common/bad.ts importing node:path', () => {
      expect(fired('common-is-pure', 'common/bad.ts'), violations.map(describeViolation).join('\n')).toBe(true);
    });
    it('common-echarts-types-only: common/bad-echarts.ts importing the echarts runtime', () => {
      expect(fired('common-echarts-types-only', 'common/bad-echarts.ts'), violations.map(describeViolation).join('\n')).toBe(true);
    });
    it('common-is-pure: the typed API in common/api importing ws or src-main', () => {
      expect(fired('common-is-pure', 'common/api/bad-ws.ts'), violations.map(describeViolation).join('\n')).toBe(true);
      expect(fired('common-is-pure', 'common/api/bad-main.ts'), violations.map(describeViolation).join('\n')).toBe(true);
    });
    it('electron-only-in-shell: workers/bad.ts and src-main/cli/bad-electron.ts importing electron', () => {
      expect(fired('electron-only-in-shell', 'workers/bad.ts'), violations.map(describeViolation).join('\n')).toBe(true);
      expect(fired('electron-only-in-shell', 'src-main/cli/bad-electron.ts'), violations.map(describeViolation).join('\n')).toBe(true);
    });
    it('cli-is-an-entry: src-main/controller and src-main/launch importing src-main/cli', () => {
      expect(fired('cli-is-an-entry', 'src-main/controller/bad-cli.ts'), violations.map(describeViolation).join('\n')).toBe(true);
      expect(fired('cli-is-an-entry', 'src-main/launch/bad-cli.ts'), violations.map(describeViolation).join('\n')).toBe(true);
    });
    it('comm-only-through-index: workers/parallel and bench importing comm internals', () => {
      expect(fired('comm-only-through-index', 'workers/parallel/bad-comm.ts'), violations.map(describeViolation).join('\n')).toBe(true);
      expect(fired('comm-only-through-index', 'bench/bad-comm.ts'), violations.map(describeViolation).join('\n')).toBe(true);
    });
    it('concerns-below-the-core: workers/comm-hooks and workers/precision importing a strategy', () => {
      expect(fired('concerns-below-the-core', 'workers/comm-hooks/bad-core.ts'), violations.map(describeViolation).join('\n')).toBe(true);
      expect(fired('concerns-below-the-core', 'workers/precision/bad-core.ts'), violations.map(describeViolation).join('\n')).toBe(true);
    });
    it('allowed imports stay quiet: shell -> electron, main -> workers/protocol, common -> zod and echarts types, renderer -> common and zod, comm internals among themselves, workers -> comm/index', () => {
      const fromGood = violations.filter((v) => v.from in good);
      expect(fromGood.map(describeViolation)).toEqual([]);
    });
  });
});
