// electron-vite with Shardwise's folders: explicit inputs for main, preload and renderer.
//   out/main/main.js       Electron main process (ESM, like the rest of the package)
//   out/main/launch.js     `npm run app`: starts Electron, or explains why not (plain Node)
//   out/preload/preload.cjs the sandboxed preload, CommonJS (sandboxed preloads cannot be ESM)
//   out/renderer/          the Vue dashboard
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { defineConfig } from 'electron-vite';
import vue from '@vitejs/plugin-vue';

const root = import.meta.dirname;
const pkg = JSON.parse(readFileSync(resolve(root, 'package.json'), 'utf8')) as { version: string };

export default defineConfig({
  main: {
    build: {
      outDir: resolve(root, 'out/main'),
      rolldownOptions: {
        input: {
          main: resolve(root, 'src-main/shell/main.ts'),
          launch: resolve(root, 'src-main/shell/launch.ts'),
        },
      },
    },
  },
  preload: {
    define: { __SHARDWISE_VERSION__: JSON.stringify(pkg.version) },
    build: {
      outDir: resolve(root, 'out/preload'),
      rolldownOptions: {
        input: { preload: resolve(root, 'src-main/shell/preload.ts') },
        output: { format: 'cjs', entryFileNames: '[name].cjs' },
      },
    },
  },
  renderer: {
    root: resolve(root, 'src-renderer'),
    plugins: [vue()],
    build: {
      outDir: resolve(root, 'out/renderer'),
      rolldownOptions: { input: resolve(root, 'src-renderer/index.html') },
    },
  },
});
