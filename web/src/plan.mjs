// Planning from the start of a file: only the GGUF header (metadata and
// tensor list, usually well under a few megabytes) is read, so a page can
// show what a model will need, and which engine build it fits, before
// downloading gigabytes.
import { WASM32_LIMIT, newEngine } from './engine.mjs';
import { WispError } from './errors.mjs';
import { engineConfig, planFinetune } from './model.mjs';
import { cachedResponse } from './cache.mjs';
import { openPrefixReader, responseSource, sourceName } from './source.mjs';
import { modelSources, shardError } from './shards.mjs';
import { checkOptions } from './util.mjs';

let planner = null; // one small shared engine instance

export const PLAN_OPTIONS = ['ctx', 'batch', 'kvType', 'maxTextBytes', 'maxAdapters', 'maxLoraRank', 'kernels', 'signal',
  'finetune', 'threads', 'cache'];

export async function planSource(source, options = {}) {
  checkOptions('plan', options, PLAN_OPTIONS);
  const cfg = engineConfig(options);
  const sources = modelSources(source);
  const readers = [];
  try {
    for (const s of sources) {
      // a model in the browser's cache is planned from there, without the network
      const hit = options.cache === false ? null : await cachedResponse(s);
      if (hit) {
        const src = responseSource(hit, sourceName(s), 'cache', options.signal);
        readers.push({ size: src.size, read: src.prefix.read, close: src.close });
      } else {
        readers.push(await openPrefixReader(s, options));
      }
    }
    return await planPrefix(readers, readers.map((r) => r.size), cfg, sources.map(sourceName), options);
  } finally {
    for (const r of readers) await r.close();
  }
}

// The plan from readers of the starts of a model's files ({ read(n) -> the
// first n bytes }; one, or a split model's shards in order) of `fileSizes`
// bytes (undefined where unknown); `names` name them in errors.
export async function planPrefix(readers, fileSizes, cfg, names, options = {}) {
  if (!Array.isArray(readers)) [readers, fileSizes, names] = [[readers], [fileSizes], [names]];
  planner ??= newEngine();
  const e = await planner;
  const heads = [];
  try {
    for (let i = 0; i < readers.length; i++) heads.push(await readHeader(e, readers[i], names[i]));
    return planHeaders(e, heads, fileSizes, cfg, names, options);
  } finally {
    for (const h of heads) e.free(h.p);
  }
}

// A file's whole GGUF header into the planner's memory: { p, n } (the
// caller frees p).
async function readHeader(e, reader, name) {
  let want = 1 << 18; // most headers fit; large vocabularies take a few doublings
  for (;;) {
    const bytes = await reader.read(want);
    const p = e.alloc(Math.max(bytes.length, 1));
    e.u8.set(bytes, p);
    const need = e.mod._ww_header_need(p, bytes.length);
    if (need === 0) return { p, n: bytes.length };
    e.free(p);
    if (need < 0) throw e.error(0);
    if (bytes.length < want) throw new WispError('format', `${name}: the file ends inside its GGUF header (${bytes.length} bytes, header needs ${need})`);
    want = Math.max(need, want * 2);
  }
}

const clampSize = (size) => (size === undefined || size > 0xffffffff ? 0xffffffff : size);

function planHeaders(e, heads, fileSizes, cfg, names, { finetune, kernels }) {
  const model = e.mod._ww_open_header(heads[0].p, heads[0].n, clampSize(fileSizes[0]));
  if (!model) throw e.error(0);
  try {
    if (heads.length > 1) {
      for (let i = 1; i < heads.length; i++) {
        if (e.mod._ww_add_shard_header(model, heads[i].p, heads[i].n, clampSize(fileSizes[i])) !== 0)
          throw prefixed(e.error(model), names[i]);
      }
      const rc = e.mod._ww_link_shards(model);
      if (rc !== 0) throw shardError(e, model, rc, names);
    } else {
      // one shard of a split model, given alone: say how to give them all
      const shards = e.mod._ww_meta_int(model, e.scratchString('split.count'));
      if (shards > 1) {
        throw new WispError('unsupported', `${names[0]} is one of ${shards} shards of a split GGUF (split.count = ${shards}): ` +
          'pass loadModel/plan the list of all shards in order, or the URL of one whose name ends in -0000k-of-0000N.gguf');
      }
    }
    // the kernel level as loadModel would choose it: attention's scratch depends on it
    const k = kernels === undefined ? 0 : e.scratchString(String(kernels), 'second_key');
    if (e.mod._ww_plan(model, e.config(cfg), k, e.record('plan')) !== 0) throw e.error(model);
    const plan = e.readPlan();
    plan.config.threads = cfg.threads;
    plan.whyNotThreaded = cfg.whyNotThreaded;
    plan.fileBytes = fileSizes.some((s) => s === undefined) ? undefined : fileSizes.reduce((a, b) => a + b, 0);
    plan.shards = heads.length;
    plan.name = e.metaString(model, 'general.name') ?? names[0];
    plan.architecture = e.metaString(model, 'general.architecture');
    // a session's arena comes on top of the model's
    if (finetune) plan.finetune = planFinetune(e, model, finetune, cfg.threads);
    return withWasmEstimate(plan);
  } finally {
    e.mod._ww_close(model);
  }
}

function prefixed(err, name) {
  err.message = `${name}: ${err.message}`;
  return err;
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
