// The wasm engine: two builds of wisp-engine (one thread; wasm threads with
// a pool of workers), each compiled once, one instance per model (so
// disposing a model gives all of its memory back), and small helpers over the
// C ABI of wasm/abi.c.
import createWispEngine from '../dist/wisp-engine.mjs';
import { WispError } from './errors.mjs';

export const isNode = typeof process === 'object' && process.versions != null && process.versions.node != null &&
  typeof window === 'undefined' && typeof importScripts !== 'function';

// wasm32 addresses 4 GiB: a model's file, its arena and the engine's few
// megabytes must fit in that.
export const WASM32_LIMIT = 2 ** 32;
export const MAX_DEFAULT_THREADS = 8;

// The cores the platform reports (navigator.hardwareConcurrency; in Node the
// available parallelism).
const os = isNode ? await import('node:os') : null;
const reportedCores = os ? os.availableParallelism?.() ?? os.cpus().length : globalThis.navigator?.hardwareConcurrency ?? 1;

// How many threads a model gets, and why not more than one when it gets one:
// { threads, whyNotThreaded } (null when threaded). `requested` is loadModel's
// threads option (undefined: the reported cores, at most 8).
export function chooseThreads(requested) {
  if (requested !== undefined && (!Number.isInteger(requested) || requested < 1 || requested > 64))
    throw new WispError('arg', `threads must be an integer in 1..64 (got ${requested})`);
  const threads = requested ?? Math.max(1, Math.min(MAX_DEFAULT_THREADS, reportedCores));
  if (threads === 1) {
    return { threads, whyNotThreaded: requested === 1 ? 'threads: 1 was asked for'
      : `the platform reports ${reportedCores} core${reportedCores === 1 ? '' : 's'}` };
  }
  if (!isNode && globalThis.crossOriginIsolated !== true) {
    return { threads: 1, whyNotThreaded: 'the page is not cross-origin isolated: serve it with the headers ' +
      "'Cross-Origin-Opener-Policy: same-origin' and 'Cross-Origin-Embedder-Policy: require-corp'" };
  }
  if (typeof SharedArrayBuffer !== 'function' || typeof Atomics !== 'object')
    return { threads: 1, whyNotThreaded: 'SharedArrayBuffer is not available here (wasm threads need it)' };
  return { threads, whyNotThreaded: null };
}

// The two builds: where their .wasm is, the factory, the compiled module.
const builds = {
  single: { wasm: new URL('../dist/wisp-engine.wasm', import.meta.url), factory: async () => createWispEngine, compiled: null },
  threaded: {
    wasm: new URL('../dist/wisp-engine-mt.wasm', import.meta.url),
    factory: async () => (await import('../dist/wisp-engine-mt.mjs')).default,
    compiled: null,
  },
};

// Where the .wasm files come from when the default location does not work
// (a bundler moved them): { wasmUrl, threadedWasmUrl } or, for the
// single-thread build, { wasmBinary } or { wasmModule }.
export function configureEngine(options = {}) {
  builds.single.compiled = null;
  builds.threaded.compiled = null;
  if (options.wasmModule) builds.single.compiled = Promise.resolve(options.wasmModule);
  else if (options.wasmBinary) builds.single.compiled = WebAssembly.compile(options.wasmBinary);
  else if (options.wasmUrl) builds.single.compiled = compileFrom(new URL(options.wasmUrl, baseUrl()));
  if (options.threadedWasmUrl) builds.threaded.compiled = compileFrom(new URL(options.threadedWasmUrl, baseUrl()));
}

function baseUrl() {
  return typeof location === 'object' && location.href ? location.href : import.meta.url;
}

async function compileFrom(url) {
  if (isNode && url.protocol === 'file:') {
    const { readFile } = await import('node:fs/promises');
    return WebAssembly.compile(await readFile(url));
  }
  const res = await fetch(url, { credentials: 'same-origin' });
  if (!res.ok) throw new WispError('io', `cannot fetch the wisp engine from ${url} (HTTP ${res.status})`);
  const type = res.headers.get('content-type') || '';
  if (typeof WebAssembly.compileStreaming === 'function' && type.startsWith('application/wasm'))
    return WebAssembly.compileStreaming(res);
  return WebAssembly.compile(await res.arrayBuffer());
}

