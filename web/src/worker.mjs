// The inside of a worker-backed model (see worker-client.mjs): one model per
// worker, driven by messages { id, op, args }. Replies are
// { id, type: 'result', value, memoryBytes } or { id, type: 'error', name, code, message };
// long operations also send 'progress' and 'piece' messages with their id.
// Generation and fine-tuning give the event loop a turn every few
// milliseconds, so an 'abort' message stops them promptly.
import { loadAdapter } from './adapter.mjs';
import { Model } from './model.mjs';

let post;
let listen;
if (typeof self === 'object' && typeof self.postMessage === 'function' && typeof window === 'undefined') {
  post = (msg, transfer) => self.postMessage(msg, transfer ?? []);
  listen = (fn) => self.addEventListener('message', (ev) => fn(ev.data));
  // Emscripten rethrows a thread worker's failure to load (an Event) from
  // its handler; the load it belongs to already fell back to one thread, so
  // it must not take this worker down with it.
  self.addEventListener('error', (ev) => { if (ev.error instanceof Event) ev.preventDefault(); });
} else {
  const { parentPort } = await import('node:worker_threads');
  post = (msg, transfer) => parentPort.postMessage(msg, transfer ?? []);
  listen = (fn) => parentPort.on('message', fn);
}

let model = null;
const adapters = new Map(); // id -> Adapter
let nextAdapterId = 1;
const running = new Map(); // request id -> AbortController

function adapterOf(id) {
  const a = adapters.get(id);
  if (!a) throw Object.assign(new Error(`no adapter with id ${id} in this worker`), { code: 'arg' });
  return a;
}

function register(adapter) {
  const id = nextAdapterId++;
  adapters.set(id, adapter);
  return { id, info: adapter.info };
}

function needModel() {
  if (!model) throw Object.assign(new Error('no model is loaded in this worker'), { code: 'arg' });
  return model;
}

const ops = {
  async load({ source, options }, ctx) {
    // download progress at most every 50 ms (and the last one), not per chunk
    let last = 0;
    const onProgress = (p) => {
      const t = Date.now();
      if (t - last < 50 && p.loaded !== p.total) return;
      last = t;
      ctx.progress(p);
    };
    model = await Model.load(source, { ...options, signal: ctx.signal, onProgress });
    return { info: model.info, memoryPlan: model.memoryPlan, threads: model.threads, whyNotThreaded: model.whyNotThreaded };
  },
  plan: ({ options }) => needModel().plan(options),
  tokenize: ({ text, options }) => needModel().tokenize(text, options),
  detokenize: ({ ids, options }) => needModel().detokenize(ids, options),
  embed: ({ text, options }) => needModel().embed(text, options),
  applyTemplate: ({ messages, options }) => needModel().applyTemplate(messages, options),
  async generate({ prompt, options, wantTokens }, ctx) {
    const m = needModel();
    let ids = [];
    const o = { ...options, signal: ctx.signal };
    if (wantTokens) o.onToken = (id) => ids.push(id);
    for await (const text of m.generate(prompt, o)) {
      ctx.piece({ text, ids });
      ids = [];
    }
    return { stats: m.lastStats };
  },
  async finetune({ data, options }, ctx) {
    const m = needModel();
    const adapter = await m.finetune(data, { ...options, signal: ctx.signal, onProgress: (p) => ctx.progress(p) });
    return register(adapter);
  },
  async loadAdapter({ source, options }) {
    const a = await loadAdapter(needModel(), source, options);
    return register(a);
  },
  useAdapter: ({ id, scale }) => { needModel().useAdapter(adapterOf(id), scale); },
  removeAdapter: ({ id }) => { needModel().removeAdapter(adapterOf(id)); },
  adapterGGUF: ({ id, options }, ctx) => ctx.transfer(adapterOf(id).toGGUF(options)),
  adapterPEFT: ({ id, options }, ctx) => {
    const p = adapterOf(id).toPEFT(options);
    return ctx.transfer(p, [p.safetensors.buffer]);
  },
  disposeAdapter: ({ id }) => {
    adapterOf(id).dispose();
    adapters.delete(id);
  },
  abort: ({ target }) => { running.get(target)?.abort(); },
  dispose: () => {
    model?.dispose();
    model = null;
    adapters.clear();
  },
};

listen(async (msg) => {
  const { id, op, args } = msg;
  const controller = new AbortController();
  let transfer;
  const ctx = {
    signal: controller.signal,
    progress: (data) => post({ id, type: 'progress', data }),
    piece: (data) => post({ id, type: 'piece', data }),
    transfer(value, list) {
      transfer = list ?? [value.buffer];
      return value;
    },
  };
  if (op !== 'abort') running.set(id, controller);
  try {
    if (!Object.hasOwn(ops, op)) throw Object.assign(new Error(`unknown worker operation '${op}'`), { code: 'arg' });
    const value = await ops[op](args ?? {}, ctx);
    post({ id, type: 'result', value, memoryBytes: model?.memoryBytes }, transfer);
  } catch (e) {
    post({ id, type: 'error', name: e?.name ?? 'Error', code: e?.code, message: e?.message ?? String(e) });
  } finally {
    running.delete(id);
  }
});
post({ type: 'ready' });
