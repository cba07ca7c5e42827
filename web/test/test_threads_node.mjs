#!/usr/bin/env node
// The threaded build in Node (worker threads are always there): the tokens
// of 2 and 3 threads equal one thread's, greedy and seeded, in the main
// thread and in a worker model; the build that ran is the one asked for; the
// plan from the header is the plan the threaded model was initialised with;
// fine-tuning losses do not depend on the threads. The model is a
// SmolLM2-135M-shaped one cut to 2 layers (`wisp make-model`, written to WORK
// and deleted after): its 49152-row output and 1536-row FFN are split over
// the threads, unlike stories260K's few rows.
import { execFileSync } from 'node:child_process';
import { cpSync, readFileSync, rmSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import path from 'node:path';
import { WEB_OUT, WISP, WORK, check, checkEqual, done, expectError, shared, wispPackage } from './lib.mjs';

const vocab = shared('models/tokenizers/llamacpp-vocab/ggml-vocab-smollm2.gguf');
const corpus = readFileSync(shared('data/tinyshakespeare.txt'), 'utf8').slice(0, 8000);
const modelPath = path.join(WORK, 'threads-smollm2-2layers-q8_0.gguf');
execFileSync(WISP, ['make-model', '--like', 'smollm2-135m', '--type', 'q8_0', '--layers', '2', '--vocab-from', vocab,
  '-o', modelPath, '-t', '1'], { stdio: 'ignore' });
const wisp = await wispPackage();
const prompt = 'The quick brown fox jumps over the lazy dog. Once upon a time';
const opts = { ctx: 256, batch: 16 };

// Token ids of a greedy and a seeded run (the prompt is longer than a batch,
// so prefill takes several steps).
async function run(model) {
  const out = {};
  for (const [name, g] of [['greedy', { temperature: 0 }], ['seeded', { temperature: 0.9, seed: 1234 }]]) {
    const ids = [];
    await model.complete(prompt, { ...g, maxTokens: 24, onToken: (id) => ids.push(id), cachePrompt: false });
    out[name] = ids.join(',');
  }
  return out;
}

try {
  const one = await wisp.loadModel(modelPath, { ...opts, threads: 1 });
  checkEqual(one.threads, 1, 'threads: 1 runs one thread');
  checkEqual(one.info.build, 'single', 'threads: 1 runs the single-thread build');
  checkEqual(one.whyNotThreaded, 'threads: 1 was asked for', 'the reason for one thread');
  const ref = await run(one);
  checkEqual(one.lastStats.workerPieces, 0, 'one thread: no worker pieces');
  check(ref.greedy.split(',').length === 24 && ref.seeded.split(',').length === 24, 'one thread generated 24 tokens twice');
  check(ref.greedy !== ref.seeded, 'seeded sampling differs from greedy (the comparison can fail)');
  const ftOpts = { rank: 4, ctx: 32, batch: 2, steps: 3, lr: 0.01 };
  const lossesOne = [];
  await one.finetune(corpus, { ...ftOpts, onProgress: (p) => lossesOne.push(p.loss) });
  one.dispose();

  for (const threads of [2, 3]) {
    const planned = await wisp.plan(modelPath, { ...opts, threads });
    checkEqual(planned.config.threads, threads, `plan({threads: ${threads}}) plans for ${threads} threads`);
    const m = await wisp.loadModel(modelPath, { ...opts, threads });
    checkEqual(m.threads, threads, `threads: ${threads} runs ${threads} threads`);
    checkEqual(m.info.build, 'threaded', `threads: ${threads} runs the threaded build`);
    checkEqual(m.whyNotThreaded, null, 'no reason given when threaded');
    checkEqual(m.memoryPlan.total, planned.total, `the header plan for ${threads} threads is the plan init used`);
    const got = await run(m);
    check(m.lastStats.workerPieces > 0, `${threads} threads: the pool's workers ran pieces of the work (${m.lastStats.workerPieces})`);
    checkEqual(got.greedy, ref.greedy, `${threads} threads: greedy tokens equal one thread's`);
    checkEqual(got.seeded, ref.seeded, `${threads} threads: seeded tokens equal one thread's`);
    const mem = m.memoryBytes;
    const losses = [];
    await m.finetune(corpus, { ...ftOpts, onProgress: (p) => losses.push(p.loss) });
    checkEqual(losses.join(','), lossesOne.join(','), `${threads} threads: fine-tuning losses equal one thread's`);
    const again = await run(m);
    checkEqual(again.greedy, ref.greedy, `${threads} threads: greedy again after fine-tuning`);
    check(m.memoryBytes >= mem, 'memory is shared and only grows');
    m.dispose();
  }
  const one2 = await wisp.plan(modelPath, { ...opts, threads: 1 });
  const two2 = await wisp.plan(modelPath, { ...opts, threads: 2 });
  check(two2.total > one2.total, `per-thread scratch is planned (1 thread ${one2.total}, 2 threads ${two2.total})`);

  // The default: the cores Node reports, at most 8.
  const { availableParallelism } = await import('node:os');
  const m = await wisp.loadModel(modelPath, opts);
  checkEqual(m.threads, Math.min(8, availableParallelism()), 'default threads: the reported cores, at most 8');
  m.dispose();

  // A worker model with threads: the same tokens.
  const w = await wisp.loadModel(modelPath, { ...opts, threads: 2, worker: true });
  checkEqual(w.threads, 2, 'worker model: 2 threads');
  checkEqual(w.whyNotThreaded, null, 'worker model: threaded');
  const wGot = await run(w);
  check(w.lastStats.workerPieces > 0, `worker model: the pool's workers ran pieces (${w.lastStats.workerPieces})`);
  checkEqual(wGot.greedy, ref.greedy, 'worker model, 2 threads: greedy tokens equal one thread\'s');
  checkEqual(wGot.seeded, ref.seeded, 'worker model, 2 threads: seeded tokens equal one thread\'s');
  await w.dispose();

  // A package whose threaded build cannot start (its worker script is
  // missing) falls back to one thread and says why.
  const broken = path.join(WORK, 'package-without-thread-worker');
  rmSync(broken, { recursive: true, force: true });
  cpSync(WEB_OUT, broken, { recursive: true });
  rmSync(path.join(broken, 'dist', 'wisp-engine-mt.worker.js'));
  const wispBroken = await import(pathToFileURL(path.join(broken, 'src', 'index.mjs')).href);
  const fb = await wispBroken.loadModel(modelPath, { ...opts, threads: 2 });
  checkEqual(fb.threads, 1, 'without its worker script the threaded build falls back to one thread');
  check(/threaded build did not start.*worker script.*missing/.test(fb.whyNotThreaded ?? ''), `and says why (${fb.whyNotThreaded})`);
  checkEqual((await run(fb)).greedy, ref.greedy, 'the fallback gives the same tokens');
  fb.dispose();
  rmSync(broken, { recursive: true, force: true });

  await expectError(() => wisp.loadModel(modelPath, { threads: 0 }), 'arg', 'threads: 0 is refused');
  await expectError(() => wisp.loadModel(modelPath, { threads: 1.5 }), 'arg', 'fractional threads are refused');
} finally {
  rmSync(modelPath, { force: true });
}
done();
