#!/usr/bin/env node
// The `shardwise` command: a thin entry into the compiled CLI (npm run build makes dist/).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const entry = new URL('../dist/src-main/cli/main.js', import.meta.url);
if (!existsSync(fileURLToPath(entry))) {
  process.stderr.write("shardwise: not built yet; run 'npm ci && npm run build' in the shardwise folder first\n");
  process.exit(2);
}
await import(entry.href);
