// Split models (llama.cpp's gguf-split: NAME-00001-of-00003.gguf ...
// NAME-00003-of-00003.gguf) load as one model. A source is split when it is
// an array of sources (the shards, in order: any kinds loadModel takes), or
// a URL or (Node) path whose name has the -0000k-of-0000N.gguf ending with
// N > 1: then all N names are derived from it, whichever shard it names.
// The engine checks the set (core/gguf_shards.c) and names what is wrong.
import { WispError } from './errors.mjs';
import { sourceKind } from './source.mjs';

const SHARD_NAME = /-(\d{5})-of-(\d{5})\.gguf$/;

// The sources of a model: [source] for one file, else its shards in order.
export function modelSources(source) {
  if (Array.isArray(source)) {
    if (source.length === 0) throw new WispError('arg', 'an empty list of model shards');
    if (source.length > 65535) throw new WispError('arg', `${source.length} shards: a split model has at most 65535`);
    for (const s of source)
      if (Array.isArray(s)) throw new WispError('arg', 'a model shard must be a single source, not a list');
    return source;
  }
  const kind = sourceKind(source);
  if (kind !== 'url' && kind !== 'path') return [source];
  const text = String(source);
  // a URL's name is its path's last part (a query string would hide it)
  const url = kind === 'url' ? new URL(text, typeof location === 'object' && location.href ? location.href : undefined) : null;
  const m = SHARD_NAME.exec(url ? url.pathname : text);
  if (!m || Number(m[2]) < 2) return [source];
  const count = Number(m[2]);
  if (Number(m[1]) < 1 || Number(m[1]) > count)
    throw new WispError('arg', `${text}: shard ${Number(m[1])} of ${count} is not a shard of a ${count}-shard model`);
  const names = [];
  for (let k = 1; k <= count; k++) {
    const suffix = `-${String(k).padStart(5, '0')}-of-${m[2]}.gguf`;
    if (url) {
      const u = new URL(url.href);
      u.pathname = u.pathname.replace(SHARD_NAME, suffix);
      names.push(source instanceof URL ? u : u.href);
    } else {
      names.push(text.replace(SHARD_NAME, suffix));
    }
  }
  return names;
}

// The error of a failed ww_link_shards (rc = -1 - the index of the shard
// at fault), naming that shard's source.
export function shardError(engine, ptr, rc, names) {
  const e = engine.error(ptr);
  const k = -1 - rc;
  if (k >= 0 && k < names.length) e.message = `${names[k]}: ${e.message}`;
  return e;
}
