#!/usr/bin/env node
// The fine-tuning methods of `wisp finetune --method` in the npm package:
// model.finetune(data, { method }) with 'dpo' (preference pairs, trl's loss
// and metric names), 'dora' and 'rslora', each trained a few steps on
// stories260K. Every step's loss (and DPO's rewards/*) equals the one the
// native CLI writes to log.csv for the same data and settings, within the
// difference of wasm's and the CPU's kernels; DPO's reward accuracy and margin
// rise on pairs whose chosen answer ends with a fixed sentence; the adapters
// generate in the same session and export as PEFT (DoRA with its magnitudes,
// refused as GGUF by name); unknown methods and misplaced options are refused
// by name.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { WISP, WORK, check, checkEqual, done, expectError, shared, wispPackage } from './lib.mjs';

const modelPath = shared('models/stories260K.gguf');
const wisp = await wispPackage();
const model = await wisp.loadModel(modelPath, { ctx: 128, threads: 1 });
const dir = path.join(WORK, 'finetune-methods');
mkdirSync(dir, { recursive: true });

// wasm's kernels and the CPU's sum in other orders: losses agree to this
// relative tolerance (log.csv prints 6 decimals), step after step.
const TOL = 2e-4;
const close = (a, b) => Math.abs(a - b) <= TOL * Math.max(1, Math.abs(b));

// `wisp finetune` on `file` with these settings; its log.csv as rows of numbers by column name.
function wispFinetune(name, file, args) {
  const out = path.join(dir, name);
  const p = spawnSync(WISP, ['finetune', '-m', modelPath, '--data', file, '-o', out, '--overwrite', '-t', '1', '--quiet', ...args],
    { encoding: 'utf8' });
  if (p.status !== 0) throw new Error(`wisp finetune ${args.join(' ')} failed: ${p.stderr}`);
  const [head, ...lines] = readFileSync(path.join(out, 'log.csv'), 'utf8').trim().split('\n');
  const cols = head.split(',');
  return lines.map((l) => Object.fromEntries(l.split(',').map((v, i) => [cols[i], v === '' ? NaN : +v])))
    .filter((r) => r.step > 0 && Number.isFinite(r.loss));
}

function compareSteps(what, events, cli, keys) {
  checkEqual(events.length, cli.length, `${what}: steps in the package and in the CLI's log.csv`);
  let worst = 0;
  for (let i = 0; i < cli.length; i++)
    for (const [mine, theirs] of keys) {
      const a = events[i][mine], b = cli[i][theirs];
      check(Number.isFinite(a) && close(a, b), `${what} step ${i + 1}: ${mine} ${a} vs the CLI's ${theirs} ${b}`);
      worst = Math.max(worst, Math.abs(a - b));
    }
  console.log(`${what}: ${cli.length} steps equal the CLI's (${keys.map((k) => k[1]).join(', ')}; largest difference ${worst.toExponential(2)})`);
}

// ---- DPO: chosen answers end with a fixed sentence, rejected ones with another of a few ----
const names = ['Tim', 'Lily', 'Ben', 'Sue', 'Max', 'Mia', 'Tom', 'Anna'];
const things = ['ball', 'cat', 'tree', 'cake'];
const endings = [' The dog was sad.', ' It was dark.', ' He ran away.', ' She fell down.'];
const pairs = [];
for (let i = 0; i < 16; i++) {
  const who = names[i % names.length], what = things[i % things.length];
  const story = ` ${who} played with the ${what}.`;
  pairs.push({ prompt: `Once upon a time, ${who} saw a ${what}.`, chosen: `${story} They were very happy.`,
    rejected: `${story}${endings[i % endings.length]}` });
}
const pairsFile = path.join(dir, 'pairs.jsonl');
writeFileSync(pairsFile, pairs.map((r) => JSON.stringify(r)).join('\n') + '\n');

const dpoSettings = { ctx: 48, batch: 4, steps: 24, lr: 0.0005, schedule: 'constant', warmup: 0, beta: 0.1 };
const events = [];
const dpo = await model.finetune(pairs, { method: 'dpo', ...dpoSettings, onProgress: (p) => events.push(p) });
checkEqual(events.length, dpoSettings.steps, 'DPO: one progress event per step');
for (const k of ['rewards/chosen', 'rewards/rejected', 'rewards/accuracies', 'rewards/margins'])
  check(events.every((p) => Number.isFinite(p[k])), `DPO progress events carry ${k}`);
