// Models fetched by URL, kept for the next load (see README: caching).
import { openSource } from './source.mjs';

// The source of a model to load: a URL comes from the cache when it is there.
export async function openModelSource(source, options = {}) {
  return openSource(source, options);
}
