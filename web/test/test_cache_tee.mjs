#!/usr/bin/env node
// The bounded tee that writes a download to wasm memory and to the Cache API
// at once (web/src/cache.mjs): the download never runs more than its limit
// ahead of the cache's reader, so a slow cache writer cannot make the page
// hold the model twice; both sides get every byte in order; the cache side
// failing leaves the wasm side going; an error of the body, or the wasm side
// cancelled, ends both. Plain streams in Node, no browser needed.
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { WEB_OUT, check, checkEqual, done } from './lib.mjs';

const { teeBounded } = await import(pathToFileURL(path.join(WEB_OUT, 'src', 'cache.mjs')).href);
const CHUNK = 64 << 10, CHUNKS = 200, LIMIT = 1 << 20;
const tick = () => new Promise((r) => setTimeout(r, 1));

// A body of CHUNKS chunks; chunk i is filled with i & 255. It counts what
// was pulled from it, and can fail at a chunk.
function body({ failAt = -1 } = {}) {
  const state = { pulled: 0, cancelled: false };
  const stream = new ReadableStream({
    pull(c) {
      if (state.pulled === failAt) {
        c.error(new Error('network gone'));
        return;
      }
      if (state.pulled === CHUNKS) {
        c.close();
        return;
      }
      c.enqueue(new Uint8Array(CHUNK).fill(state.pulled & 255));
      state.pulled++;
    },
    cancel() { state.cancelled = true; },
  });
  return { stream, state };
}

// Reads a side to the end, checking the bytes are chunk after chunk in order;
// `delay` waits after each chunk (a slow cache writer); `onChunk(n)` sees the
// count of chunks read so far.
async function drain(side, { delay = false, onChunk } = {}) {
  const reader = side.getReader();
  let n = 0;
  for (;;) {
    const { done: end, value } = await reader.read();
    if (end) return n;
    check(value.length === CHUNK && value[0] === (n & 255) && value[CHUNK - 1] === (n & 255), `chunk ${n} arrives whole and in order`);
    n++;
    onChunk?.(n);
    if (delay) await tick();
  }
}

{ // a fast wasm side and a slow cache side: the download waits for the cache
  const { stream, state } = body();
  const [toWasm, toCache] = teeBounded(stream, LIMIT);
  let ahead = 0;
  const cacheRead = drain(toCache, { delay: true, onChunk: (n) => { ahead = Math.max(ahead, (state.pulled - n) * CHUNK); } });
  const wasmRead = drain(toWasm);
  checkEqual(await wasmRead, CHUNKS, 'the wasm side gets every chunk');
  checkEqual(await cacheRead, CHUNKS, 'the cache side gets every chunk');
  check(ahead <= LIMIT + 2 * CHUNK, `the download ran at most the limit ahead of the cache (${ahead} bytes, limit ${LIMIT})`);
  check(ahead >= LIMIT / 2, `the download did run ahead, up to the limit (${ahead} bytes)`);
}

{ // the cache side fails (cache.put gave up): the wasm side goes on alone
  const { stream } = body();
  const [toWasm, toCache] = teeBounded(stream, LIMIT);
  const reader = toCache.getReader();
  await reader.read();
  await reader.cancel(new Error('quota'));
  checkEqual(await drain(toWasm), CHUNKS, 'after the cache side stops, the wasm side still gets every chunk');
}

{ // the body fails: both sides fail with its error
  const { stream } = body({ failAt: 50 });
  const [toWasm, toCache] = teeBounded(stream, LIMIT);
  const results = await Promise.allSettled([drain(toWasm), drain(toCache)]);
  for (const [i, r] of results.entries()) {
    check(r.status === 'rejected' && /network gone/.test(r.reason?.message), `side ${i} fails with the body's error`);
  }
}

{ // the wasm side is cancelled (the load was refused or aborted): the body is
  // cancelled and the cache side fails, so no entry is written
  const { stream, state } = body();
  const [toWasm, toCache] = teeBounded(stream, LIMIT);
  const cacheRead = drain(toCache).then(() => 'closed', (e) => `failed: ${e.message}`);
  const reader = toWasm.getReader();
  await reader.read();
  await reader.cancel(new Error('refused'));
  check(state.cancelled, 'cancelling the wasm side cancels the download');
  checkEqual(await cacheRead, 'failed: refused', 'the cache side fails, so cache.put keeps no entry');
}

done();
