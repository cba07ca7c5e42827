// The wasm engine: compiling wisp-engine.wasm once, one instance per model
// (so disposing a model gives all of its memory back), and small helpers
// over the C ABI of wasm/abi.c.
import createWispEngine from '../dist/wisp-engine.mjs';
import { WispError } from './errors.mjs';

export const isNode = typeof process === 'object' && process.versions != null && process.versions.node != null &&
  typeof window === 'undefined' && typeof importScripts !== 'function';

let compiled = null;

// Where the .wasm comes from when the default location does not work (a
// bundler moved it): { wasmUrl }, { wasmBinary } or { wasmModule }.
export function configureEngine(options = {}) {
  compiled = null;
  if (options.wasmModule) compiled = Promise.resolve(options.wasmModule);
  else if (options.wasmBinary) compiled = WebAssembly.compile(options.wasmBinary);
  else if (options.wasmUrl) compiled = compileFrom(new URL(options.wasmUrl, baseUrl()));
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

function compiledEngine() {
  compiled ??= compileFrom(new URL('../dist/wisp-engine.wasm', import.meta.url));
  return compiled;
}

// A fresh instance of the engine with its own memory.
export async function newEngine() {
  const module = await compiledEngine();
  let failed;
  const failure = new Promise((_, reject) => { failed = reject; });
  const mod = await Promise.race([
    createWispEngine({
      instantiateWasm(imports, receive) {
        WebAssembly.instantiate(module, imports).then((instance) => receive(instance, module), failed);
        return {};
      },
      print: () => {},
      printErr: () => {},
    }),
    failure,
  ]);
  return new Engine(mod);
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

// Thin typed access to one instance. Heap views are re-read on every use:
// growing memory replaces the buffer.
export class Engine {
  constructor(mod) {
    this.mod = mod;
    this.abi = mod;
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

  get u8() { return this.mod.HEAPU8; }
  get memoryBytes() { return this.mod.HEAPU8.buffer.byteLength; }

  alloc(n) {
    const p = this.mod._ww_alloc(n);
    if (!p) throw new WispError('capacity', `out of wasm memory allocating ${n} bytes (wasm32 memory ends at 2 GiB)`);
    return p;
  }

  free(p) { this.mod._ww_free(p); }

  cstring(ptr, max = 1 << 20) {
    const u8 = this.u8;
    let end = ptr;
    while (end < ptr + max && u8[end] !== 0) end++;
    return decoder.decode(u8.subarray(ptr, end));
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
      c.maxLoraRank ?? 0];
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
