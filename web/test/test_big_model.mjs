#!/usr/bin/env node
// Models past 2 GiB in wasm32's 4 GiB: a TinyLlama-1.1B-shaped F16 model
// (`wisp make-model` with Llama's vocabulary, 2.05 GiB, written to WORK and deleted after) plans and
// loads in Node, so its arena and I/O buffers lie above 2 GiB, where wasm
// hands addresses to JS as negative int32s; text goes through them intact
// and the tokens equal the native CLI's. Then the same file grown past
// 4 GiB, and the model with a context too large for the rest, are refused
// by plan() and by loadModel over HTTP before the body is downloaded, with
// the numbers.
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync, rmSync, statSync, truncateSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { WEB_OUT, WISP, WORK, check, checkEqual, done, expectError, shared, wispPackage } from './lib.mjs';

const GiB = 2 ** 30;
const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

// Every C function of the ABI that returns a pointer or a uint32 is read
// back unsigned in JS (engine.mjs UNSIGNED_RESULTS).
const { UNSIGNED_RESULTS } = await import(pathToFileURL(path.join(WEB_OUT, 'src', 'engine.mjs')).href);
// This test is about wasm32 in a Node without Memory64 (Node 20, which `make
// test` runs); test_browser_wasm64 checks wasm64, in Chromium and Node 24.
const { whyNoMemory64 } = await import(pathToFileURL(path.join(WEB_OUT, 'src', 'engine64.mjs')).href);
check(whyNoMemory64() !== null, `this Node (${process.version}) runs Memory64, but the wasm32 refusals below assume one without it`);
const abiSources = readdirSync(path.join(repo, 'wasm')).filter((f) => /^abi.*\.c$/.test(f))
  .map((f) => readFileSync(path.join(repo, 'wasm', f), 'utf8')).join('\n');