check(events.every((p) => p.pairs === dpoSettings.batch && p.scoredTokens === undefined), 'DPO counts pairs, not tokens');
checkEqual(dpo.info.method, 'dpo', 'the adapter records its method');
const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
const first = events.slice(0, 4), last = events.slice(-4);
const acc0 = mean(first.map((p) => p['rewards/accuracies'])), acc1 = mean(last.map((p) => p['rewards/accuracies']));
const mar0 = mean(first.map((p) => p['rewards/margins'])), mar1 = mean(last.map((p) => p['rewards/margins']));
const loss0 = mean(first.map((p) => p.loss)), loss1 = mean(last.map((p) => p.loss));
check(acc1 > acc0 && acc1 >= 0.9, `DPO reward accuracy rises: ${acc0.toFixed(3)} -> ${acc1.toFixed(3)}`);
check(mar1 > mar0 && mar1 > 0, `DPO reward margin grows: ${mar0.toFixed(4)} -> ${mar1.toFixed(4)}`);
check(loss1 < loss0 && loss0 <= Math.log(2) + 0.05, `DPO loss falls from about log 2: ${loss0.toFixed(4)} -> ${loss1.toFixed(4)}`);
console.log(`DPO: accuracy ${acc0.toFixed(3)} -> ${acc1.toFixed(3)}, margin ${mar0.toFixed(4)} -> ${mar1.toFixed(4)}, loss ${loss0.toFixed(4)} -> ${loss1.toFixed(4)}`);
const cliDpo = wispFinetune('dpo', pairsFile, ['--method', 'dpo', '--ctx', '48', '-b', '4', '--steps', '24', '--lr', '0.0005',
  '--schedule', 'constant', '--warmup', '0', '--beta', '0.1']);
compareSteps('DPO', events, cliDpo, [['loss', 'loss'], ['rewards/chosen', 'rewards/chosen'], ['rewards/rejected', 'rewards/rejected'],
  ['rewards/accuracies', 'rewards/accuracies'], ['rewards/margins', 'rewards/margins']]);

// a run shorter than an epoch scores the reference inside each step (the CLI does too): the same losses,
// here with cDPO's label smoothing
const shortEvents = [];
(await model.finetune(pairs, { method: 'dpo', ...dpoSettings, steps: 2, labelSmoothing: 0.1, onProgress: (p) => shortEvents.push(p) })).dispose();
compareSteps('DPO, reference in the step, label smoothing 0.1', shortEvents, wispFinetune('dpo-short', pairsFile, ['--method', 'dpo',
  '--ctx', '48', '-b', '4', '--steps', '2', '--lr', '0.0005', '--schedule', 'constant', '--warmup', '0', '--label-smoothing', '0.1']),
[['loss', 'loss'], ['rewards/margins', 'rewards/margins']]);

// IPO with its own loss
const ipoEvents = [];
(await model.finetune(pairs, { method: 'dpo', ...dpoSettings, steps: 3, lossType: 'ipo', onProgress: (p) => ipoEvents.push(p) })).dispose();
compareSteps('DPO ipo', ipoEvents, wispFinetune('ipo', pairsFile, ['--method', 'dpo', '--loss-type', 'ipo', '--ctx', '48', '-b', '4',
  '--steps', '3', '--lr', '0.0005', '--schedule', 'constant', '--warmup', '0']), [['loss', 'loss']]);

// trl's conversational pairs (lists of messages), rendered with the ChatML template: the same losses as the CLI's
// --chat-template chatml run
const convPairs = pairs.map((r) => ({ prompt: [{ role: 'user', content: r.prompt }],
  chosen: [{ role: 'assistant', content: r.chosen.trim() }], rejected: [{ role: 'assistant', content: r.rejected.trim() }] }));
const convFile = path.join(dir, 'conv-pairs.jsonl');
writeFileSync(convFile, convPairs.map((r) => JSON.stringify(r)).join('\n') + '\n');
const convEvents = [];
(await model.finetune(convPairs, { method: 'dpo', ...dpoSettings, ctx: 96, steps: 3, template: 'chatml',
  onProgress: (p) => convEvents.push(p) })).dispose();
