#!/usr/bin/env node
// The records engine.mjs exchanges with the C ABI are read and written by
// field name at offsets C reports (wasm/abi_layout.c, from offsetof), never at
// numbers of its own: every field JS uses is in C's table with the type JS
// expects, every C field is one JS knows (so none is left stale), each
// record's fields cover it exactly once, a mismatch is refused by name, and
// values cross C in both directions intact. tests/unit/test_abi_layout.c
// checks the same table natively.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { WEB_OUT, check, checkEqual, done, expectError, shared, wispPackage } from './lib.mjs';

const engineUrl = pathToFileURL(path.join(WEB_OUT, 'src', 'engine.mjs')).href;
const { ABI_RECORDS, layoutMismatches, newEngine } = await import(engineUrl);
const e = await newEngine();
const layout = e.layout;
const BYTES = { i32: 4, u32: 4, f32: 4, f64: 8, char: 1 };

// Both sides name the same records and fields, with the same types.
checkEqual(Object.keys(layout).sort().join(','), Object.keys(ABI_RECORDS).sort().join(','), 'C and JS name the same records');
for (const [record, fields] of Object.entries(ABI_RECORDS)) {
  const r = layout[record];
  check(r && r.size > 0, `C reports record ${record} (${r?.size} bytes)`);
  if (!r) continue;
  for (const [name, want] of Object.entries(fields)) {
    const f = r.fields[name];
    const array = want.endsWith('[]');
    check(f !== undefined, `${record}.${name} (used by engine.mjs) is in C's table`);
    if (!f) continue;
    checkEqual(f.type, array ? want.slice(0, -2) : want, `${record}.${name} has the type JS reads it as`);
    check(array ? f.elements >= 1 : f.elements === 1, `${record}.${name}: ${f.elements} element(s), as JS expects (${want})`);
    checkEqual(f.size, f.elements * BYTES[f.type], `${record}.${name}: its size is its elements times the type's size`);
  }
  for (const name of Object.keys(r.fields)) check(name in fields, `C's field ${record}.${name} is one engine.mjs knows`);
  // every byte of the record belongs to one field: no overlap, no gap
  const owner = new Array(r.size).fill(null);
  for (const [name, f] of Object.entries(r.fields)) {
    check(f.offset >= 0 && f.offset + f.size <= r.size, `${record}.${name} lies inside the record`);
    check(f.offset % BYTES[f.type] === 0, `${record}.${name} at ${f.offset} is aligned for ${f.type}`);
    for (let b = f.offset; b < f.offset + f.size; b++) {
      if (owner[b] !== null) check(false, `${record}.${name} overlaps ${owner[b]} at byte ${b}`);
      owner[b] = name;
    }
  }
  checkEqual(owner.filter((o) => o === null).length, 0, `every byte of record ${record} belongs to a field`);
}
checkEqual(layoutMismatches(layout).length, 0, 'this build\'s table matches engine.mjs');
checkEqual(e.partNames.length, layout.plan.fields.part.elements, 'one name per plan part');
check(e.partNames.every((n) => /^[a-z_0-9]+$/.test(n)) && new Set(e.partNames).size === e.partNames.length, `plan parts are named: ${e.partNames}`);

// No hard-coded offsets are left in the package's sources.
for (const file of ['engine.mjs', 'model.mjs', 'plan.mjs', 'adapter.mjs']) {
  const src = readFileSync(path.join(WEB_OUT, 'src', file), 'utf8');
  check(!/scratch\s*\+\s*\d/.test(src) && !/\.scratch\b/.test(src), `${file} computes no addresses from a scratch block`);
}

// A table that disagrees is reported, naming the field (negative controls).
const copy = () => JSON.parse(JSON.stringify(layout));
let bad = copy();
delete bad.config.fields.threads;
check(layoutMismatches(bad).some((m) => m.includes('config.threads') && m.includes('missing')), 'a missing field is named');
bad = copy();
bad.train.fields.seed_hi.type = 'i32';
check(layoutMismatches(bad).some((m) => m.includes('train.seed_hi') && m.includes('u32')), `another type is named: ${layoutMismatches(bad)}`);
bad = copy();
bad.plan.fields.ctx_train.offset = bad.plan.size;
check(layoutMismatches(bad).some((m) => m.includes('plan.ctx_train')), 'a field outside its record is named');
bad = copy();
delete bad.train_step;
check(layoutMismatches(bad).some((m) => m.includes('train_step')), 'a missing record is named');

// Writing is by the whole record: an unknown or forgotten field is refused.
await expectError(() => e.write('config', { n_ctx: 1 }), 'internal', 'a config record with fields missing');
const full = { n_ctx: 1, n_batch: 2, kv_f32: 0, max_text_bytes: 3, max_adapters: 4, max_lora_rank: 5, threads: 1 };
await expectError(() => e.write('config', { ...full, nCtx: 1 }), 'internal', 'a config record with an unknown field');
// ...and what is written is read back from the same offsets.
e.write('train', { seq_len: 7, micro_batch: 3, rank: 2, steps: 9, seed_lo: 0xfffffffe, seed_hi: 0x80000001, schedule: 1,
  warmup: 4, jsonl: 1, blank_line_docs: 0, threads: 2, alpha: 0.5, lr: 0.25, clip: 1.5, packing: 1, method: 3, dpo_beta: 0.125,
  label_smoothing: 0.375, dpo_loss: 1, num_virtual_tokens: 11 });
const back = e.read('train');
checkEqual(`${back.seed_lo},${back.seed_hi},${back.seq_len},${back.clip},${back.warmup},${back.packing},${back.method},${back.dpo_beta},${back.label_smoothing},${back.dpo_loss},${back.num_virtual_tokens}`,
  `${0xfffffffe},${0x80000001},7,1.5,4,1,3,0.125,0.375,1,11`,
  'a train record reads back field by field (uint32 seeds stay unsigned)');
e.close();

// Through C and back: a configuration with a distinct value in every field
// comes back in the plan record's fields of the same names.
const wisp = await wispPackage();
const cfg = { ctx: 96, batch: 24, kvType: 'f32', maxTextBytes: 1500, maxAdapters: 3, maxLoraRank: 12 };
const p = await wisp.plan(shared('models/stories260K.gguf'), cfg);
for (const [k, v] of Object.entries(cfg)) checkEqual(p.config[k], v, `config.${k} crosses C and comes back in the plan`);
check(Object.values(p.model).every((v) => Number.isInteger(v) && v > 0), `the model's figures are read: ${JSON.stringify(p.model)}`);
checkEqual(Object.values(p.parts).reduce((a, b) => a + b, 0) <= p.total, true, 'the parts fit in the total');
done();
