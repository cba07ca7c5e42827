// Models fetched by URL are kept in the browser's Cache API (cache
// 'wisp-models'), so the next load streams them from disk instead of the
// network. Cache API rather than the origin private file system (OPFS): in
// Chromium 156 on this project's test machine, storing a 256 MiB download
// took 2.0-2.3 s with cache.put (as long as the download alone) and
// 3.6-3.8 s through an OPFS writable; reading it back took 0.6-0.8 s either
// way. It also keeps the response's headers, works the same in pages and
// workers, and needs no file naming. Where there is no Cache API (Node, an
// insecure http: page) models are simply not cached.
//
// A download is written to wasm memory and to the cache at the same time
// (the body is teed); the entry exists only once the whole body arrived. A
// load that stops early (refused as too large, aborted, failed) aborts the
// download and keeps no entry.
import { WispError, abortError } from './errors.mjs';
import { openSource, responseSource, sourceKind, sourceName } from './source.mjs';

export const CACHE_NAME = 'wisp-models';

function cacheStorage() {
  return typeof caches === 'object' && caches !== null && typeof caches.open === 'function' ? caches : null;
}

function urlOf(source) {
  const base = typeof location === 'object' && location.href ? location.href : undefined;
  return new URL(source, base).href;
}

// Why a source is not cached (null when it is looked up in the cache).
function notCachedBecause(source, cache) {
  if (cache === false) return 'off (cache: false)';
  if (sourceKind(source) !== 'url') return 'not a URL';
  if (!cacheStorage()) return 'no Cache API here (Node, or a page that is not a secure context)';
  if (!/^https?:/.test(urlOf(source))) return 'not an http(s) URL';
  return null;
}

// The source of a model to load (source.mjs openSource, plus `cache`: 'hit',
// 'stored' once into() finished and the entry is written, or why not).
export async function openModelSource(source, { signal, cache } = {}) {
  const why = notCachedBecause(source, cache);
  if (why) return { ...(await openSource(source, { signal })), cache: why };
  const url = urlOf(source);
  const name = sourceName(source);
  const store = await cacheStorage().open(CACHE_NAME);
  const hit = await store.match(url);
  if (hit) return { ...responseSource(hit, name, 'cache', signal), cache: 'hit' };

  const download = new AbortController();
  const onAbort = () => download.abort(signal.reason);
  if (signal?.aborted) throw abortError(signal.reason);
  signal?.addEventListener('abort', onAbort, { once: true });
  let res;
  try {
    res = await fetch(url, { signal: download.signal, credentials: 'same-origin' });
  } catch (e) {
    signal?.removeEventListener('abort', onAbort);
    if (e?.name === 'AbortError') throw e;
    throw new WispError('io', `cannot fetch ${url}: ${e?.message ?? e}`);
  }
  if (!res.ok) {
    signal?.removeEventListener('abort', onAbort);
    throw new WispError('io', `cannot fetch ${url}: HTTP ${res.status} ${res.statusText}`);
  }
  if (res.status !== 200 || !res.body) {
    signal?.removeEventListener('abort', onAbort);
    return { ...responseSource(res, name, 'network', signal), cache: `not stored (HTTP ${res.status})` };
  }
  const [toWasm, toCache] = teeBounded(res.body, CACHE_BACKLOG);
  const stored = store.put(url, new Response(toCache, { status: 200, headers: res.headers })).then(() => null, (e) => e);
  const src = responseSource(new Response(toWasm, { status: 200, headers: res.headers }), name, 'network', signal);
  let complete = false;
  const out = {
    ...src,
    cache: 'storing',
    async into(engine, options) {
      const r = await src.into(engine, options);
      complete = true;
      const failed = await stored;
      out.cache = failed ? `not stored: ${failed.message ?? failed}` : 'stored';
      return r;
    },
    async close() {
      signal?.removeEventListener('abort', onAbort);
      await src.close();
      if (complete) return;
      // no entry for a load that did not finish: cache.put fails with the
      // aborted body, or (when the body had all arrived) the entry goes
      download.abort();
      if (!(await stored)) await store.delete(url);
    },
  };
  return out;
}

// How far (bytes) a download may run ahead of the cache's writer. The
// body's own tee() queues every chunk the writer has not taken yet: from a
// local server, which sends faster than the cache writes, that was most of
// the model, and the page held it twice. A TinyLlama-shaped Q4_K_M (0.7 GB)
// in Chromium 156: renderer peak RSS 1594-1597 MiB with tee(), 1062-1068
// with this (805 once loaded), and the load no slower (5.7 s, 4.4-5.2 s):
// into() returns only when the cache entry is written, so it waited for the
// cache's writer anyway.
const CACHE_BACKLOG = 16 << 20;

// Two streams of one body, like body.tee(), but the first (to wasm memory)
// waits while the second (to the cache) holds `limit` bytes not yet taken.
// Both get the same chunks (no copies; neither side changes them). If the
// cache side stops (cache.put failed), the first goes on alone; an error of
// the body, or the first side cancelled, ends both.
export function teeBounded(body, limit) {
  const reader = body.getReader();
  let cacheSide = null;
  let cacheGone = false;
  let room = null; // resolves a wait for the cache side to take chunks
  const wake = () => {
    room?.();
    room = null;
  };
  const toCache = new ReadableStream({
    start(c) { cacheSide = c; },
    pull: wake,
    cancel() {
      cacheGone = true;
      wake();
    },
  }, new ByteLengthQueuingStrategy({ highWaterMark: limit }));
  const endCache = (how) => {
    if (cacheGone) return;
    cacheGone = true;
    try {
      how();
    } catch { /* already closed */ }
  };
  const toWasm = new ReadableStream({
    async pull(c) {
      let next;
      try {
        next = await reader.read();
      } catch (e) {
        endCache(() => cacheSide.error(e));
        throw e;
      }
      if (next.done) {
        endCache(() => cacheSide.close());
        c.close();
        return;
      }
      if (!cacheGone) {
        cacheSide.enqueue(next.value);
        while (!cacheGone && cacheSide.desiredSize <= 0) await new Promise((resolve) => { room = resolve; });
      }
      c.enqueue(next.value);
    },
    cancel(reason) {
      endCache(() => cacheSide.error(reason));
      wake();
      return reader.cancel(reason);
    },
  });
  return [toWasm, toCache];
}

// A cached model's response for planning (only its header is read), or null.
export async function cachedResponse(source) {
  if (notCachedBecause(source)) return null;
  const store = await cacheStorage().open(CACHE_NAME);
  return (await store.match(urlOf(source))) ?? null;
}

/** Models in the cache: [{ url, bytes }]. Empty where there is no Cache API. */
export async function cachedModels() {
  const storage = cacheStorage();
  if (!storage || !(await storage.has(CACHE_NAME))) return [];
  const store = await storage.open(CACHE_NAME);
  const out = [];
  for (const req of await store.keys()) {
    const res = await store.match(req);
    const len = Number(res?.headers.get('content-length'));
    out.push({ url: req.url, bytes: Number.isSafeInteger(len) ? len : undefined });
  }
  return out;
}

/** Forget one cached model (by URL), or all of them; true if anything was removed. */
export async function clearCache(url) {
  const storage = cacheStorage();
  if (!storage) return false;
  if (url === undefined) return storage.delete(CACHE_NAME);
  if (!(await storage.has(CACHE_NAME))) return false;
  return (await storage.open(CACHE_NAME)).delete(urlOf(url));
}
