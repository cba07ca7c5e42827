#!/usr/bin/env node
// The demo in Debian's Chromium, driven by playwright-core (no browser is
// ever downloaded): load stories260K from the local server, chat (greedy text
// equals the native CLI's), answer through the JSON schema box (the answer
// parses and fits the schema), fine-tune a LoRA for a few steps with the loss
// chart, switch the adapter on, compare, download it as GGUF and PEFT, and
// take a screenshot. wasm memory must not change while generating or between
// training steps. Then fine-tune on a conversations file (built-in ChatML
// template, packed): the panel's data report equals `wisp finetune`'s for the
// same file. Also the package's direct (main-thread) API in the page.
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { WEB_OUT, WISP, WORK, check, checkEqual, cliGreedy, done, fail, launchChromium, requireChromium, shared } from './lib.mjs';

const playwright = await requireChromium();
const modelPath = shared('models/stories260K.gguf');
const corpus = readFileSync(shared('data/tinyshakespeare.txt'), 'utf8').slice(0, 6000);
const { serve } = await import(pathToFileURL(path.join(WEB_OUT, 'demo', 'serve.mjs')).href);

const prompt = 'Once upon a time';
const nTokens = 40;
const expected = cliGreedy(modelPath, prompt, nTokens);
const server = await serve({ root: WEB_OUT, models: path.dirname(modelPath), port: 0 });
const base = `http://127.0.0.1:${server.address().port}`;
const pageErrors = [];
const browser = await launchChromium(playwright, { acceptDownloads: true, viewport: { width: 1100, height: 1500 } });
const stateIs = (s) => `document.body.dataset.state === ${JSON.stringify(s)}`;

