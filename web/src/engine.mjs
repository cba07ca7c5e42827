// The wasm engine: two builds of wisp-engine (one thread; wasm threads with
// a pool of workers), each compiled once, one instance per model (so
// disposing a model gives all of its memory back), and small helpers over the
// C ABI of wasm/abi.c.
import createWispEngine from '../dist/wisp-engine.mjs';
import { compileWide, instantiateWide } from './engine64.mjs';
import { WispError } from './errors.mjs';
import { isNode } from './util.mjs';

export { isNode };

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

// The builds: where their .wasm is, the factory, the compiled module (the
// wasm64 build has no factory: engine64.mjs instantiates it).
const builds = {
  single: { wasm: new URL('../dist/wisp-engine.wasm', import.meta.url), factory: async () => createWispEngine, compiled: null },
  threaded: {
    wasm: new URL('../dist/wisp-engine-mt.wasm', import.meta.url),
    factory: async () => (await import('../dist/wisp-engine-mt.mjs')).default,
    compiled: null,
  },
  wasm64: { wasm: new URL('../dist/wisp-engine-64.wasm', import.meta.url), compiled: null },
  wasm64Threaded: { wasm: new URL('../dist/wisp-engine-64-mt.wasm', import.meta.url), compiled: null },
};

// Where the .wasm files come from when the default location does not work
// (a bundler moved them): { wasmUrl, threadedWasmUrl, wasm64Url,
// wasm64ThreadedUrl } or, for the
// single-thread build, { wasmBinary } or { wasmModule }.
export function configureEngine(options = {}) {
  for (const b of Object.values(builds)) b.compiled = null;
  if (options.wasmModule) builds.single.compiled = Promise.resolve(options.wasmModule);
  else if (options.wasmBinary) builds.single.compiled = WebAssembly.compile(options.wasmBinary);
  else if (options.wasmUrl) builds.single.compiled = compileFrom(new URL(options.wasmUrl, baseUrl()));
  if (options.threadedWasmUrl) builds.threaded.compiled = compileFrom(new URL(options.threadedWasmUrl, baseUrl()));
  if (options.wasm64Url) builds.wasm64.url = new URL(options.wasm64Url, baseUrl());
  if (options.wasm64ThreadedUrl) builds.wasm64Threaded.url = new URL(options.wasm64ThreadedUrl, baseUrl());
}

function baseUrl() {
  return typeof location === 'object' && location.href ? location.href : import.meta.url;
}

async function compileFrom(url) {
  if (isNode && url.protocol === 'file:') return WebAssembly.compile(await bytesOf(url));
  const res = await fetchEngine(url);
  const type = res.headers.get('content-type') || '';
  if (typeof WebAssembly.compileStreaming === 'function' && type.startsWith('application/wasm'))
    return WebAssembly.compileStreaming(res);
  return WebAssembly.compile(await res.arrayBuffer());
}

async function fetchEngine(url) {
  const res = await fetch(url, { credentials: 'same-origin' });
  if (!res.ok) throw new WispError('io', `cannot fetch the wisp engine from ${url} (HTTP ${res.status})`);
  return res;
}

