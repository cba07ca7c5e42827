// The wasm64 (Memory64) build of the engine: for models whose file plus arena
// pass wasm32's 4 GiB. It is made without Emscripten (wasm/wasm64/wasm64.mk),
// so this file is its whole runtime: instantiate it, and give it the shape of
// an Emscripten module (`_ww_*` functions, `wasmMemory`) so engine.mjs drives
// it as it drives the wasm32 builds.
//
// In wasm64 pointers and size_t are i64, which JS passes as BigInt. Every
// export's signature is read from the binary, and each is wrapped: numbers in,
// BigInt to the i64 parameters; i64 results back as numbers (wasm memory ends
// far below 2^53, so addresses and sizes are exact), and the ABI's unsigned
// i32 results read unsigned.
import { WispError } from './errors.mjs';
import { isNode } from './util.mjs';

// The most V8 gives a 64-bit memory (wasm/wasm64/wasm64.mk links the module
// with this maximum).
export const WASM64_LIMIT = 2 ** 34;

// A module with a 64-bit memory and a 64-bit table (what clang's wasm64
// output uses): does this JS engine validate it?
const MEMORY64_PROBE = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // \0asm, version 1
  0x04, 0x04, 0x01, 0x70, 0x04, 0x00, // table section: one funcref table, 64-bit, min 0
  0x05, 0x03, 0x01, 0x04, 0x00, // memory section: one memory, 64-bit, min 0
]);

// Why the wasm64 build cannot run here (null when it can).
export function whyNoMemory64() {
  if (typeof WebAssembly !== 'object') return 'WebAssembly is not available';
  if (WebAssembly.validate(MEMORY64_PROBE)) return null;
  return 'this JavaScript engine has no Memory64 (64-bit wasm memory and tables: Chrome/Edge 133 or later, ' +
    'Firefox 134 or later; Node.js 24 or later)';
}

const VALTYPES = { 0x7f: 'i32', 0x7e: 'i64', 0x7d: 'f32', 0x7c: 'f64', 0x7b: 'v128', 0x70: 'funcref', 0x6f: 'externref' };

// The signature of every exported function of a wasm binary:
// Map name -> { params: ['i32' | 'i64' | ...], results: [...] }; and the
// limits of an imported memory ({ min, max } in pages; null when none).
export function moduleShape(bytes) {
  const u8 = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  let at = 8;
  const fail = (what) => { throw new WispError('internal', `the wasm64 engine's binary is malformed (${what} at byte ${at})`); };
  const byte = () => (at < u8.length ? u8[at++] : fail('unexpected end'));
  const uleb = () => {
    let v = 0;
    for (let shift = 0; ; shift += 7) {
      const b = byte();
      v += (b & 0x7f) * 2 ** shift;
      if (!(b & 0x80)) return v;
      if (shift > 49) fail('an overlong number');
    }
  };
  const name = () => {
    const n = uleb();
    if (at + n > u8.length) fail('a name past the end');
    const s = new TextDecoder().decode(u8.subarray(at, at + n));
    at += n;
    return s;
  };
  const limits = () => {
    const flags = byte();
    const min = uleb();
    return { min, max: flags & 1 ? uleb() : undefined };
  };
  let memory = null;
  const valtypes = () => Array.from({ length: uleb() }, () => VALTYPES[byte()] ?? fail('an unknown value type'));
  const types = [];
  const funcTypes = []; // imported functions first, then defined ones
  const exports = new Map();
  while (at < u8.length) {
    const id = byte();
    const size = uleb();
    const end = at + size;
    if (end > u8.length) fail('a section past the end');
    if (id === 1) {
      for (let i = 0, n = uleb(); i < n; i++) {
        if (byte() !== 0x60) fail('a type that is not a function type');
        types.push({ params: valtypes(), results: valtypes() });
      }
    } else if (id === 2) {
      for (let i = 0, n = uleb(); i < n; i++) {
        name();
        name();
        const kind = byte();
        if (kind === 0) funcTypes.push(types[uleb()]);
        else if (kind === 1) { byte(); limits(); } // a table: its element type, limits
        else if (kind === 2) memory = limits(); // a memory
        else if (kind === 3) { byte(); byte(); } // a global: its type, mutability
        else fail(`an import of kind ${kind}`);
      }
    } else if (id === 3) {
      for (let i = 0, n = uleb(); i < n; i++) funcTypes.push(types[uleb()]);
    } else if (id === 7) {
      for (let i = 0, n = uleb(); i < n; i++) {
        const ex = name();
        const kind = byte();
        const index = uleb();
        if (kind === 0) exports.set(ex, funcTypes[index] ?? fail(`function ${index} of export ${ex}`));
      }
    }
    at = end;
  }
  return { signatures: exports, memory };
}

