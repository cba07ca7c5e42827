#!/usr/bin/env node
// Prefix tuning (PEFT PREFIX_TUNING) in the npm package. A prefix adapter made
// by `wisp finetune --method prefix` loads with loadAdapter as PEFT files, puts
// its keys and values into the KV cache before the text (the text at positions
// N..), and generates greedily exactly what `wisp run --lora DIR --temp 0`
// prints: on stories260K (arch llama: the keys move between Hugging Face's
// order and GGUF's; grouped-query attention) and on a synthetic qwen2 (its
// keys kept as they are; its random weights give the same greedy text with
// and without a prefix, so there only the equality is checked). Its PEFT
// files come back byte for byte.
// model.finetune(text, { method: 'prefix' }) trains one whose per-step losses
// and config equal the CLI's, and which generates as the CLI's adapter does.
// GGUF export, scales, embeddings with it attached and prefixProjection are
// refused by name.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { WISP, WORK, check, checkEqual, done, expectError, shared, wispPackage } from './lib.mjs';

const wisp = await wispPackage();
const dir = path.join(WORK, 'prefix-adapter');
mkdirSync(dir, { recursive: true });
const textFile = path.join(dir, 'shakespeare.txt');
const text = readFileSync(shared('data/tinyshakespeare.txt'), 'utf8').slice(0, 6000);
writeFileSync(textFile, text);
const opts = { maxTokens: 24, temperature: 0 };

function cli(args) {
  const p = spawnSync(WISP, args, { encoding: 'utf8' });
  if (p.status !== 0) throw new Error(`wisp ${args.join(' ')} failed: ${p.stderr}`);
  return p.stdout;
}
const peftFiles = (folder) => ({ config: readFileSync(path.join(folder, 'adapter_config.json'), 'utf8'),
  safetensors: new Uint8Array(readFileSync(path.join(folder, 'adapter_model.safetensors'))) });
const greedy = (modelPath, folder, prompt) => cli(['run', '-m', modelPath, ...(folder ? ['--lora', folder] : []), '-p', prompt,
  '-n', '24', '--temp', '0', '--no-echo', '-q', '-t', '1']).replace(/\n$/, '');

// ---- a CLI-made prefix adapter, on two families ----
for (const [family, rel, steps, changes] of [['stories260K', 'models/stories260K.gguf', 8, true],
  ['qwen2', 'models/synthetic/syn-qwen2-f32.gguf', 3, false]]) {
  const modelPath = shared(rel);
  const out = path.join(dir, family);
  cli(['finetune', '-m', modelPath, '--data', textFile, '-o', out, '--overwrite', '-t', '1', '--quiet', '--method', 'prefix',
    '--num-virtual-tokens', '5', '--ctx', '64', '-b', '2', '--steps', String(steps), '--lr', '0.01', '--schedule', 'constant',
    '--warmup', '0']);
  const folder = path.join(out, 'peft');
  const files = peftFiles(folder);
  const model = await wisp.loadModel(modelPath, { ctx: 128, threads: 1 });
  const a = await wisp.loadAdapter(model, files);
  checkEqual(a.info.virtual, 'prefix', `${family}: the PEFT folder loads as prefix tuning`);
  checkEqual(a.info.numVirtualTokens, 5, `${family}: with its 5 virtual positions`);
  checkEqual(a.info.pairs, 0, `${family}: no LoRA pairs`);
  const prompt = 'ROMEO:';
  const plain = await model.complete(prompt, opts);
  model.useAdapter(a);
  const tuned = await model.complete(prompt, opts);
  const again = await model.complete(prompt, opts); // the cached prefix and prompt are reused
  model.removeAdapter(a);
  const cliText = greedy(modelPath, folder, prompt);
  checkEqual(tuned, cliText, `${family}: greedy tokens with the prefix equal \`wisp run --lora DIR --temp 0\``);
  checkEqual(again, tuned, `${family}: the same completion from the cache`);
  if (changes) check(tuned !== plain, `${family}: the prefix changes generation: ${JSON.stringify(tuned)} vs ${JSON.stringify(plain)}`);
  checkEqual(await model.complete(prompt, opts), plain, `${family}: detached, the base model again`);
  console.log(`${family}: ${JSON.stringify(tuned)} with the prefix (without: ${JSON.stringify(plain)})`);
  // PEFT files back, byte for byte (the CLI's config ends with a newline)
  const back = a.toPEFT();
  checkEqual(back.config + '\n', files.config, `${family}: adapter_config.json written back as read`);
  check(Buffer.from(back.safetensors).equals(Buffer.from(files.safetensors)), `${family}: adapter_model.safetensors written back byte for byte`);
  a.dispose();
  model.dispose();
}

