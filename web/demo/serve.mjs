#!/usr/bin/env node
// A small static server for the demo, offline: serves the package folder
// (this file's parent's parent) on 127.0.0.1 with the MIME types wasm and
// ES modules need, byte ranges (wisp's plan() reads only a GGUF's header),
// and optionally a folder of models under /models/. Pages are cross-origin
// isolated (COOP/COEP headers) so wisp can use its threaded build; with
// --no-isolate they are not, and wisp runs on one thread.
//
//   node demo/serve.mjs [--port 8080] [--host 127.0.0.1] [--models DIR] [--no-isolate]
//   then open http://127.0.0.1:8080/demo/
import http from 'node:http';
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const MIME = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.mjs': 'text/javascript', '.css': 'text/css',
  '.wasm': 'application/wasm', '.json': 'application/json', '.txt': 'text/plain; charset=utf-8', '.png': 'image/png',
  '.svg': 'image/svg+xml', '.ts': 'text/plain; charset=utf-8',
};

// Resolve a URL path inside root, refusing anything that climbs out of it.
function inside(root, urlPath) {
  const file = path.resolve(root, '.' + path.posix.normalize('/' + urlPath));
  return file === root || file.startsWith(root + path.sep) ? file : null;
}

// What makes a page cross-origin isolated (crossOriginIsolated, and with it
// SharedArrayBuffer and wasm threads).
export const ISOLATION_HEADERS = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
};

async function send(req, res, file, extraHeaders) {
  let st;
  try {
    st = await stat(file);
    if (st.isDirectory()) {
      file = path.join(file, 'index.html');
      st = await stat(file);
    }
  } catch {
    res.writeHead(404, { 'Content-Type': 'text/plain' }).end('not found\n');
    return;
  }
  const headers = {
    'Content-Type': MIME[path.extname(file)] || 'application/octet-stream', 'Cache-Control': 'no-store',
    'Accept-Ranges': 'bytes', ...extraHeaders,
  };
  const range = /^bytes=(\d*)-(\d*)$/.exec(req.headers.range || '');
  let start = 0;
  let end = st.size - 1;
  let code = 200;
  if (range && (range[1] || range[2])) {
    if (range[1]) {
      start = Number(range[1]);
      if (range[2]) end = Math.min(end, Number(range[2]));
    } else {
      start = Math.max(0, st.size - Number(range[2]));
    }
    if (start > end || start >= st.size) {
      res.writeHead(416, { 'Content-Range': `bytes */${st.size}` }).end();
      return;
    }
    code = 206;
    headers['Content-Range'] = `bytes ${start}-${end}/${st.size}`;
  }
  headers['Content-Length'] = String(st.size === 0 ? 0 : end - start + 1);
  res.writeHead(code, headers);
  if (req.method === 'HEAD' || st.size === 0) {
    res.end();
    return;
  }
  createReadStream(file, { start, end }).on('error', () => res.destroy()).pipe(res);
}

// Start serving; resolves to the http.Server (port 0 picks a free one).
// `mounts` maps URL prefixes ('/models/') to more folders; `isolate: false`
// leaves out the isolation headers; onRequest(req) sees every request.
export function serve({ root, models, mounts = {}, port = 8080, host = '127.0.0.1', isolate = true, onRequest } = {}) {
  root = path.resolve(root ?? path.join(path.dirname(fileURLToPath(import.meta.url)), '..'));
  const extra = Object.entries({ ...mounts, ...(models ? { '/models/': models } : {}) })
    .map(([prefix, dir]) => [prefix.endsWith('/') ? prefix : prefix + '/', path.resolve(dir)]);
  const extraHeaders = isolate ? ISOLATION_HEADERS : {};
  const server = http.createServer((req, res) => {
    onRequest?.(req);
    let urlPath;
    try {
      urlPath = decodeURIComponent(new URL(req.url, 'http://localhost').pathname);
    } catch {
      res.writeHead(400).end();
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405).end();
      return;
    }
    if (urlPath === '/') {
      res.writeHead(302, { Location: '/demo/' }).end();
      return;
    }
    const mount = extra.find(([prefix]) => urlPath.startsWith(prefix));
    const file = mount ? inside(mount[1], urlPath.slice(mount[0].length - 1)) : inside(root, urlPath);
    if (!file) {
      res.writeHead(403).end();
      return;
    }
    send(req, res, file, extraHeaders);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve(server));
  });
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const opt = (name, dflt) => {
    const i = args.indexOf(name);
    return i >= 0 && i + 1 < args.length ? args[i + 1] : dflt;
  };
  if (args.includes('--help') || args.includes('-h')) {
    console.log('usage: node demo/serve.mjs [--port 8080] [--host 127.0.0.1] [--models DIR] [--no-isolate]\n' +
      'Serves the wisp demo offline; with --models, DIR is served under /models/ (e.g. /models/stories260K.gguf).\n' +
      'Pages are cross-origin isolated (COOP/COEP headers), so wisp runs threaded; --no-isolate leaves the headers out.');
    process.exit(0);
  }
  const server = await serve({ port: Number(opt('--port', 8080)), host: opt('--host', '127.0.0.1'), models: opt('--models'),
    isolate: !args.includes('--no-isolate') });
  const { address, port } = server.address();
  console.log(`wisp demo: http://${address}:${port}/demo/  (Ctrl-C to stop)`);
}
