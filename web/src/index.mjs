// wisp: run and fine-tune llama-family GGUF models in browsers, workers and
// Node. See README.md for the API; types/index.d.ts for the exact shapes.
import { configureEngine } from './engine.mjs';
import { Model } from './model.mjs';
import { planSource } from './plan.mjs';

export { WispError } from './errors.mjs';
export { configureEngine };
export const version = '0.1.0';

/**
 * Load a GGUF model. `source`: Uint8Array/ArrayBuffer, File/Blob, Response,
 * URL (streamed, with onProgress), or in Node a file path. With
 * { worker: true } (browsers) the model runs in a Web Worker: same calls,
 * the page never blocks.
 */
export async function loadModel(source, options = {}) {
  if (options?.worker) {
    const { createWorkerModel } = await import('./worker-client.mjs');
    const { worker, ...rest } = options;
    return createWorkerModel(source, rest);
  }
  return Model.load(source, options);
}

export async function createWorkerModel(source, options = {}) {
  const m = await import('./worker-client.mjs');
  return m.createWorkerModel(source, options);
}

/** The memory plan for a model, reading only its GGUF header. */
export function plan(source, options = {}) {
  return planSource(source, options);
}

export { loadAdapter } from './adapter.mjs';
export { cachedModels, clearCache } from './cache.mjs';