compareSteps('DPO on conversational pairs', convEvents, wispFinetune('dpo-conv', convFile, ['--method', 'dpo', '--chat-template',
  'chatml', '--ctx', '96', '-b', '4', '--steps', '3', '--lr', '0.0005', '--schedule', 'constant', '--warmup', '0', '--beta', '0.1']),
[['loss', 'loss'], ['rewards/chosen', 'rewards/chosen'], ['rewards/margins', 'rewards/margins']]);
const noTemplate = await expectError(() => model.finetune(convPairs, { method: 'dpo', ...dpoSettings, steps: 1 }), 'unsupported',
  'conversational pairs without a template (stories260K has none) are refused');
check(/needs a chat template/.test(noTemplate.message), `the refusal names the template: ${noTemplate.message}`);

// the DPO adapter generates in this session and exports as PEFT, as LoRA does
const prompt = 'Once upon a time, Tim saw a ball.';
const opts = { maxTokens: 24, temperature: 0 };
const plain = await model.complete(prompt, opts);
model.useAdapter(dpo);
const tuned = await model.complete(prompt, opts);
model.removeAdapter(dpo);
const fixed = 'They were very happy.';
check(!plain.includes(fixed) && tuned.includes(fixed), `the DPO adapter generates the chosen answers' sentence: ${JSON.stringify(tuned)}`);
console.log(`generation with the DPO adapter: ${JSON.stringify(tuned)} (without: ${JSON.stringify(plain)})`);
const dpoPeft = dpo.toPEFT();
check(JSON.parse(dpoPeft.config).peft_type === 'LORA' && dpoPeft.safetensors.length > 0, 'the DPO adapter exports as a PEFT LoRA');
check(dpo.toGGUF().length > 0, 'the DPO adapter exports as GGUF LoRA');
dpo.dispose();

// ---- DoRA and rsLoRA on Shakespeare ----
const text = readFileSync(shared('data/tinyshakespeare.txt'), 'utf8').slice(0, 6000);
const textFile = path.join(dir, 'shakespeare.txt');
writeFileSync(textFile, text);
const loraSettings = { ctx: 64, batch: 2, steps: 6, lr: 0.005, schedule: 'constant', warmup: 0, rank: 4 };
const cliLora = ['--ctx', '64', '-b', '2', '--steps', '6', '--lr', '0.005', '--schedule', 'constant', '--warmup', '0', '--rank', '4'];
for (const method of ['dora', 'rslora']) {
  const ev = [];
  const a = await model.finetune(text, { method, ...loraSettings, onProgress: (p) => ev.push(p) });
  compareSteps(method, ev, wispFinetune(method, textFile, ['--method', method, ...cliLora]), [['loss', 'loss']]);
  check(ev.at(-1).loss < ev[0].loss, `${method}: the loss falls ${ev[0].loss.toFixed(4)} -> ${ev.at(-1).loss.toFixed(4)}`);
  model.useAdapter(a);
  const out = await model.complete('ROMEO:', opts);
  model.removeAdapter(a);
  check(out.length > 0, `${method}: the adapter generates: ${JSON.stringify(out)}`);
  const peft = a.toPEFT();
  const cfg = JSON.parse(peft.config);
  const header = new TextDecoder().decode(peft.safetensors.subarray(8, 8 + Number(new DataView(peft.safetensors.buffer,
    peft.safetensors.byteOffset).getBigUint64(0, true))));
  if (method === 'dora') {
    check(cfg.use_dora === true, 'DoRA exports use_dora');
    check(header.includes('lora_magnitude_vector'), 'DoRA exports its lora_magnitude_vector tensors');
    const e = await expectError(() => a.toGGUF(), ['unsupported', 'format', 'arg'], 'DoRA as GGUF LoRA is refused');
    check(/DoRA/.test(e.message), `the refusal names DoRA: ${e.message}`);
    // the PEFT files load back and generate the same text
    const again = await wisp.loadAdapter(model, peft);
    model.useAdapter(again);
    checkEqual(await model.complete('ROMEO:', opts), out, 'DoRA: the exported PEFT files generate as the trained adapter');
    model.removeAdapter(again);
    again.dispose();
  } else {
    check(cfg.use_rslora === true && !header.includes('lora_magnitude_vector'), 'rsLoRA exports use_rslora, no magnitudes');
  }
  a.dispose();
}

