// Types of the npm package `wisp` (src/index.mjs).
/// <reference lib="esnext.disposable" />

/** Where a GGUF comes from. Strings are URLs in browsers and file paths in Node (unless http:, https:, data: or blob:). */
export type ModelSource = Uint8Array | ArrayBuffer | ArrayBufferView | Blob | Response | URL | string;

/**
 * A model: one source, or the shards of a split GGUF (llama.cpp's gguf-split) in order. A URL or
 * (Node) path named NAME-0000k-of-0000N.gguf with N > 1 stands for all N shards by itself.
 */
export type ModelSources = ModelSource | ReadonlyArray<ModelSource>;

/** Stable codes of WispError. */
export type WispErrorCode =
  | 'arg' | 'format' | 'unsupported' | 'shape' | 'not_found' | 'arena' | 'capacity' | 'numeric' | 'io'
  | 'aborted' | 'internal' | 'disposed' | 'busy';

/** Every failure: a code and a message naming what was wrong. Aborted fine-tuning rejects with name 'AbortError'. */
export declare class WispError extends Error {
  readonly code: WispErrorCode;
  constructor(code: WispErrorCode, message: string);
}

export interface LoadProgress {
  /** bytes read so far */
  loaded: number;
  /** bytes in all, when known */
  total: number | undefined;
  /** where the bytes come from: a download, the browser's cache of models, a file, or memory */
  from: 'network' | 'cache' | 'file' | 'memory';
  /** a split model: the shard being read (0-based); loaded and total count over all shards */
  shard?: number;
}

/** What sizes the arena. Zero means the default. */
export interface EngineOptions {
  /** KV cache positions; default: the model's context length, at most 4096 */
  ctx?: number;
  /** tokens per forward step; default min(ctx, 64) */
  batch?: number;
  /** KV cache element type; default 'f16' (as llama.cpp) */
  kvType?: 'f16' | 'f32';
  /** longest prompt in bytes; default max(4096, ...) */
  maxTextBytes?: number;
  /** LoRA adapters attachable at once; default 4 */
  maxAdapters?: number;
  /** largest rank of an attached adapter; default 64 */
  maxLoraRank?: number;
  /**
   * threads to run on; default the cores the platform reports, at most 8. More than 1 needs the threaded
   * build: always in Node, in browsers only on cross-origin isolated pages (COOP/COEP), else 1 (see
   * whyNotThreaded). 1 forces the single-thread build. Scratch is planned per thread.
   */
  threads?: number;
  /**
   * the engine build: 'auto' (default: wasm32 when file + arena fit its 4 GiB, else wasm64 where the
   * JavaScript engine has Memory64), 'wasm32' or 'wasm64' (up to 16 GiB); each runs threads as `threads` says
   */
  build?: 'auto' | 'wasm32' | 'wasm64';
}

export interface LoadOptions extends EngineOptions {
  /** kernel table: 'auto' (default: the best available), 'scalar' or 'wasm-simd128' */
  kernels?: string;
  onProgress?: (progress: LoadProgress) => void;
  signal?: AbortSignal;
  /** run the model in a Web Worker (browsers) or a worker thread (Node) */
  worker?: boolean;
  /** keep a model fetched by URL in the browser's Cache API and load it from there next time; default true */
  cache?: boolean;
}

export interface WorkerLoadOptions extends Omit<LoadOptions, 'worker'> {
  /** where the package's src/worker.mjs is served from, if a bundler moved it */
  workerUrl?: string | URL;
  /** move (rather than copy) an ArrayBuffer source to the worker */
  transfer?: boolean;
}

export type PlanPart =
  | 'context' | 'tokenizer' | 'kv_cache' | 'scratch' | 'logits' | 'sampler' | 'text' | 'adapters' | 'lora'
  | 'gradients' | 'optimizer' | 'activations' | 'train_scratch' | 'packed_weights';

