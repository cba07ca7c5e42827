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
// Map name -> { params: ['i32' | 'i64' | ...], results: [...] }.
export function exportSignatures(bytes) {
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
    uleb();
    if (flags & 1) uleb();
  };
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
        else if (kind === 2) limits(); // a memory
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
  return exports;
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

// A fresh instance: `compiled` is { module, signatures } from compileWide.
export async function instantiateWide({ module, signatures }, unsigned) {
  let mod = null;
  const env = {
    // abi_adapter.c's output sink: bytes at data, n of them
    js_sink_write: (data, n) => (mod.wispSinkWrite(Number(data), Number(n)) ? 1 : 0),
  };
  const instance = await WebAssembly.instantiate(module, { env });
  mod = wideModule(instance, signatures, unsigned);
  return mod;
}

// Compiles the build from its bytes, keeping the signatures JS needs.
export async function compileWide(bytes) {
  const why = whyNoMemory64();
  if (why) throw new WispError('unsupported', `the wasm64 build cannot run here: ${why}`);
  return { module: await WebAssembly.compile(bytes), signatures: exportSignatures(bytes) };
}
