#!/usr/bin/env node
// The package's API in Node, straight from the built folder: plans from a
// header match plans after loading, greedy text matches the native CLI, wasm
// memory stays put while generating, the KV cache is reused correctly,
// abort/stop/seed behave, adapters attach and detach exactly, the worker
// gives the same answers, and bad input gives clear errors.
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { WEB_OUT, WISP, WORK, check, checkEqual, cliGreedy, done, expectError, shared, wispPackage } from './lib.mjs';

const modelPath = shared('models/stories260K.gguf');
const adapterPath = shared('golden/adapters/stories260K-r4/adapter.gguf');
const peftDir = shared('golden/adapters/stories260K-r4/peft');
const corpus = readFileSync(shared('data/tinyshakespeare.txt'), 'utf8').slice(0, 20000);
const wisp = await wispPackage();
const { cutAtStop } = await import(pathToFileURL(path.join(WEB_OUT, 'src', 'model.mjs')).href);
const { serve } = await import(pathToFileURL(path.join(WEB_OUT, 'demo', 'serve.mjs')).href);
const bytes = new Uint8Array(await readFile(modelPath));
const prompt = 'Once upon a time';

// Stop strings hold back only what could start one.
checkEqual(cutAtStop('abc', []).emit, 'abc', 'cutAtStop without stops');
checkEqual(cutAtStop('hello wor', ['world']).emit, 'hello ', 'cutAtStop holds a partial stop');
check(cutAtStop('hello world!', ['world']).stopped, 'cutAtStop finds a stop');
checkEqual(cutAtStop('hello world!', ['world', 'lo']).emit, 'hel', 'cutAtStop takes the earliest stop');

// Plans: from the header only (path, bytes, Blob, HTTP range) and after loading.
const server = await serve({ root: WEB_OUT, models: path.dirname(modelPath), port: 0 });
const url = `http://127.0.0.1:${server.address().port}/models/${path.basename(modelPath)}`;
const opts = { ctx: 256, batch: 32 };
const plans = [await wisp.plan(modelPath, opts), await wisp.plan(bytes, opts), await wisp.plan(new Blob([bytes]), opts),
  await wisp.plan(url, opts)];
for (const p of plans.slice(1)) checkEqual(JSON.stringify(p.parts), JSON.stringify(plans[0].parts), 'plans from every source agree');
checkEqual(plans[3].fileBytes, bytes.length, 'plan over HTTP knows the file size from Content-Range');
// Planning reads the header only.
class CountingBlob extends Blob {
  read = 0;
  slice(start, end) {
    this.read = Math.max(this.read, end ?? this.size);
    return super.slice(start, end);
  }
}
const counting = new CountingBlob([bytes]);
await wisp.plan(counting, opts);
check(counting.read > 0 && counting.read < bytes.length / 2, `plan(Blob) read ${counting.read} of ${bytes.length} bytes`);
const progress = [];
const model = await wisp.loadModel(url, { ...opts, onProgress: (p) => progress.push(p) });
check(progress.length >= 2 && progress.at(-1).loaded === bytes.length && progress.at(-1).total === bytes.length,
  `download progress reaches the file size (${JSON.stringify(progress.at(-1))})`);
for (let i = 1; i < progress.length; i++) check(progress[i].loaded >= progress[i - 1].loaded, 'progress never goes back');
checkEqual(model.memoryPlan.total, plans[0].total, 'the header plan is the plan init used');
checkEqual(JSON.stringify(model.memoryPlan.parts), JSON.stringify(plans[0].parts), 'per-part plan equals init');
checkEqual(model.memoryPlan.config.ctx, 256, 'ctx option');
check(JSON.stringify(model.plan({ ctx: 512 })) !== JSON.stringify(model.memoryPlan), 'model.plan answers for other settings');
const ftShape = { rank: 4, ctx: 32, batch: 2 };
const withFt = await wisp.plan(modelPath, { ...opts, finetune: ftShape });
checkEqual(withFt.finetune.total, model.plan({ finetune: ftShape }).total, 'a fine-tuning plan from the header equals the loaded model\'s');
check(withFt.finetune.parts.activations > 0 && withFt.finetune.parts.optimizer > 0, 'the fine-tuning plan has training parts');
checkEqual(withFt.wasmBytes, plans[0].wasmBytes + withFt.finetune.total, 'wasmBytes includes the session');
server.close();