/** Exact bytes, per part, before anything is allocated. */
export interface MemoryPlan {
  /** arena bytes */
  total: number;
  parts: Record<PlanPart, number>;
  /** bytes of weights, used in place (not part of the arena) */
  weights: number;
  /** size of the GGUF, all shards of a split one (undefined when a server did not say) */
  fileBytes: number | undefined;
  /** from plan(source): the files the model is in (1 unless split) */
  shards?: number;
  config: { ctx: number; batch: number; kvType: 'f16' | 'f32'; maxTextBytes: number; maxAdapters: number; maxLoraRank: number; threads: number };
  model: { nVocab: number; dim: number; nLayers: number; nHeads: number; nKvHeads: number; headDim: number; ffnDim: number; ctxTrain: number };
  /** from plan(source): general.name and general.architecture */
  name?: string;
  architecture?: string;
  /** from plan(source): wasm memory loading will take (file + arena + engine) */
  wasmBytes?: number;
  /** from plan(source): whether that fits a build that runs here (build is not null) */
  fitsWasm?: boolean;
  /** from plan(source): the engine builds and whether the model fits each */
  builds?: EngineBuildFit[];
  /** from plan(source): the build loadModel will use, null when none fits (loadModel then refuses it) */
  build?: 'wasm32' | 'wasm64' | null;
  /** from plan(source): the build option it was planned for */
  requestedBuild?: 'auto' | 'wasm32' | 'wasm64';
  /** from plan(source): why the plan is for one thread (null when for more) */
  whyNotThreaded?: string | null;
  /** from plan(source, { finetune }): the fine-tuning session's own arena */
  finetune?: MemoryPlan;
}

/** One engine build against a plan: its address space and whether the model fits. */
export interface EngineBuildFit {
  name: 'wasm32' | 'wasm64';
  /** bytes the build can address: 4 GiB (wasm32), 16 GiB (wasm64) */
  limitBytes: number;
  /** undefined when the file size is unknown */
  fits: boolean | undefined;
  /** false: the build cannot run in this JavaScript engine (why says so: no Memory64) */
  available: boolean;
  why?: string;
}

/** What sizes a fine-tuning session's arena. */
export type FinetuneShape = Pick<FinetuneOptions, 'rank' | 'ctx' | 'batch' | 'steps' | 'alpha' | 'lr' | 'seed' | 'schedule' | 'warmup' | 'clip' | 'method'>;

export interface PlanOptions extends EngineOptions {
  /** the kernel table loadModel will be given (default 'auto'): the plan depends on it */
  kernels?: string;
  signal?: AbortSignal;
  /** also plan a fine-tuning session of this shape (plan.finetune; wasmBytes includes it) */
  finetune?: FinetuneShape;
  /** plan for this many threads (default: what loadModel would choose) */
  threads?: number;
  /** false: do not read a cached copy of a URL's model; default true */
  cache?: boolean;
}

/** One message of a conversation (other keys, such as tool calls, are refused). */
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool' | string;
  content: string;
}

export interface TemplateOptions {
  /** a built-in format (chatml, llama3, gemma, phi3, phi4, zephyr, mistral) or a Jinja template; default: the model's */
  template?: string;
  /** the date strftime_now gives (a Date or 'YYYY-MM-DD'); default: today */
  date?: Date | string;
}

export interface ApplyTemplateOptions extends TemplateOptions {
  /** end with the assistant's header; default true */
  addGenerationPrompt?: boolean;
}

export type ChatOptions = GenerateOptions & TemplateOptions;

export interface GenerateOptions {
  /** tokens to generate at most; default 128 */
  maxTokens?: number;
  /** 0: greedy; default 0.8 */
  temperature?: number;
  /** default 40; 0: off */
  topK?: number;
  /** default 0.95; 1: off */
  topP?: number;
  /** default 0.05; 0: off */
  minP?: number;
  /** default 1 (off) */
  repeatPenalty?: number;
  /** default 64 */
  repeatLastN?: number;
  /** same seed, same text; default random */
  seed?: number | bigint;
  /** add the BOS token; default: the model's preference */
  addBos?: boolean;
  /** parse special-token texts such as <|im_start|> in the prompt */
  special?: boolean;
  /** end the text before the first of these strings */
  stop?: string | string[];
  /** aborting ends the iteration (stopReason 'abort') */
  signal?: AbortSignal;
  /** called with each generated token id */
  onToken?: (id: number) => void;
  /** reuse the KV cache for what the prompt shares with the last one; default true */
  cachePrompt?: boolean;
  /** constrain the text to this GBNF grammar (llama.cpp syntax) */
  grammar?: string;
  /** constrain the text to JSON valid for this schema (object or JSON text); complete() then returns the parsed
   * value, and so does awaiting chat()'s stream */
  jsonSchema?: object | string;
}

