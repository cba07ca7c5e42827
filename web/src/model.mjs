// A loaded model: one engine instance holding the GGUF bytes, the planned
// arena and the exchange buffers. Every call after load runs in that memory;
// nothing allocates while generating (wasm memory stays the size it had
// after load; see memoryBytes).
import { Adapter } from './adapter.mjs';
import { chooseThreads, newEngine } from './engine.mjs';
import { WispError, abortError } from './errors.mjs';
import { checkFits, planPrefix } from './plan.mjs';
import { openModelSource } from './cache.mjs';
import { modelSources, shardError } from './shards.mjs';
import { Lock, checkNumber, checkOptions, disposeSymbol, makeYielder, now, seedHalves, yieldToEventLoop } from './util.mjs';

const END = -2;
const FULL = -3;

export const LOAD_OPTIONS = ['ctx', 'batch', 'kvType', 'maxTextBytes', 'maxAdapters', 'maxLoraRank', 'kernels',
  'onProgress', 'signal', 'worker', 'threads', 'cache', 'build'];
export const FINETUNE_OPTIONS = ['rank', 'alpha', 'steps', 'ctx', 'batch', 'lr', 'seed', 'schedule', 'warmup', 'clip', 'format',
  'docs', 'onProgress', 'signal', 'name', 'template', 'packing', 'method', 'beta', 'labelSmoothing', 'lossType',
  'numVirtualTokens', 'promptInitText', 'prefixProjection'];
export const GENERATE_OPTIONS = ['maxTokens', 'temperature', 'topK', 'topP', 'minP', 'repeatPenalty', 'repeatLastN',
  'seed', 'addBos', 'special', 'stop', 'signal', 'onToken', 'cachePrompt', 'grammar', 'jsonSchema'];

// The constraint of generate's options as [text, isSchema], or null.
export function guideSource(o) {
  if (o.grammar !== undefined && o.jsonSchema !== undefined) throw new WispError('arg', 'give grammar or jsonSchema, not both');
  if (o.grammar !== undefined) {
    if (typeof o.grammar !== 'string' || o.grammar === '') throw new WispError('arg', 'grammar must be GBNF text');
    return [o.grammar, 0];
  }
  if (o.jsonSchema !== undefined) {
    const t = typeof o.jsonSchema === 'string' ? o.jsonSchema : JSON.stringify(o.jsonSchema);
    if (typeof t !== 'string' || (typeof o.jsonSchema !== 'string' && (typeof o.jsonSchema !== 'object' || o.jsonSchema === null)))
      throw new WispError('arg', 'jsonSchema must be a schema object or its JSON text');
    return [t, 1];
  }
  return null;
}

// complete()'s answer: parsed JSON when a schema constrained it.
export function completeResult(text, options) {
  if (options.jsonSchema === undefined) return text;
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new WispError('format', `the constrained answer is not complete JSON (${e.message}); raise maxTokens`);
  }
}

// A stream's whole text, as complete() and chat() with a schema return it.
export async function wholeAnswer(pieces, options) {
  let text = '';
  for await (const piece of pieces) text += piece;
  return completeResult(text, options);
}

// chat()'s stream; with a schema it is also awaitable: `await model.chat(messages, { jsonSchema })`
// gives the parsed answer, as complete() does, while iterating it still streams the text.
export function chatStream(pieces, options) {
  if (options.jsonSchema === undefined) return pieces;
  let answer = null;
  pieces.then = (resolve, reject) => (answer ??= wholeAnswer(pieces, options)).then(resolve, reject);
  return pieces;
}

// The engine configuration from user options, with the package's defaults
// (the engine's, plus room for 4 adapters of rank <= 64: a few kilobytes),
// and the threads the model will run on (see chooseThreads).
export function engineConfig(o = {}) {
  const c = {
    ...chooseThreads(o.threads),
    ctx: o.ctx ?? 0,
    batch: o.batch ?? 0,
    kvType: o.kvType ?? 'f16',
    maxTextBytes: o.maxTextBytes ?? 0,
    maxAdapters: o.maxAdapters ?? 4,
    maxLoraRank: o.maxLoraRank ?? 64,
    build: o.build ?? 'auto',
  };
  if (!['auto', 'wasm32', 'wasm64'].includes(c.build)) throw new WispError('arg', `build must be 'auto', 'wasm32' or 'wasm64' (got ${c.build})`);
  checkNumber('ctx', c.ctx, { min: 0, max: 1 << 20, integer: true });
  checkNumber('batch', c.batch, { min: 0, max: 1 << 20, integer: true });
  checkNumber('maxTextBytes', c.maxTextBytes, { min: 0, max: 1 << 28, integer: true });
  checkNumber('maxAdapters', c.maxAdapters, { min: 0, max: 4096, integer: true });
  checkNumber('maxLoraRank', c.maxLoraRank, { min: 0, max: 65536, integer: true });
  if (c.kvType !== 'f16' && c.kvType !== 'f32') throw new WispError('arg', `kvType must be 'f16' or 'f32' (got ${c.kvType})`);
  return c;
}

