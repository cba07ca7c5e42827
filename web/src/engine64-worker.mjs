// A worker of the threaded wasm64 build (engine64.mjs starts it): an
// instance of the module over the pool's shared memory, on a stack of its
// own, that runs pieces of the pool's jobs (wasm/wasm64/pool.c) until the
// pool stops. It never calls back into JS, so it needs no runtime.
import { isNode } from './util.mjs';

const port = isNode ? (await import('node:worker_threads')).parentPort : self;

function run({ module, memory, pool, stackTop }) {
  try {
    const refuse = () => 0; // the output sink: only the model's own thread writes
    const instance = new WebAssembly.Instance(module, { env: { memory, js_sink_write: refuse } });
    instance.exports.__stack_pointer.value = BigInt(stackTop);
    port.postMessage({ ready: true });
    instance.exports.ww_pool64_worker(BigInt(pool));
  } catch (e) {
    port.postMessage({ error: String(e?.message ?? e) });
  }
}

if (isNode) port.once('message', run);
else self.onmessage = (e) => run(e.data);
