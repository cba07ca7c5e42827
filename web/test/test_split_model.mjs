#!/usr/bin/env node
// Split GGUFs in the package (Node): stories260K split into 2 and 3 shards
// (tests/tools/gguf_split.py, llama.cpp's gguf-split layout) loads from a
// list of paths, from the list's bytes, from the name of any one shard and
// over HTTP from one shard's URL, and gives the single file's greedy token
// ids, text and embedding exactly, with the same plan (on 2 threads too:
// the threaded build); broken sets are
// refused with errors naming the shard.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { WEB_OUT, WORK, check, checkEqual, done, expectError, shared, wispPackage } from './lib.mjs';

const modelPath = shared('models/stories260K.gguf');
const splitTool = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'tests', 'tools', 'gguf_split.py');
const dir = path.join(WORK, 'split-model');
rmSync(dir, { recursive: true, force: true });
mkdirSync(dir, { recursive: true });
const split = (prefix, n, ...extra) =>
  execFileSync('python3', [splitTool, modelPath, path.join(dir, prefix), String(n), ...extra], { encoding: 'utf8' })
    .trim().split('\n');

const wisp = await wispPackage();
const { serve } = await import(pathToFileURL(path.join(WEB_OUT, 'demo', 'serve.mjs')).href);
const opts = { ctx: 128, batch: 16, threads: 1 };
const prompt = 'Once upon a time';

// What a model answers: greedy token ids and text, and an embedding.
async function answers(model) {
  const ids = [];
  const text = await model.complete(prompt, { temperature: 0, maxTokens: 32, onToken: (id) => ids.push(id) });
  const embedding = Array.from(model.embed('The dog ran to the park.'));
  return { ids: ids.join(','), text, embedding: embedding.join(',') };
}

const whole = await wisp.loadModel(modelPath, opts);
const want = await answers(whole);
check(want.ids.split(',').length === 32, `the single file generated ${want.ids.split(',').length} tokens`);
const wholePlan = whole.memoryPlan;
whole.dispose();

async function same(model, what) {
  const got = await answers(model);
  checkEqual(got.ids, want.ids, `${what}: greedy token ids`);
  checkEqual(got.text, want.text, `${what}: greedy text`);
  checkEqual(got.embedding, want.embedding, `${what}: embedding`);
  checkEqual(JSON.stringify(model.memoryPlan.parts), JSON.stringify(wholePlan.parts), `${what}: the plan`);
  model.dispose();
}

for (const n of [2, 3]) {
  const files = split(`s${n}`, n);
  checkEqual(files.length, n, `the splitter wrote ${n} files`);
  const bytes = files.reduce((a, f) => a + statSync(f).size, 0);
  const a = await wisp.loadModel(files, opts);
  checkEqual(a.info.shards, n, `${n} shards: info.shards`);
  checkEqual(a.info.shardCache?.length, n, `${n} shards: info.shardCache has one answer per shard`);
  await same(a, `${n} shards from a list of paths`);
  await same(await wisp.loadModel(files[n - 1], opts), `${n} shards from the last shard's path`);
  await same(await wisp.loadModel(files.map((f) => new Uint8Array(readFileSync(f))), opts), `${n} shards from bytes`);
  if (n === 3) { // the threaded build reads split models the same way
    const mt = await wisp.loadModel(files, { ...opts, threads: 2 });
    checkEqual(mt.info.build, 'threaded', 'threads: 2 runs the threaded build');
    const got = await answers(mt);
    checkEqual(got.ids, want.ids, '3 shards on 2 threads: greedy token ids');
    checkEqual(got.text, want.text, '3 shards on 2 threads: greedy text');
    mt.dispose();
  }
  const p = await wisp.plan(files[0], opts);
  checkEqual(p.shards, n, `plan of ${n} shards: shards`);
  checkEqual(p.fileBytes, bytes, `plan of ${n} shards: fileBytes is every shard's`);
  checkEqual(p.total, wholePlan.total, `plan of ${n} shards from the headers: total`);
}

// HTTP: the URL of one shard fetches all of them; progress counts over all
const server = await serve({ root: WEB_OUT, models: dir, port: 0 });
try {
  const base = `http://127.0.0.1:${server.address().port}/models/`;
  const progress = [];
  const m = await wisp.loadModel(`${base}s3-00002-of-00003.gguf`, { ...opts, onProgress: (q) => progress.push(q) });
  const total = ['1', '2', '3'].reduce((a, k) => a + statSync(path.join(dir, `s3-0000${k}-of-00003.gguf`)).size, 0);
  checkEqual(progress.at(-1).loaded, total, 'download progress ends at all shards\' bytes');
  checkEqual(progress.at(-1).total, total, 'download progress total is all shards\' bytes');
  check(progress.every((q, i) => i === 0 || q.loaded >= progress[i - 1].loaded), 'progress never goes back');
  checkEqual(new Set(progress.map((q) => q.shard)).size, 3, 'progress names each of the 3 shards');
  await same(m, '3 shards over HTTP');
  const p = await wisp.plan(`${base}s3-00001-of-00003.gguf`, opts);
  checkEqual(p.total, wholePlan.total, 'plan over HTTP from 3 shards\' headers');
} finally {
  server.close();
}

// broken sets, each refused with the shard named
const [h1, h2, h3] = split('h', 3);
rmSync(h2);
let e = await expectError(() => wisp.loadModel(h1, opts), 'io', 'a missing shard');
check(e.message.includes('h-00002-of-00003.gguf'), `the missing shard is named: ${e.message}`);
split('h', 3);
e = await expectError(() => wisp.loadModel([h1, h3, h2], opts), 'format', 'shards out of order');
check(e.message.includes(h3) && e.message.includes("'split.no'"), `the misplaced shard and key are named: ${e.message}`);
e = await expectError(() => wisp.loadModel([h1, h2, h2], opts), 'format', 'a shard given twice');
check(e.message.includes("shard 3 of 3 has 'split.no' = 1"), `the repeated shard is named: ${e.message}`);
e = await expectError(() => wisp.loadModel([h1, h2], opts), 'format', 'too few shards');
check(e.message.includes("'split.count' = 3"), `split.count is named: ${e.message}`);
split('h', 3, '--hostile', 'dup-tensor');
e = await expectError(() => wisp.loadModel(h1, opts), 'format', 'a tensor in two shards');
check(e.message.includes('is in shard 1 and in shard 2') && e.message.includes('h-00002-of-00003.gguf'), `the tensor and shard are named: ${e.message}`);
split('h', 3);
e = await expectError(() => wisp.loadModel(new Uint8Array(readFileSync(h1)), opts), 'unsupported', 'one shard alone');
check(e.message.includes('split.count = 3'), `a lone shard says it is one of 3: ${e.message}`);
done();