// An Emscripten-shaped module over an instance of the wasm64 build (see the
// top of this file). `unsigned`: names of functions whose i32 result is a uint32.
export function wideModule(instance, signatures, unsigned) {
  const mod = { wasmMemory: instance.exports.memory, wide: true };
  for (const [name, sig] of signatures) {
    const f = instance.exports[name];
    const wide = sig.params.map((t) => t === 'i64');
    const toArgs = (args) => args.map((a, i) => (wide[i] ? BigInt(a) : a));
    const result = sig.results[0];
    mod[`_${name}`] = result === 'i64' ? (...args) => Number(f(...toArgs(args)))
      : result === 'i32' && unsigned.includes(name) ? (...args) => f(...toArgs(args)) >>> 0
        : (...args) => f(...toArgs(args));
  }
  return mod;
}

const STACK_BYTES = 1 << 20; // a worker's stack, as the main one (wasm/wasm64/wasm64.mk)

// A fresh instance: `compiled` is { module, signatures, memory } from
// compileWide; `threads` > 1 (the threaded variant) also starts threads - 1
// workers, each with an instance over the same shared memory running
// wasm/wasm64/pool.c's loop, and resolves once all of them are in it.
export async function instantiateWide({ module, signatures, memory: limits }, unsigned, threads = 1) {
  let mod = null;
  const env = {
    // abi_adapter.c's output sink: bytes at data, n of them
    js_sink_write: (data, n) => (mod.wispSinkWrite(Number(data), Number(n)) ? 1 : 0),
  };
  if (limits) {
    env.memory = new WebAssembly.Memory({ initial: BigInt(limits.min), maximum: BigInt(limits.max ?? WASM64_LIMIT / 65536),
      shared: true, address: 'i64' });
  }
  const instance = await WebAssembly.instantiate(module, { env });
  mod = wideModule(instance, signatures, unsigned);
  if (limits) mod.wasmMemory = env.memory;
  if (threads > 1) await startWorkers(mod, module, env.memory, threads);
  return mod;
}

// The workers of the threaded variant, and mod.wispClose to end them.
async function startWorkers(mod, module, memory, threads) {
  const pool = mod._ww_pool64_new(threads);
  if (!pool) throw new WispError('capacity', `out of wasm memory for a pool of ${threads} threads`);
  const workers = [];
  mod.wispClose = () => {
    for (const w of workers) w.terminate();
  };
  const url = new URL('./engine64-worker.mjs', import.meta.url);
  const { Worker: NodeWorker } = isNode ? await import('node:worker_threads') : {};
  try {
    await Promise.all(Array.from({ length: threads - 1 }, (_, i) => new Promise((resolve, reject) => {
      const stack = mod._ww_alloc(STACK_BYTES);
      if (!stack) throw new WispError('capacity', `out of wasm memory for worker ${i + 1}'s stack`);
      // (Node: not the process's --input-type, which a worker given a file refuses)
      const w = isNode ? new NodeWorker(url, { execArgv: process.execArgv.filter((a) => !a.startsWith('--input-type')) })
        : new Worker(url, { type: 'module' });
      workers.push(w);
      const failed = (e) => reject(new WispError('io', `a worker of the wasm64 build failed to start: ${e?.message ?? e}`));
      const onMessage = (m) => {
        const data = isNode ? m : m.data;
        if (data?.ready) resolve();
        else if (data?.error) failed(data.error);
      };
      if (isNode) {
        w.on('message', onMessage);
        w.on('error', failed);
      } else {
        w.onmessage = onMessage;
        w.onerror = (e) => { e.preventDefault?.(); failed(e.message || `could not load ${url}`); };
      }
      w.postMessage({ module, memory, pool, stackTop: stack + STACK_BYTES });
    })));
    // each worker says ready just before it enters the loop; the pool counts them in
    for (let waited = 0; mod._ww_pool64_started(pool) < threads - 1; waited++) {
      if (waited > 5000) throw new WispError('io', `the wasm64 build's workers did not start (${mod._ww_pool64_started(pool)} of ${threads - 1})`);
      await new Promise((r) => setTimeout(r, 1));
    }
    // Node: idle workers must not keep the process running (calls block the
    // caller until their work is done anyway)
    if (isNode) for (const w of workers) w.unref();
  } catch (e) {
    mod.wispClose();
    throw e;
  }
}

// Compiles the build from its bytes, keeping what JS needs of its shape.
export async function compileWide(bytes) {
  const why = whyNoMemory64();
  if (why) throw new WispError('unsupported', `the wasm64 build cannot run here: ${why}`);
  return { module: await WebAssembly.compile(bytes), ...moduleShape(bytes) };
}
