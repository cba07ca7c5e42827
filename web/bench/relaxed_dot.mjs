// make bench-relaxed-dot: relaxed_dot.c's two decode loops (SIMD128's 16-bit
// dot against relaxed SIMD's 8-bit dot) timed in this Node (24 or later:
// relaxed SIMD without a flag) and in Chromium, on Q4_0-shaped rows that
// fit L1/L2 and rows that do not. Both loops must give the same floats.
// Usage: node relaxed_dot.mjs MODULE.wasm PLAYWRIGHT_CORE_DIR
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { CHROMIUM, launchChromium } from '../test/chromium.mjs';

const [wasmPath, playwrightDir] = process.argv.slice(2);
if (!wasmPath || !playwrightDir) {
  console.error('usage: node relaxed_dot.mjs MODULE.wasm PLAYWRIGHT_CORE_DIR');
  process.exit(2);
}
// rows x inputs: 64 KiB of nibbles (L1/L2), 2 MiB, and 8 MiB (past L2)
const SHAPES = [[64, 2048], [2048, 2048], [2048, 8192]];

// Runs where it is called: in Node, and serialized into the page. Each loop
// runs alternately for `seconds` per round, 3 rounds; the best round counts.
async function measure(bytes, shapes, seconds) {
  const { instance } = await WebAssembly.instantiate(new Uint8Array(bytes));
  const e = instance.exports, memory = e.memory;
  const results = [];
  for (const [rows, inputs] of shapes) {
    const blocks = inputs / 32;
    const nib = rows * blocks * 16, scales = rows * blocks * 4;
    const base = Math.ceil(memory.buffer.byteLength / 64) * 64;
    const need = base + nib + scales + inputs + blocks * 4 + rows * 4 * 2;
    if (need > memory.buffer.byteLength) memory.grow(Math.ceil((need - memory.buffer.byteLength) / 65536));
    const q = base, sc = q + nib, x = sc + scales, xs = x + inputs, outA = xs + blocks * 4, outB = outA + rows * 4;
    // fixed pseudo-random bytes; activations in [-127, 127] as Q8 writes them
    const u8 = new Uint8Array(memory.buffer);
    let s = 12345;
    const next = () => (s = (Math.imul(s, 1103515245) + 12345) >>> 0) >>> 16;
    for (let i = 0; i < nib; i++) u8[q + i] = next() & 255;
    const f = new Float32Array(memory.buffer, sc, rows * blocks);
    for (let i = 0; i < f.length; i++) f[i] = (next() % 1000) / 65536;
    const i8 = new Int8Array(memory.buffer, x, inputs);
    for (let i = 0; i < inputs; i++) i8[i] = (next() % 255) - 127;
    const fx = new Float32Array(memory.buffer, xs, blocks);
    for (let i = 0; i < blocks; i++) fx[i] = (next() % 1000) / 65536;
    if (!e.prepare(x, xs, blocks)) throw new Error(`prepare refused ${blocks} blocks`);
    const best = { dot_i16: 0, dot_relaxed: 0 };
    for (let round = 0; round < 3; round++) {
      for (const k of ['dot_i16', 'dot_relaxed']) {
        e[k](q, sc, rows, blocks, k === 'dot_i16' ? outA : outB);
        let reps = 0;
        const t0 = performance.now();
        let t = t0;
        while (t - t0 < seconds * 1000) {
          e[k](q, sc, rows, blocks, k === 'dot_i16' ? outA : outB);
          reps++;
          t = performance.now();
        }
        best[k] = Math.max(best[k], (rows * inputs * reps) / ((t - t0) / 1000) / 1e9);
      }
    }
    const a = new Uint32Array(memory.buffer, outA, rows), b = new Uint32Array(memory.buffer, outB, rows);
    const same = a.every((v, i) => v === b[i]);
    results.push({ rows, inputs, weightBytes: nib + scales, i16: best.dot_i16, relaxed: best.dot_relaxed, same });
  }
  return results;
}

function report(where, results) {
  console.log(`\n${where}`);
  console.log('| rows x inputs | weights + scales | SIMD128 i16 dot, Gweights/s | relaxed i8 dot, Gweights/s | relaxed / i16 | same floats |');
  console.log('|---|---|---|---|---|---|');
  for (const r of results) {
    console.log(`| ${r.rows} x ${r.inputs} | ${(r.weightBytes / 1048576).toFixed(2)} MiB | ${r.i16.toFixed(2)} | ${r.relaxed.toFixed(2)} | ${(r.relaxed / r.i16).toFixed(2)} | ${r.same ? 'yes' : 'NO'} |`);
  }
  return results.every((r) => r.same);
}

const bytes = [...readFileSync(wasmPath)];
let ok = report(`Node ${process.version} (V8 ${process.versions.v8})`, await measure(bytes, SHAPES, 1));

const playwright = await import(pathToFileURL(path.join(playwrightDir, 'index.mjs')).href);
const browser = await launchChromium(playwright, { dir: path.dirname(wasmPath) });
try {
  await browser.page.goto('about:blank');
  const results = await browser.page.evaluate(`(${measure})(${JSON.stringify(bytes)}, ${JSON.stringify(SHAPES)}, 1)`);
  ok = report(execFileSync(CHROMIUM, ['--version'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim(), results) && ok;
} finally {
  await browser.close();
}
if (!ok) {
  console.log('\nFAIL: the two loops gave different floats');
  process.exit(1);
}
