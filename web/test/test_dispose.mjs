#!/usr/bin/env node
// Models and adapters are disposable resources: `using` (and `await using`
// for worker models) calls [Symbol.dispose] / [Symbol.asyncDispose], which
// free them exactly as dispose() does. Node 20 has the symbols but not the
// `using` syntax, so the block is written out as the language defines it
// (dispose in reverse order in a finally), and with the syntax itself when
// this Node parses it.
import { readFile } from 'node:fs/promises';
import { check, checkEqual, done, expectError, shared, wispPackage } from './lib.mjs';

const wisp = await wispPackage();
const bytes = new Uint8Array(await readFile(shared('models/stories260K.gguf')));
const adapterBytes = new Uint8Array(await readFile(shared('golden/adapters/stories260K-r4/adapter.gguf')));
const dispose = Symbol.dispose ?? Symbol.for('nodejs.dispose');
const asyncDispose = Symbol.asyncDispose ?? Symbol.for('nodejs.asyncDispose');
check(typeof dispose === 'symbol' && typeof asyncDispose === 'symbol', `this Node has the symbols (${String(dispose)}, ${String(asyncDispose)})`);

// `using model = ...; using adapter = ...;` written out.
let model, adapter;
try {
  model = await wisp.loadModel(bytes, { ctx: 64 });
  try {
    adapter = await wisp.loadAdapter(model, adapterBytes);
    model.useAdapter(adapter, 1);
    check(typeof adapter[dispose] === 'function' && typeof model[dispose] === 'function', 'Model and Adapter have [Symbol.dispose]');
    checkEqual(model.adapters.length, 1, 'the adapter is attached inside the block');
    throw new Error('leaving the block by a throw');
  } finally {
    adapter[dispose]();
  }
} catch (e) {
  checkEqual(e.message, 'leaving the block by a throw', 'the block\'s own error propagates');
} finally {
  check(!model.disposed, 'the model is still alive after the adapter is disposed');
  checkEqual(model.adapters.length, 0, 'disposing the adapter detached it');
  check(adapter.disposed, '[Symbol.dispose] disposed the adapter');
  model[dispose]();
}
check(model.disposed, '[Symbol.dispose] disposed the model');
await expectError(() => model.complete('Once'), 'disposed', 'a model used after its block');
model[dispose](); // a second dispose is harmless, as dispose() is
check(model.disposed, 'disposing twice is harmless');

// The `using` syntax itself, when this Node parses it.
let syntax = true;
try {
  new Function('{ using x = null; }');
} catch {
  syntax = false;
}
if (syntax) {
  const run = new Function('wisp', 'bytes', 'return (async () => { let kept; { using m = await wisp.loadModel(bytes, { ctx: 64 }); kept = m; } return kept; })();');
  const kept = await run(wisp, bytes);
  check(kept.disposed, '`using` disposed the model at the end of its block');
} else {
  console.log(`note: Node ${process.version} does not parse \`using\`; the block was written out above`);
}

// `await using` on a worker model and its adapter.
const wm = await wisp.loadModel(bytes, { ctx: 64, worker: true });
const wa = await wisp.loadAdapter(wm, adapterBytes);
check(typeof wm[asyncDispose] === 'function' && typeof wa[asyncDispose] === 'function', 'WorkerModel and WorkerAdapter have [Symbol.asyncDispose]');
await wa[asyncDispose]();
check(wa.disposed && !wm.disposed, '[Symbol.asyncDispose] disposed the worker adapter only');
await wm[asyncDispose]();
check(wm.disposed, '[Symbol.asyncDispose] disposed the worker model');
await expectError(() => wm.complete('Once'), 'disposed', 'a worker model used after its block');
done();
