// Getting GGUF bytes from wherever they are into wasm memory.
//
// The one copy: wasm code can only read its own linear memory, so a model in
// a JS ArrayBuffer (or a File, a download, a file on disk) is copied once into
// memory the engine allocated for it. Streams (downloads, Blob.stream(), file
// reads) are written chunk by chunk straight into that memory when the size
// is known up front, so the model never exists twice. Only a download without
// a usable Content-Length (compressed transfer) is gathered first and then
// copied in. Everything after that (the weights, the tokenizer's strings)
// is used in place.
import { isNode } from './engine.mjs';
import { WispError, abortError } from './errors.mjs';

const CHUNK = 16 << 20;

function checkAbort(signal) {
  if (signal?.aborted) throw abortError(signal.reason);
}

// What kind of thing `source` is: 'bytes', 'blob', 'response', 'url' or 'path'.
export function sourceKind(source) {
  if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) return 'bytes';
  if (typeof SharedArrayBuffer === 'function' && source instanceof SharedArrayBuffer) return 'bytes';
  if (typeof Blob === 'function' && source instanceof Blob) return 'blob';
  if (typeof Response === 'function' && source instanceof Response) return 'response';
  if (source instanceof URL) return isNode && source.protocol === 'file:' ? 'path' : 'url';
  if (typeof source === 'string') {
    if (/^(https?|data|blob):/i.test(source)) return 'url';
    if (isNode) return 'path';
    return 'url';
  }
  throw new WispError('arg', 'a model source must be a Uint8Array/ArrayBuffer, a File/Blob, a Response, a URL, or (in Node) a file path');
}

export function sourceName(source) {
  const kind = sourceKind(source);
  if (kind === 'blob') return source.name || 'blob';
  if (kind === 'url' || kind === 'path') return String(source);
  if (kind === 'response') return source.url || 'response';
  return `${source.byteLength} bytes`;
}

function asBytes(source) {
  if (source instanceof Uint8Array) return source;
  if (ArrayBuffer.isView(source)) return new Uint8Array(source.buffer, source.byteOffset, source.byteLength);
  return new Uint8Array(source);
}

async function nodePath(source) {
  if (source instanceof URL) {
    const { fileURLToPath } = await import('node:url');
    return fileURLToPath(source);
  }
  return source;
}

function resolveUrl(source) {
  const base = typeof location === 'object' && location.href ? location.href : undefined;
  return new URL(source, base);
}

async function fetchChecked(url, init) {
  let res;
  try {
    res = await fetch(url, init);
  } catch (e) {
    if (e?.name === 'AbortError') throw e;
    throw new WispError('io', `cannot fetch ${url}: ${e?.message ?? e}`);
  }
  if (!res.ok) throw new WispError('io', `cannot fetch ${url}: HTTP ${res.status} ${res.statusText}`);
  return res;
}

// The byte count a response's body will have, when the headers say so.
function bodyLength(res) {
  const enc = res.headers.get('content-encoding');
  if (enc && enc !== 'identity') return undefined;
  const len = Number(res.headers.get('content-length'));
  return Number.isSafeInteger(len) && len >= 0 ? len : undefined;
}

// Write a stream's chunks into wasm memory after `head` (bytes already read
// from it); returns { ptr, size }. onProgress({ loaded, total, from }).
async function streamInto(engine, reader, size, name, { onProgress, signal, from, head }) {
  const report = (loaded, total) => onProgress?.({ loaded, total, from });
  let ptr = 0;
  try {
    if (size !== undefined) {
      ptr = engine.alloc(size);
      let off = 0;
      const put = (value) => {
        if (off + value.length > size) throw new WispError('io', `${name}: more bytes arrived than the announced ${size}`);
        engine.u8.set(value, ptr + off);
        off += value.length;
        report(off, size);
      };
      report(0, size);
      if (head?.length) put(head);
      for (;;) {
        checkAbort(signal);
        const { done, value } = await reader.read();
        if (done) break;
        put(value);
      }
      if (off !== size) throw new WispError('io', `${name}: truncated: ${off} of ${size} bytes arrived`);
      return { ptr, size };
    }
    const chunks = head?.length ? [head] : [];
    let total = head?.length ?? 0;
    for (;;) {
      checkAbort(signal);
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      total += value.length;
      report(total, undefined);
    }
    ptr = engine.alloc(total);
    let off = 0;
    for (const c of chunks) {
      engine.u8.set(c, ptr + off);
      off += c.length;
    }
    return { ptr, size: total };
  } catch (e) {
    if (ptr) engine.free(ptr);
    reader.cancel().catch(() => {});
    throw e;
  }
}

async function openPath(source) {
  const path = await nodePath(source);
  const { open } = await import('node:fs/promises');
  try {
    return { path, fh: await open(path, 'r') };
  } catch (e) {
    throw new WispError('io', `cannot open ${path}: ${e.code === 'ENOENT' ? 'no such file' : e.message}`);
  }
}

async function readFileInto(engine, fh, size, path, { onProgress, signal }) {
  let ptr = 0;
  try {
    ptr = engine.alloc(size);
    let off = 0;
    onProgress?.({ loaded: 0, total: size, from: 'file' });
    while (off < size) {
      checkAbort(signal);
      const n = Math.min(CHUNK, size - off);
      const { bytesRead } = await fh.read(engine.u8, ptr + off, n, off);
      if (bytesRead === 0) throw new WispError('io', `${path}: the file shrank while being read`);
      off += bytesRead;
      onProgress?.({ loaded: off, total: size, from: 'file' });
    }
    return { ptr, size };
  } catch (e) {
    if (ptr) engine.free(ptr);
    throw e;
  }
}

