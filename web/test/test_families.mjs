#!/usr/bin/env node
// The npm package runs the newer families of the architecture table, not
// just llama: qwen3 (per-head q/k norms, head size != dim/heads) and gemma3
// (embedding scale, GELU-tanh, post-norms, sliding-window layers whose KV
// cache is a ring, local RoPE base). Greedy text over a prompt longer than
// gemma3's window of 16 equals the native CLI's, and the plan read from the
// header is the plan init used.
import { readFile } from 'node:fs/promises';
import { check, checkEqual, cliGreedy, done, shared, wispPackage } from './lib.mjs';

const wisp = await wispPackage();
const prompt = 'Lily and Tom went to the big park to play with a red ball. Lily and Tom went to the big park';
for (const name of ['syn-qwen3-f16', 'syn-gemma3-f16']) {
  const modelPath = shared(`models/synthetic/${name}.gguf`);
  const opts = { ctx: 256, batch: 8 };
  const plan = await wisp.plan(modelPath, opts);
  const model = await wisp.loadModel(new Uint8Array(await readFile(modelPath)), opts);
  checkEqual(model.memoryPlan.total, plan.total, `${name}: the header plan is the plan init used`);
  const n = 24;
  const expected = cliGreedy(modelPath, prompt, n);
  const greedy = await model.complete(prompt, { temperature: 0, maxTokens: n });
  check(greedy.length > 0, `${name}: generated text`);
  checkEqual(greedy, expected, `${name}: greedy continuation equals \`wisp run --temp 0\``);
  console.log(`${name}: ${n} greedy tokens equal the native CLI's`);
  model.dispose?.();
}
done();
