// Planning from the start of a file: only the GGUF header (metadata and
// tensor list, usually well under a few megabytes) is read, so a page can
// show what a model will need before downloading gigabytes.
import { newEngine } from './engine.mjs';
import { WispError } from './errors.mjs';
import { engineConfig, planFinetune } from './model.mjs';
import { openPrefixReader, sourceName } from './source.mjs';
import { checkOptions } from './util.mjs';

let planner = null; // one small shared engine instance
const WASM_LIMIT = 2 ** 31;

export const PLAN_OPTIONS = ['ctx', 'batch', 'kvType', 'maxTextBytes', 'maxAdapters', 'maxLoraRank', 'kernels', 'signal',
  'finetune'];

export async function planSource(source, options = {}) {
  checkOptions('plan', options, PLAN_OPTIONS);
  const cfg = engineConfig(options);
  planner ??= newEngine();
  const e = await planner;
  const reader = await openPrefixReader(source, options);
  try {
    let want = 1 << 18; // most headers fit; large vocabularies take a few doublings
    for (;;) {
      const bytes = await reader.read(want);
      const p = e.alloc(Math.max(bytes.length, 1));
      try {
        e.u8.set(bytes, p);
        const need = e.mod._ww_header_need(p, bytes.length);
        if (need < 0) throw e.error(0);
        if (need === 0) return planHeader(e, p, bytes.length, reader.size, cfg, source, options);
        if (bytes.length < want) throw new WispError('format', `${sourceName(source)}: the file ends inside its GGUF header (${bytes.length} bytes, header needs ${need})`);
        want = Math.max(need, want * 2);
      } finally {
        e.free(p);
      }
    }
  } finally {
    await reader.close();
  }
}

function planHeader(e, p, n, fileSize, cfg, source, { finetune, kernels }) {
  const size = fileSize === undefined || fileSize > 0xffffffff ? 0xffffffff : fileSize;
  const model = e.mod._ww_open_header(p, n, size);
  if (!model) throw e.error(0);
  try {
    // the kernel level as loadModel would choose it: attention's scratch depends on it
    const k = kernels === undefined ? 0 : e.scratchString(String(kernels), 512);
    if (e.mod._ww_plan(model, e.config(cfg), k, e.scratch) !== 0) throw e.error(model);
    const plan = e.readPlan();
    plan.fileBytes = fileSize;
    plan.name = e.metaString(model, 'general.name') ?? sourceName(source);
    plan.architecture = e.metaString(model, 'general.architecture');
    withWasmEstimate(plan);
    if (finetune) {
      // a session's arena comes on top of the model's
      plan.finetune = planFinetune(e, model, finetune);
      if (plan.wasmBytes !== undefined) {
        plan.wasmBytes += plan.finetune.total;
        plan.fitsWasm = plan.wasmBytes < WASM_LIMIT;
      }
    }
    return plan;
  } finally {
    e.mod._ww_close(model);
  }
}

// What loading will take in wasm memory: the file (copied in once), the
// arena, and the engine's own few megabytes; and whether that fits wasm32.
export function withWasmEstimate(plan) {
  const overhead = 4 << 20;
  plan.wasmBytes = plan.fileBytes === undefined ? undefined : plan.fileBytes + plan.total + overhead;
  plan.fitsWasm = plan.wasmBytes === undefined ? undefined : plan.wasmBytes < WASM_LIMIT;
  return plan;
}