const unsignedInC = [...abiSources.matchAll(/^API\s+(?:const\s+)?(?:[A-Za-z_0-9]+\s*\*+|uint32_t\s+|size_t\s+)\s*(ww_[a-z_0-9]+)\s*\(/gm)]
  .map((m) => m[1]).sort();
check(unsignedInC.length >= 15, `found the ABI's pointer and uint32 results in wasm/abi*.c (${unsignedInC.length})`);
checkEqual([...UNSIGNED_RESULTS].sort().join(','), unsignedInC.join(','), 'engine.mjs reads exactly those results unsigned');

const modelPath = path.join(WORK, 'big-tinyllama-f16.gguf');
const wisp = await wispPackage();
const { serve } = await import(pathToFileURL(path.join(WEB_OUT, 'demo', 'serve.mjs')).href);
try {
  execFileSync(WISP, ['make-model', '--like', 'tinyllama-1.1b', '--type', 'f16', '-o', modelPath,
    '--vocab-from', shared('models/tokenizers/llamacpp-vocab/ggml-vocab-llama-spm.gguf')], { stdio: 'ignore' });
  const fileBytes = statSync(modelPath).size;
  const opts = { ctx: 256, batch: 16, threads: 2 };

  const plan = await wisp.plan(modelPath, opts);
  checkEqual(plan.fileBytes, fileBytes, 'the plan knows the file size');
  check(plan.wasmBytes > 2 * GiB && plan.wasmBytes < 4 * GiB, `file + arena is between 2 and 4 GiB (${plan.wasmBytes})`);
  checkEqual(plan.fitsWasm, true, 'plan: it fits wasm32');
  checkEqual(plan.build, 'wasm32', 'plan: the wasm32 build will load it');
  checkEqual(plan.builds.find((b) => b.name === 'wasm32')?.limitBytes, 4 * GiB, 'plan: wasm32 addresses 4 GiB');
  const wide = plan.builds.find((b) => b.name === 'wasm64');
  checkEqual(wide?.available, false, 'plan: this Node cannot run the wasm64 build (no Memory64)');
  check(/Memory64/.test(wide?.why ?? ''), `plan: and it says so (${wide?.why})`);

  // Both builds: the threaded one (2 threads) and the single-thread one.
  const prompt = 'Once upon a time';
  const n = 3;
  const native = execFileSync(WISP, ['run', '-m', modelPath, '-p', prompt, '-n', String(n), '--temp', '0', '--no-echo', '-q', '--ctx', '256'],
    { encoding: 'utf8' }).replace(/\n$/, '');
  for (const threads of [2, 1]) {
    const model = await wisp.loadModel(modelPath, { ...opts, threads });
    const build = `${model.info.build} build`;
    checkEqual(model.threads, threads, `${build}: ${threads} thread(s)`);
    checkEqual(model.memoryPlan.total, (await wisp.plan(modelPath, { ...opts, threads })).total, `${build}: the header plan is the plan init used`);
    check(model.memoryBytes > 2 * GiB && model.memoryBytes <= 4 * GiB, `${build}: wasm memory is past 2 GiB (${model.memoryBytes})`);
    const e = model._engine;
    const io = e.mod._ww_io(model._ptr);
    check(io > 2 ** 31, `${build}: the I/O buffer lies above 2 GiB (${io}) and is read as an unsigned address`);
    const text = 'Once upon a time, in a land far away';
    checkEqual(model.detokenize(model.tokenize(text)), text, `${build}: text round-trips through buffers above 2 GiB`);
    const got = await model.complete(prompt, { temperature: 0, maxTokens: n });
    checkEqual(model.lastStats.generatedTokens, n, `${build}: generated ${n} tokens`);
    checkEqual(got, native, `${build}: greedy text equals the native CLI's`);
    model.dispose();
  }

  // Too large: the settings (a 65536-token F32 KV cache) and then the file.
  const server = await serve({ root: WEB_OUT, models: WORK, port: 0 });
  let bodyBytes = 0;
  server.on('request', (req, res) => {
    if (!req.url.includes(path.basename(modelPath))) return;
    const write = res.write.bind(res);
    res.write = (chunk, ...rest) => { bodyBytes += chunk.length; return write(chunk, ...rest); };
  });
  const url = `http://127.0.0.1:${server.address().port}/models/${path.basename(modelPath)}`;
  try {
    const huge = { ctx: 65536, kvType: 'f32', threads: 1 };
    const hugePlan = await wisp.plan(url, huge);
    checkEqual(hugePlan.fitsWasm, false, `plan: a 65536-token F32 cache does not fit (${hugePlan.wasmBytes} bytes)`);
    checkEqual(hugePlan.build, null, 'plan: no build loads it');
    bodyBytes = 0;
    const err = await expectError(() => wisp.loadModel(url, huge), 'capacity', 'loadModel refuses it');
    console.log(`refusal: ${err.message}`);
    check(err.message.includes(String(hugePlan.wasmBytes)) && err.message.includes(String(fileBytes)) &&
      err.message.includes(String(hugePlan.total)) && err.message.includes(String(4 * GiB)),
    `the refusal gives the numbers: ${err.message}`);
    check(bodyBytes < 64 << 20, `refused before the download: ${bodyBytes} of ${fileBytes} bytes were sent`);

    truncateSync(modelPath, 4.5 * GiB); // the same header, a file past 4 GiB (sparse)
    const bigPlan = await wisp.plan(url, opts);
    checkEqual(bigPlan.fileBytes, 4.5 * GiB, 'plan: the file size past 4 GiB');
    checkEqual(bigPlan.fitsWasm, false, 'plan: a file past 4 GiB does not fit');
    bodyBytes = 0;
    const err2 = await expectError(() => wisp.loadModel(url, opts), 'capacity', 'loadModel refuses a file past 4 GiB');
    check(err2.message.includes(String(4.5 * GiB)), `the refusal names the file size: ${err2.message}`);
    check(bodyBytes < 64 << 20, `refused before the download: ${bodyBytes} bytes were sent`);
    await expectError(() => wisp.loadModel(modelPath, opts), 'capacity', 'loadModel refuses the file from a path too');
  } finally {
    server.close();
  }
} finally {
  rmSync(modelPath, { force: true });
}
done();
