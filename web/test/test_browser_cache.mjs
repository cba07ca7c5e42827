#!/usr/bin/env node
// Load once, in Chromium: a model fetched by URL is stored in the Cache API
// while it loads; the next load (and plan) of the same URL makes no request
// to the server for it (counted here), reads it from the cache (onProgress
// says so), and gives the same tokens, in the page and in a worker model.
// cachedModels() lists it, clearCache() forgets it, cache: false bypasses
// it, and a load that is aborted leaves no entry behind.
import { statSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { WEB_OUT, check, checkEqual, cliGreedy, done, fail, launchChromium, requireChromium, shared } from './lib.mjs';

const playwright = await requireChromium();
const modelPath = shared('models/stories260K.gguf');
const otherPath = shared('models/llama-2-tiny-random.gguf');
const { serve } = await import(pathToFileURL(path.join(WEB_OUT, 'demo', 'serve.mjs')).href);

const prompt = 'Once upon a time';
const expected = cliGreedy(modelPath, prompt, 32);
const modelUrl = `/models/${path.basename(modelPath)}`;
const otherUrl = `/models/${path.basename(otherPath)}`;
const requests = [];
const server = await serve({ root: WEB_OUT, models: path.dirname(modelPath), port: 0,
  onRequest: (req) => requests.push({ url: req.url, range: req.headers.range }) });
const base = `http://127.0.0.1:${server.address().port}`;
const modelRequests = (u) => requests.filter((r) => r.url === u);
const errors = [];
const browser = await launchChromium(playwright);

try {
  const { page } = browser;
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  await page.goto(`${base}/demo/`);
  // One load in the page: plan, load (worker or not), greedy text, where the bytes came from.
  const load = (url, options = {}) => page.evaluate(async ([u, p, o]) => {
    const w = await import('/src/index.mjs');
    const froms = new Set();
    const { noPlan, ...options } = o;
    const plan = noPlan ? null : await w.plan(u, { ctx: 128, cache: o.cache });
    const m = await w.loadModel(u, { ctx: 128, ...options, onProgress: (e) => froms.add(e.from) });
    const text = await m.complete(p, { temperature: 0, maxTokens: 32 });
    const r = { text, froms: [...froms], cache: m.info.cache, planTotal: plan?.total, total: m.memoryPlan.total };
    await m.dispose();
    return r;
  }, [url, prompt, options]);
  const listed = () => page.evaluate(async () => (await import('/src/index.mjs')).cachedModels());

  await page.evaluate(async () => (await import('/src/index.mjs')).clearCache());
  checkEqual((await listed()).length, 0, 'the cache starts empty');

  const first = await load(modelUrl);
  checkEqual(first.text, expected, 'first load: greedy text equals the native CLI');
  checkEqual(first.froms.join(','), 'network', 'first load: onProgress reports the network');
  checkEqual(first.cache, 'stored', 'first load: the model was stored in the cache');
  check(modelRequests(modelUrl).some((r) => !r.range), 'first load: the body was requested from the server');
  const list = await listed();
  checkEqual(list.length, 1, 'cachedModels lists one model');
  checkEqual(list[0].url, base + modelUrl, 'cachedModels: its URL');
  checkEqual(list[0].bytes, statSync(modelPath).size, 'cachedModels: its size');

  requests.length = 0;
  const second = await load(modelUrl);
  checkEqual(modelRequests(modelUrl).length, 0, `second load (with plan): no request for the model (${JSON.stringify(requests)})`);
  checkEqual(second.text, first.text, 'second load: the same tokens');
  checkEqual(second.froms.join(','), 'cache', 'second load: onProgress reports the cache');
  checkEqual(second.cache, 'hit', 'second load: a cache hit');
  checkEqual(second.planTotal, second.total, 'a plan from the cache equals the plan init used');

  requests.length = 0;
  const inWorker = await load(modelUrl, { worker: true });
  checkEqual(modelRequests(modelUrl).length, 0, 'worker model: no request for the model');
  checkEqual(inWorker.text, first.text, 'worker model from the cache: the same tokens');
  checkEqual(inWorker.froms.join(','), 'cache', 'worker model: onProgress reports the cache');

  requests.length = 0;
  const bypass = await load(modelUrl, { cache: false });
  check(modelRequests(modelUrl).some((r) => !r.range), 'cache: false downloads the model');
  checkEqual(bypass.froms.join(','), 'network', 'cache: false reports the network');
  checkEqual(bypass.text, first.text, 'cache: false: the same tokens');

  // An aborted load keeps no partial entry.
  const aborted = await page.evaluate(async (u) => {
    const w = await import('/src/index.mjs');
    const ac = new AbortController();
    let name = '';
    try {
      await w.loadModel(u, { onProgress: (e) => { if (e.loaded > 0) ac.abort(); }, signal: ac.signal });
    } catch (e) {
      name = e.name;
    }
    await new Promise((r) => setTimeout(r, 200));
    return { name, list: (await w.cachedModels()).map((m) => m.url) };
  }, otherUrl);
  checkEqual(aborted.name, 'AbortError', 'the aborted load rejects with an AbortError');
  check(!aborted.list.some((u) => u.endsWith(otherUrl)), `an aborted download leaves no cache entry (${aborted.list})`);

  checkEqual(await page.evaluate(async (u) => (await import('/src/index.mjs')).clearCache(u), modelUrl), true, 'clearCache(url) removes it');
  checkEqual((await listed()).length, 0, 'the cache is empty again');
  requests.length = 0;
  const third = await load(modelUrl, { noPlan: true });
  check(modelRequests(modelUrl).length > 0, 'after clearCache the model is downloaded again');
  checkEqual(third.text, first.text, 'and gives the same tokens');
  check(errors.length === 0, `no page errors (${errors.join(' | ')})`);
} catch (e) {
  fail(`${e.stack ?? e.message}${errors.length ? `\npage errors: ${errors.join(' | ')}` : ''}`);
} finally {
  await browser.close();
  server.close();
}
done();
