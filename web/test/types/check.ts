// Compiled (never run) by test_types.mjs: every public call with its types,
// and misuses the .d.ts must reject.
import {
  loadModel, createWorkerModel, plan, loadAdapter, configureEngine, version, WispError, cachedModels, clearCache,
  type CachedModel,
  type Model, type WorkerModel, type Adapter, type WorkerAdapter, type MemoryPlan, type GenerationStats,
  type FinetuneProgress, type PeftFiles, type ChatMessage,
} from 'wisp';

async function direct(bytes: Uint8Array, file: File): Promise<void> {
  const p: MemoryPlan = await plan(file, { ctx: 512, finetune: { rank: 8, ctx: 128, batch: 4 } });
  const trainBytes: number | undefined = p.finetune?.parts.activations;
  const total: number = p.total + p.parts.kv_cache + p.model.nLayers;
  const m: Model = await loadModel(bytes, { ctx: 256, kvType: 'f16', threads: 2, onProgress: ({ loaded, total: all, from }) => console.log(loaded, all, from) });
  const threads: number = m.threads + p.config.threads;
  const why: string | null = m.whyNotThreaded;
  const fits: boolean | undefined = p.builds?.find((b) => b.name === 'wasm32')?.fits;
  const build: 'threaded' | 'single' | 'wasm64' | 'wasm64-threaded' = m.info.build;
  const wide: Model = await loadModel(bytes, { build: 'wasm64' });
  const chosen: 'wasm32' | 'wasm64' | null | undefined = (await plan(file, { build: 'auto' })).build;
  console.log(threads, why, fits, build, p.build, wide.info.build, chosen);
  const cached: CachedModel[] = await cachedModels();
  const removed: boolean = await clearCache(cached[0]?.url);
  const hit: string | undefined = (await loadModel('/m.gguf', { cache: false })).info.cache;
  // a split model: the list of its shards, any sources
  const split: Model = await loadModel(['/m-00001-of-00002.gguf', file], { ctx: 64 });
  const shards: number = split.info.shards;
  const perShard: string[] | undefined = split.info.shardCache;
  const splitPlan: number | undefined = (await plan(['/a.gguf', bytes])).shards;
  console.log(shards, perShard, splitPlan);
  console.log(removed, hit, await clearCache());
  // @ts-expect-error build names an engine build
  await loadModel(bytes, { build: 'wasm128' });
  // @ts-expect-error cache is a boolean
  await loadModel(bytes, { cache: 'yes' });
  const text: string = await m.complete('Once', { maxTokens: 8, temperature: 0, topK: 40, topP: 0.9, minP: 0.05, repeatPenalty: 1.1, seed: 1 });
  const ac = new AbortController();
  for await (const piece of m.generate('Once', { signal: ac.signal, stop: ['\n'], seed: 5n })) console.log(piece.toUpperCase());
  const stats: GenerationStats | null = m.lastStats;
  const adapter: Adapter = await m.finetune('some text', {
    rank: 4, alpha: 8, steps: 2, ctx: 32, batch: 2, lr: 1e-3, seed: 1,
    onProgress: (e: FinetuneProgress) => console.log(e.step, e.loss, e.tokensPerSecond), signal: ac.signal,
  });
  m.useAdapter(adapter, 0.5);
  m.removeAdapter(adapter);
  const gguf: Uint8Array = adapter.toGGUF();
  const peft: PeftFiles = adapter.toPEFT();
  const again: Adapter = await loadAdapter(m, gguf);
  const fromPeft: Adapter = await loadAdapter(m, { config: peft.config, safetensors: peft.safetensors });
  const ids: Int32Array = m.tokenize('hello', { addBos: true });
  const back: string = m.detokenize(ids);
  const vec: Float32Array = m.embed('hello', { pooling: 'last', normalize: false });
  // @ts-expect-error pooling is 'mean' or 'last'
  m.embed('hello', { pooling: 'max' });
  const chatMsgs: ChatMessage[] = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }];
  const rendered: string = m.applyTemplate(chatMsgs, { template: 'chatml', addGenerationPrompt: true, date: '2024-07-26' });
  for await (const piece of m.chat(chatMsgs, { maxTokens: 8, temperature: 0, template: 'chatml', stop: ['\n'] })) console.log(piece, rendered);
  const answer: { name: string } = await m.chat(chatMsgs, { jsonSchema: { type: 'object' }, template: 'chatml' });
  for await (const piece of m.chat(chatMsgs, { jsonSchema: '{"type":"object"}' })) console.log(piece, answer.name);
  // @ts-expect-error messages are objects with role and content
  m.applyTemplate(['Hi']);
  const records: Adapter = await m.finetune([{ prompt: 'Q:', completion: ' A.' }, { instruction: 'Say hi', output: 'Hi' }], { schedule: 'constant' });
  const chats: Adapter = await m.finetune([{ messages: [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello.' }] }],
    { template: 'chatml', packing: true, onProgress: (p) => console.log(p.data.scoredTokens) });
  const scored: number | undefined = chats.info.data?.scoredTokens;
  const dpo: Adapter = await m.finetune([{ prompt: 'Q:', chosen: ' Yes.', rejected: ' No.' }],
    { method: 'dpo', beta: 0.1, lossType: 'sigmoid', labelSmoothing: 0, onProgress: (p) => console.log(p['rewards/margins'], p.pairs) });
  const dora: Adapter = await m.finetune('text', { method: 'dora', rank: 4 });
  const prompt: Adapter = await m.finetune('text', { method: 'prompt', numVirtualTokens: 8, promptInitText: 'Once upon a time' });
  const prefix: Adapter = await m.finetune('text', { method: 'prefix', numVirtualTokens: 4 });
  const kind: 'prompt' | 'prefix' | undefined = prefix.info.virtual;
  console.log(dpo.info.method, dora.info.rank, prompt.info.numVirtualTokens, kind);
  // @ts-expect-error the reparameterization MLP is not in the npm package
  await m.finetune('text', { method: 'prefix', prefixProjection: true });
  // @ts-expect-error unknown method
  await m.finetune('text', { method: 'ia3' });
  // @ts-expect-error lossType is 'sigmoid' or 'ipo'
  await m.finetune([{ prompt: 'Q:', chosen: ' Yes.', rejected: ' No.' }], { method: 'dpo', lossType: 'hinge' });
  m.dispose();
  console.log(scored, vec.length, trainBytes, records.info.rank, total, text, stats?.tokensPerSecond, again.info.rank, fromPeft.info.source, back, version);
  // @ts-expect-error temperature is a number
  await m.complete('Once', { temperature: 'hot' });
  // @ts-expect-error without a schema, awaiting chat() gives the stream, not an answer
  const notParsed: string = await m.chat(chatMsgs, { maxTokens: 4 });
  console.log(notParsed);
  // @ts-expect-error direct adapters export synchronously
  (await adapter.toGGUF()).then;
  // @ts-expect-error threads is a number
  await loadModel(bytes, { threads: 'all' });
  // @ts-expect-error unknown kv type
  await loadModel(bytes, { kvType: 'q8' });
  // @ts-expect-error unknown schedule
  await m.finetune('text', { schedule: 'sawtooth' });
}

async function worker(url: string): Promise<void> {
  const wm: WorkerModel = await loadModel(url, { worker: true });
  const w2: WorkerModel = await createWorkerModel(new URL(url), { workerUrl: '/worker.mjs' });
  const text: string = await wm.complete('Once');
  const wt: number = wm.threads;
  const wwhy: string | null = wm.whyNotThreaded;
  console.log(wt, wwhy);
  const wrendered: string = await wm.applyTemplate([{ role: 'user', content: 'Hi' }], { template: 'zephyr' });
  for await (const piece of wm.chat([{ role: 'user', content: 'Hi' }], { maxTokens: 4 })) console.log(piece, wrendered);
  const a: WorkerAdapter = await wm.finetune(['doc one', 'doc two'], { steps: 1 });
  await wm.useAdapter(a, 1);
  const bytes: Uint8Array = await a.toGGUF();
  const la: WorkerAdapter = await loadAdapter(wm, bytes);
  await wm.removeAdapter(la);
  await wm.dispose();
  await w2.dispose();
  console.log(text);
  // @ts-expect-error worker adapters export asynchronously
  const sync: Uint8Array = a.toGGUF();
  console.log(sync);
}

// `using` / `await using` dispose models and adapters at the end of the block.
async function scoped(bytes: Uint8Array, url: string): Promise<void> {
  using m = await loadModel(bytes);
  using a: Adapter = await m.finetune('text', { steps: 1 });
  await using wm = await loadModel(url, { worker: true });
  await using wa = await wm.finetune('text', { steps: 1 });
  const sync: Disposable = m;
  const later: AsyncDisposable = wm;
  console.log(a.info.rank, wa.id, sync, later);
  // @ts-expect-error a worker model is disposed asynchronously only (no Symbol.dispose)
  using w2 = await createWorkerModel(url);
  console.log(w2.threads);
}

configureEngine({ wasmUrl: '/wisp-engine.wasm', threadedWasmUrl: '/wisp-engine-mt.wasm' });
try {
  await direct(new Uint8Array(0), new File([], 'm.gguf'));
  await worker('m.gguf');
  await scoped(new Uint8Array(0), 'm.gguf');
} catch (e) {
  if (e instanceof WispError) console.log(e.code === 'format', e.message);
}
// @ts-expect-error plan needs a source
await plan();