async function bytesOf(url) {
  if (isNode && url.protocol === 'file:') {
    const { readFile } = await import('node:fs/promises');
    return readFile(url);
  }
  return new Uint8Array(await (await fetchEngine(url)).arrayBuffer());
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
// with `threads - 1` workers next to the calling thread when threads > 1;
// the wasm64 build when `wasm64` (its threaded variant when threads > 1).
// Rejects when the instance (or one of its workers) cannot start.
export async function newEngine({ threads = 1, wasm64 = false } = {}) {
  if (wasm64) {
    const b = threads > 1 ? builds.wasm64Threaded : builds.wasm64;
    b.compiled ??= bytesOf(b.url ?? b.wasm).then(compileWide);
    b.compiled.catch(() => { b.compiled = null; }); // a failed fetch is tried again next time
    return new Engine(await instantiateWide(await b.compiled, UNSIGNED_RESULTS, threads), threads);
  }
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

// Little-endian accessors of the record field types (wasm is little-endian).
const setters = {
  i32: (v, at, x) => v.setInt32(at, x, true), u32: (v, at, x) => v.setUint32(at, x >>> 0, true),
  f32: (v, at, x) => v.setFloat32(at, x, true), f64: (v, at, x) => v.setFloat64(at, x, true),
};
const getters = {
  i32: (v, at) => v.getInt32(at, true), u32: (v, at) => v.getUint32(at, true),
  f32: (v, at) => v.getFloat32(at, true), f64: (v, at) => v.getFloat64(at, true),
};
const decoder = new TextDecoder();

// C functions that return a pointer or a uint32: wasm hands them to JS as
// int32, so addresses past 2 GiB (wasm32 reaches 4 GiB) would come out
// negative; these are read back unsigned (>>> 0). web/test checks this list
// against wasm/abi*.c.
export const UNSIGNED_RESULTS = ['ww_alloc', 'ww_error', 'ww_error_code', 'ww_open', 'ww_open_header', 'ww_part_name',
  'ww_record_name', 'ww_field_name', 'ww_field_type', 'ww_plan_of', 'ww_kernels_name', 'ww_io', 'ww_io_cap', 'ww_ids', 'ww_detokenize', 'ww_token_piece', 'ww_logits',
  'ww_adapter_open_gguf', 'ww_adapter_open_peft', 'ww_adapter_notes', 'ww_adapter_peft_config', 'ww_adapter_peft_config_len',
  'ww_train_begin', 'ww_train_finish', 'ww_embed', 'ww_chat_text'];

// The records this file exchanges with C (the structs of wasm/abi_structs.h),
// each field with the type it must have there: 'f64', 'i32', 'u32', 'f32', or
// 'char[]' / 'f64[]' for arrays. Offsets are never written here: they come
// from C's layout table (wasm/abi_layout.c) when an engine starts, and an
// engine whose table lacks one of these fields, or types it differently, is
// refused (web/test/test_abi_layout.mjs checks both sides).
export const ABI_RECORDS = {
  config: {
    n_ctx: 'i32', n_batch: 'i32', kv_f32: 'i32', max_text_bytes: 'i32', max_adapters: 'i32', max_lora_rank: 'i32',
    threads: 'i32',
  },
  plan: {
    total: 'f64', part: 'f64[]', weights: 'f64', file_bytes: 'f64', n_ctx: 'f64', n_batch: 'f64', kv_f32: 'f64',
    max_text_bytes: 'f64', max_adapters: 'f64', max_lora_rank: 'f64', n_vocab: 'f64', dim: 'f64', n_layers: 'f64',
    n_heads: 'f64', n_kv_heads: 'f64', head_dim: 'f64', ffn_dim: 'f64', ctx_train: 'f64',
  },
  train: {
    seq_len: 'i32', micro_batch: 'i32', rank: 'i32', steps: 'i32', seed_lo: 'u32', seed_hi: 'u32', schedule: 'i32',
    warmup: 'i32', jsonl: 'i32', blank_line_docs: 'i32', threads: 'i32', alpha: 'f32', lr: 'f32', clip: 'f32',
    packing: 'i32', method: 'i32', dpo_beta: 'f32', label_smoothing: 'f32', dpo_loss: 'i32', num_virtual_tokens: 'i32',
  },
  train_step: {
    loss: 'f64', scored: 'f64', lr: 'f64', grad_norm: 'f64', step: 'f64', epoch: 'f64', rewards_chosen: 'f64',
    rewards_rejected: 'f64', rewards_accuracies: 'f64', rewards_margins: 'f64',
  },
  train_data: { records: 'f64', windows: 'f64', truncated: 'f64', unscored: 'f64', scored: 'f64' },
  strings: { key: 'char[]', second_key: 'char[]', meta: 'char[]' },
};

const ELEMENT_BYTES = { i32: 4, u32: 4, f32: 4, f64: 8, char: 1 };

// C's layout table: { record: { size, fields: { name: { offset, type, elements, size } } } }.
export function readLayout(mod, cstring) {
  const layout = {};
  for (let r = 0, n = mod._ww_record_count(); r < n; r++)
    layout[cstring(mod._ww_record_name(r))] = { size: mod._ww_record_size(r), fields: {} };
  for (let i = 0, n = mod._ww_field_count(); i < n; i++) {
    const record = Object.values(layout)[mod._ww_field_record(i)];
    record.fields[cstring(mod._ww_field_name(i))] = {
      offset: mod._ww_field_offset(i), type: cstring(mod._ww_field_type(i)), elements: mod._ww_field_elements(i),
      size: mod._ww_field_size(i),
    };
  }
  return layout;
}

// What in a C layout table disagrees with ABI_RECORDS (empty when nothing):
// a record or field JS uses that C lacks, another type, a field outside its record.
export function layoutMismatches(layout) {
  const wrong = [];
  for (const [record, fields] of Object.entries(ABI_RECORDS)) {
    const r = layout[record];
    if (!r) { wrong.push(`record ${record} is missing`); continue; }
    for (const [name, want] of Object.entries(fields)) {
      const f = r.fields[name];
      const array = want.endsWith('[]');
      const type = array ? want.slice(0, -2) : want;
      if (!f) wrong.push(`${record}.${name} is missing`);
      else if (f.type !== type || (array ? f.elements < 1 : f.elements !== 1))
        wrong.push(`${record}.${name} is ${f.type}${f.elements > 1 ? `[${f.elements}]` : ''} in C, ${want} in JS`);
      else if (f.size !== f.elements * ELEMENT_BYTES[type] || f.offset < 0 || f.offset + f.size > r.size)
        wrong.push(`${record}.${name} (${f.size} bytes at ${f.offset}) does not fit its type or the ${r.size}-byte record`);
    }
  }
  return wrong;
}

export class Engine {
  #u8 = null;

  constructor(mod, threads = 1) {
    // The wrappers live on an object of their own: Emscripten replaces its
    // exports on the module at their first call, which would drop them.
    // (the wasm64 build's module reads its results right already)
    const abi = Object.create(mod);
    for (const name of mod.wide ? [] : UNSIGNED_RESULTS) {
      const f = mod[`_${name}`];
      abi[`_${name}`] = (...args) => f(...args) >>> 0;
    }
    this.module = mod; // properties the C side reads (Module.wispSinkWrite) are set here
    this.mod = abi;
    this.abi = abi;
    this.threaded = threads > 1;
    /** 'single', 'threaded', 'wasm64' or 'wasm64-threaded' */
    this.build = (mod.wide ? ['wasm64', 'wasm64-threaded'] : ['single', 'threaded'])[mod._ww_threaded()];
    this.layout = readLayout(abi, (p) => this.cstring(p));
    const wrong = layoutMismatches(this.layout);
    if (wrong.length) throw new WispError('internal', `the wasm engine's records do not match this package: ${wrong.join('; ')}`);
    this.partNames = [];
    for (let i = 0; i < this.layout.plan.fields.part.elements; i++) this.partNames.push(this.cstring(abi._ww_part_name(i)));
    // One block per record, taken at creation so later calls allocate nothing.
    this.records = Object.fromEntries(Object.keys(ABI_RECORDS).map((name) => [name, this.alloc(this.layout[name].size)]));
  }

  // The address of a record's block (what the C calls take).
  record(name) { return this.records[name]; }

  // Fields of a record, by name, into its block; every field of
  // ABI_RECORDS[name] must be given (a forgotten one would keep a stale value).
  write(name, values) {
    const expected = Object.keys(ABI_RECORDS[name]);
    const unknown = Object.keys(values).filter((k) => !expected.includes(k));
    const missing = expected.filter((k) => !(k in values) && ABI_RECORDS[name][k] !== 'char[]');
    if (unknown.length || missing.length)
      throw new WispError('internal', `record ${name}: unknown fields [${unknown}], missing fields [${missing}]`);
    const view = new DataView(this.u8.buffer);
    const base = this.records[name];
    for (const [field, value] of Object.entries(values)) {
      const f = this.layout[name].fields[field];
      setters[f.type](view, base + f.offset, value);
    }
    return base;
  }

  // A record's numeric fields by name (arrays as arrays).
  read(name) {
    const view = new DataView(this.u8.buffer);
    const base = this.records[name];
    const out = {};
    for (const field of Object.keys(ABI_RECORDS[name])) {
      const f = this.layout[name].fields[field];
      if (f.type === 'char') continue;
      const at = (k) => getters[f.type](view, base + f.offset + k * ELEMENT_BYTES[f.type]);
      out[field] = ABI_RECORDS[name][field].endsWith('[]') ? Array.from({ length: f.elements }, (_, k) => at(k)) : at(0);
    }
    return out;
  }

  // The address of a char field of the strings record, and its capacity.
  stringField(field) {
    const f = this.layout.strings.fields[field];
    return { ptr: this.records.strings + f.offset, cap: f.size };
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
    this.module.wispClose?.(); // the threaded wasm64 build's workers
  }

  alloc(n) {
    const p = this.mod._ww_alloc(n);
    if (!p) {
      const end = this.build === 'wasm64' ? 'wasm64 memory ends at 16 GiB' : 'wasm32 memory ends at 4 GiB';
      throw new WispError('capacity', `out of wasm memory allocating ${n} bytes (${end}; this instance holds ${this.memoryBytes})`);
    }
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

  // A short NUL-terminated string in the strings record: its field 'key', or
  // 'second_key' for a second string of the same call.
  scratchString(s, field = 'key') {
    const bytes = encoder.encode(s);
    const { ptr: p, cap } = this.stringField(field);
    if (bytes.length + 1 > cap) throw new WispError('arg', `'${s.slice(0, 40)}…' is too long (at most ${cap - 1} bytes)`);
    this.u8.set(bytes, p);
    this.u8[p + bytes.length] = 0;
    return p;
  }

  // An engine configuration into the config record; its address.
  config(c) {
    return this.write('config', {
      n_ctx: c.ctx ?? 0, n_batch: c.batch ?? 0, kv_f32: c.kvType === 'f32' ? 1 : 0, max_text_bytes: c.maxTextBytes ?? 0,
      max_adapters: c.maxAdapters ?? 0, max_lora_rank: c.maxLoraRank ?? 0, threads: c.threads ?? 1,
    });
  }

  // A plan as an object, from the plan record.
  readPlan() {
    const v = this.read('plan');
    return {
      total: v.total,
      parts: Object.fromEntries(this.partNames.map((name, i) => [name, v.part[i]])),
      weights: v.weights,
      fileBytes: v.file_bytes,
      config: {
        ctx: v.n_ctx, batch: v.n_batch, kvType: v.kv_f32 ? 'f32' : 'f16', maxTextBytes: v.max_text_bytes,
        maxAdapters: v.max_adapters, maxLoraRank: v.max_lora_rank,
      },
      model: {
        nVocab: v.n_vocab, dim: v.dim, nLayers: v.n_layers, nHeads: v.n_heads, nKvHeads: v.n_kv_heads,
        headDim: v.head_dim, ffnDim: v.ffn_dim, ctxTrain: v.ctx_train,
      },
    };
  }

  // Metadata strings of a GGUF (general.name, general.architecture).
  metaString(model, key) {
    const k = this.scratchString(key);
    const { ptr: out, cap } = this.stringField('meta');
    const n = this.mod._ww_meta_str(model, k, out, cap);
    return n < 0 ? undefined : this.cstring(out, cap);
  }
}