// ---- refusals, and training a prefix in the package ----
const modelPath = shared('models/stories260K.gguf');
const model = await wisp.loadModel(modelPath, { ctx: 128, threads: 1 });
const cliFolder = path.join(dir, 'stories260K', 'peft');
{
  const a = await wisp.loadAdapter(model, peftFiles(cliFolder));
  let e = await expectError(() => a.toGGUF(), 'unsupported', 'a prefix as GGUF LoRA is refused');
  check(/prefix tuning/.test(e.message), `the refusal names prefix tuning: ${e.message}`);
  e = await expectError(() => model.useAdapter(a, 0.5), 'arg', 'a prefix adapter with a scale');
  check(/prefix-tuning adapter has no scale/.test(e.message), `the refusal names the prefix: ${e.message}`);
  model.useAdapter(a);
  e = await expectError(() => model.embed('ROMEO:'), 'unsupported', 'embeddings with a prefix adapter attached');
  check(/prefix-tuning/.test(e.message), `the refusal names the prefix: ${e.message}`);
  model.removeAdapter(a);
  a.dispose();
  e = await expectError(() => model.finetune(text, { method: 'prefix', prefixProjection: true }), 'unsupported', 'prefixProjection');
  check(/prefixProjection/.test(e.message), `the refusal names prefixProjection: ${e.message}`);
  await expectError(() => model.finetune(text, { method: 'prefix', promptInitText: 'Once' }), 'arg', 'a text init for a prefix');
  await expectError(() => model.finetune(text, { method: 'prefix', rank: 4 }), 'arg', 'a LoRA rank for a prefix');
}
{
  const ev = [];
  const a = await model.finetune(text, { method: 'prefix', numVirtualTokens: 5, ctx: 64, batch: 2, steps: 8, lr: 0.01,
    schedule: 'constant', warmup: 0, onProgress: (p) => ev.push(p) });
  const [head, ...lines] = readFileSync(path.join(dir, 'stories260K', 'log.csv'), 'utf8').trim().split('\n');
  const cols = head.split(',');
  const cliSteps = lines.map((l) => Object.fromEntries(l.split(',').map((v, i) => [cols[i], v === '' ? NaN : +v])))
    .filter((r) => r.step > 0 && Number.isFinite(r.loss));
  checkEqual(ev.length, cliSteps.length, 'prefix training: as many steps as the CLI logged');
  let worst = 0;
  for (let i = 0; i < cliSteps.length; i++) {
    const d = Math.abs(ev[i].loss - cliSteps[i].loss);
    check(d <= 2e-4 * Math.max(1, cliSteps[i].loss), `prefix step ${i + 1}: loss ${ev[i].loss} vs the CLI's ${cliSteps[i].loss}`);
    worst = Math.max(worst, d);
  }
  check(ev.at(-1).loss < ev[0].loss, `prefix training: the loss falls ${ev[0].loss.toFixed(4)} -> ${ev.at(-1).loss.toFixed(4)}`);
  checkEqual(a.info.method, 'prefix', 'the trained adapter records its method');
  checkEqual(a.info.virtual, 'prefix', 'the trained adapter is a prefix');
  const peft = a.toPEFT();
  const cliFiles = peftFiles(cliFolder);
  checkEqual(peft.config + '\n', cliFiles.config, "prefix training: adapter_config.json is the CLI's");
  checkEqual(peft.safetensors.length, cliFiles.safetensors.length, "prefix training: the safetensors file has the CLI's size");
  model.useAdapter(a);
  const out = await model.complete('ROMEO:', opts);
  model.removeAdapter(a);
  checkEqual(out, greedy(modelPath, cliFolder, 'ROMEO:'), "prefix training: generates as the CLI's adapter with `wisp run --lora`");
  console.log(`prefix training: ${ev.length} steps equal the CLI's (largest difference ${worst.toExponential(2)})`);
  a.dispose();
}
model.dispose();
done();