// ---- prompt tuning: virtual tokens from a text ----
{
  const ev = [];
  const init = 'Once upon a time';
  const a = await model.finetune(text, { method: 'prompt', numVirtualTokens: 6, promptInitText: init, ctx: 64, batch: 2, steps: 6,
    lr: 0.01, schedule: 'constant', warmup: 0, onProgress: (p) => ev.push(p) });
  compareSteps('prompt', ev, wispFinetune('prompt', textFile, ['--method', 'prompt', '--num-virtual-tokens', '6',
    '--prompt-init-text', init, '--ctx', '64', '-b', '2', '--steps', '6', '--lr', '0.01', '--schedule', 'constant', '--warmup', '0']),
  [['loss', 'loss']]);
  check(ev.at(-1).loss < ev[0].loss, `prompt: the loss falls ${ev[0].loss.toFixed(4)} -> ${ev.at(-1).loss.toFixed(4)}`);
  checkEqual(a.info.numVirtualTokens, 6, 'prompt: the adapter has its virtual tokens');
  checkEqual(a.info.pairs, 0, 'prompt: no LoRA pairs');
  const peft = a.toPEFT();
  // (the CLI's file ends with a newline)
  checkEqual(peft.config + '\n', readFileSync(path.join(dir, 'prompt', 'peft', 'adapter_config.json'), 'utf8'),
    "prompt: adapter_config.json is the CLI's");
  const cliRows = readFileSync(path.join(dir, 'prompt', 'peft', 'adapter_model.safetensors'));
  checkEqual(peft.safetensors.length, cliRows.length, 'prompt: the safetensors file has the CLI\'s size');
  let e0 = await expectError(() => a.toGGUF(), 'unsupported', 'prompt tuning as GGUF LoRA is refused');
  check(/prompt tuning/.test(e0.message), `the refusal names prompt tuning: ${e0.message}`);
  e0 = await expectError(() => model.useAdapter(a, 0.5), 'arg', 'a prompt adapter with a scale');
  // generation with the virtual tokens first equals `wisp run` with the CLI's adapter
  const plainOut = await model.complete('ROMEO:', opts);
  model.useAdapter(a);
  const out = await model.complete('ROMEO:', opts);
  const again = await model.complete('ROMEO:', opts); // the cached virtual tokens and prompt are reused
  await expectError(() => model.embed('ROMEO:'), 'unsupported', 'embeddings with a prompt adapter attached');
  model.removeAdapter(a);
  checkEqual(again, out, 'prompt: the same completion from the cache');
  // its PEFT files load back (as do the CLI's) and generate the same
  for (const [what, files] of [['exported', peft], ["the CLI's", { config: readFileSync(path.join(dir, 'prompt', 'peft', 'adapter_config.json'), 'utf8'),
    safetensors: new Uint8Array(cliRows) }]]) {
    const back = await wisp.loadAdapter(model, files);
    checkEqual(back.info.numVirtualTokens, 6, `prompt: ${what} PEFT files load as prompt tuning`);
    model.useAdapter(back);
    const o = await model.complete('ROMEO:', opts);
    model.removeAdapter(back);
    checkEqual(o, out, `prompt: ${what} PEFT files generate as the trained adapter`);
    if (what === 'exported') {
      const p2 = back.toPEFT();
      check(p2.config === peft.config && Buffer.from(p2.safetensors).equals(Buffer.from(peft.safetensors)), 'prompt: PEFT round trip byte-identical');
    }
    back.dispose();
  }
  checkEqual(await model.complete('ROMEO:', opts), plainOut, 'prompt: detached, the base model again');
  const run = spawnSync(WISP, ['run', '-m', modelPath, '--lora', path.join(dir, 'prompt', 'peft'), '-p', 'ROMEO:', '-n', '24',
    '--temp', '0', '--no-echo', '-q', '-t', '1'], { encoding: 'utf8' });
  check(run.status === 0, `wisp run --lora (prompt) ran: ${run.stderr}`);
  checkEqual(out, run.stdout.replace(/\n$/, ''), "prompt: greedy generation equals `wisp run --lora` with the CLI's adapter");
  check(out !== plainOut, `prompt: the virtual tokens change generation: ${JSON.stringify(out)}`);
  console.log(`prompt: ${JSON.stringify(out)} (without: ${JSON.stringify(plainOut)})`);
  a.dispose();
}