try {
  const { page } = browser;
  page.on('pageerror', (e) => pageErrors.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error') pageErrors.push(m.text()); });
  await page.goto(`${base}/demo/`);
  await page.waitForFunction(stateIs('empty'));

  // The package's direct API in the page's main thread.
  const direct = await page.evaluate(async ([url, p, n]) => {
    const wisp = await import('/src/index.mjs');
    const plan = await wisp.plan(url, { ctx: 128 });
    const m = await wisp.loadModel(url, { ctx: 128 });
    const text = await m.complete(p, { temperature: 0, maxTokens: n });
    const r = { planTotal: plan.total, initTotal: m.memoryPlan.total, text, kernels: m.info.kernels };
    m.dispose();
    return r;
  }, [`/models/${path.basename(modelPath)}`, prompt, nTokens]);
  checkEqual(direct.text, expected, 'main-thread API in Chromium: greedy text equals the native CLI');
  checkEqual(direct.planTotal, direct.initTotal, 'plan from the header over HTTP equals the plan init used');
  console.log(`kernels in Chromium: ${direct.kernels}`);

  // Load through the URL field (plan, streamed download with progress).
  await page.fill('#opt-ctx', '256');
  await page.fill('#model-url', `/models/${path.basename(modelPath)}`);
  await page.click('#model-url-load');
  await page.waitForFunction(`${stateIs('ready')} || ${stateIs('error')}`, null, { timeout: 60000 });
  const status = await page.textContent('#model-status');
  check(/^Loaded /.test(status), `model status after loading: ${status}`);
  check((await page.$$eval('#plan-table tr', (rows) => rows.length)) > 5, 'the memory plan is shown');

  // Chat: greedy, streamed into the transcript.
  await page.fill('#gen-temp', '0');
  await page.fill('#gen-max', String(nTokens));
  await page.fill('#chat-input', prompt);
  await page.click('#chat-send');
  await page.waitForFunction(`${stateIs('ready')} && document.querySelector('#transcript .model')`, null, { timeout: 60000 });
  checkEqual(await page.textContent('#transcript .model'), expected, 'demo chat (worker) greedy text equals the native CLI');
  check(/tokens\/s/.test(await page.textContent('#gen-stats')), 'tokens/s are shown');

  // Chat with a template: bubbles, the rendered template shown, the same answer as `wisp run --chat`,
  // and a second turn that evaluates only its new tokens.
  const chatMsgs = [{ role: 'system', content: 'You tell stories.' }, { role: 'user', content: prompt }];
  const chatExpected = execFileSync(WISP, ['run', '-m', modelPath, '--chat', '--chat-template', 'chatml', '-n', String(nTokens),
    '--temp', '0', '-q', '--ctx', '256'], { input: JSON.stringify(chatMsgs), encoding: 'utf8' }).replace(/\n$/, '');
  await page.selectOption('#chat-format', 'chatml');
  await page.fill('#chat-system', 'You tell stories.');
  await page.fill('#chat-input', prompt);
  await page.click('#chat-send');
  await page.waitForFunction(`${stateIs('ready')} && document.querySelector('#transcript.bubbles .model')`, null, { timeout: 60000 });
  checkEqual(await page.textContent('#transcript .model'), chatExpected, 'demo chat with chatml equals wisp run --chat');
  check((await page.textContent('#template-text')).startsWith('<|im_start|>system\nYou tell stories.<|im_end|>'),
    'the rendered template is shown');
  await page.fill('#chat-input', 'And then?');
  await page.click('#chat-send');
  await page.waitForFunction(`${stateIs('ready')} && document.querySelectorAll('#transcript .model').length === 2`, null,
    { timeout: 60000 });
  const turn2 = await page.textContent('#gen-stats');
  const [, total, fresh] = turn2.match(/conversation (\d+) tokens \((\d+) new/) ?? [];
  check(total && Number(fresh) < Number(total) / 2, `turn 2 evaluates only its new tokens: ${turn2}`);
  await page.screenshot({ path: path.join(WORK, 'demo-chat.png'), fullPage: true });
  console.log(`screenshot: ${path.join(WORK, 'demo-chat.png')}`);
  // The JSON schema box: the answer (chat() through the worker, constrained) is JSON valid for the schema.
  const schema = { type: 'object', additionalProperties: false, required: ['mood', 'age', 'name'],
    properties: { mood: { enum: ['happy', 'sad'] }, age: { type: 'integer', minimum: 0, maximum: 120 },
      name: { type: 'string', maxLength: 12 } } };
  await page.click('#chat-clear'); // a new conversation: the last one fills the 256-token context
  await page.click('#schema-details summary');
  await page.fill('#json-schema', JSON.stringify(schema));
  await page.fill('#gen-max', '300');
  await page.fill('#chat-input', 'Who are you? Answer in JSON.');
  await page.click('#chat-send');
  await page.waitForFunction(`${stateIs('ready')} && document.querySelectorAll('#transcript .model').length === 1`, null,
    { timeout: 60000 });
  const jsonAnswer = await page.$$eval('#transcript .model', (spans) => spans[spans.length - 1].textContent);
  let value = null;
  const jsonStats = await page.textContent('#gen-stats');
  try { value = JSON.parse(jsonAnswer); } catch (e) { fail(`demo JSON schema answer does not parse: ${e.message}: '${jsonAnswer}' (${jsonStats})`); }
  check(value !== null && typeof value === 'object' && !Array.isArray(value) &&
    Object.keys(value).sort().join(',') === 'age,mood,name' && ['happy', 'sad'].includes(value.mood) &&
    Number.isInteger(value.age) && value.age >= 0 && value.age <= 120 &&
    typeof value.name === 'string' && [...value.name].length <= 12, `demo JSON schema answer validates: ${jsonAnswer}`);
  check(/stopped: eos/.test(jsonStats), `the constrained answer ends where the schema does: ${jsonStats}`);
  await page.fill('#json-schema', ''); // unconstrained for what follows
  await page.fill('#gen-max', String(nTokens));
  await page.selectOption('#chat-format', ''); // back to text continuation for what follows
  await page.fill('#chat-input', prompt);

  // Fine-tune a few steps; the loss chart and progress follow.
  const steps = 6;
  await page.fill('#train-text', corpus);
  await page.fill('#ft-steps', String(steps));
  await page.fill('#ft-ctx', '32');
  await page.fill('#ft-batch', '2');
  await page.fill('#ft-rank', '4');
  await page.fill('#ft-lr', '0.01');
  await page.click('#ft-start');
  await page.waitForFunction(`${stateIs('trained')} || (${stateIs('ready')} && document.querySelector('#ft-status.error'))`, null,
    { timeout: 180000 });
  const ftStatus = await page.textContent('#ft-status');
  check(/^Trained /.test(ftStatus), `fine-tuning finished: ${ftStatus}`);
  const demo = await page.evaluate(() => ({ losses: window.wispDemo.losses, memory: window.wispDemo.memory }));
  checkEqual(demo.losses.length, steps, 'one progress event per step');
  check(demo.losses.every((p, i) => p.step === i + 1 && Number.isFinite(p.loss) && p.tokensPerSecond > 0),
    'progress events carry step, a finite loss and tokens/s');
  const mem = (w) => demo.memory.filter((m) => m.where === w || (w === 'train' && m.where.startsWith('train step')));
  checkEqual(mem('generate')[0].bytes, mem('load')[0].bytes, 'wasm memory unchanged by generation');
  const trainMem = mem('train').map((m) => m.bytes);
  check(trainMem.length === steps && trainMem.every((b) => b === trainMem[0]), `wasm memory constant across training steps (${trainMem})`);
  check(await page.isChecked('#adapter-on'), 'the trained adapter is switched on');

  // Compare with and without the adapter.
  await page.click('#compare');
  await page.waitForFunction(`${stateIs('trained')} && /only the adapter differs/.test(document.querySelector('#adapter-status').textContent)`,
    null, { timeout: 60000 });
  const cmpBase = await page.textContent('#cmp-base');
  const cmpLora = await page.textContent('#cmp-lora');
  checkEqual(cmpBase, prompt + expected, 'comparison: the base model is unchanged');
  check(cmpLora !== cmpBase, 'comparison: the adapter changes the text');
  const memEnd = await page.evaluate(() => window.wispDemo.model.memoryBytes);
  checkEqual(memEnd, trainMem[0], 'wasm memory unchanged by generating with the trained adapter');

  // Downloads.
  const [gg] = await Promise.all([page.waitForEvent('download'), page.click('#dl-gguf')]);
  const ggPath = path.join(WORK, 'wisp-lora.gguf');
  await gg.saveAs(ggPath);
  const ggBytes = readFileSync(ggPath);
  checkEqual(ggBytes.subarray(0, 4).toString('latin1'), 'GGUF', 'downloaded adapter is a GGUF');
  const peft = [];
  page.on('download', (d) => peft.push(d));
  await page.click('#dl-peft');
  await page.waitForFunction(() => /Saved adapter_config/.test(document.querySelector('#adapter-status').textContent), null,
    { timeout: 20000 });
  while (peft.length < 2) await new Promise((r) => setTimeout(r, 50));
  const names = peft.map((d) => d.suggestedFilename()).sort();
  checkEqual(names.join(','), 'adapter_config.json,adapter_model.safetensors', 'PEFT download file names');
  const cfgPath = path.join(WORK, 'adapter_config.json');
  await peft.find((d) => d.suggestedFilename() === 'adapter_config.json').saveAs(cfgPath);
  const cfg = JSON.parse(readFileSync(cfgPath, 'utf8'));
  checkEqual(cfg.r, 4, 'PEFT config rank');
  checkEqual(cfg.peft_type, 'LORA', 'PEFT config type');

  // Switch the adapter off: the base text is back.
  await page.uncheck('#adapter-on');
  await page.click('#chat-clear');
  await page.click('#chat-send');
  await page.waitForFunction(`${stateIs('ready')} && document.querySelector('#transcript .model')`, null, { timeout: 60000 });
  checkEqual(await page.textContent('#transcript .model'), expected, 'adapter off: base text again');

  // Fine-tune on a conversations file: stories260K has no template, so ChatML by name; packed.
  const chatsPath = path.join(WORK, 'demo-chats.jsonl');
  const chats = [['cat', 'Tom'], ['dog', 'Rex'], ['owl', 'Hoot'], ['fox', 'Red'], ['cow', 'Daisy']].map(([pet, name]) => ({
    messages: [{ role: 'user', content: `Name the ${pet}.` }, { role: 'assistant', content: `The ${pet} is ${name}.` }] }));
  writeFileSync(chatsPath, chats.map((c) => JSON.stringify(c)).join('\n') + '\n');
  const cli = spawnSync(WISP, ['finetune', '-m', modelPath, '--data', chatsPath, '--chat-template', 'chatml', '--packing',
    '--ctx', '32', '--steps', '1', '-b', '1', '-t', '1', '-o', path.join(WORK, 'demo-chats-cli'), '--overwrite'], { encoding: 'utf8' });
  const m = cli.stderr.match(/(\d+) records kept, packed into (\d+) windows of \d+ tokens, (\d+) left with nothing to score[^;]*; (\d+) scored targets/);
  check(cli.status === 0 && m, `wisp finetune on the conversations: ${cli.stderr}`);
  const want = { records: +m[1], windows: +m[2], truncated: 0, unscored: +m[3], scoredTokens: +m[4] };
  await page.setInputFiles('#train-file', chatsPath);
  await page.waitForFunction(() => document.querySelector('#train-text').value.startsWith('{"messages"'));
  await page.selectOption('#ft-template', 'chatml');
  await page.check('#ft-packing');
  await page.fill('#ft-steps', '4');
  await page.click('#ft-start');
  await page.waitForFunction(`${stateIs('trained')} || (${stateIs('ready')} && document.querySelector('#ft-status.error'))`, null,
    { timeout: 180000 });
  const chatStatus = await page.textContent('#ft-status');
  check(/^Trained /.test(chatStatus), `conversation fine-tuning finished: ${chatStatus}`);
  const got = await page.evaluate(() => window.wispDemo.trainingData);
  checkEqual(JSON.stringify(got), JSON.stringify(want), 'the demo\'s data report equals wisp finetune\'s');
  check(chatStatus.includes(`Data: ${want.records} records in ${want.windows} windows (packed), ${want.scoredTokens} scored tokens, ` +
    '0 cut to the context'), `the panel shows the report: ${chatStatus}`);

  // DPO with the method selector: pairs whose chosen answer ends with a fixed sentence; the panel shows
  // trl's reward accuracy and margin, and the last step's margin exceeds the first's
  const pairsPath = path.join(WORK, 'demo-pairs.jsonl');
  const pairs = ['Tim', 'Lily', 'Ben', 'Sue'].map((who) => ({ prompt: `Once upon a time, ${who} saw a ball.`,
    chosen: ` ${who} played. They were very happy.`, rejected: ` ${who} played. It was dark.` }));
  writeFileSync(pairsPath, pairs.map((c) => JSON.stringify(c)).join('\n') + '\n');
  await page.setInputFiles('#train-file', pairsPath);
  await page.waitForFunction(() => document.querySelector('#train-text').value.startsWith('{"prompt"'));
  await page.selectOption('#ft-method', 'dpo');
  await page.fill('#ft-steps', '8');
  await page.fill('#ft-lr', '0.001');
  await page.click('#ft-start');
  await page.waitForFunction(`${stateIs('trained')} || (${stateIs('ready')} && document.querySelector('#ft-status.error'))`, null,
    { timeout: 180000 });
  const dpoStatus = await page.textContent('#ft-status');
  check(/^Trained .*\(DPO\)/.test(dpoStatus), `DPO fine-tuning finished: ${dpoStatus}`);
  const dpoSteps = await page.evaluate(() => window.wispDemo.losses);
  check(dpoSteps.length === 8 && dpoSteps.at(-1)['rewards/margins'] > dpoSteps[0]['rewards/margins'],
    `DPO in the demo: the margin grows ${dpoSteps[0]['rewards/margins']} -> ${dpoSteps.at(-1)['rewards/margins']}`);

  const shot = path.join(WORK, 'demo.png');
  await page.screenshot({ path: shot, fullPage: true });
  console.log(`screenshot: ${shot}`);
  check(pageErrors.length === 0, `no page errors (${pageErrors.join(' | ')})`);
} catch (e) {
  fail(`${e.message}${pageErrors.length ? `\npage errors: ${pageErrors.join(' | ')}` : ''}`);
} finally {
  await browser.close();
  server.close();
}
done();