/** chat() with a jsonSchema: iterate it for the text as it comes, or await it for the parsed answer */
export interface ChatJsonStream extends AsyncGenerator<string, void, undefined>, PromiseLike<any> {}

export interface GenerationStats {
  promptTokens: number;
  /** prompt tokens actually evaluated (the rest was reused from the KV cache) */
  evaluatedPromptTokens: number;
  prefillMs: number;
  prefillTokensPerSecond: number;
  /** time to first token, from the call */
  ttftMs: number;
  generatedTokens: number;
  decodeMs: number;
  /** decode speed, after the first token */
  tokensPerSecond: number;
  stopReason: 'length' | 'eos' | 'stop' | 'abort' | 'context';
  /** pieces of work (row ranges of products, attention heads) the other threads ran; 0 on one thread */
  workerPieces: number;
}

/** A prompt/completion record, or an Alpaca-style instruction record: only the response is scored;
 * or a conversation, rendered with the chat template: only assistant turns are scored. */
export type TrainingRecord = { prompt: string; completion: string } | { instruction: string; input?: string; output: string }
  | { messages: ChatMessage[] };

/** A preference pair for method 'dpo' (trl's explicit-prompt form; no other keys): strings, or (trl's conversational
 * form) lists of messages rendered with the chat template, the prompt ending with the user's message. */
export type PreferencePair = { prompt: string; chosen: string; rejected: string }
  | { prompt: ChatMessage[]; chosen: ChatMessage[]; rejected: ChatMessage[] };

/** Training data: one text, several documents, or records (method 'dpo': preference pairs). */
export type TrainingData = string | string[] | TrainingRecord[] | PreferencePair[];

/** `wisp finetune --method`: LoRA, rsLoRA (alpha / sqrt(rank)), DoRA (PEFT use_dora: a learned magnitude per
 * output row), DPO (trl's, a LoRA adapter trained on preference pairs against the base as reference),
 * prompt tuning (PEFT PROMPT_TUNING: learned virtual tokens before every input) or prefix tuning (PEFT
 * PREFIX_TUNING: learned keys and values of every layer at the first positions). */
export type FinetuneMethod = 'lora' | 'rslora' | 'dora' | 'dpo' | 'prompt' | 'prefix';

/** Defaults are `wisp finetune`'s, so the same settings train the same adapter in a browser and natively. */
export interface FinetuneOptions {
  /** what to train; default 'lora' */
  method?: FinetuneMethod;
  /** method 'dpo': trl's beta; default 0.1 */
  beta?: number;
  /** method 'dpo' with lossType 'sigmoid': cDPO's label smoothing in [0, 0.5); default 0 */
  labelSmoothing?: number;
  /** method 'dpo': trl's loss_type; default 'sigmoid' */
  lossType?: 'sigmoid' | 'ipo';
  /** methods 'prompt' and 'prefix': learned virtual positions before every input; default 8 */
  numVirtualTokens?: number;
  /** method 'prefix' through PEFT's reparameterization MLP: not in the npm package; true is refused by name */
  prefixProjection?: false;
  /** method 'prompt': start from this text's token embeddings (PEFT's TEXT init); default random rows */
  promptInitText?: string;
  /** LoRA rank; default 8 */
  rank?: number;
  /** LoRA alpha; default 2 x rank */
  alpha?: number;
  /** optimizer steps; default 100 */
  steps?: number;
  /** tokens per training sequence; default 256 */
  ctx?: number;
  /** sequences per step (method 'dpo': pairs, two sequences each); default 4 */
  batch?: number;
  /** peak learning rate (AdamW); default 1e-3 */
  lr?: number;
  /** learning-rate schedule; default 'cosine' */
  schedule?: 'constant' | 'cosine' | 'linear' | '1cycle';
  /** warmup steps; default 5% of the steps */
  warmup?: number;
  /** global gradient-norm clipping; default 1, 0: off */
  clip?: number;
  /** plain text as one document ('file', default) or blank-line paragraphs ('blank') */
  docs?: 'file' | 'blank';
  /** a string of JSONL records instead of plain text */
  format?: 'text' | 'jsonl';
  /** initialisation and data order; default 42 */
  seed?: number | bigint;
  /** name recorded in exported files */
  name?: string;
  /** chat template for conversation records: a built-in name (chatml, llama3, gemma, phi3, phi4, zephyr,
   * mistral) or a Jinja template's text; default: the model's tokenizer.chat_template */
  template?: string;
  /** pack records, EOS between them, into shared windows of ctx tokens (trl's packing: attention crosses
   * records within a window, each record keeps its own loss mask, nothing is truncated); default false */
  packing?: boolean;
  onProgress?: (progress: FinetuneProgress) => void;
  /** aborting rejects with an AbortError */
  signal?: AbortSignal;
}

