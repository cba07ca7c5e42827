// A model that runs in a Web Worker (or a Node worker thread): the same calls
// as Model, all asynchronous, so the page never blocks. Model bytes given as
// a File/Blob or URL are read by the worker itself; bytes given as an
// ArrayBuffer are copied to it (or moved, with { transfer: true }).
import { isNode } from './engine.mjs';
import { WispError } from './errors.mjs';
import { chatStream, wholeAnswer } from './model.mjs';
import { asyncDisposeSymbol } from './util.mjs';

async function spawn(url) {
  if (isNode) {
    const { Worker } = await import('node:worker_threads');
    const w = new Worker(url);
    w.unref(); // an idle model must not keep Node running; calls in flight hold it
    return {
      hold: (on) => (on ? w.ref() : w.unref()),
      post: (m, t) => w.postMessage(m, t ?? []),
      onMessage: (fn) => w.on('message', fn),
      onError: (fn) => w.on('error', (e) => fn(new WispError('io', `the wisp worker failed: ${e.message}`))),
      terminate: () => w.terminate(),
    };
  }
  const w = new Worker(url, { type: 'module' });
  return {
    hold: () => {},
    post: (m, t) => w.postMessage(m, t ?? []),
    onMessage: (fn) => w.addEventListener('message', (ev) => fn(ev.data)),
    onError: (fn) => w.addEventListener('error', (ev) => {
      ev.preventDefault?.();
      fn(new WispError('io', `the wisp worker failed: ${ev.message || `could not run ${url}`}`));
    }),
    terminate: () => w.terminate(),
  };
}

function remoteError(msg) {
  const e = new WispError(msg.code ?? 'internal', msg.message);
  if (msg.name === 'AbortError') e.name = 'AbortError';
  return e;
}

// Request/response over the worker's messages.
class Client {
  #port;
  #calls = new Map();
  #next = 1;
  #broken = null;
  #inFlight = 0;
  /** wasm memory of the worker's instance, as of its last reply */
  memoryBytes = 0;

  constructor(port) {
    this.#port = port;
    port.hold(true); // until the worker says it is ready
    this.ready = new Promise((resolve, reject) => {
      port.onMessage((msg) => {
        if (msg?.type === 'ready') {
          port.hold(false);
          resolve();
        }
        else this.#dispatch(msg);
      });
      port.onError((e) => {
        this.#broken = e;
        reject(e);
        for (const c of this.#calls.values()) c.reject(e);
        this.#calls.clear();
      });
    });
  }

  #dispatch(msg) {
    const c = this.#calls.get(msg?.id);
    if (!c) return;
    if (msg.type === 'progress') c.onProgress?.(msg.data);
    else if (msg.type === 'piece') c.onPiece?.(msg.data);
    else {
      this.#calls.delete(msg.id);
      if (typeof msg.memoryBytes === 'number') this.memoryBytes = msg.memoryBytes;
      if (msg.type === 'result') c.resolve(msg.value);
      else c.reject(remoteError(msg));
    }
  }

