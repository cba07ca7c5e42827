// Adapters of a model: LoRA (GGUF LoRA or PEFT files) and PEFT prompt- and
// prefix-tuning folders, loaded or made by model.finetune(), attached with
// model.useAdapter, saved as GGUF (LoRA only) or PEFT.
import { WispError } from './errors.mjs';
import { disposeSymbol } from './util.mjs';
import { readIntoEngine, sourceKind } from './source.mjs';

export class Adapter {
  #model;
  #ptr;
  #disposed = false;

  constructor(model, ptr, info) {
    this.#model = model;
    this.#ptr = ptr;
    const m = model._engine.mod;
    /** rank, alpha, number of adapted projections, and where it came from */
    const notes = model._engine.cstring(m._ww_adapter_notes(ptr)).split('\n').filter(Boolean);
    this.info = { pairs: m._ww_adapter_pairs(ptr), rank: m._ww_adapter_rank(ptr), alpha: m._ww_adapter_alpha(ptr), ...info };
    const virtualTokens = m._ww_adapter_virtual_tokens(ptr);
    if (virtualTokens) { // prompt or prefix tuning: no pairs, these virtual positions
      this.info.numVirtualTokens = virtualTokens;
      this.info.virtual = m._ww_adapter_is_prefix(ptr) ? 'prefix' : 'prompt';
    }
    if (notes.length) this.info.notes = notes;
  }

  get model() { return this.#model; }
  get disposed() { return this.#disposed; }
  /** @internal */
  get _ptr() { return this.#ptr; }

  #alive() {
    if (this.#disposed) throw new WispError('disposed', 'this adapter was disposed');
    if (this.#model.disposed) throw new WispError('disposed', 'the model of this adapter was disposed');
  }

  // Run one of the engine's writers (count first, then write) into a
  // Uint8Array of exactly the right size.
  #write(fn) {
    const e = this.#model._engine;
    const n = fn(1);
    if (n < 0) throw e.error(this.#model._ptr);
    const out = new Uint8Array(n);
    let off = 0;
    e.module.wispSinkWrite = (ptr, len) => {
      // wasm32 hands addresses past 2 GiB over negative; wasm64's are exact
      if (ptr < 0) ptr += 2 ** 32;
      if (len < 0) len += 2 ** 32;
      if (off + len > n) return false;
      out.set(e.u8.subarray(ptr, ptr + len), off);
      off += len;
      return true;
    };
    try {
      if (fn(0) < 0) throw e.error(this.#model._ptr);
    } finally {
      e.module.wispSinkWrite = null;
    }
    if (off !== n) throw new WispError('internal', `the writer announced ${n} bytes but wrote ${off}`);
    return out;
  }

  /** The adapter as a llama.cpp GGUF LoRA file. */
  toGGUF({ name } = {}) {
    this.#alive();
    const e = this.#model._engine;
    const namePtr = e.scratchString(name ?? this.info.name ?? 'wisp LoRA adapter');
    return this.#write((countOnly) => e.mod._ww_adapter_write_gguf(this.#model._ptr, this.#ptr, namePtr, countOnly));
  }

  /**
   * The adapter as PEFT files: adapter_config.json (text) and
   * adapter_model.safetensors, with the q/k rows in Hugging Face order.
   */
  toPEFT() {
    this.#alive();
    const e = this.#model._engine;
    const p = e.mod._ww_adapter_peft_config(this.#ptr);
    const n = e.mod._ww_adapter_peft_config_len(this.#ptr);
    const config = e.text(p, p + n);
    const safetensors = this.#write((countOnly) => e.mod._ww_adapter_write_safetensors(this.#model._ptr, this.#ptr, countOnly));
    return { config, safetensors };
  }

  /** Detach (if attached) and free the adapter's memory. */
  dispose() {
    if (this.#disposed || this.#model.disposed) {
      this.#disposed = true;
      return;
    }
    this.#model._disposeAdapter(this, this.#ptr);
    this.#disposed = true;
  }

  /** `using adapter = ...`: dispose at the end of the block. */
  [disposeSymbol]() { this.dispose(); }
}

function isGGUF(bytes) {
  return bytes.length >= 4 && bytes[0] === 0x47 && bytes[1] === 0x47 && bytes[2] === 0x55 && bytes[3] === 0x46;
}

// PEFT files given as { config, safetensors } or as a list of Files (the
// two files of the adapter folder, picked together).
function peftParts(source) {
  if (Array.isArray(source) || (typeof FileList === 'function' && source instanceof FileList)) {
    const files = Array.from(source);
    const config = files.find((f) => f.name.endsWith('.json'));
    const st = files.find((f) => f.name.endsWith('.safetensors'));
    const gguf = files.find((f) => f.name.endsWith('.gguf'));
    if (gguf && files.length === 1) return { gguf };
    if (!config || !st) throw new WispError('arg', 'give adapter_config.json and adapter_model.safetensors together (or one .gguf)');
    return { config, safetensors: st };
  }
  if (source && typeof source === 'object' && 'safetensors' in source && 'config' in source) return source;
  return null;
}

async function configText(config) {
  if (typeof config === 'string') return config;
  if (typeof Blob === 'function' && config instanceof Blob) return config.text();
  if (config instanceof ArrayBuffer || ArrayBuffer.isView(config)) return new TextDecoder().decode(config);
  if (config && typeof config === 'object') return JSON.stringify(config);
  throw new WispError('arg', 'the PEFT config must be a string, an object, bytes or a File');
}

/**
 * Load an adapter for `model`: a GGUF LoRA (bytes, File/Blob, URL or, in
 * Node, a path), or PEFT's two files as { config, safetensors } or [File, File]
 * (LoRA, DoRA, prompt tuning or prefix tuning).
 */
export async function loadAdapter(model, source, options = {}) {
  if (typeof model?._loadAdapter === 'function') return model._loadAdapter(source, options);
  if (!model || typeof model._engine !== 'object') throw new WispError('arg', 'loadAdapter(model, source): the first argument must be a model');
  const parts = peftParts(source);
  if (parts?.gguf) return loadAdapter(model, parts.gguf, options);
  if (!parts) sourceKind(source);
  return model._lock.run(async () => {
    const e = model._engine;
    if (parts) {
      const cfgBytes = new TextEncoder().encode(await configText(parts.config));
      const cfg = e.alloc(cfgBytes.length + 1);
      e.u8.set(cfgBytes, cfg);
      e.u8[cfg + cfgBytes.length] = 0;
      let st;
      try {
        st = await readIntoEngine(e, parts.safetensors, options);
      } catch (err) {
        e.free(cfg);
        throw err;
      }
      const a = e.mod._ww_adapter_open_peft(model._ptr, cfg, cfgBytes.length, st.ptr, st.size);
      if (!a) throw e.error(model._ptr);
      return new Adapter(model, a, { name: options.name, source: 'peft' });
    }
    const { ptr, size } = await readIntoEngine(e, source, options);
    if (!isGGUF(e.u8.subarray(ptr, ptr + Math.min(size, 4)))) {
      e.free(ptr);
      throw new WispError('format', 'not a GGUF LoRA adapter (the file does not start with "GGUF"); PEFT adapters are given as { config, safetensors }');
    }
    const a = e.mod._ww_adapter_open_gguf(model._ptr, ptr, size);
    if (!a) throw e.error(model._ptr);
    return new Adapter(model, a, { name: options.name, source: 'gguf' });
  });
}