export class Model {
  #engine;
  #ptr;
  #lock = new Lock();
  #adapters = new Map(); // Adapter -> scale
  #disposed = false;
  #busy = false; // a generation or fine-tuning holds the engine

  constructor(engine, ptr, name, whyNotThreaded) {
    this.#engine = engine;
    this.#ptr = ptr;
    const e = engine;
    e.mod._ww_plan_of(ptr, e.record('plan'));
    /** Threads generation and fine-tuning run on (1: the single-thread build). */
    this.threads = e.mod._ww_n_threads(ptr);
    /** Why the model runs on one thread (null when it has more). */
    this.whyNotThreaded = this.threads > 1 ? null : whyNotThreaded;
    /** The memory plan this model was initialised with. */
    this.memoryPlan = e.readPlan();
    this.memoryPlan.config.threads = this.threads;
    this.info = {
      name: e.metaString(ptr, 'general.name') ?? name,
      architecture: e.metaString(ptr, 'general.architecture'),
      kernels: e.cstring(e.mod._ww_kernels_name(ptr)),
      build: e.build,
      source: name,
    };
    /** Figures of the last generation (see generate). */
    this.lastStats = null;
  }

  static async load(source, options = {}) {
    checkOptions('loadModel', options, LOAD_OPTIONS);
    const cfg = engineConfig(options);
    // one file, or the shards of a split model (shards.mjs), each its own source
    const sources = modelSources(source);
    const srcs = [];
    let engine = null;
    let ptr = 0;
    try {
      for (const s of sources) srcs.push(await openModelSource(s, options));
      const names = srcs.map((s) => s.name);
      // The plan from the header(s) first: a model that cannot fit is
      // refused before its bytes are copied (or downloaded).
      const plan = await planPrefix(srcs.map((s) => s.prefix), srcs.map((s) => s.size), cfg, names, options);
      checkFits(plan, names[0]);
      const start = (threads) => newEngine({ threads, wasm64: plan.build === 'wasm64' });
      engine = await start(cfg.threads).catch(async (e) => {
        if (cfg.threads === 1) throw e;
        // the threaded build did not start (a worker script that was not
        // served, say): one thread it is, and the model says why
        cfg.threads = 1;
        cfg.whyNotThreaded = `the threaded build did not start: ${e.message}`;
        return start(1);
      });
      // shards one after the other; progress counts over all of them
      const placed = [];
      let before = 0;
      const total = plan.fileBytes;
      for (const src of srcs) {
        const onProgress = options.onProgress && (srcs.length === 1 ? options.onProgress
          : (p) => options.onProgress({ ...p, loaded: before + p.loaded, total, shard: placed.length }));
        placed.push(await src.into(engine, { onProgress }));
        before += placed.at(-1).size;
      }
      // ww_open and ww_add_shard own the bytes from here, even on failure
      ptr = engine.mod._ww_open(placed[0].ptr, placed[0].size);
      if (!ptr) throw engine.error(0);
      for (let i = 1; i < placed.length; i++) {
        if (engine.mod._ww_add_shard(ptr, placed[i].ptr, placed[i].size) !== 0) {
          for (const q of placed.slice(i + 1)) engine.free(q.ptr);
          const err = engine.error(ptr);
          err.message = `${names[i]}: ${err.message}`;
          throw err;
        }
      }
      if (placed.length > 1) {
        const rc = engine.mod._ww_link_shards(ptr);
        if (rc !== 0) throw shardError(engine, ptr, rc, names);
      }
      let kernels = 0;
      if (options.kernels !== undefined) kernels = engine.scratchString(String(options.kernels), 'second_key');
      if (engine.mod._ww_init(ptr, engine.config(cfg), kernels) !== 0) throw engine.error(ptr);
      const model = new Model(engine, ptr, names[0], cfg.whyNotThreaded);
      // a split model: each shard's cache outcome, and theirs if they agree
      const caches = srcs.map((s) => s.cache);
      model.info.cache = caches.every((c) => c === caches[0]) ? caches[0] : 'mixed (see shardCache)';
      if (srcs.length > 1) model.info.shardCache = caches;
      model.info.shards = srcs.length;
      return model;
    } catch (e) {
      if (ptr) engine.mod._ww_close(ptr);
      engine?.close();
      throw e;
    } finally {
      for (const src of srcs) await src.close();
    }
  }

