#!/usr/bin/env node
// Chat in the npm package: applyTemplate renders the golden chat templates
// byte for byte (those that use no BOS/EOS text: the model's own are used),
// raises as the template does, refuses what it does not support by name;
// chat() answers as `wisp run --chat` does (greedy), reuses the KV cache for
// the next turn, and a worker gives the same answers.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { WISP, check, checkEqual, done, expectError, shared, wispPackage } from './lib.mjs';

const modelPath = shared('models/stories260K.gguf');
const templates = JSON.parse(readFileSync(shared('golden/chat/templates.json'), 'utf8'));
const cases = JSON.parse(readFileSync(shared('golden/chat/cases.json'), 'utf8'));
const wisp = await wispPackage();
const model = await wisp.loadModel(modelPath, { ctx: 512 });

// Golden templates that do not print bos_token/eos_token (the model's are stories260K's).
let compared = 0;
for (const c of cases) {
  const t = templates.find((x) => x.model === c.model);
  if (/bos_token|eos_token/.test(t.template)) continue;
  const options = { template: t.template, date: '2024-07-26', addGenerationPrompt: c.add_generation_prompt };
  if (c.error) {
    await expectError(() => model.applyTemplate(c.messages, options), 'arg', `${c.model}/${c.conversation_id} raises`);
    continue;
  }
  checkEqual(model.applyTemplate(c.messages, options), c.expected, `${c.model}/${c.conversation_id}`);
  compared++;
}
check(compared >= 60, `compared ${compared} golden cases`);
// a raising template's message reaches JS
const gemma2 = templates.find((x) => x.model === 'google/gemma-2-2b-it').template;
try {
  model.applyTemplate([{ role: 'system', content: 'x' }, { role: 'user', content: 'y' }], { template: gemma2 });
  check(false, 'gemma-2 with a system message should raise');
} catch (e) {
  check(/template raised: System role not supported/.test(e.message), `raise message: ${e.message}`);
}
// a built-in format by name
const msgs = [{ role: 'system', content: 'You tell stories.' }, { role: 'user', content: 'Once upon a time' }];
checkEqual(model.applyTemplate(msgs, { template: 'chatml' }),
  '<|im_start|>system\nYou tell stories.<|im_end|>\n<|im_start|>user\nOnce upon a time<|im_end|>\n<|im_start|>assistant\n',
  'chatml by name');
// refused by name: keys the templates do not get, unknown formats, a model without a template
// (tool_calls became a key templates get with tool calling, issue 17; images are still not one)
const keyError = await expectError(() => model.applyTemplate([{ role: 'user', content: 'x', images: [] }], { template: 'chatml' }),
  'unsupported', 'images');
check(/"images"/.test(keyError.message), `the refusal names the key: ${keyError.message}`);
await expectError(() => model.applyTemplate(msgs, { template: 'nosuch' }), 'not_found', 'unknown format');
await expectError(() => model.applyTemplate(msgs), 'not_found', 'no template in the model');
await expectError(() => model.applyTemplate(msgs, { template: '{% include "x" %}' }), 'unsupported', 'include');

// chat(): the same greedy answer as the native CLI
let answer = '';
for await (const piece of model.chat(msgs, { template: 'zephyr', maxTokens: 16, temperature: 0 })) answer += piece;
const cli = execFileSync(WISP, ['run', '-m', modelPath, '--chat', '--chat-template', 'zephyr', '-n', '16', '--temp', '0', '-q',
  '--ctx', '512'], { input: JSON.stringify(msgs), encoding: 'utf8' }).replace(/\n$/, '');
checkEqual(answer, cli, 'chat answer vs wisp run --chat');
const first = model.lastStats;
check(first.generatedTokens > 0, 'chat generated tokens');
// the next turn evaluates only what the conversation added
const turn2 = [...msgs, { role: 'assistant', content: answer }, { role: 'user', content: 'And then?' }];
for await (const piece of model.chat(turn2, { template: 'zephyr', maxTokens: 4, temperature: 0 })) void piece;
const s2 = model.lastStats;
check(s2.evaluatedPromptTokens < s2.promptTokens - first.promptTokens + 8,
  `turn 2 evaluated ${s2.evaluatedPromptTokens} of ${s2.promptTokens} prompt tokens (turn 1 had ${first.promptTokens})`);

// fine-tuning on conversations needs the model's chat template: stories260K has none, and says so
await expectError(() => model.finetune([{ messages: [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello.' }] }],
  { steps: 1, ctx: 32, batch: 1 }), 'unsupported', 'conversations without a template');

// the same in a worker
const w = await wisp.loadModel(modelPath, { ctx: 512, worker: true });
checkEqual(await w.applyTemplate(msgs, { template: 'chatml' }), model.applyTemplate(msgs, { template: 'chatml' }), 'worker applyTemplate');
let wanswer = '';
for await (const piece of w.chat(msgs, { template: 'zephyr', maxTokens: 16, temperature: 0 })) wanswer += piece;
checkEqual(wanswer, answer, 'worker chat');
await w.dispose();
model.dispose();
done();
