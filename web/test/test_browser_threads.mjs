#!/usr/bin/env node
// Threads in Chromium: the demo served cross-origin isolated (COOP/COEP) runs
// the threaded build, served without the headers the single-thread one, and
// says why; the tokens are the same either way (greedy and seeded, in the
// page's main thread and in a worker model), and equal Node's single-thread
// tokens. The model is a 2-layer SmolLM2-135M-shaped Q8_0 (`wisp make-model`,
// written to WORK and deleted after), wide enough that every matrix product
// is split over the threads.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { WEB_OUT, WISP, WORK, check, checkEqual, done, fail, launchChromium, requireChromium, shared, wispPackage } from './lib.mjs';

const playwright = await requireChromium();
const stories = shared('models/stories260K.gguf');
const vocab = shared('models/tokenizers/llamacpp-vocab/ggml-vocab-smollm2.gguf');
const { serve } = await import(pathToFileURL(path.join(WEB_OUT, 'demo', 'serve.mjs')).href);

const modelDir = mkdtempSync(path.join(WORK, 'threads-models-'));
const modelFile = 'smollm2-2layers-q8_0.gguf';
execFileSync(WISP, ['make-model', '--like', 'smollm2-135m', '--type', 'q8_0', '--layers', '2', '--vocab-from', vocab,
  '-o', path.join(modelDir, modelFile), '-t', '1'], { stdio: 'ignore' });
const prompt = 'The quick brown fox jumps over the lazy dog. Once upon a time';
const gens = { greedy: { temperature: 0, maxTokens: 20 }, seeded: { temperature: 0.9, seed: 99, maxTokens: 20 } };

// Node, one thread: the reference.
const wisp = await wispPackage();
const ref = {};
{
  const m = await wisp.loadModel(path.join(modelDir, modelFile), { ctx: 256, batch: 16, threads: 1 });
  for (const [k, g] of Object.entries(gens)) {
    const ids = [];
    await m.complete(prompt, { ...g, onToken: (id) => ids.push(id) });
    ref[k] = ids.join(',');
  }
  m.dispose();
}
check(ref.greedy !== ref.seeded, 'the reference greedy and seeded tokens differ');

async function inChromium(isolate, root = WEB_OUT) {
  const server = await serve({ root, mounts: { '/models/': modelDir, '/shared-models/': path.dirname(stories) }, port: 0, isolate });
  const base = `http://127.0.0.1:${server.address().port}`;
  const errors = [];
  const browser = await launchChromium(playwright);
  try {
    const { page } = browser;
    page.on('pageerror', (e) => errors.push(e.message));
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
    await page.goto(`${base}/demo/`);
    await page.waitForFunction('document.body.dataset.state === "empty"');
    if (root !== WEB_OUT) {
      // only the package's API, with threads asked for
      const fb = await page.evaluate(async (url) => {
        const w = await import('/src/index.mjs');
        const m = await w.loadModel(url, { ctx: 128, threads: 2 });
        const r = { threads: m.threads, why: m.whyNotThreaded, text: await m.complete('Once upon a time', { temperature: 0, maxTokens: 16 }) };
        await m.dispose();
        return r;
      }, '/shared-models/stories260K.gguf');
      return { fb, errors };
    }
    // The demo's own load (a worker model, default threads).
    await page.fill('#model-url', '/shared-models/stories260K.gguf');
    await page.click('#model-url-load');
    await page.waitForFunction('document.body.dataset.state === "ready" || document.body.dataset.state === "error"', null, { timeout: 60000 });
    const demo = await page.evaluate(() => ({
      isolated: crossOriginIsolated, cores: navigator.hardwareConcurrency, status: document.querySelector('#model-status').textContent,
      threads: window.wispDemo.model?.threads, why: window.wispDemo.model?.whyNotThreaded,
    }));
    // The package's API: threads 2 asked for, in the page and in a worker.
    const api = await page.evaluate(async ([url, p, g]) => {
      const w = await import('/src/index.mjs');
      const out = {};
      for (const worker of [false, true]) {
        const m = await w.loadModel(url, { ctx: 256, batch: 16, threads: 2, worker });
        const r = { threads: m.threads, why: m.whyNotThreaded, build: m.info?.build };
        for (const [k, o] of Object.entries(g)) {
          const ids = [];
          await m.complete(p, { ...o, onToken: (id) => ids.push(id) });
          r[k] = ids.join(',');
          r[`${k}Pieces`] = m.lastStats.workerPieces;
        }
        await m.dispose();
        out[worker ? 'worker' : 'main'] = r;
      }
      return out;
    }, [`/models/${modelFile}`, prompt, gens]);
    return { demo, api, errors };
  } finally {
    await browser.close();
    server.close();
  }
}