  /** @internal */
  get _engine() { return this.#engine; }
  /** @internal */
  get _ptr() { return this.#ptr; }
  /** @internal */
  get _lock() { return this.#lock; }

  /** Bytes of wasm memory this model's instance holds (model + arena + buffers). */
  get memoryBytes() { return this.#engine.memoryBytes; }

  #alive() {
    if (this.#disposed) throw new WispError('disposed', 'this model was disposed');
  }

  /**
   * The memory plan for other settings of this model (nothing is allocated);
   * with { finetune: {rank, ctx, batch, ...} }, the plan of a fine-tuning
   * session instead (its own arena, next to the model's).
   */
  plan(options = {}) {
    this.#alive();
    checkOptions('plan', options, ['ctx', 'batch', 'kvType', 'maxTextBytes', 'maxAdapters', 'maxLoraRank', 'finetune']);
    const e = this.#engine;
    if (options.finetune) return planFinetune(e, this.#ptr, options.finetune, this.threads);
    if (e.mod._ww_plan(this.#ptr, e.config({ ...engineConfig(options), threads: this.threads }), 0, e.record('plan')) !== 0)
      throw e.error(this.#ptr);
    const plan = e.readPlan();
    plan.config.threads = this.threads;
    return plan;
  }

  // Text into the I/O buffer; its byte length.
  #writeText(text) {
    if (typeof text !== 'string') throw new WispError('arg', `text must be a string (got ${typeof text})`);
    const e = this.#engine;
    const io = e.mod._ww_io(this.#ptr);
    const cap = e.mod._ww_io_cap(this.#ptr);
    // encoded first: encodeInto may not write into shared memory (threaded build)
    const bytes = new TextEncoder().encode(text);
    if (bytes.length > cap - 1)
      throw new WispError('capacity', `the text is longer than maxTextBytes (${this.memoryPlan.config.maxTextBytes} bytes); load the model with a larger maxTextBytes`);
    e.u8.set(bytes, io);
    return bytes.length;
  }

  // Tokenize into the id buffer; the count.
  _tokenizeInPlace(text, addBos, special) {
    const e = this.#engine;
    const len = this.#writeText(text);
    const n = e.mod._ww_tokenize(this.#ptr, len, addBos ? 1 : 0, special ? 1 : 0);
    if (n < 0) throw e.error(this.#ptr);
    return n;
  }

  /** Token ids of `text`. */
  tokenize(text, { addBos = false, special = false } = {}) {
    this.#alive();
    const n = this._tokenizeInPlace(text, addBos, special);
    const ids = this.#engine.mod._ww_ids(this.#ptr);
    return new Int32Array(this.#engine.u8.buffer, ids, n).slice();
  }

  /**
   * Text of token ids. By default the space SentencePiece puts before a text
   * is removed, so detokenize(tokenize(s)) === s; { continuation: true }
   * keeps it (for ids that follow other text).
   */
  detokenize(ids, { special = false, continuation = false } = {}) {
    this.#alive();
    const e = this.#engine;
    const nCtx = e.mod._ww_n_ctx(this.#ptr);
    if (ids.length > nCtx) throw new WispError('capacity', `${ids.length} ids are more than the context (${nCtx})`);
    new Int32Array(e.u8.buffer, e.mod._ww_ids(this.#ptr), ids.length).set(ids);
    const len = e.mod._ww_detokenize(this.#ptr, ids.length, special ? 1 : 0, continuation ? 0 : 1);
    const cap = e.mod._ww_io_cap(this.#ptr);
    if (len > cap) throw new WispError('capacity', `the text of these ids is longer than the I/O buffer (${cap} bytes)`);
    const io = e.mod._ww_io(this.#ptr);
    return e.text(io, io + len);
  }

  /**
   * The embedding of `text` (BOS added): the model's final hidden state (after its output
   * norm, before the output projection), the mean over the text's tokens (pooling 'mean',
   * the default) or the last token's ('last'), L2-normalized unless normalize is false.
   * The text is evaluated alone, so the KV cache of a conversation is emptied.
   */
  embed(text, options = {}) {
    this.#alive();
    checkOptions('embed', options, ['pooling', 'normalize']);
    const { pooling = 'mean', normalize = true } = options;
    if (pooling !== 'mean' && pooling !== 'last') throw new WispError('arg', `pooling must be 'mean' or 'last' (got ${pooling})`);
    if (typeof normalize !== 'boolean') throw new WispError('arg', 'normalize must be a boolean');
    if (this.#busy) throw new WispError('busy', 'the model is generating or fine-tuning: wait for it (or abort it) before embedding');
    const e = this.#engine;
    const n = this._tokenizeInPlace(text, true, false);
    const p = e.mod._ww_embed(this.#ptr, n, pooling === 'last' ? 1 : 0, normalize ? 1 : 0);
    if (!p) throw e.error(this.#ptr);
    return new Float32Array(e.u8.buffer, p, e.mod._ww_n_embd(this.#ptr)).slice();
  }

  // A conversation through wasm/abi_chat.c: its text (tokenize false), or its
  // prompt ids put in the id buffer (tokenize true: their count).
  #chatCall(messages, { template, date, addGenerationPrompt = true } = {}, tokenize) {
    if (!Array.isArray(messages)) throw new WispError('arg', 'messages must be an array of {role, content} objects');
    if (template !== undefined && typeof template !== 'string') throw new WispError('arg', 'template must be a string');
    const e = this.#engine;
    const m = e.mod;
    const json = new TextEncoder().encode(JSON.stringify(messages));
    const spec = new TextEncoder().encode(template ?? '');
    const when = date === undefined ? new Date() : new Date(date);
    if (Number.isNaN(when.getTime())) throw new WispError('arg', `date must be a Date or 'YYYY-MM-DD' (got ${date})`);
    const ymd = date === undefined ? when.getFullYear() * 10000 + (when.getMonth() + 1) * 100 + when.getDate()
      : when.getUTCFullYear() * 10000 + (when.getUTCMonth() + 1) * 100 + when.getUTCDate();
    // ww_alloc: its addresses come back unsigned (past 2 GiB in wasm32) and
    // it is in every build (the wasm64 one exports no malloc)
    const pj = e.alloc(json.length + 1);
    let ps = 0;
    try {
      ps = e.alloc(spec.length + 1);
      e.u8.set(json, pj);
      e.u8.set(spec, ps);
      const r = m._ww_chat(this.#ptr, pj, json.length, ps, spec.length, addGenerationPrompt ? 1 : 0, tokenize ? 1 : 0, ymd);
      if (r < 0) throw e.error(this.#ptr);
      if (tokenize) return r;
      const p = m._ww_chat_text();
      return e.text(p, p + r); // copied first in the threaded build: browsers' TextDecoder refuses shared memory
    } finally {
      e.free(pj);
      if (ps) e.free(ps);
    }
  }

  /**
   * The text a conversation becomes with the model's chat template (or
   * options.template: a built-in format's name or a Jinja template), as Hugging
   * Face's apply_chat_template renders it.
   */
  applyTemplate(messages, options = {}) {
    this.#alive();
    checkOptions('applyTemplate', options, ['template', 'date', 'addGenerationPrompt']);
    return this.#chatCall(messages, options, false);
  }

  /**
   * Stream the answer to a conversation, like generate: the messages are
   * rendered with the chat template and tokenized with its special tokens
   * (never the messages' own text), and the KV cache keeps what the
   * conversation shares with the last prompt, so a new turn evaluates only
   * its new tokens. Options: generate's, plus template and date. With
   * jsonSchema the stream can also be awaited: the parsed answer, as complete gives.
   */
  chat(messages, options = {}) {
    const { template, date, ...rest } = options;
    return chatStream(this.generate({ messages, template, date }, rest), options);
  }

  /** The continuation of `prompt` as one string (with jsonSchema: the parsed JSON value). */
  async complete(prompt, options = {}) {
    return wholeAnswer(this.generate(prompt, options), options);
  }

  /**
   * Stream the continuation of `prompt` as text pieces. Aborting (options.signal)
   * or reaching maxTokens, an end-of-generation token, a stop string or a full
   * context ends the iteration; lastStats.stopReason says which. The KV cache
   * keeps what a new prompt shares with the last one (cachePrompt: false
   * evaluates the whole prompt again).
   */
  async *generate(prompt, options = {}) {
    checkOptions('generate', options, GENERATE_OPTIONS);
    const o = {
      maxTokens: 128, temperature: 0.8, topK: 40, topP: 0.95, minP: 0.05, repeatPenalty: 1, repeatLastN: 64,
      ...options,
    };
    checkNumber('maxTokens', o.maxTokens, { min: 0, integer: true });
    checkNumber('temperature', o.temperature, { min: 0 });
    checkNumber('topK', o.topK, { min: 0, integer: true });
    checkNumber('topP', o.topP, { min: 0, max: 1 });
    checkNumber('minP', o.minP, { min: 0, max: 1 });
    checkNumber('repeatPenalty', o.repeatPenalty, { min: 0 });
    checkNumber('repeatLastN', o.repeatLastN, { min: 0, integer: true });
    const stops = o.stop === undefined ? [] : Array.isArray(o.stop) ? o.stop : [o.stop];
    if (stops.some((s) => typeof s !== 'string' || s === '')) throw new WispError('arg', 'stop must be a non-empty string or an array of them');
    const [seedLo, seedHi] = seedHalves(o.seed);
    const guide = guideSource(o);
    this.#alive();
    const release = await this.#lock.acquire();
    if (this.#disposed) {
      release();
      this.#alive();
    }
    const e = this.#engine;
    const m = e.mod;
    const stats = { promptTokens: 0, evaluatedPromptTokens: 0, prefillMs: 0, ttftMs: 0, generatedTokens: 0, decodeMs: 0,
      tokensPerSecond: 0, prefillTokensPerSecond: 0, stopReason: 'length', workerPieces: 0 };
    const piecesBefore = m._ww_worker_pieces(this.#ptr);
    this.lastStats = stats;
    this.#busy = true;
    try {
      const t0 = now();
      const addBos = o.addBos ?? m._ww_add_bos_default(this.#ptr) !== 0;
      const n = typeof prompt === 'object' && prompt !== null && Array.isArray(prompt.messages)
        ? this.#chatCall(prompt.messages, { template: prompt.template, date: prompt.date }, true) // chat()
        : this._tokenizeInPlace(prompt, addBos, o.special ?? false);
      m._ww_sampler(this.#ptr, o.temperature, o.topK, o.topP, o.minP, o.repeatPenalty, o.repeatLastN, seedLo, seedHi);
      if (guide) { // after ww_sampler (it resets the sampler); the prompt's ids are elsewhere
        const len = this.#writeText(guide[0]);
        if (m._ww_guide_set(this.#ptr, m._ww_io(this.#ptr), len, guide[1]) < 0) throw e.error(this.#ptr);
      } else m._ww_guide_clear(this.#ptr);
      if (o.cachePrompt === false) m._ww_reset(this.#ptr);
      const evaluated = m._ww_prompt(this.#ptr, n);
      if (evaluated < 0) throw e.error(this.#ptr);
      const t1 = now();
      Object.assign(stats, { promptTokens: n, evaluatedPromptTokens: evaluated, prefillMs: t1 - t0,
        prefillTokensPerSecond: evaluated / Math.max(t1 - t0, 1e-3) * 1000 });
      const decoder = new TextDecoder('utf-8');
      const io = m._ww_io(this.#ptr);
      const pause = makeYielder();
      let held = ''; // text that may be the start of a stop string
      let tFirst = 0;
      for (let i = 0; i < o.maxTokens; i++) {
        if (o.signal?.aborted || this.#disposed) { stats.stopReason = 'abort'; break; }
        const id = m._ww_next(this.#ptr);
        if (id === END) { stats.stopReason = 'eos'; break; }
        if (id === FULL) { stats.stopReason = 'context'; break; }
        if (id < 0) throw e.error(this.#ptr);
        if (i === 0) { tFirst = now(); stats.ttftMs = tFirst - t0; }
        stats.generatedTokens++;
        const len = m._ww_token_piece(this.#ptr, id);
        const piece = e.u8.subarray(io, io + len);
        held += decoder.decode(e.threaded ? piece.slice() : piece, { stream: true });
        o.onToken?.(id);
        const cut = cutAtStop(held, stops);
        if (cut.stopped) {
          if (cut.emit) yield cut.emit;
          held = '';
          stats.stopReason = 'stop';
          break;
        }
        if (cut.emit) {
          held = held.slice(cut.emit.length);
          yield cut.emit;
        }
        await pause();
      }
      if (stats.stopReason !== 'stop') {
        held += decoder.decode();
        if (held) yield held;
      }
      const t2 = now();
      stats.decodeMs = tFirst ? t2 - tFirst : 0;
      stats.tokensPerSecond = stats.generatedTokens > 1 ? (stats.generatedTokens - 1) / Math.max(stats.decodeMs, 1e-3) * 1000 : 0;
      stats.workerPieces = m._ww_worker_pieces(this.#ptr) - piecesBefore;
    } finally {
      this.#busy = false;
      release();
    }
  }

  /**
   * Fine-tune an adapter on `data` (a text, an array of documents, or
   * records) with options.method: 'lora' (default), 'rslora', 'dora', or
   * 'dpo' (a LoRA adapter trained on {prompt, chosen, rejected} pairs with
   * trl's DPO loss; progress events carry trl's rewards/* metrics; the three
   * are strings, or lists of messages rendered with options.template or the
   * model's chat template as trl renders conversational pairs), 'prompt'
   * (virtual tokens before every input) or 'prefix' (learned keys and values
   * of every layer, PEFT PREFIX_TUNING without its reparameterization MLP).
   * Memory for the session is allocated before the first step and released
   * after the last; the steps allocate nothing (progress events carry
   * memoryBytes, constant from the first step on). Aborting rejects with an
   * AbortError. The model's own context and attached adapters are untouched.
   */
  async finetune(data, options = {}) {
    checkOptions('finetune', options, FINETUNE_OPTIONS);
    const o = finetuneOptions(options);
    const { text, format, docs } = trainingText(data, o);
    this.#alive();
    const release = await this.#lock.acquire();
    const e = this.#engine;
    const m = e.mod;
    let t = 0;
    this.#busy = true;
    try {
      this.#alive();
      const bytes = new TextEncoder().encode(text);
      // the chat template for conversation records: a built-in name or a template's text ('': the model's)
      const spec = new TextEncoder().encode(o.template ?? '');
      const specPtr = e.alloc(spec.length + 1);
      e.u8.set(spec, specPtr);
      // prompt tuning's TEXT init ('': random rows)
      const init = new TextEncoder().encode(o.promptInitText ?? '');
      const initPtr = e.alloc(init.length + 1);
      e.u8.set(init, initPtr);
      const ptr = e.alloc(bytes.length + 1);
      e.u8.set(bytes, ptr);
      const settings = writeTrainSettings(e, { ...o, format, docs }, this.threads);
      t = m._ww_train_begin(this.#ptr, settings, ptr, bytes.length, specPtr, spec.length, initPtr, init.length);
      e.free(specPtr);
      e.free(initPtr);
      if (!t) throw e.error(this.#ptr);
      const examples = m._ww_train_examples(t);
      m._ww_train_data_report(t, e.record('train_data'));
      const d = e.read('train_data');
      // what the data became, as `wisp finetune` reports it (truncation is never silent)
      const data = { records: d.records, windows: d.windows, truncated: d.truncated, unscored: d.unscored, scoredTokens: d.scored };
      const perStep = o.batch * o.ctx * (o.method === 'dpo' ? 2 : 1);
      const t0 = now();
      for (let step = 1; step <= o.steps; step++) {
        Model.checkAbort(o.signal);
        if (this.#disposed) throw new WispError('disposed', 'the model was disposed while fine-tuning');
        const ts = now();
        if (m._ww_train_step(t, e.record('train_step')) !== 0) throw e.error(this.#ptr);
        const tEnd = now();
        const r = e.read('train_step');
        // DPO: `scored` counts pairs, and trl's reward metrics come under trl's names
        const counted = o.method === 'dpo' ? { pairs: r.scored, 'rewards/chosen': r.rewards_chosen,
          'rewards/rejected': r.rewards_rejected, 'rewards/accuracies': r.rewards_accuracies,
          'rewards/margins': r.rewards_margins } : { scoredTokens: r.scored };
        o.onProgress?.({
          step, steps: o.steps, loss: r.loss, ...counted, lr: r.lr, gradNorm: r.grad_norm, epoch: r.epoch, examples,
          tokensPerSecond: perStep / Math.max(tEnd - ts, 1e-3) * 1000,
          averageTokensPerSecond: step * perStep / Math.max(tEnd - t0, 1e-3) * 1000,
          tokens: step * perStep, elapsedMs: tEnd - t0, memoryBytes: e.memoryBytes, data,
        });
        await yieldToEventLoop();
      }
      Model.checkAbort(o.signal);
      const a = m._ww_train_finish(t);
      t = 0;
      return new Adapter(this, a, { source: 'finetune', name: o.name, data, method: o.method });
    } finally {
      if (t) m._ww_train_free(t);
      this.#busy = false;
      release();
    }
  }

  /** Attach (or rescale) an adapter; the KV cache restarts. */
  useAdapter(adapter, scale = 1) {
    this.#alive();
    checkNumber('scale', scale);
    this.#own(adapter);
    if (this.#engine.mod._ww_adapter_attach(this.#ptr, adapter._ptr, scale) !== 0) throw this.#engine.error(this.#ptr);
    this.#adapters.set(adapter, scale);
  }

  /** Detach an adapter (it stays loaded and can be used again). */
  removeAdapter(adapter) {
    this.#alive();
    this.#own(adapter);
    if (this.#engine.mod._ww_adapter_detach(this.#ptr, adapter._ptr) !== 0) throw this.#engine.error(this.#ptr);
    this.#adapters.delete(adapter);
  }

  /** Adapters attached now, with their scales. */
  get adapters() { return [...this.#adapters].map(([adapter, scale]) => ({ adapter, scale })); }

  #own(adapter) {
    if (this.#busy) throw new WispError('busy', 'the model is generating or fine-tuning: wait for it (or abort it) before changing adapters');
    if (!adapter || adapter.model !== this) throw new WispError('arg', 'this adapter belongs to another model (load it with loadAdapter(model, ...))');
    if (adapter.disposed) throw new WispError('disposed', 'this adapter was disposed');
  }

  /** @internal detach and free an adapter of this model */
  _disposeAdapter(adapter, ptr) {
    if (this.#busy) throw new WispError('busy', 'the model is generating or fine-tuning: wait for it (or abort it) before disposing an adapter');
    this.#adapters.delete(adapter);
    this.#engine.mod._ww_adapter_free(this.#ptr, ptr);
  }

  /** Free everything; the model cannot be used afterwards. */
  dispose() {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#lock.run(() => {
      this.#engine.mod._ww_close(this.#ptr);
      this.#engine.close();
      this.#engine = null;
    });
  }

  /** `using model = await loadModel(...)`: dispose at the end of the block. */
  [disposeSymbol]() { this.dispose(); }

  get disposed() { return this.#disposed; }

  static checkAbort(signal) {
    if (signal?.aborted) throw abortError(signal.reason);
  }
}

// Split streamed text at the first stop string: { stopped, emit } where emit
// is what can be shown now (everything before a stop string, or everything
// that cannot be the beginning of one).
export function cutAtStop(text, stops) {
  if (stops.length === 0) return { stopped: false, emit: text };
  let first = -1;
  for (const s of stops) {
    const at = text.indexOf(s);
    if (at >= 0 && (first < 0 || at < first)) first = at;
  }
  if (first >= 0) return { stopped: true, emit: text.slice(0, first) };
  let keep = 0;
  for (const s of stops)
    for (let k = Math.min(s.length - 1, text.length); k > keep; k--)
      if (text.endsWith(s.slice(0, k))) { keep = k; break; }
  return { stopped: false, emit: text.slice(0, text.length - keep) };
}

// ---- fine-tuning helpers ----

const SCHEDULES = ['constant', 'cosine', 'linear', '1cycle'];
// options.method -> ww_train_method (wasm/abi_structs.h), the order of its enum
const METHODS = ['lora', 'rslora', 'dora', 'dpo', 'prompt', 'prefix'];
// Options of `wisp finetune` the package does not offer yet: refused by name.
const OPTIONS_NOT_HERE = { prefixProjection: "method 'prefix' with PEFT's reparameterization MLP (wisp finetune --prefix-projection)" };
const DPO_LOSSES = ['sigmoid', 'ipo'];

// Options with the defaults of `wisp finetune`, so the same settings train
// the same adapter in a browser and natively.
function finetuneOptions(options) {
  const o = { rank: 8, steps: 100, ctx: 256, batch: 4, lr: 1e-3, seed: 42, schedule: 'cosine', clip: 1, method: 'lora', ...options };
  for (const k of Object.keys(OPTIONS_NOT_HERE))
    if (o[k] !== undefined && o[k] !== false)
      throw new WispError('unsupported', `${k}: ${OPTIONS_NOT_HERE[k]} is not available in the npm package yet`);
  if (!METHODS.includes(o.method)) throw new WispError('arg', `unknown method '${o.method}': use one of ${METHODS.join(', ')}`);
  if (o.method !== 'dpo') {
    const dpoOnly = ['beta', 'labelSmoothing', 'lossType'].filter((k) => o[k] !== undefined);
    if (dpoOnly.length) throw new WispError('arg', `${dpoOnly.join(', ')}: options of method 'dpo', not '${o.method}'`);
  }
  const virtual = o.method === 'prompt' || o.method === 'prefix'; // learned virtual positions, no LoRA pairs
  if (!virtual) {
    const promptOnly = ['numVirtualTokens', 'promptInitText'].filter((k) => o[k] !== undefined);
    if (promptOnly.length) throw new WispError('arg', `${promptOnly.join(', ')}: options of methods 'prompt' and 'prefix', not '${o.method}'`);
  } else {
    const loraOnly = ['rank', 'alpha'].filter((k) => options[k] !== undefined);
    if (loraOnly.length) throw new WispError('arg', `${loraOnly.join(', ')}: LoRA options; method '${o.method}' trains only the virtual positions`);
  }
  if (o.method === 'prefix' && o.promptInitText !== undefined)
    throw new WispError('arg', "promptInitText is for method 'prompt' (PEFT's prefix tuning has no text init)");
  o.numVirtualTokens ??= 8; // PEFT requires it; its prompt-tuning guide (and `wisp finetune`) use 8
  checkNumber('numVirtualTokens', o.numVirtualTokens, { min: 1, max: 4096, integer: true });
  if (o.promptInitText !== undefined && (typeof o.promptInitText !== 'string' || !o.promptInitText))
    throw new WispError('arg', 'promptInitText must be a non-empty string');
  o.beta ??= 0.1;
  o.labelSmoothing ??= 0;
  o.lossType ??= 'sigmoid';
  checkNumber('beta', o.beta, { min: 0 });
  if (!(o.beta > 0)) throw new WispError('arg', 'beta must be positive');
  checkNumber('labelSmoothing', o.labelSmoothing, { min: 0 });
  if (!(o.labelSmoothing < 0.5)) throw new WispError('arg', 'labelSmoothing must be in [0, 0.5)');
  if (!DPO_LOSSES.includes(o.lossType)) throw new WispError('arg', `lossType must be one of ${DPO_LOSSES.join(', ')} (got '${o.lossType}')`);
  if (o.lossType === 'ipo' && o.labelSmoothing !== 0) throw new WispError('arg', "labelSmoothing is for lossType 'sigmoid', not 'ipo'");
  if (o.method === 'dpo' && o.packing) throw new WispError('arg', "packing is not for method 'dpo': each answer is scored in a window of its own");
  o.alpha ??= 2 * o.rank;
  o.warmup ??= Math.floor(o.steps / 20);
  checkNumber('rank', o.rank, { min: 1, max: 4096, integer: true });
  checkNumber('alpha', o.alpha, { min: 0 });
  checkNumber('steps', o.steps, { min: 1, max: 2 ** 31 - 1, integer: true });
  checkNumber('ctx', o.ctx, { min: 1, max: 65536, integer: true });
  checkNumber('batch', o.batch, { min: 1, max: 4096, integer: true });
  checkNumber('lr', o.lr, { min: 0 });
  checkNumber('warmup', o.warmup, { min: 0, max: 2 ** 31 - 1, integer: true });
  checkNumber('clip', o.clip, { min: 0 });
  if (!(o.lr > 0)) throw new WispError('arg', 'lr must be positive');
  if (!SCHEDULES.includes(o.schedule)) throw new WispError('arg', `schedule must be one of ${SCHEDULES.join(', ')}`);
  if (o.docs !== undefined && o.docs !== 'file' && o.docs !== 'blank') throw new WispError('arg', "docs must be 'file' or 'blank'");
  if (o.format !== undefined && o.format !== 'text' && o.format !== 'jsonl') throw new WispError('arg', "format must be 'text' or 'jsonl'");
  if (o.onProgress !== undefined && typeof o.onProgress !== 'function') throw new WispError('arg', 'onProgress must be a function');
  if (o.template !== undefined && (typeof o.template !== 'string' || !o.template)) throw new WispError('arg', 'template must be a built-in format name or a template\'s text');
  if (o.packing !== undefined && typeof o.packing !== 'boolean') throw new WispError('arg', 'packing must be true or false');
  return o;
}

// The training data as the engine reads it (adapters/train_data.h): plain
// text (one document, or paragraphs with docs: 'blank'), or JSONL records.
// An array of strings is several documents; an array of objects is records
// ({prompt, completion}, {instruction, input, output} or {messages}:
// conversations, rendered by the C template engine, assistant turns scored).
function trainingText(data, o) {
  if (o.method === 'dpo') {
    if (!Array.isArray(data) || data.length === 0 || !data.every((d) => d && typeof d === 'object' && !Array.isArray(d)))
      throw new WispError('arg', "method 'dpo' takes an array of records {prompt, chosen, rejected} (strings, or lists of messages)");
    return { text: data.map((r) => JSON.stringify(r)).join('\n'), format: 'jsonl', docs: 'file' };
  }
  if (typeof data === 'string') {
    if (!data.trim()) throw new WispError('arg', 'the training text is empty');
    return { text: data, format: o.format ?? 'text', docs: o.docs ?? 'file' };
  }
  if (Array.isArray(data) && data.length > 0 && data.every((d) => typeof d === 'string')) {
    const docs = data.filter((d) => d.trim());
    if (docs.length === 0) throw new WispError('arg', 'the training documents are empty');
    return { text: docs.join('\n\n'), format: 'text', docs: 'blank' };
  }
  if (Array.isArray(data) && data.length > 0 && data.every((d) => d && typeof d === 'object')) {
    return { text: data.map((r) => JSON.stringify(r)).join('\n'), format: 'jsonl', docs: 'file' };
  }
  throw new WispError('arg', 'training data must be a string, an array of strings (documents) or an array of records');
}

// Training settings into the train record (wasm/abi_structs.h ww_train_in);
// its address.
function writeTrainSettings(e, o, threads) {
  const [lo, hi] = seedHalves(o.seed);
  return e.write('train', {
    seq_len: o.ctx, micro_batch: o.batch, rank: o.rank, steps: o.steps, seed_lo: lo, seed_hi: hi,
    schedule: SCHEDULES.indexOf(o.schedule), warmup: o.warmup, jsonl: o.format === 'jsonl' ? 1 : 0,
    blank_line_docs: o.docs === 'blank' ? 1 : 0, threads, alpha: o.alpha, lr: o.lr, clip: o.clip, packing: o.packing ? 1 : 0,
    method: METHODS.indexOf(o.method), dpo_beta: o.beta, label_smoothing: o.labelSmoothing, dpo_loss: DPO_LOSSES.indexOf(o.lossType),
    num_virtual_tokens: o.numVirtualTokens,
  });
}

// The plan of a fine-tuning session with these options, on `threads` threads.
export function planFinetune(e, ptr, options, threads) {
  checkOptions('plan finetune', options, FINETUNE_OPTIONS);
  const o = finetuneOptions(options);
  if (e.mod._ww_train_plan(ptr, writeTrainSettings(e, o, threads), e.record('plan')) !== 0) throw e.error(ptr);
  const plan = e.readPlan();
  plan.config.threads = threads;
  return plan;
}