  call(op, args, { onProgress, onPiece, signal, transfer } = {}) {
    if (this.#broken) return Promise.reject(this.#broken);
    const id = this.#next++;
    if (this.#inFlight++ === 0) this.#port.hold(true);
    const settle = () => { if (--this.#inFlight === 0) this.#port.hold(false); };
    const done = new Promise((resolve, reject) => this.#calls.set(id, {
      resolve: (v) => { settle(); resolve(v); },
      reject: (e) => { settle(); reject(e); },
      onProgress,
      onPiece,
    }));
    if (signal) {
      const abort = () => this.#port.post({ id: this.#next++, op: 'abort', args: { target: id } });
      if (signal.aborted) queueMicrotask(abort);
      else {
        signal.addEventListener('abort', abort, { once: true });
        done.finally(() => signal.removeEventListener('abort', abort)).catch(() => {});
      }
    }
    this.#port.post({ id, op, args }, transfer);
    return done;
  }

  terminate() { this.#port.terminate(); }
}

export class WorkerAdapter {
  #model;
  constructor(model, id, info) {
    this.#model = model;
    this.id = id;
    this.info = info;
    this.disposed = false;
  }
  get model() { return this.#model; }
  /** The adapter as a llama.cpp GGUF LoRA file. */
  toGGUF(options = {}) { return this.#model._call('adapterGGUF', { id: this.id, options }); }
  /** The adapter as PEFT files: { config, safetensors }. */
  toPEFT(options = {}) { return this.#model._call('adapterPEFT', { id: this.id, options }); }
  async dispose() {
    if (this.disposed) return;
    this.disposed = true;
    if (!this.#model.disposed) await this.#model._call('disposeAdapter', { id: this.id });
  }

  /** `await using adapter = ...`: dispose at the end of the block. */
  [asyncDisposeSymbol]() { return this.dispose(); }
}

export class WorkerModel {
  #client;
  #disposed = false;

  constructor(client, loaded) {
    this.#client = client;
    this.info = loaded.info;
    this.memoryPlan = loaded.memoryPlan;
    this.threads = loaded.threads;
    this.whyNotThreaded = loaded.whyNotThreaded;
    this.lastStats = null;
    this.worker = true;
  }

  get disposed() { return this.#disposed; }

  /** wasm memory of the worker's instance, as of its last reply */
  get memoryBytes() { return this.#client.memoryBytes; }

  /** @internal */
  _call(op, args, options) {
    if (this.#disposed) return Promise.reject(new WispError('disposed', 'this model was disposed'));
    return this.#client.call(op, args, options);
  }

  plan(options = {}) { return this._call('plan', { options }); }
  tokenize(text, options = {}) { return this._call('tokenize', { text, options }); }
  detokenize(ids, options = {}) { return this._call('detokenize', { ids: Array.from(ids), options }); }
  embed(text, options = {}) { return this._call('embed', { text, options }); }
  applyTemplate(messages, options = {}) { return this._call('applyTemplate', { messages, options }); }

  /** Model.chat in the worker: generate with the conversation as the prompt (awaitable with a schema). */
  chat(messages, options = {}) {
    const { template, date, ...rest } = options;
    return chatStream(this.generate({ messages, template, date }, rest), options);
  }

  async complete(prompt, options = {}) {
    return wholeAnswer(this.generate(prompt, options), options);
  }

  async *generate(prompt, options = {}) {
    const { signal, onToken, ...rest } = options;
    const inner = new AbortController();
    const onAbort = () => inner.abort();
    if (signal?.aborted) inner.abort();
    else signal?.addEventListener('abort', onAbort, { once: true });
    const queue = [];
    let wake = null;
    let settled = false;
    const result = this._call('generate', { prompt, options: rest, wantTokens: !!onToken },
      { signal: inner.signal, onPiece: (d) => { queue.push(d); wake?.(); } });
    result.then(() => { settled = true; wake?.(); }, () => { settled = true; wake?.(); });
    try {
      for (;;) {
        if (queue.length) {
          const d = queue.shift();
          if (onToken) for (const id of d.ids) onToken(id);
          yield d.text;
          continue;
        }
        if (settled) break;
        await new Promise((resolve) => { wake = resolve; });
        wake = null;
      }
      const r = await result;
      this.lastStats = r.stats;
    } finally {
      signal?.removeEventListener('abort', onAbort);
      if (!settled) inner.abort(); // the consumer stopped early
    }
  }

  async finetune(data, options = {}) {
    const { onProgress, signal, ...rest } = options;
    const r = await this._call('finetune', { data, options: rest }, { onProgress, signal });
    return new WorkerAdapter(this, r.id, r.info);
  }

  /** @internal loadAdapter(model, ...) for a worker model */
  async _loadAdapter(source, options = {}) {
    const { onProgress, signal, ...rest } = options;
    const r = await this._call('loadAdapter', { source: cloneable(source), options: rest }, { onProgress, signal });
    return new WorkerAdapter(this, r.id, r.info);
  }

  #own(adapter) {
    if (!(adapter instanceof WorkerAdapter) || adapter.model !== this)
      throw new WispError('arg', 'this adapter belongs to another model (load it with loadAdapter(model, ...))');
  }

  async useAdapter(adapter, scale = 1) {
    this.#own(adapter);
    await this._call('useAdapter', { id: adapter.id, scale });
  }

  async removeAdapter(adapter) {
    this.#own(adapter);
    await this._call('removeAdapter', { id: adapter.id });
  }

  async dispose() {
    if (this.#disposed) return;
    try {
      await this.#client.call('dispose', {});
    } finally {
      this.#disposed = true;
      this.#client.terminate();
    }
  }

  /** `await using model = await createWorkerModel(...)`: dispose at the end of the block. */
  [asyncDisposeSymbol]() { return this.dispose(); }
}

// Bytes that view part of a larger buffer are sliced, so only they are copied.
function cloneable(source) {
  if (Array.isArray(source)) return source.map(cloneable); // a split model's shards
  if (ArrayBuffer.isView(source) && (source.byteOffset !== 0 || source.byteLength !== source.buffer.byteLength))
    return new Uint8Array(source.buffer, source.byteOffset, source.byteLength).slice();
  return source;
}

export async function createWorkerModel(source, options = {}) {
  const { onProgress, signal, workerUrl, transfer, ...rest } = options;
  const port = await spawn(workerUrl ?? new URL('./worker.mjs', import.meta.url));
  const client = new Client(port);
  try {
    await client.ready;
    const src = cloneable(source);
    const list = transfer && (src instanceof ArrayBuffer || ArrayBuffer.isView(src)) ? [src.buffer ?? src] : undefined;
    const loaded = await client.call('load', { source: src, options: rest }, { onProgress, signal, transfer: list });
    return new WorkerModel(client, loaded);
  } catch (e) {
    client.terminate();
    throw e;
  }
}