export interface FinetuneProgress {
  step: number;
  steps: number;
  /** mean cross-entropy of this step's batch (method 'dpo': the mean DPO loss of its pairs) */
  loss: number;
  /** targets the loss was taken over (not for method 'dpo') */
  scoredTokens?: number;
  /** method 'dpo': pairs of this step */
  pairs?: number;
  /** method 'dpo', trl's metrics over this step's pairs: mean beta (log p - log p_ref) of the chosen answers */
  'rewards/chosen'?: number;
  /** method 'dpo': the same of the rejected answers */
  'rewards/rejected'?: number;
  /** method 'dpo': fraction of pairs whose chosen reward exceeds the rejected one */
  'rewards/accuracies'?: number;
  /** method 'dpo': mean of chosen minus rejected reward */
  'rewards/margins'?: number;
  /** learning rate of this step */
  lr: number;
  /** gradient norm before clipping */
  gradNorm: number;
  /** passes over the data completed */
  epoch: number;
  /** training windows (or records) in the data */
  examples: number;
  /** tokens trained on per second, this step */
  tokensPerSecond: number;
  /** tokens per second since the first step */
  averageTokensPerSecond: number;
  /** tokens trained on so far */
  tokens: number;
  elapsedMs: number;
  /** wasm memory (constant from the first step on) */
  memoryBytes: number;
  /** what the training data became */
  data: TrainingDataReport;
}

/** The counts `wisp finetune` prints for JSONL data. */
export interface TrainingDataReport {
  /** records kept (plain text: windows) */
  records: number;
  /** training windows (equal to records unless packing) */
  windows: number;
  /** records cut to the window (never with packing) */
  truncated: number;
  /** records left with nothing to score (conversations among them are dropped) */
  unscored: number;
  /** targets scored over all windows */
  scoredTokens: number;
}

export interface AdapterInfo {
  /** adapted projections */
  pairs: number;
  rank: number;
  alpha: number;
  name?: string;
  source: 'gguf' | 'peft' | 'finetune';
  /** fine-tuned adapters: the method they were trained with */
  method?: FinetuneMethod;
  /** prompt or prefix tuning: the virtual positions (pairs, rank and alpha are 0) */
  numVirtualTokens?: number;
  /** prompt or prefix tuning: which of the two (prefix: keys and values put into every layer's cache) */
  virtual?: 'prompt' | 'prefix';
  /** fine-tuned adapters: what the training data became */
  data?: TrainingDataReport;
}

/** PEFT's two files: adapter_config.json (text) and adapter_model.safetensors. */
export interface PeftFiles {
  config: string;
  safetensors: Uint8Array;
}

export interface ExportOptions {
  /** general.name of the GGUF */
  name?: string;
}

export interface Adapter {
  readonly model: Model;
  readonly info: AdapterInfo;
  readonly disposed: boolean;
  /** llama.cpp's GGUF LoRA format */
  toGGUF(options?: ExportOptions): Uint8Array;
  toPEFT(options?: ExportOptions): PeftFiles;
  /** detach and free */
  dispose(): void;
  /** `using adapter = ...` disposes it at the end of the block */
  [Symbol.dispose](): void;
}