try {
  const iso = await inChromium(true);
  const plain = await inChromium(false);
  checkEqual(iso.demo.isolated, true, 'served with COOP/COEP, the demo page is cross-origin isolated');
  checkEqual(plain.demo.isolated, false, 'served without them, it is not');
  check(/^Loaded /.test(iso.demo.status) && /^Loaded /.test(plain.demo.status), `the demo loaded (${iso.demo.status} | ${plain.demo.status})`);
  const want = Math.min(8, iso.demo.cores);
  checkEqual(iso.demo.threads, want, `isolated demo: the reported cores (${iso.demo.cores}), at most 8, as threads`);
  check(want > 1 ? iso.demo.why === null : typeof iso.demo.why === 'string', `isolated demo: the reason matches (${iso.demo.why})`);
  check(/threads|one thread/.test(iso.demo.status), `the demo says how many threads run (${iso.demo.status})`);
  checkEqual(plain.demo.threads, 1, 'demo without isolation: one thread');
  check(/cross-origin isolated/.test(plain.demo.why ?? ''), `demo without isolation says why (${plain.demo.why})`);
  for (const where of ['main', 'worker']) {
    const a = iso.api[where];
    const b = plain.api[where];
    checkEqual(a.threads, 2, `isolated, ${where}: 2 threads`);
    checkEqual(a.build, 'threaded', `isolated, ${where}: the threaded build ran`);
    checkEqual(b.threads, 1, `not isolated, ${where}: one thread`);
    checkEqual(b.build, 'single', `not isolated, ${where}: the single-thread build ran`);
    check(/Cross-Origin-Embedder-Policy/.test(b.why ?? ''), `not isolated, ${where}: the reason names the headers`);
    check(a.greedyPieces > 0 && a.seededPieces > 0, `isolated, ${where}: the other thread ran pieces of the work (${a.greedyPieces}, ${a.seededPieces})`);
    check(b.greedyPieces === 0, `not isolated, ${where}: no other thread ran any`);
    for (const k of Object.keys(gens)) {
      checkEqual(a[k], ref[k], `isolated (2 threads), ${where}, ${k}: tokens equal Node's one thread`);
      checkEqual(b[k], ref[k], `not isolated (1 thread), ${where}, ${k}: tokens equal Node's one thread`);
    }
  }
  check(iso.errors.length === 0 && plain.errors.length === 0, `no page errors (${[...iso.errors, ...plain.errors].join(' | ')})`);

  // A site that does not serve the threaded build's worker script: one
  // thread, and the reason names the script.
  const broken = mkdtempSync(path.join(WORK, 'package-without-thread-worker-'));
  cpSync(WEB_OUT, broken, { recursive: true });
  rmSync(path.join(broken, 'dist', 'wisp-engine-mt.worker.js'));
  try {
    const { fb } = await inChromium(true, broken);
    checkEqual(fb.threads, 1, 'isolated, but the worker script is not served: one thread');
    check(/threaded build did not start.*worker script.*404/.test(fb.why ?? ''), `and the reason says so (${fb.why})`);
    check(fb.text.length > 0, 'and it generates');
  } finally {
    rmSync(broken, { recursive: true, force: true });
  }
} catch (e) {
  fail(e.stack ?? e.message);
} finally {
  rmSync(modelDir, { recursive: true, force: true });
}
done();
