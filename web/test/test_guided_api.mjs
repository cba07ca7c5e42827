#!/usr/bin/env node
// Guided output in the npm package: complete(prompt, { jsonSchema }) returns
// parsed JSON that an independent validator (python3-jsonschema) accepts, for
// several shared schemas and seeds, and so does awaiting chat(messages,
// { jsonSchema }) (directly and in a worker; iterating it streams the same
// text); generate(..., { grammar }) yields text the
// grammar matches (checked by `wisp grammar match`); a seed repeats its text;
// bad grammars, unsupported schema keywords and both options at once are
// refused by name; a later unconstrained generation is free again.
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { WISP, WORK, check, checkEqual, done, expectError, fail, shared, wispPackage } from './lib.mjs';

const schemas = JSON.parse(readFileSync(shared('golden/constrained/schemas.json'), 'utf8'));
const wisp = await wispPackage();
const model = await wisp.loadModel(shared('models/stories260K.gguf'), { ctx: 1024 });

function validate(schema, value, what) {
  const out = execFileSync('/usr/bin/python3', ['-c', `
import json, sys, jsonschema
schema, value = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
try:
    jsonschema.validate(value, schema, format_checker=jsonschema.FormatChecker())
    print("valid")
except jsonschema.ValidationError as e:
    print("invalid: " + e.message)
`, join(WORK, 'guided_schema.json'), join(WORK, 'guided_value.json')], { input: '', encoding: 'utf8',
    env: { ...process.env } });
  writeFileSync(join(WORK, 'last_validation.txt'), out);
  checkEqual(out.trim(), 'valid', what);
}

let generated = 0;
for (const id of ['s01_sentiment_label', 's03_boolean_flags', 's24_payment_oneof', 's16_invoice_header']) {
  const s = schemas.find((x) => x.id === id);
  check(s, `shared schema ${id}`);
  for (const seed of [1, 2, 3]) {
    let value;
    try {
      value = await model.complete('Once upon a time', { jsonSchema: s.schema, seed, maxTokens: 900, temperature: 1 });
    } catch (err) {
      fail(`${id} seed ${seed}: ${err.message}`);
    }
    check(typeof value === 'object' && value !== null, `${id} seed ${seed}: an object (${JSON.stringify(value)})`);
    writeFileSync(join(WORK, 'guided_schema.json'), JSON.stringify(s.schema));
    writeFileSync(join(WORK, 'guided_value.json'), JSON.stringify(value));
    validate(s.schema, value, `${id} seed ${seed}: ${JSON.stringify(value)}`);
    generated++;
  }
}
check(generated === 12, 'generated 12 values');
// (schemas whose strings are bounded: a story model's free strings ramble past maxTokens)
// schema as JSON text, same seed -> same value
const s1 = schemas.find((x) => x.id === 's24_payment_oneof').schema;
const a = await model.complete('Once', { jsonSchema: JSON.stringify(s1), seed: 7, maxTokens: 900 });
const b = await model.complete('Once', { jsonSchema: s1, seed: 7, maxTokens: 900 });
checkEqual(JSON.stringify(a), JSON.stringify(b), 'same seed, same value (schema as text or object)');

// chat(messages, { jsonSchema }) awaited: the parsed answer, valid; iterated: the same answer's text
const msgs = [{ role: 'system', content: 'You answer in JSON.' }, { role: 'user', content: 'How was the payment made?' }];
writeFileSync(join(WORK, 'guided_schema.json'), JSON.stringify(s1));
for (const seed of [1, 2, 3]) {
  const opts = { jsonSchema: s1, template: 'chatml', seed, maxTokens: 900, temperature: 1 };
  const answer = await model.chat(msgs, opts);
  check(typeof answer === 'object' && answer !== null, `chat seed ${seed}: an object (${JSON.stringify(answer)})`);
  writeFileSync(join(WORK, 'guided_value.json'), JSON.stringify(answer));
  validate(s1, answer, `chat seed ${seed}: ${JSON.stringify(answer)}`);
  checkEqual(model.lastStats.stopReason, 'eos', `chat seed ${seed}: ends at the grammar's end`);
  let text = '';
  for await (const piece of model.chat(msgs, opts)) text += piece;
  checkEqual(JSON.stringify(JSON.parse(text)), JSON.stringify(answer), `chat seed ${seed}: streamed text is the same answer`);
}
check(model.chat(msgs, { template: 'chatml' }).then === undefined, 'without a schema chat() is only a stream');
await expectError(() => model.chat(msgs, { jsonSchema: s1, template: 'chatml', maxTokens: 3 }), 'format',
  'chat: an answer cut by maxTokens is not complete JSON');
const worker = await wisp.loadModel(shared('models/stories260K.gguf'), { ctx: 1024, worker: true });
const wOpts = { jsonSchema: JSON.stringify(s1), template: 'chatml', seed: 2, maxTokens: 900, temperature: 1 };
checkEqual(JSON.stringify(await worker.chat(msgs, wOpts)), JSON.stringify(await model.chat(msgs, wOpts)),
  'chat with a schema in a worker: the same parsed answer');
await worker.dispose();

// a GBNF grammar, streamed; checked by the CLI's recognizer
const grammar = 'root ::= "The " ("cat" | "dog") " is " [a-z]{2,8} "."\n';
writeFileSync(join(WORK, 'guided.gbnf'), grammar);
for (const seed of [1, 2, 3, 4]) {
  let text = '';
  for await (const piece of model.generate('Once upon a time', { grammar, seed, maxTokens: 100 })) text += piece;
  check(/^The (cat|dog) is [a-z]{2,8}\.$/.test(text), `grammar seed ${seed}: '${text}'`);
  execFileSync(WISP, ['grammar', 'match', join(WORK, 'guided.gbnf'), text]); // throws unless exit 0
  checkEqual(model.lastStats.stopReason, 'eos', `grammar seed ${seed}: ends at the grammar's end`);
}
// refusals, by name
await expectError(() => model.complete('x', { grammar: 'root ::= undefined_rule\n' }), ['format', 'arg'], 'undefined rule');
const e = await expectError(() => model.complete('x', { jsonSchema: { type: 'string', contentEncoding: 'base64' } }),
  ['unsupported', 'format', 'arg'], 'unsupported schema keyword');
check(/contentEncoding/.test(e.message), `the keyword is named: ${e.message}`);
await expectError(() => model.complete('x', { grammar, jsonSchema: s1 }), 'arg', 'grammar and jsonSchema together');
await expectError(() => model.complete('x', { jsonSchema: 42 }), 'arg', 'a number as schema');
// unconstrained again afterwards: the same as a fresh model's text for the same seed
const free1 = await model.complete('Once upon a time', { seed: 5, maxTokens: 30 });
check(typeof free1 === 'string' && !/^The (cat|dog) is/.test(free1), `unconstrained afterwards: '${free1}'`);
model.dispose();
done();