// Greedy text equals the native CLI's; memory does not grow while generating.
const n = 48;
const expected = cliGreedy(modelPath, prompt, n);
const memAfterLoad = model.memoryBytes;
const greedy = await model.complete(prompt, { temperature: 0, maxTokens: n });
checkEqual(greedy, expected, 'greedy continuation equals `wisp run --temp 0`');
checkEqual(model.lastStats.generatedTokens, n, 'generated token count');
check(model.lastStats.tokensPerSecond > 0 && model.lastStats.ttftMs > 0, 'stats are measured');
let long = '';
for await (const piece of model.generate(prompt, { temperature: 1, seed: 7, maxTokens: 200 })) long += piece;
check(long.length > 0, 'sampled generation produced text');
checkEqual(model.memoryBytes, memAfterLoad, 'wasm memory does not grow while generating');

// The KV cache keeps a shared prefix, and the answer is the same as from scratch.
const longer = prompt + greedy.slice(0, 20);
const reused = await model.complete(longer, { temperature: 0, maxTokens: 16 });
check(model.lastStats.evaluatedPromptTokens < model.lastStats.promptTokens, 'a prompt extending the cached one reuses the cache');
checkEqual(await model.complete(longer, { temperature: 0, maxTokens: 16, cachePrompt: false }), reused, 'cachePrompt: false gives the same text');
checkEqual(model.lastStats.evaluatedPromptTokens, model.lastStats.promptTokens, 'cachePrompt: false evaluates the whole prompt');
const fresh = await wisp.loadModel(bytes, opts);
checkEqual(reused, await fresh.complete(longer, { temperature: 0, maxTokens: 16 }), 'cache reuse changes nothing');
checkEqual(fresh.lastStats.evaluatedPromptTokens, fresh.lastStats.promptTokens, 'a fresh model evaluates the whole prompt');
fresh.dispose();

// Seeds, stop strings, abort.
const s1 = await model.complete(prompt, { seed: 123, maxTokens: 40 });
checkEqual(await model.complete(prompt, { seed: 123, maxTokens: 40 }), s1, 'same seed, same text');
checkEqual(await model.complete(prompt, { seed: 123n, maxTokens: 40 }), s1, 'bigint seeds');
const stopped = await model.complete(prompt, { temperature: 0, maxTokens: n, stop: ['.'] });
checkEqual(stopped, expected.slice(0, expected.indexOf('.')), 'a stop string ends the text before it');
checkEqual(model.lastStats.stopReason, 'stop', 'stop reason: stop');
const ac = new AbortController();
let pieces = 0;
for await (const _ of model.generate(prompt, { maxTokens: 1000, seed: 1, signal: ac.signal })) if (++pieces === 5) ac.abort();
checkEqual(model.lastStats.stopReason, 'abort', 'abort ends the iteration');
check(model.lastStats.generatedTokens >= 5 && model.lastStats.generatedTokens < 10, 'abort stops promptly');

// Tokens.
const ids = model.tokenize('Lily and the big red ball');
checkEqual(model.detokenize(ids), 'Lily and the big red ball', 'detokenize(tokenize(s)) == s');
checkEqual(model.tokenize(prompt, { addBos: true }).length, model.tokenize(prompt).length + 1, 'addBos adds one token');

// Adapters: on changes the text, off restores it exactly, GGUF round trip.
const adapter = await wisp.loadAdapter(model, adapterPath);
checkEqual(adapter.info.rank, 4, 'adapter rank');
checkEqual(adapter.info.pairs, 35, 'adapter pairs (7 projections x 5 layers)');
model.useAdapter(adapter, 1);
const withAdapter = await model.complete(prompt, { temperature: 0, maxTokens: 32 });
check(withAdapter !== greedy.slice(0, withAdapter.length), 'the adapter changes the greedy text');
model.useAdapter(adapter, 0);
checkEqual(await model.complete(prompt, { temperature: 0, maxTokens: n }), expected, 'scale 0 gives the base text');
model.removeAdapter(adapter);
checkEqual(await model.complete(prompt, { temperature: 0, maxTokens: n }), expected, 'removing the adapter restores the base text');
const memBeforeExport = model.memoryBytes;
const gguf = adapter.toGGUF();
adapter.toPEFT();
checkEqual(model.memoryBytes, memBeforeExport, 'exporting allocates no wasm memory');
checkEqual(new TextDecoder().decode(gguf.subarray(0, 4)), 'GGUF', 'toGGUF writes a GGUF');
const again = await wisp.loadAdapter(model, gguf);
model.useAdapter(again, 1);
checkEqual(await model.complete(prompt, { temperature: 0, maxTokens: 32 }), withAdapter, 'a re-read GGUF adapter computes the same');
model.removeAdapter(again);

