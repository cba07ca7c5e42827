// Planning from the start of a file: only the GGUF header (metadata and
// tensor list, usually well under a few megabytes) is read, so a page can
// show what a model will need, and which engine build it fits, before
// downloading gigabytes.
import { WASM32_LIMIT, newEngine } from './engine.mjs';
import { WASM64_LIMIT, whyNoMemory64 } from './engine64.mjs';
import { WispError } from './errors.mjs';
import { engineConfig, planFinetune } from './model.mjs';
import { cachedResponse } from './cache.mjs';
import { openPrefixReader, responseSource, sourceName } from './source.mjs';
import { modelSources, shardError } from './shards.mjs';
import { checkOptions } from './util.mjs';

// small shared engine instances: wasm32's, and wasm64's for files past 4 GiB
const planners = { wasm32: null, wasm64: null };

export const PLAN_OPTIONS = ['ctx', 'batch', 'kvType', 'maxTextBytes', 'maxAdapters', 'maxLoraRank', 'kernels', 'signal',
  'finetune', 'threads', 'cache', 'build'];

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
  // A file past 4 GiB is planned by the wasm64 build, whose sizes reach past
  // it; without Memory64, wasm32's planner sees such a file as 4 GiB long.
  const huge = fileSizes.findIndex((s) => s > WASM32_LIMIT - 1);
  const build = huge >= 0 && whyNoMemory64() === null ? 'wasm64' : 'wasm32';
  if (!planners[build]) {
    planners[build] = newEngine({ wasm64: build === 'wasm64' });
    planners[build].catch(() => { planners[build] = null; }); // one that failed to start is tried again next time
  }
  const e = await planners[build];
  const heads = [];
  try {
    for (let i = 0; i < readers.length; i++) heads.push(await readHeader(e, readers[i], names[i]));
    return planHeaders(e, heads, fileSizes, cfg, names, options);
  } catch (err) {
    // wasm32's planner found a tensor past the 4 GiB it was told of
    if (build === 'wasm32' && huge >= 0 && err.code === 'format') {
      throw new WispError('capacity', `${names[huge]} does not fit in wasm memory: the file alone is ${fileSizes[huge]} bytes, ` +
        `more than wasm32's ${WASM32_LIMIT} bytes (4 GiB), and the wasm64 build cannot run here: ${whyNoMemory64()}`);
    }
    throw err;
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

function planHeaders(e, heads, fileSizes, cfg, names, { finetune, kernels }) {
  // a size the planner's size_t holds (unknown: as large as it goes)
  const most = e.build === 'wasm64' ? Number.MAX_SAFE_INTEGER : WASM32_LIMIT - 1;
  const clampSize = (size) => (size === undefined || size > most ? most : size);
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
    return withWasmEstimate(plan, cfg.build);
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
// and which build of the engine takes it: wasm32 (the one-thread and the
// threaded build) addresses 4 GiB, wasm64 (its one-thread and threaded
// variants, where the JS engine has Memory64) 16 GiB. The first build that is available here, fits, and
// is the one asked for (`build`: 'auto', 'wasm32' or 'wasm64') is chosen.
export function withWasmEstimate(plan, build = 'auto') {
  const known = plan.fileBytes !== undefined;
  plan.wasmBytes = known ? plan.fileBytes + plan.total + (plan.finetune?.total ?? 0) + OVERHEAD : undefined;
  const fits = (limit) => (known ? plan.wasmBytes <= limit : undefined);
  const why64 = whyNoMemory64();
  plan.builds = [
    { name: 'wasm32', limitBytes: WASM32_LIMIT, fits: fits(WASM32_LIMIT), available: true },
    { name: 'wasm64', limitBytes: WASM64_LIMIT, fits: fits(WASM64_LIMIT), available: why64 === null, ...(why64 && { why: why64 }) },
  ];
  plan.requestedBuild = build;
  plan.build = plan.builds.find((b) => b.available && b.fits !== false && (build === 'auto' || b.name === build))?.name ?? null;
  plan.fitsWasm = known ? plan.build !== null : undefined;
  return plan;
}

// Refuse, before any model bytes are copied, a plan that no build takes.
export function checkFits(plan, name) {
  if (plan.build !== null) return;
  const asked = plan.builds.find((b) => b.name === plan.requestedBuild);
  if (asked && !asked.available) throw new WispError('unsupported', `build '${asked.name}' cannot run here: ${asked.why}`);
  const mib = (b) => `${(b / 1048576).toFixed(1)} MiB`;
  const considered = asked ? [asked] : plan.builds;
  const why = considered.map((b) => (b.available ? `more than ${b.name}'s ${b.limitBytes} bytes (${b.limitBytes / 2 ** 30} GiB)`
    : `the ${b.name} build cannot run here: ${b.why}`));
  throw new WispError('capacity', `${name} does not fit in wasm memory: it needs ${plan.wasmBytes} bytes (${mib(plan.wasmBytes)}: ` +
    `file ${plan.fileBytes} + arena ${plan.total}${plan.finetune ? ` + fine-tuning ${plan.finetune.total}` : ''} + engine ${OVERHEAD}), ` +
    `${why.join('; ')}; a smaller ctx or a smaller quantization may fit`);
}
