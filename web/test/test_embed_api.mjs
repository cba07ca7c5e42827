#!/usr/bin/env node
// model.embed in Node: the vectors of the native `wisp embed` (mean and last pooling,
// normalized or not), the same from a worker, generation unharmed after embedding, and
// clear errors for bad options.
import { execFileSync } from 'node:child_process';
import { WISP, check, checkEqual, cliGreedy, done, expectError, shared, wispPackage } from './lib.mjs';

const modelPath = shared('models/stories260K.gguf');
const wisp = await wispPackage();
const texts = ['Once upon a time', 'The dog ran to the park.'];

// One vector per text from the CLI, in the order given.
function cliVectors(extra) {
  const args = ['embed', '-m', modelPath, ...texts.flatMap((t) => ['-p', t]), ...extra];
  return execFileSync(WISP, args, { encoding: 'utf8' }).trim().split('\n').map((l) => l.split(' ').map(Number));
}

function maxDiff(a, b) {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

const model = await wisp.loadModel(modelPath, { ctx: 128, batch: 16 });
const cases = [
  { options: {}, cli: [] },
  { options: { pooling: 'last' }, cli: ['--pooling', 'last'] },
  { options: { normalize: false }, cli: ['--no-normalize'] },
  { options: { pooling: 'last', normalize: false }, cli: ['--pooling', 'last', '--no-normalize'] },
];
const dim = cliVectors([])[0].length;
let worst = 0;
for (const c of cases) {
  const want = cliVectors(c.cli);
  for (let i = 0; i < texts.length; i++) {
    const got = model.embed(texts[i], c.options);
    check(got instanceof Float32Array, 'embed returns a Float32Array');
    checkEqual(got.length, dim, `embed ${JSON.stringify(c.options)}: length`);
    // wasm SIMD and the native kernels sum in other orders: equal to float rounding, relative
    // to the vector's length (1 when normalized)
    const d = maxDiff(got, want[i]) / Math.sqrt(want[i].reduce((s, v) => s + v * v, 0));
    worst = Math.max(worst, d);
    check(d < 1e-4, `embed ${JSON.stringify(c.options)} of '${texts[i]}' differs from the CLI's by ${d} of its length`);
  }
}
console.log(`model.embed vs wisp embed: worst max |diff| ${worst.toExponential(1)} of the vector's length`);
const unit = model.embed(texts[0]);
const len = Math.sqrt(unit.reduce((s, v) => s + v * v, 0));
check(Math.abs(len - 1) < 1e-5, `normalized length ${len}`);
check(maxDiff(unit, model.embed(texts[0], { pooling: 'last' })) > 1e-3, 'mean and last pooling differ');

// Embedding empties the KV cache; generation afterwards is the CLI's greedy text.
const n = 24;
checkEqual(await model.complete(texts[0], { temperature: 0, maxTokens: n }), cliGreedy(modelPath, texts[0], n),
  'greedy text before embedding');
model.embed(texts[1]);
checkEqual(await model.complete(texts[0], { temperature: 0, maxTokens: n }), cliGreedy(modelPath, texts[0], n),
  'greedy text after embedding');

await expectError(() => model.embed(texts[0], { pooling: 'max' }), 'arg', 'unknown pooling');
await expectError(() => model.embed(texts[0], { normalise: true }), 'arg', 'misspelt option');
await expectError(() => model.embed('a '.repeat(400)), 'capacity', 'a text longer than the context');

// A worker-backed model gives the same vectors.
const wm = await wisp.loadModel(modelPath, { ctx: 128, batch: 16, worker: true });
const fromWorker = await wm.embed(texts[1], { pooling: 'last' });
check(fromWorker instanceof Float32Array, 'worker embed returns a Float32Array');
checkEqual(maxDiff(fromWorker, model.embed(texts[1], { pooling: 'last' })), 0, 'worker and in-thread vectors');
await expectError(() => wm.embed(texts[0], { pooling: 'max' }), 'arg', 'worker: unknown pooling');
wm.dispose();
model.dispose();
done();