// PEFT files of the same adapter compute the same.
const goldenPeft = await wisp.loadAdapter(model, {
  config: readFileSync(path.join(peftDir, 'adapter_config.json'), 'utf8'),
  safetensors: readFileSync(path.join(peftDir, 'adapter_model.safetensors')),
});
checkEqual(goldenPeft.info.source, 'peft', 'PEFT adapter source');
model.useAdapter(goldenPeft, 1);
checkEqual(await model.complete(prompt, { temperature: 0, maxTokens: 32 }), withAdapter, 'PEFT and GGUF forms of one adapter agree');
const peftOut = goldenPeft.toPEFT();
const peftBack = await wisp.loadAdapter(model, peftOut);
model.removeAdapter(goldenPeft);
model.useAdapter(peftBack, 1);
checkEqual(await model.complete(prompt, { temperature: 0, maxTokens: 32 }), withAdapter, 'toPEFT() round trip');
model.removeAdapter(peftBack);
checkEqual(JSON.parse(peftOut.config).r, 4, 'toPEFT() config');

// Fine-tuning matches `wisp finetune` step by step (same data windows, seed,
// schedule and settings), and memory does not move during the steps.
const ftData = path.join(WORK, 'finetune-data.txt');
const ftDir = path.join(WORK, 'native-finetune');
writeFileSync(ftData, corpus);
rmSync(ftDir, { recursive: true, force: true });
const ft = { ctx: 32, batch: 2, rank: 4, steps: 8 };
execFileSync(WISP, ['finetune', '-m', modelPath, '--data', ftData, '-o', ftDir, '--ctx', String(ft.ctx), '--batch', String(ft.batch),
  '--rank', String(ft.rank), '--steps', String(ft.steps), '-t', '1', '-q'], { stdio: 'ignore' });
const native = readFileSync(path.join(ftDir, 'log.csv'), 'utf8').trim().split('\n').slice(1).map((l) => l.split(',').map(Number));
const steps = [];
const memBefore = model.memoryBytes;
const trained = await model.finetune(corpus, { ...ft, onProgress: (p) => steps.push(p) });
checkEqual(steps.length, ft.steps, 'one progress event per step');
checkEqual(native.length, ft.steps, 'the native log has every step');
for (let i = 0; i < ft.steps; i++) {
  const [, loss, lr] = native[i];
  check(Math.abs(steps[i].loss - loss) <= 1e-4 * loss, `step ${i + 1}: loss ${steps[i].loss} equals the native ${loss}`);
  check(Math.abs(steps[i].lr - lr) <= 1e-5 * lr + 1e-12, `step ${i + 1}: learning rate ${steps[i].lr} equals the native ${lr}`);
}
check(steps.every((p) => p.memoryBytes === steps[0].memoryBytes), 'wasm memory constant across training steps');
check(steps[0].memoryBytes >= memBefore, 'the session grew memory before its first step, not during');
const memTrained = model.memoryBytes;
model.useAdapter(trained, 1);
const withTrained = await model.complete(prompt, { temperature: 0, maxTokens: 32 });
checkEqual(model.memoryBytes, memTrained, 'generation with the trained adapter does not grow memory');
const nativeAdapter = await wisp.loadAdapter(model, path.join(ftDir, 'adapter.gguf'));
model.removeAdapter(trained);
model.useAdapter(nativeAdapter, 1);
checkEqual(await model.complete(prompt, { temperature: 0, maxTokens: 32 }), withTrained, 'the natively trained adapter generates the same text');
model.removeAdapter(nativeAdapter);
const nativePeft = await wisp.loadAdapter(model, {
  config: readFileSync(path.join(ftDir, 'peft', 'adapter_config.json'), 'utf8'),
  safetensors: readFileSync(path.join(ftDir, 'peft', 'adapter_model.safetensors')),
});
model.useAdapter(nativePeft, 1);
checkEqual(await model.complete(prompt, { temperature: 0, maxTokens: 32 }), withTrained, "the native run's PEFT copy too");
model.removeAdapter(nativePeft);
const trainedBack = await wisp.loadAdapter(model, trained.toGGUF());
model.useAdapter(trainedBack, 1);
checkEqual(await model.complete(prompt, { temperature: 0, maxTokens: 32 }), withTrained, 'the trained adapter survives toGGUF()');
model.removeAdapter(trainedBack);

// Records (JSONL-style) train too; aborting rejects and leaves the model usable.
const records = [{ prompt: 'Q: Who loved the park?\nA:', completion: ' Lily loved the park.' },
  { instruction: 'Name a color.', output: 'Red.' }];