export interface ModelInfo {
  name: string;
  architecture: string | undefined;
  /** the kernel table in use, e.g. 'wasm-simd128' */
  kernels: string;
  /** the engine build: wasm32's 'single' (one thread) or 'threaded' (wasm threads), or wasm64's 'wasm64' or 'wasm64-threaded' */
  build: 'threaded' | 'single' | 'wasm64' | 'wasm64-threaded';
  source: string;
  /** for a URL: 'hit' (read from the cache), 'stored' (downloaded and kept), or why it was not cached (a split model: the shards' if they agree, else 'mixed (see shardCache)') */
  cache?: string;
  /** a split model: cache's answer for each shard */
  shardCache?: string[];
  /** the files the model was loaded from (1 unless split) */
  shards: number;
}

/** A model kept in the browser's cache. */
export interface CachedModel {
  url: string;
  /** undefined when the server did not say */
  bytes: number | undefined;
}

export interface TokenizeOptions {
  addBos?: boolean;
  special?: boolean;
}

export interface EmbedOptions {
  /** 'mean' (default): the mean of every token's final hidden state; 'last': the last token's */
  pooling?: 'mean' | 'last';
  /** L2-normalize the vector (default true) */
  normalize?: boolean;
}

export interface DetokenizeOptions {
  special?: boolean;
  /** keep the space SentencePiece puts before a text (for ids that continue other text) */
  continuation?: boolean;
}

/** A model running in the calling thread. */
export interface Model {
  readonly info: ModelInfo;
  /** threads generation and fine-tuning run on (1: the single-thread build) */
  readonly threads: number;
  /** why the model runs on one thread, e.g. the page is not cross-origin isolated; null when threaded */
  readonly whyNotThreaded: string | null;
  /** the plan the model was initialised with */
  readonly memoryPlan: MemoryPlan;
  /** figures of the last generation */
  readonly lastStats: GenerationStats | null;
  /** wasm memory of this model's instance */
  readonly memoryBytes: number;
  readonly disposed: boolean;
  /** attached adapters with their scales */
  readonly adapters: ReadonlyArray<{ adapter: Adapter; scale: number }>;
  /** the plan for other settings, or with { finetune } the plan of a fine-tuning session */
  plan(options?: EngineOptions & { finetune?: FinetuneShape }): MemoryPlan;
  tokenize(text: string, options?: TokenizeOptions): Int32Array;
  detokenize(ids: ArrayLike<number>, options?: DetokenizeOptions): string;
  /** the text's embedding (final hidden state after the output norm, pooled); empties the KV cache */
  embed(text: string, options?: EmbedOptions): Float32Array;
  complete(prompt: string, options?: GenerateOptions): Promise<any>;
  generate(prompt: string, options?: GenerateOptions): AsyncGenerator<string, void, undefined>;
  /** the answer to a conversation, streamed; the KV cache keeps what turns share */
  chat(messages: ChatMessage[], options: ChatOptions & { jsonSchema: object | string }): ChatJsonStream;
  chat(messages: ChatMessage[], options?: ChatOptions): AsyncGenerator<string, void, undefined>;
  /** the text a conversation becomes with the chat template */
  applyTemplate(messages: ChatMessage[], options?: ApplyTemplateOptions): string;
  finetune(data: TrainingData, options?: FinetuneOptions): Promise<Adapter>;
  useAdapter(adapter: Adapter, scale?: number): void;
  removeAdapter(adapter: Adapter): void;
  dispose(): void;
  /** `using model = await loadModel(...)` disposes it at the end of the block */
  [Symbol.dispose](): void;
}

export interface WorkerAdapter {
  readonly model: WorkerModel;
  readonly info: AdapterInfo;
  readonly id: number;
  readonly disposed: boolean;
  toGGUF(options?: ExportOptions): Promise<Uint8Array>;
  toPEFT(options?: ExportOptions): Promise<PeftFiles>;
  dispose(): Promise<void>;
  /** `await using adapter = ...` disposes it at the end of the block */
  [Symbol.asyncDispose](): Promise<void>;
}

