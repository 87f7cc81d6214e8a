#!/usr/bin/env node
// Typecheck and emit dist/ (common, workers, src-main, bench), then copy the WGSL sources the
// kernel launchers load next to their compiled modules and the files an exporter copies out as
// they are (a template/ folder: the PyTorch job's train.py and launch.sh), and build the
// dashboard where it is missing or stale (build-dashboard.mjs: `shardwise serve` serves it).
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, readdirSync, rmSync, statSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { buildDashboard } from './build-dashboard.mjs';

const root = path.dirname(path.dirname(new URL(import.meta.url).pathname));
// dist/ is emitted whole every time: a file moved or deleted in the sources must not live on there.
rmSync(path.join(root, 'dist'), { recursive: true, force: true });
const tsc = spawnSync(process.execPath, [path.join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], {
  cwd: root,
  stdio: 'inherit',
});
if (tsc.status !== 0) process.exit(tsc.status ?? 1);
const tt = spawnSync(process.execPath, [path.join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.tests.json'], {
  cwd: root,
  stdio: 'inherit',
});
if (tt.status !== 0) process.exit(tt.status ?? 1);

function copyWgsl(dir) {
  for (const name of readdirSync(path.join(root, dir))) {
    const rel = path.join(dir, name);
    if (statSync(path.join(root, rel)).isDirectory()) copyWgsl(rel);
    else if (name.endsWith('.wgsl') || rel.split(path.sep).includes('template')) {
      mkdirSync(path.join(root, 'dist', dir), { recursive: true });
      cpSync(path.join(root, rel), path.join(root, 'dist', rel));
    }
  }
}
copyWgsl('workers');

// Per-layer type checks that emit nothing (VS Code style): the renderer with DOM and no Node
// types (vue-tsc, so .vue files count), the Electron shell with Node + Electron and no DOM, and
// common/ with neither. They run in parallel; together they add about two seconds.
const layerChecks = [
  [path.join(root, 'node_modules/vue-tsc/bin/vue-tsc.js'), '--noEmit', '-p', 'src-renderer/tsconfig.json'],
  [path.join(root, 'node_modules/typescript/bin/tsc'), '--noEmit', '-p', 'src-main/shell/tsconfig.json'],
  [path.join(root, 'node_modules/typescript/bin/tsc'), '--noEmit', '-p', 'common/tsconfig.json'],
].map(
  (args) =>
    new Promise((resolve) => {
      const child = spawn(process.execPath, args, { cwd: root, stdio: 'inherit' });
      child.on('exit', (code) => resolve(code ?? 1));
    }),
);
const layerCodes = await Promise.all(layerChecks);
if (layerCodes.some((c) => c !== 0)) process.exit(1);

try {
  if (await buildDashboard(root)) process.stdout.write('build: built the dashboard (out/renderer) that shardwise serve serves\n');
} catch (e) {
  process.stderr.write(`${e.message}\n`);
  process.exit(1);
}
