#!/usr/bin/env node
// Fine-tuning on conversations in the npm package: model.finetune accepts
// {messages} records, rendered by the C template engine with a built-in format
// or a Jinja template (stories260K has none of its own) and scored on the
// assistant turns only. The data report (records, windows, scored tokens,
// cut, left unscored) equals what `wisp finetune` prints for the same file,
// packed and not; the training loss falls; a worker gives the same report;
// unusable templates are refused by name.
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { WISP, WORK, check, checkEqual, done, expectError, shared, wispPackage } from './lib.mjs';

const modelPath = shared('models/stories260K.gguf');
const wisp = await wispPackage();
const model = await wisp.loadModel(modelPath, { ctx: 128 });
const dir = path.join(WORK, 'finetune-chat');
mkdirSync(dir, { recursive: true });

const pets = [['cat', 'Tom'], ['dog', 'Rex'], ['bird', 'Tweety'], ['fish', 'Nemo']];
const records = pets.map(([pet, name]) => ({
  messages: [{ role: 'system', content: 'Answer with a name.' }, { role: 'user', content: `Name the ${pet}.` },
    { role: 'assistant', content: `The ${pet} is called ${name}.` }],
}));
const file = path.join(dir, 'chats.jsonl');
writeFileSync(file, records.map((r) => JSON.stringify(r)).join('\n') + '\n');

// What `wisp finetune` reports for the same data and settings (its stderr line on the data).
function wispFinetune(args) {
  const p = spawnSync(WISP, ['finetune', '-m', modelPath, '--data', file, '-o', path.join(dir, 'cli'), '--overwrite',
    '--steps', '1', '-b', '1', '-t', '1', ...args], { encoding: 'utf8' });
  if (p.status !== 0) throw new Error(`wisp finetune ${args.join(' ')} failed: ${p.stderr}`);
  const m = p.stderr.match(/(\d+) records kept, (?:packed into (\d+) windows of \d+ tokens|(\d+) cut to \d+ tokens), (\d+) left with nothing to score[^;]*; (\d+) scored targets/);
  if (!m) throw new Error(`no data report in: ${p.stderr}`);
  return { records: +m[1], windows: m[2] !== undefined ? +m[2] : +m[1], truncated: m[3] !== undefined ? +m[3] : 0,
    unscored: +m[4], scoredTokens: +m[5] };
}

// unpacked, one window per conversation; the loss falls over repeated steps on the same batch
const losses = [];
let data = null;
const a = await model.finetune(records, {
  template: 'chatml', ctx: 128, batch: 4, steps: 25, lr: 0.02, schedule: 'constant', warmup: 0,
  onProgress: (p) => { losses.push(p.loss); data = p.data; },
});
checkEqual(losses.length, 25, 'one progress event per step');
check(losses.every(Number.isFinite), 'finite losses');
check(losses.at(-1) < losses[0] * 0.8, `the assistant loss falls: ${losses[0].toFixed(4)} -> ${losses.at(-1).toFixed(4)}`);
const cli = wispFinetune(['--chat-template', 'chatml', '--ctx', '128']);
checkEqual(JSON.stringify(a.info.data), JSON.stringify(cli), 'data report equals wisp finetune\'s (unpacked)');
checkEqual(JSON.stringify(data), JSON.stringify(cli), 'progress events carry the same report');
check(cli.scoredTokens > 0 && cli.records === 4 && cli.truncated === 0, `CLI report ${JSON.stringify(cli)}`);
console.log(`unpacked: ${JSON.stringify(cli)}; loss ${losses[0].toFixed(4)} -> ${losses.at(-1).toFixed(4)}`);
a.dispose();

// packed into short windows: the same scored tokens, fewer tokens of padding, nothing cut
const p = await model.finetune(records, { template: 'chatml', ctx: 48, batch: 2, steps: 2, packing: true });
const cliPacked = wispFinetune(['--chat-template', 'chatml', '--ctx', '48', '--packing']);
checkEqual(JSON.stringify(p.info.data), JSON.stringify(cliPacked), 'data report equals wisp finetune\'s (packed)');
checkEqual(p.info.data.scoredTokens, cli.scoredTokens, 'packing scores the same assistant tokens');
check(p.info.data.windows > 1 && p.info.data.truncated === 0, `packed windows: ${JSON.stringify(p.info.data)}`);
console.log(`packed: ${JSON.stringify(cliPacked)}`);
p.dispose();

// too short a window unpacked: cut records are counted, exactly as the CLI counts them
const c = await model.finetune(records, { template: 'chatml', ctx: 80, batch: 1, steps: 1 }).catch((e) => e);
let cliCut = null;
try { cliCut = wispFinetune(['--chat-template', 'chatml', '--ctx', '80']); } catch (e) { cliCut = e; }
if (c instanceof Error) {
  check(cliCut instanceof Error, `both refuse a window with nothing to score: ${c.message}`);
} else {
  checkEqual(JSON.stringify(c.info.data), JSON.stringify(cliCut), 'cut records counted as the CLI counts them');
  check(c.info.data.truncated > 0, `records were cut: ${JSON.stringify(c.info.data)}`);
  c.dispose();
}

// a Jinja template given as text works like the built-in it spells out
const jinja = "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>' + '\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
const j = await model.finetune(records, { template: jinja, ctx: 128, batch: 1, steps: 1 });
checkEqual(JSON.stringify(j.info.data), JSON.stringify(cli), 'a Jinja template\'s text: the same report');
j.dispose();

// refused by name
await expectError(() => model.finetune(records, { template: 'nosuch', steps: 1, ctx: 32, batch: 1 }), 'not_found', 'unknown format');
await expectError(() => model.finetune(records, { template: '{% include "x" %}', steps: 1, ctx: 32, batch: 1 }), 'unsupported',
  'unsupported template construct');
await expectError(() => model.finetune(records, { steps: 1, ctx: 32, batch: 1 }), 'unsupported', 'no template in the model');
await expectError(() => model.finetune('plain text', { template: 'chatml', steps: 1, ctx: 32, batch: 1 }), 'arg', 'template with plain text');
await expectError(() => model.finetune(records, { template: 'chatml', packing: 'yes', steps: 1 }), 'arg', 'packing must be boolean');

// the same through a worker
const w = await wisp.loadModel(modelPath, { ctx: 128, worker: true });
const wa = await w.finetune(records, { template: 'chatml', ctx: 48, batch: 2, steps: 1, packing: true });
checkEqual(JSON.stringify(wa.info.data), JSON.stringify(cliPacked), 'worker: the same packed report');
await w.dispose();
model.dispose();
done();