// The threaded build's worker script must be there before workers are made
// from it: a missing one is thrown at the process by Node, and at the
// event loop (not at a promise) by browsers. Checked once.
let workerScript = null;
function checkWorkerScript() {
  workerScript ??= (async () => {
    const script = new URL('../dist/wisp-engine-mt.worker.js', import.meta.url);
    if (isNode) {
      const { access } = await import('node:fs/promises');
      await access(script).catch(() => { throw new WispError('io', `the threaded build's worker script ${script.pathname} is missing`); });
      return;
    }
    const res = await fetch(script, { method: 'HEAD', credentials: 'same-origin' }).catch((e) => ({ ok: false, status: e.message }));
    if (!res.ok) throw new WispError('io', `the threaded build's worker script ${script.href} could not be fetched (${res.status})`);
  })();
  return workerScript;
}

// A fresh instance of the engine with its own memory: the threaded build
// with `threads - 1` workers next to the calling thread when threads > 1.
// Rejects when the instance (or one of its workers) cannot start.
export async function newEngine({ threads = 1 } = {}) {
  const build = threads > 1 ? builds.threaded : builds.single;
  if (threads > 1) await checkWorkerScript();
  build.compiled ??= compileFrom(build.wasm);
  const [module, create] = await Promise.all([build.compiled, build.factory()]);
  let failed;
  const failure = new Promise((_, reject) => { failed = reject; });
  const mod = await Promise.race([
    create({
      instantiateWasm(imports, receive) {
        WebAssembly.instantiate(module, imports).then((instance) => receive(instance, module), failed);
        return {};
      },
      // the pthread workers are started before the instance is ready
      wispWorkers: threads - 1,
      print: () => {},
      // Emscripten reports a worker that failed to load here (and nowhere a
      // promise would see it)
      printErr: (text) => {
        if (/worker sent an error/.test(text)) failed(new WispError('io', `a worker of the threaded build failed: ${text.trim()}`));
      },
    }),
    failure,
  ]);
  // Node: idle pthread workers must not keep the process running (calls
  // block the caller until their work is done anyway).
  if (isNode) for (const w of [...mod.PThread?.unusedWorkers ?? [], ...mod.PThread?.runningWorkers ?? []]) w.unref?.();
  return new Engine(mod, threads);
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

// C functions that return a pointer or a uint32: wasm hands them to JS as
// int32, so addresses past 2 GiB (wasm32 reaches 4 GiB) would come out
// negative; these are read back unsigned (>>> 0). web/test checks this list
// against wasm/abi*.c.
export const UNSIGNED_RESULTS = ['ww_alloc', 'ww_error', 'ww_error_code', 'ww_open', 'ww_open_header', 'ww_plan_field_name',
  'ww_plan_of', 'ww_kernels_name', 'ww_io', 'ww_io_cap', 'ww_ids', 'ww_detokenize', 'ww_token_piece', 'ww_logits',
  'ww_adapter_open_gguf', 'ww_adapter_open_peft', 'ww_adapter_notes', 'ww_adapter_peft_config', 'ww_adapter_peft_config_len',
  'ww_train_begin', 'ww_train_finish', 'ww_embed', 'ww_chat_text'];

export class Engine {
  #u8 = null;

  constructor(mod, threads = 1) {
    // The wrappers live on an object of their own: Emscripten replaces its
    // exports on the module at their first call, which would drop them.
    const abi = Object.create(mod);
    for (const name of UNSIGNED_RESULTS) {
      const f = mod[`_${name}`];
      abi[`_${name}`] = (...args) => f(...args) >>> 0;
    }
    this.module = mod; // properties the C side reads (Module.wispSinkWrite) are set here
    this.mod = abi;
    this.abi = abi;
    this.threaded = threads > 1;
    this.configFields = mod._ww_config_field_count();
    this.planNames = [];
    for (let i = 0, n = mod._ww_plan_field_count(); i < n; i++) this.planNames.push(this.cstring(mod._ww_plan_field_name(i)));
    this.partNames = this.planNames.slice(1, this.planNames.indexOf('weights'));
    // Small fixed scratch, taken at creation so later calls allocate nothing:
    //   +0     plan figures (doubles) and training step results
    //   +1024  engine configuration (int32, wasm/abi.c CF_*)
    //   +1536  training settings (int32 TI_*), +1600 (float TF_*)
    //   +2048  short NUL-terminated strings (scratchString; +512 for a second one)
    //   +3072  metadata strings read back (metaString)
    this.scratch = this.alloc(4096);
  }

  // The threaded build's memory is shared: its views are made here, anew
  // when it has grown (the module's own may lag behind a growth).
  get u8() {
    const memory = this.module.wasmMemory;
    if (!memory) return this.module.HEAPU8;
    if (this.#u8?.byteLength !== memory.buffer.byteLength) this.#u8 = new Uint8Array(memory.buffer);
    return this.#u8;
  }

  get memoryBytes() { return this.u8.byteLength; }

  // Text of wasm memory: TextDecoder does not read shared memory everywhere,
  // so those bytes are copied first.
  text(start, end) {
    const view = this.u8.subarray(start, end);
    return decoder.decode(this.threaded ? view.slice() : view);
  }

  // Stop the instance's workers (threaded build); its memory goes with it.
  close() {
    this.module.PThread?.terminateAllThreads();
  }

  alloc(n) {
    const p = this.mod._ww_alloc(n);
    if (!p) throw new WispError('capacity', `out of wasm memory allocating ${n} bytes (wasm32 memory ends at 4 GiB; this instance holds ${this.memoryBytes})`);
    return p;
  }

  free(p) { this.mod._ww_free(p); }

  cstring(ptr, max = 1 << 20) {
    const u8 = this.u8;
    let end = ptr;
    while (end < ptr + max && u8[end] !== 0) end++;
    return this.text(ptr, end);
  }

  // The last error of a model record (or of opening one, with ptr 0).
  error(model = 0) {
    return new WispError(this.cstring(this.mod._ww_error_code(model)), this.cstring(this.mod._ww_error(model)));
  }

  // A NUL-terminated string in the scratch area (short strings only).
  scratchString(s, offset = 0) {
    const bytes = encoder.encode(s);
    if (bytes.length + 1 > 512) throw new WispError('arg', `'${s.slice(0, 40)}…' is too long (at most 511 bytes)`);
    const p = this.scratch + 2048 + offset;
    this.u8.set(bytes, p);
    this.u8[p + bytes.length] = 0;
    return p;
  }

  // int32 configuration fields, in wasm/abi.c's CF_* order.
  config(c) {
    const fields = [c.ctx ?? 0, c.batch ?? 0, c.kvType === 'f32' ? 1 : 0, c.maxTextBytes ?? 0, c.maxAdapters ?? 0,
      c.maxLoraRank ?? 0, c.threads ?? 1];
    const i32 = new Int32Array(this.u8.buffer, this.scratch + 1024, this.configFields);
    fields.forEach((v, i) => { i32[i] = v; });
    return this.scratch + 1024;
  }

  // A plan as an object, from PF_* doubles at the scratch area.
  readPlan() {
    const f64 = new Float64Array(this.u8.buffer, this.scratch, this.planNames.length);
    const v = Object.fromEntries(this.planNames.map((name, i) => [name, f64[i]]));
    const parts = Object.fromEntries(this.partNames.map((name) => [name, v[name]]));
    return {
      total: v.total,
      parts,
      weights: v.weights,
      fileBytes: v.fileBytes,
      config: {
        ctx: v.nCtx, batch: v.nBatch, kvType: v.kvF32 ? 'f32' : 'f16', maxTextBytes: v.maxTextBytes,
        maxAdapters: v.maxAdapters, maxLoraRank: v.maxLoraRank,
      },
      model: {
        nVocab: v.nVocab, dim: v.dim, nLayers: v.nLayers, nHeads: v.nHeads, nKvHeads: v.nKvHeads,
        headDim: v.headDim, ffnDim: v.ffnDim, ctxTrain: v.ctxTrain,
      },
    };
  }

  // Metadata strings of a GGUF (general.name, general.architecture).
  metaString(model, key) {
    const k = this.scratchString(key);
    const out = this.scratch + 3072;
    const n = this.mod._ww_meta_str(model, k, out, 1024);
    return n < 0 ? undefined : this.cstring(out, 1024);
  }
}