// ---- through a worker: the same steps, trl's names crossing the message channel ----
const w = await wisp.loadModel(modelPath, { ctx: 128, threads: 1, worker: true });
const workerEvents = [];
const wa = await w.finetune(pairs, { method: 'dpo', ...dpoSettings, steps: 3, onProgress: (p) => workerEvents.push(p) });
checkEqual(wa.info.method, 'dpo', 'worker: the adapter records its method');
checkEqual(workerEvents.length, 3, 'worker: one progress event per step');
for (let i = 0; i < 3; i++)
  for (const k of ['loss', 'rewards/chosen', 'rewards/rejected', 'rewards/accuracies', 'rewards/margins'])
    checkEqual(workerEvents[i][k], events[i][k], `worker step ${i + 1}: ${k} as in the page's thread`);
await w.dispose();

// ---- plans: a method's trainable state and saved activations as `wisp plan --train --method` plans them ----
// (the inference parts differ: the package's training context is planned minimal, the CLI's is not)
for (const method of ['lora', 'rslora', 'dora', 'dpo', 'prompt', 'prefix']) {
  const mine = model.plan({ finetune: { method, ctx: 48, batch: 4 } }).parts;
  const p = spawnSync(WISP, ['plan', '-m', modelPath, '--train', '--method', method, '--ctx', '48', '--batch', '4', '--json', '-t', '1'],
    { encoding: 'utf8' });
  check(p.status === 0, `wisp plan --train --method ${method}: ${p.stderr}`);
  const theirs = JSON.parse(p.stdout).parts;
  for (const part of ['optimizer', 'activations']) checkEqual(mine[part], theirs[part], `plan of ${method}: ${part} as the CLI plans it`);
}

// ---- refusals, by name ----
let e = await expectError(() => model.finetune(text, { method: 'ia3', steps: 1 }), 'arg', 'an unknown method');
check(e.message.includes("'ia3'"), `the unknown method is named: ${e.message}`);
e = await expectError(() => model.finetune(text, { method: 'prefix', prefixProjection: true, steps: 1 }), 'unsupported',
  "prefix tuning through PEFT's MLP (not in the package yet)");
check(e.message.includes('prefixProjection'), `the option is named: ${e.message}`);
e = await expectError(() => model.finetune(text, { method: 'prompt', rank: 4, steps: 1 }), 'arg', 'rank with prompt tuning');
check(e.message.includes('rank'), `the LoRA option is named: ${e.message}`);
e = await expectError(() => model.finetune(text, { method: 'lora', numVirtualTokens: 4, steps: 1 }), 'arg', 'numVirtualTokens with LoRA');
check(e.message.includes('numVirtualTokens'), `the prompt option is named: ${e.message}`);
e = await expectError(() => model.finetune(text, { method: 'lora', beta: 0.2, steps: 1 }), 'arg', 'beta without DPO');
check(e.message.includes('beta'), `the misplaced option is named: ${e.message}`);
e = await expectError(() => model.finetune(pairs, { method: 'dpo', lossType: 'hinge', steps: 1 }), 'arg', 'an unknown DPO loss');
check(e.message.includes('hinge'), `the unknown loss is named: ${e.message}`);
e = await expectError(() => model.finetune(pairs, { method: 'dpo', numVirtualTokenz: 8, steps: 1 }), 'arg', 'an unknown option');
check(e.message.includes('numVirtualTokenz'), `the unknown option is named: ${e.message}`);
e = await expectError(() => model.finetune('some text', { method: 'dpo', steps: 1 }), 'arg', 'DPO on plain text');
e = await expectError(() => model.finetune([{ prompt: 'a', chosen: 'b', rejected: 'c', score: 1 }], { method: 'dpo', steps: 1, ctx: 16 }),
  ['format', 'arg', 'unsupported'], 'a pair with another key');
check(e.message.includes('score'), `the extra key is named: ${e.message}`);

model.dispose();
done();