/** A model running in a worker: the same calls, all asynchronous. */
export interface WorkerModel {
  readonly worker: true;
  readonly info: ModelInfo;
  /** threads generation and fine-tuning run on (1: the single-thread build) */
  readonly threads: number;
  /** why the model runs on one thread, e.g. the page is not cross-origin isolated; null when threaded */
  readonly whyNotThreaded: string | null;
  readonly memoryPlan: MemoryPlan;
  readonly lastStats: GenerationStats | null;
  /** as of the worker's last reply */
  readonly memoryBytes: number;
  readonly disposed: boolean;
  plan(options?: EngineOptions & { finetune?: FinetuneShape }): Promise<MemoryPlan>;
  tokenize(text: string, options?: TokenizeOptions): Promise<Int32Array>;
  detokenize(ids: ArrayLike<number>, options?: DetokenizeOptions): Promise<string>;
  /** the text's embedding (final hidden state after the output norm, pooled); empties the KV cache */
  embed(text: string, options?: EmbedOptions): Promise<Float32Array>;
  complete(prompt: string, options?: GenerateOptions): Promise<any>;
  generate(prompt: string, options?: GenerateOptions): AsyncGenerator<string, void, undefined>;
  /** the answer to a conversation, streamed; the KV cache keeps what turns share */
  chat(messages: ChatMessage[], options: ChatOptions & { jsonSchema: object | string }): ChatJsonStream;
  chat(messages: ChatMessage[], options?: ChatOptions): AsyncGenerator<string, void, undefined>;
  applyTemplate(messages: ChatMessage[], options?: ApplyTemplateOptions): Promise<string>;
  finetune(data: TrainingData, options?: FinetuneOptions): Promise<WorkerAdapter>;
  useAdapter(adapter: WorkerAdapter, scale?: number): Promise<void>;
  removeAdapter(adapter: WorkerAdapter): Promise<void>;
  dispose(): Promise<void>;
  /** `await using model = await createWorkerModel(...)` disposes it at the end of the block */
  [Symbol.asyncDispose](): Promise<void>;
}

/** A GGUF LoRA (bytes, File/Blob, URL or path), or PEFT's two files. */
export type AdapterSource =
  | ModelSource
  | { config: string | object | Blob | Uint8Array; safetensors: Uint8Array | ArrayBuffer | Blob }
  | ReadonlyArray<File>;

export interface AdapterLoadOptions {
  name?: string;
  onProgress?: (progress: LoadProgress) => void;
  signal?: AbortSignal;
}

export declare function loadModel(source: ModelSources, options: LoadOptions & { worker: true }): Promise<WorkerModel>;
export declare function loadModel(source: ModelSources, options?: LoadOptions & { worker?: false }): Promise<Model>;
export declare function createWorkerModel(source: ModelSources, options?: WorkerLoadOptions): Promise<WorkerModel>;
/** The memory plan of a model, reading only its GGUF header. */
export declare function plan(source: ModelSources, options?: PlanOptions): Promise<MemoryPlan>;
export declare function loadAdapter(model: Model, source: AdapterSource, options?: AdapterLoadOptions): Promise<Adapter>;
export declare function loadAdapter(model: WorkerModel, source: AdapterSource, options?: AdapterLoadOptions): Promise<WorkerAdapter>;
/** Models kept in the browser's cache (empty where there is no Cache API, as in Node). */
export declare function cachedModels(): Promise<CachedModel[]>;
/** Forget one cached model (by URL), or all of them; true if anything was removed. */
export declare function clearCache(url?: string | URL): Promise<boolean>;
/** Where the .wasm files are, when a bundler moved them (threadedWasmUrl: dist/wisp-engine-mt.wasm). */
export declare function configureEngine(options: {
  wasmUrl?: string | URL; threadedWasmUrl?: string | URL; wasm64Url?: string | URL; wasm64ThreadedUrl?: string | URL; wasmBinary?: ArrayBuffer | Uint8Array; wasmModule?: WebAssembly.Module;
}): void;
export declare const version: string;
