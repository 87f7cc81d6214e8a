#!/usr/bin/env node
// Typecheck and emit dist/ (common, workers, src-main, bench), then copy the WGSL sources the
// kernel launchers load next to their compiled modules.
import { spawnSync } from 'node:child_process';
import { cpSync, readdirSync, statSync, mkdirSync } from 'node:fs';
import path from 'node:path';

const root = path.dirname(path.dirname(new URL(import.meta.url).pathname));
const tsc = spawnSync(process.execPath, [path.join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], { cwd: root, stdio: 'inherit' });
if (tsc.status !== 0) process.exit(tsc.status ?? 1);
const tt = spawnSync(process.execPath, [path.join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.tests.json'], { cwd: root, stdio: 'inherit' });
if (tt.status !== 0) process.exit(tt.status ?? 1);

function copyWgsl(dir) {
  for (const name of readdirSync(path.join(root, dir))) {
    const rel = path.join(dir, name);
    if (statSync(path.join(root, rel)).isDirectory()) copyWgsl(rel);
    else if (name.endsWith('.wgsl')) {
      mkdirSync(path.join(root, 'dist', dir), { recursive: true });
      cpSync(path.join(root, rel), path.join(root, 'dist', rel));
    }
  }
}
copyWgsl('workers');
