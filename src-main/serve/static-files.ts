// The built renderer (electron-vite builds it to out/renderer) served for web mode, with a
// strict Content-Security-Policy: scripts, styles and connections only from this origin.
// Where no build exists, a one-line page says how to make one.
import { createReadStream, existsSync, statSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// dist/src-main/serve/static-files.js -> <repo>/out/renderer
export const RENDERER_DIR = fileURLToPath(new URL('../../../out/renderer/', import.meta.url));

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.map': 'application/json',
};

export function csp(host: string): string {
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data: blob:",
    "font-src 'self'",
    `connect-src 'self' ws://${host} wss://${host}`,
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
    "object-src 'none'",
  ].join('; ');
}

const NOT_BUILT =
  '<!doctype html><meta charset="utf-8"><title>Shardwise</title><p>The dashboard is not built yet: run <code>npm run build</code> (or <code>bash scripts/setup.sh</code>) in the Shardwise folder, then reload this page.</p>\n';

export function serveStatic(req: IncomingMessage, res: ServerResponse, rootDir = RENDERER_DIR) {
  const headers = {
    'Content-Security-Policy': csp(req.headers.host ?? '127.0.0.1'),
    'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'no-referrer',
    'Cross-Origin-Opener-Policy': 'same-origin',
  };
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.writeHead(405, { ...headers, Allow: 'GET, HEAD' }).end();
    return;
  }
  let pathname: string;
  try {
    pathname = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
  } catch {
    res.writeHead(400, headers).end();
    return;
  }
  if (!existsSync(path.join(rootDir, 'index.html'))) {
    res
      .writeHead(pathname === '/' ? 200 : 404, { ...headers, 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-store' })
      .end(NOT_BUILT);
    return;
  }
  const rel = pathname === '/' ? 'index.html' : pathname.replace(/^\/+/, '');
  const file = path.resolve(rootDir, rel);
  // never outside the renderer folder (../, encoded or not)
  if (!file.startsWith(path.resolve(rootDir) + path.sep) || !existsSync(file) || !statSync(file).isFile()) {
    res.writeHead(404, { ...headers, 'Content-Type': 'text/plain; charset=utf-8' }).end('not found\n');
    return;
  }
  const type = TYPES[path.extname(file)] ?? 'application/octet-stream';
  res.writeHead(200, { ...headers, 'Content-Type': type, 'Cache-Control': rel === 'index.html' ? 'no-store' : 'max-age=3600' });
  if (req.method === 'HEAD') res.end();
  else createReadStream(file).pipe(res);
}