const recAdapter = await model.finetune(records, { ctx: 32, batch: 2, rank: 2, steps: 2 });
checkEqual(recAdapter.info.rank, 2, 'records train an adapter');
const stop = new AbortController();
let seen = 0;
try {
  await model.finetune(corpus, { ...ft, steps: 50, signal: stop.signal, onProgress: () => { if (++seen === 2) stop.abort(); } });
  check(false, 'an aborted fine-tuning must reject');
} catch (e) {
  checkEqual(e.name, 'AbortError', 'aborted fine-tuning rejects with AbortError');
}
check(seen === 2, `abort stops fine-tuning at once (${seen} steps ran)`);
checkEqual(await model.complete(prompt, { temperature: 0, maxTokens: n }), expected, 'the model is unchanged after an aborted run');
await expectError(() => model.finetune('', {}), 'arg', 'empty training text');
await expectError(() => model.finetune(corpus, { rank: 0 }), 'arg', 'rank 0');
await expectError(() => model.finetune(corpus, { schedule: 'sawtooth' }), 'arg', 'an unknown schedule');

// A worker-backed model answers the same.
const wm = await wisp.loadModel(modelPath, { ...opts, worker: true });
checkEqual(await wm.complete(prompt, { temperature: 0, maxTokens: n }), expected, 'worker model greedy text');
const wa = await wisp.loadAdapter(wm, adapterPath);
await wm.useAdapter(wa, 1);
checkEqual(await wm.complete(prompt, { temperature: 0, maxTokens: 32 }), withAdapter, 'worker model with adapter');
checkEqual((await wa.toGGUF()).length, (await adapter.toGGUF()).length, 'worker adapter export');
const wt = [];
const wtrained = await wm.finetune(corpus, { ...ft, onProgress: (p) => wt.push(p.loss) });
check(wt.length === ft.steps && wt.every((l, i) => Math.abs(l - steps[i].loss) <= 1e-6 * l), 'worker fine-tuning: the same losses');
await wm.removeAdapter(wa);
await wm.useAdapter(wtrained, 1);
checkEqual(await wm.complete(prompt, { temperature: 0, maxTokens: 32 }), withTrained, 'worker fine-tuned adapter generates the same');
checkEqual((await wtrained.toPEFT()).safetensors.length, trained.toPEFT().safetensors.length, 'worker toPEFT');
await wm.dispose();
await expectError(() => wm.complete(prompt), 'disposed', 'a disposed worker model');

// Clear errors for bad input.
await expectError(() => wisp.loadModel(new Uint8Array(100)), 'format', 'zeros are not a GGUF');
await expectError(() => wisp.loadModel(bytes.subarray(0, 5000)), 'format', 'a truncated GGUF');
await expectError(() => wisp.plan(bytes.subarray(0, 1000)), 'format', 'planning a truncated header');
await expectError(() => wisp.loadModel('/nonexistent/model.gguf'), 'io', 'a missing file');
await expectError(() => wisp.loadModel(bytes, { contxt: 5 }), 'arg', 'an unknown option');
await expectError(() => wisp.loadModel(bytes, { kernels: 'avx9000' }), 'unsupported', 'an unknown kernel table');
await expectError(() => model.complete(prompt, { temperature: -1 }), 'arg', 'a negative temperature');
await expectError(() => wisp.loadAdapter(model, bytes), ['format', 'not_found'], 'a model is not an adapter');
// A shard of llama.cpp's split GGUF (a header carrying split.count = 3)
// given alone is refused by name, saying how to give all the shards
// (test_split_model.mjs loads split models).
function ggufWithSplitCount(count) {
  const key = new TextEncoder().encode('split.count');
  const b = new DataView(new ArrayBuffer(4 + 4 + 8 + 8 + 8 + key.length + 4 + 2));
  let o = 0;
  'GGUF'.split('').forEach((c) => b.setUint8(o++, c.charCodeAt(0)));
  b.setUint32(o, 3, true); o += 4; // version
  b.setBigUint64(o, 0n, true); o += 8; // tensors
  b.setBigUint64(o, 1n, true); o += 8; // metadata keys
  b.setBigUint64(o, BigInt(key.length), true); o += 8;
  key.forEach((c) => b.setUint8(o++, c));
  b.setUint32(o, 2, true); o += 4; // GGUF type UINT16
  b.setUint16(o, count, true);
  return new Uint8Array(b.buffer);
}
const shardErr = await expectError(() => wisp.loadModel(ggufWithSplitCount(3)), 'unsupported', 'a shard of a split GGUF');
check(/split\.count = 3/.test(shardErr.message) && /list of all shards/.test(shardErr.message), `the shard refusal says why and what to do: ${shardErr.message}`);
await expectError(() => wisp.plan(ggufWithSplitCount(3)), 'unsupported', 'planning a shard of a split GGUF');
model.dispose();
await expectError(() => model.complete(prompt), 'disposed', 'a disposed model');
done();
