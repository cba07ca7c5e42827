// Planning from the start of a file: only the GGUF header (metadata and
// tensor list, usually well under a few megabytes) is read, so a page can
// show what a model will need, and which engine build it fits, before
// downloading gigabytes.
import { WASM32_LIMIT, newEngine } from './engine.mjs';
import { WispError } from './errors.mjs';
import { engineConfig, planFinetune } from './model.mjs';
import { cachedResponse } from './cache.mjs';
import { openPrefixReader, responseSource, sourceName } from './source.mjs';
import { checkOptions } from './util.mjs';

let planner = null; // one small shared engine instance

export const PLAN_OPTIONS = ['ctx', 'batch', 'kvType', 'maxTextBytes', 'maxAdapters', 'maxLoraRank', 'kernels', 'signal',
  'finetune', 'threads', 'cache'];

export async function planSource(source, options = {}) {
  checkOptions('plan', options, PLAN_OPTIONS);
  const cfg = engineConfig(options);
  // a model in the browser's cache is planned from there, without the network
  const hit = options.cache === false ? null : await cachedResponse(source);
  let reader;
  if (hit) {
    const src = responseSource(hit, sourceName(source), 'cache', options.signal);
    reader = { size: src.size, read: src.prefix.read, close: src.close };
  } else {
    reader = await openPrefixReader(source, options);
  }
  try {
    return await planPrefix(reader, reader.size, cfg, sourceName(source), options);
  } finally {
    await reader.close();
  }
}

// The plan from a reader of a file's start ({ read(n) -> the first n bytes })
// of `fileSize` bytes (undefined if unknown).
export async function planPrefix(reader, fileSize, cfg, name, options = {}) {
  planner ??= newEngine();
  const e = await planner;
  let want = 1 << 18; // most headers fit; large vocabularies take a few doublings
  for (;;) {
    const bytes = await reader.read(want);
    const p = e.alloc(Math.max(bytes.length, 1));
    try {
      e.u8.set(bytes, p);
      const need = e.mod._ww_header_need(p, bytes.length);
      if (need < 0) throw e.error(0);
      if (need === 0) return planHeader(e, p, bytes.length, fileSize, cfg, name, options);
      if (bytes.length < want) throw new WispError('format', `${name}: the file ends inside its GGUF header (${bytes.length} bytes, header needs ${need})`);
      want = Math.max(need, want * 2);
    } finally {
      e.free(p);
    }
  }
}

function planHeader(e, p, n, fileSize, cfg, name, { finetune, kernels }) {
  const size = fileSize === undefined || fileSize > 0xffffffff ? 0xffffffff : fileSize;
  const model = e.mod._ww_open_header(p, n, size);
  if (!model) throw e.error(0);
  try {
    // llama.cpp's split GGUFs (-00001-of-0000N.gguf) carry split.count: core
    // reads single files, so a shard is refused here, named, before loading
    const shards = e.mod._ww_meta_int(model, e.scratchString('split.count'));
    if (shards > 1) {
      throw new WispError('unsupported', `${name} is one of ${shards} shards of a split GGUF (split.count = ${shards}): ` +
        "wisp reads a model from one file; merge the shards first (llama.cpp's llama-gguf-split --merge)");
    }
    // the kernel level as loadModel would choose it: attention's scratch depends on it
    const k = kernels === undefined ? 0 : e.scratchString(String(kernels), 'second_key');
    if (e.mod._ww_plan(model, e.config(cfg), k, e.record('plan')) !== 0) throw e.error(model);
    const plan = e.readPlan();
    plan.config.threads = cfg.threads;
    plan.whyNotThreaded = cfg.whyNotThreaded;
    plan.fileBytes = fileSize;
    plan.name = e.metaString(model, 'general.name') ?? name;
    plan.architecture = e.metaString(model, 'general.architecture');
    // a session's arena comes on top of the model's
    if (finetune) plan.finetune = planFinetune(e, model, finetune, cfg.threads);
    return withWasmEstimate(plan);
  } finally {
    e.mod._ww_close(model);
  }
}

// The engine's own memory next to the file and the arena: code data, stack,
// the exchange buffers and allocator slack.
const OVERHEAD = 4 << 20;

// What loading will take in wasm memory: the file (copied in once), the
// arena (and a fine-tuning session's), and the engine's own few megabytes;
// and which build of the engine that fits. wasm32 (both the one-thread and
// the threaded build) addresses 4 GiB; there is no wasm64 build (see
// README: Memory64).
export function withWasmEstimate(plan) {
  const known = plan.fileBytes !== undefined;
  plan.wasmBytes = known ? plan.fileBytes + plan.total + (plan.finetune?.total ?? 0) + OVERHEAD : undefined;
  plan.fitsWasm = known ? plan.wasmBytes <= WASM32_LIMIT : undefined;
  plan.builds = [
    { name: 'wasm32', limitBytes: WASM32_LIMIT, fits: plan.fitsWasm },
    { name: 'wasm64', limitBytes: undefined, fits: false, available: false,
      why: 'not built: Emscripten 3.1.6 has only experimental Memory64 support (and Node 20 runs it only behind a flag)' },
  ];
  plan.build = plan.fitsWasm === false ? null : 'wasm32';
  return plan;
}

// Refuse, before any model bytes are copied, a plan that cannot fit.
export function checkFits(plan, name) {
  if (plan.fitsWasm !== false) return;
  const mib = (b) => `${(b / 1048576).toFixed(1)} MiB`;
  throw new WispError('capacity', `${name} does not fit in wasm memory: it needs ${plan.wasmBytes} bytes (${mib(plan.wasmBytes)}: ` +
    `file ${plan.fileBytes} + arena ${plan.total}${plan.finetune ? ` + fine-tuning ${plan.finetune.total}` : ''} + engine ${OVERHEAD}), ` +
    `more than wasm32's ${WASM32_LIMIT} bytes (4 GiB); a smaller ctx or a smaller quantization may fit`);
}
