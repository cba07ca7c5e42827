// Runs inside a fresh project that installed the packed `wisp` tarball:
// greedy generation, one fine-tuning step, adapter export, and wasm memory
// figures; prints one JSON line for test_npm_package.mjs to check.
import { loadModel, loadAdapter, plan, version } from 'wisp';

const [modelPath, prompt, n] = process.argv.slice(2);
const planned = await plan(modelPath, { ctx: 256 });
const model = await loadModel(modelPath, { ctx: 256 });
const ids = [];
const afterLoad = model.memoryBytes;
const text = await model.complete(prompt, { temperature: 0, maxTokens: Number(n), onToken: (id) => ids.push(id) });
const afterGenerate = model.memoryBytes;
const progress = [];
const adapter = await model.finetune('One day, Lily found a shiny red ball in the park. She played with it all day.\n'.repeat(20),
  { steps: 1, ctx: 32, batch: 2, rank: 4, lr: 1e-3, seed: 3, onProgress: (p) => progress.push(p) });
const gguf = adapter.toGGUF();
const peft = adapter.toPEFT();
const reloaded = await loadAdapter(model, gguf);
model.useAdapter(reloaded, 1);
const withAdapter = await model.complete(prompt, { temperature: 0, maxTokens: 8 });
console.log(JSON.stringify({
  version, text, ids, planTotal: planned.total, initTotal: model.memoryPlan.total, afterLoad, afterGenerate,
  progress, ggufMagic: new TextDecoder().decode(gguf.subarray(0, 4)), peftConfig: JSON.parse(peft.config),
  safetensorsBytes: peft.safetensors.length, adapterInfo: adapter.info, withAdapter, kernels: model.info.kernels,
  threads: model.threads, build: model.info.build,
}));
model.dispose();