// A model source opened once for both planning and reading:
//   { name, size (undefined if unknown), from, prefix: { read(n) -> the first n bytes },
//     into(engine, { onProgress }) -> { ptr, size } in wasm memory (ptr from ww_alloc, owned by the caller),
//     close() }
// A download is requested once: its header is read from the body's first
// chunks (prefix), which `into` then writes before the rest.
export async function openSource(source, { signal } = {}) {
  checkAbort(signal);
  const kind = sourceKind(source);
  const name = sourceName(source);
  if (kind === 'bytes') {
    const bytes = asBytes(source);
    return {
      name, size: bytes.length, from: 'memory', prefix: { read: async (n) => bytes.subarray(0, n) }, close() {},
      async into(engine, { onProgress } = {}) {
        const ptr = engine.alloc(bytes.length);
        engine.u8.set(bytes, ptr);
        onProgress?.({ loaded: bytes.length, total: bytes.length, from: 'memory' });
        return { ptr, size: bytes.length };
      },
    };
  }
  if (kind === 'blob') return blobSource(source, name, 'file', signal);
  if (kind === 'path') {
    const { path, fh } = await openPath(source);
    const { size } = await fh.stat();
    return {
      name, size, from: 'file', close: () => fh.close(),
      prefix: {
        async read(n) {
          const buf = new Uint8Array(Math.min(n, size));
          const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
          return buf.subarray(0, bytesRead);
        },
      },
      into: (engine, o = {}) => readFileInto(engine, fh, size, path, { ...o, signal }),
    };
  }
  const res = kind === 'response' ? source : await fetchChecked(resolveUrl(source), { signal, credentials: 'same-origin' });
  return responseSource(res, name, 'network', signal);
}

export function blobSource(blob, name, from, signal) {
  return {
    name, size: blob.size, from, close() {},
    prefix: { read: async (n) => new Uint8Array(await blob.slice(0, n).arrayBuffer()) },
    into: (engine, { onProgress } = {}) => streamInto(engine, blob.stream().getReader(), blob.size, name,
      { onProgress, signal, from }),
  };
}

export function responseSource(res, name, from, signal) {
  if (!res.body) throw new WispError('io', `${name}: the response has no body`);
  const reader = res.body.getReader();
  const size = bodyLength(res);
  const prefix = streamPrefix(reader, signal);
  return {
    name, size, from, prefix,
    into: (engine, { onProgress } = {}) => streamInto(engine, reader, size, name,
      { onProgress, signal, from, head: prefix.taken() }),
    close: () => reader.cancel().catch(() => {}),
  };
}

// Copy the whole source into wasm memory: { ptr, size } (ptr from ww_alloc,
// owned by the caller). onProgress({loaded, total, from}) as bytes arrive.
export async function readIntoEngine(engine, source, { onProgress, signal } = {}) {
  const src = await openSource(source, { signal });
  try {
    return await src.into(engine, { onProgress });
  } finally {
    await src.close();
  }
}

// Reading only the start of a source: { size (undefined if unknown),
// read(n) -> the first n bytes (fewer at the end), close() }. URLs are read
// with Range requests, so only the header crosses the network.
export async function openPrefixReader(source, { signal } = {}) {
  const kind = sourceKind(source);
  if (kind === 'url') return urlPrefixReader(resolveUrl(source), signal);
  const src = await openSource(source, { signal });
  return { size: src.size, read: src.prefix.read, close: src.close };
}

// The start of a stream, read only as far as asked and kept: taken() hands
// what was read to whoever reads the rest from the same reader.
function streamPrefix(reader, signal) {
  let have = new Uint8Array(0);
  let ended = false;
  return {
    async read(n) {
      while (have.length < n && !ended) {
        checkAbort(signal);
        const { done, value } = await reader.read();
        if (done) { ended = true; break; }
        const next = new Uint8Array(have.length + value.length);
        next.set(have);
        next.set(value, have.length);
        have = next;
      }
      return have.subarray(0, n);
    },
    taken() {
      const head = have;
      have = new Uint8Array(0);
      return head;
    },
  };
}

function streamPrefixReader(body, size, signal) {
  const reader = body.getReader();
  return { size, read: streamPrefix(reader, signal).read, close: () => reader.cancel().catch(() => {}) };
}

// HTTP: ask for byte ranges; a server that ignores Range sends the whole
// file, which is then read only as far as the header goes.
async function urlPrefixReader(url, signal) {
  let res = await fetchChecked(url, { headers: { Range: 'bytes=0-262143' }, signal, credentials: 'same-origin' });
  if (res.status !== 206) return streamPrefixReader(res.body, bodyLength(res), signal);
  const m = /\/(\d+)\s*$/.exec(res.headers.get('content-range') || '');
  const size = m ? Number(m[1]) : undefined;
  let have = new Uint8Array(await res.arrayBuffer());
  return {
    size,
    async read(n) {
      if (have.length < n && (size === undefined || have.length < size)) {
        res = await fetchChecked(url, { headers: { Range: `bytes=${have.length}-${n - 1}` }, signal, credentials: 'same-origin' });
        const more = new Uint8Array(await res.arrayBuffer());
        const next = new Uint8Array(have.length + more.length);
        next.set(have);
        next.set(more, have.length);
        have = next;
      }
      return have.subarray(0, n);
    },
    close() {},
  };
}
