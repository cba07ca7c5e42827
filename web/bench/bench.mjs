// make bench-web: wisp against @wllama/wllama (llama.cpp compiled to wasm) in
// the same Debian Chromium, with 1 and 2 threads (BENCH_THREADS=1,2: the page
// is cross-origin isolated, so both engines can run their threaded builds),
// next to the native CLI's decode on the same model and threads, on the same
// GGUF files:
// SmolLM2-135M-shaped Q8_0 and Q4_0 (random weights from `wisp make-model`,
// with SmolLM2's real vocabulary), TinyLlama-1.1B-shaped Q4_0 and Q4_K_M (the
// K-quant mix most downloads use) and stories260K; BENCH_MODELS=tinyllama,q8_0
// keeps the rows whose name contains one of the words. Reports decode and prefill
// tokens/s, time to first token, peak memory (the renderer process's peak
// RSS, and wisp's wasm memory), load time, .wasm sizes, and LoRA fine-tuning
// tokens/s in the browser next to the native CLI's for the same settings.
// Each engine x model runs in a fresh browser. Results: $BENCH_OUT/results.{json,md}.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { gzipSync } from 'node:zlib';
import { CHROMIUM, launchChromium } from '../test/chromium.mjs';

const env = (k) => process.env[k] || (() => { throw new Error(`${k} is not set (run: make bench-web)`); })();
const WEB_OUT = env('WEB_OUT');
const WEB_DEPS = env('WEB_DEPS');
const WISP = env('WISP');
const SHARED = env('WISP_SHARED');
const OUT = env('BENCH_OUT');
const WLLAMA_VERSION = '3.8.1';
const here = path.dirname(fileURLToPath(import.meta.url));
mkdirSync(path.join(OUT, 'models'), { recursive: true });

function log(msg) { console.log(msg); }

// ---- peers and inputs ----

const wllamaDir = path.join(OUT, 'node_modules', '@wllama', 'wllama');
if (!existsSync(path.join(wllamaDir, 'package.json'))) {
  log(`installing @wllama/wllama@${WLLAMA_VERSION} into ${OUT}`);
  execFileSync('npm', ['install', '--no-audit', '--no-fund', '--no-save', '--prefix', OUT, `@wllama/wllama@${WLLAMA_VERSION}`],
    { stdio: 'inherit', env: { ...process.env, npm_config_loglevel: 'error' } });
}
const wllamaVersion = JSON.parse(readFileSync(path.join(wllamaDir, 'package.json'), 'utf8')).version;

const stories = path.join(SHARED, 'models', 'stories260K.gguf');
const vocab = path.join(SHARED, 'models', 'tokenizers', 'llamacpp-vocab', 'ggml-vocab-smollm2.gguf');
const corpus = path.join(SHARED, 'data', 'tinyshakespeare.txt');
for (const f of [stories, vocab, corpus]) if (!existsSync(f)) { log(`SKIP: missing ${f}`); process.exit(0); }
// Random-weight models from `wisp make-model` with a real vocabulary, made
// (once) only for the rows BENCH_MODELS keeps.
const llamaVocab = path.join(SHARED, 'models', 'tokenizers', 'llamacpp-vocab', 'ggml-vocab-llama-spm.gguf');
const made = (label, like, type, vocabFile, finetune = false) => {
  const file = path.join(OUT, 'models', `${like}-${type}.gguf`);
  return { name: `${label}-shaped ${type.toUpperCase()}`, url: `/models/${path.basename(file)}`, file, make: { like, type, vocabFile }, finetune };
};
let models = [
  made('SmolLM2-135M', 'smollm2-135m', 'q8_0', vocab, true),
  made('SmolLM2-135M', 'smollm2-135m', 'q4_0', vocab),
  // A 1B-parameter shape next to SmolLM2, with Llama's vocabulary.
  made('TinyLlama-1.1B', 'tinyllama-1.1b', 'q4_0', llamaVocab),
  made('TinyLlama-1.1B', 'tinyllama-1.1b', 'q4_k_m', llamaVocab),
  { name: 'stories260K (F32)', url: '/shared-models/stories260K.gguf', file: stories, finetune: true },
];
const only = (process.env.BENCH_MODELS || '').toLowerCase().split(',').filter(Boolean);
if (only.length) {
  const kept = models.filter((m) => only.some((w) => m.name.toLowerCase().includes(w)));
  if (!kept.length) throw new Error(`BENCH_MODELS=${process.env.BENCH_MODELS} matches none of: ${models.map((m) => m.name).join(', ')}`);
  models = kept;
}
for (const m of models) {
  if (!m.make || existsSync(m.file)) continue;
  log(`making ${path.basename(m.file)} with wisp make-model`);
  execFileSync(WISP, ['make-model', '--like', m.make.like, '--type', m.make.type, '--vocab-from', m.make.vocabFile, '-o', m.file],
    { stdio: 'ignore' });
}

// ---- the browser ----

const require = createRequire(path.join(WEB_DEPS, 'node_modules', '.resolve'));
const pw = await import(pathToFileURL(require.resolve('playwright-core')).href);
const { serve } = await import(pathToFileURL(path.join(WEB_OUT, 'demo', 'serve.mjs')).href);
const server = await serve({
  root: WEB_OUT, port: 0,
  mounts: { '/models/': path.join(OUT, 'models'), '/shared-models/': path.dirname(stories), '/data/': path.dirname(corpus),
    '/wllama/': path.join(wllamaDir, 'esm'), '/bench/': here },
});
const base = `http://127.0.0.1:${server.address().port}`;

// Peak resident memory (VmHWM) of the renderer processes under a browser.
function rendererPeak(browserPid) {
  const kids = new Map();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (!kids.has(ppid)) kids.set(ppid, []);
      kids.get(ppid).push(Number(d));
    } catch { /* gone */ }
  }
  let peak = 0;
  const walk = (pid) => {
    for (const k of kids.get(pid) ?? []) {
      try {
        const cmd = readFileSync(`/proc/${k}/cmdline`, 'utf8');
        const hwm = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${k}/status`, 'utf8'));
        if (cmd.includes('--type=renderer') && hwm) peak = Math.max(peak, Number(hwm[1]) * 1024);
      } catch { /* gone */ }
      walk(k);
    }
  };
  walk(browserPid);
  return peak;
}

function browserPidOf(profile) {
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const cmd = readFileSync(`/proc/${d}/cmdline`, 'utf8');
      if (cmd.includes(profile) && !cmd.includes('--type=')) return Number(d);
    } catch { /* gone */ }
  }
  return 0;
}

async function measure(query, timeoutMs = 600000) {
  const browser = await launchChromium(pw, { dir: OUT });
  try {
    const { page } = browser;
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${base}/bench/page.html?${new URLSearchParams(query)}`);
    await page.waitForFunction(() => window.__bench !== undefined, null, { timeout: timeoutMs });
    const r = await page.evaluate(() => window.__bench);
    if (!r.ok) throw new Error(`${query.engine} on ${query.model}: ${r.error} ${errors.join(' | ')}`);
    r.result.peakRss = rendererPeak(browserPidOf(browser.profile));
    return r.result;
  } finally {
    await browser.close();
  }
}

// ---- native fine-tuning, for the same settings ----

function nativeFinetune(model, opts, steps, threads) {
  const data = path.join(OUT, 'finetune-data.txt');
  writeFileSync(data, readFileSync(corpus, 'utf8').slice(0, 200000));
  const args = ['finetune', '-m', model, '--data', data, '-o', path.join(OUT, 'native-finetune'), '--overwrite',
    '--rank', String(opts.rank), '--ctx', String(opts.ctx), '--batch', String(opts.batch), '--steps', String(steps),
    '--lr', String(opts.lr), '-t', String(threads)];
  const r = spawnSync(WISP, args, { encoding: 'utf8' });
  const m = /trained \d+ steps \(\d+ tokens\) in [\d.]+ s: ([\d.]+) tok\/s/.exec(r.stderr || '');
  if (r.status !== 0 || !m) return { note: `wisp finetune failed (exit ${r.status}): ${(r.stderr || '').trim().split('\n').at(-1)}` };
  return { tokensPerSecond: Number(m[1]), command: `wisp ${args.join(' ')}` };
}

// ---- run ----

const ROUNDS = Number(process.env.BENCH_ROUNDS || 2);
const THREADS = (process.env.BENCH_THREADS || '1,2').split(',').map(Number).filter((n) => Number.isInteger(n) && n >= 1);

// wllama's wasm files as the installed version lays them out: one build, or
// separate single- and multi-thread builds (which it picks itself).
function wllamaPaths() {
  const esm = path.join(wllamaDir, 'esm');
  const rel = (f) => `/wllama/${f}`;
  const paths = {};
  for (const f of ['wasm/wllama.wasm', 'single-thread/wllama.wasm', 'multi-thread/wllama.wasm', 'multi-thread/wllama.worker.mjs'])
    if (existsSync(path.join(esm, f))) paths[f.startsWith('wasm/') ? 'default' : f] = rel(f);
  return paths;
}
const wllamaConfig = JSON.stringify(wllamaPaths());

// The native CLI's decode and prefill on the same file and threads (wisp bench).
function nativeSpeed(file, threads, promptTokens) {
  const r = spawnSync(WISP, ['bench', '-m', file, '-t', String(threads), '-p', String(promptTokens), '-n', String(nGen),
    '-c', '512', '--mem-test', '0', '--json'], { encoding: 'utf8' });
  try {
    const j = JSON.parse(r.stdout);
    return { decodeTps: j.decode_tok_s, prefillTps: j.prefill_tok_s, kernels: j.kernels, threads: j.threads };
  } catch {
    return { error: `wisp bench failed (exit ${r.status}): ${(r.stderr || '').trim().split('\n').at(-1)}` };
  }
}

// The better figures of two measurements of one engine (a failed one loses).
function bestOf(a, b) {
  if (!a || a.error) return b;
  if (!b || b.error) return a;
  return {
    ...b, prefillTps: Math.max(a.prefillTps, b.prefillTps), decodeTps: Math.max(a.decodeTps, b.decodeTps),
    ttftMs: Math.min(a.ttftMs, b.ttftMs), loadMs: Math.min(a.loadMs, b.loadMs), peakRss: Math.max(a.peakRss, b.peakRss),
  };
}

// Candidate prompts, about 120 tokens each. wllama crashes when a model
// generates text that is not valid UTF-8 (random weights often do), so the
// first prompt wllama survives is used for both engines.
const prompts = [
  'The quick brown fox jumps over the lazy dog. '.repeat(12),
  'Once upon a time there was a little robot who loved to read books. '.repeat(8),
  'In a quiet village by the sea, the fishermen mended their nets and told old stories. '.repeat(6),
  'Water boils at one hundred degrees at sea level, and freezes at zero. '.repeat(8),
];
const nGen = 64;
const ftOpts = { rank: 8, ctx: 64, batch: 4, lr: 0.001 };
const results = [];
if (spawnSync(WISP, ['finetune', '--help']).status !== 0) log('note: this wisp has no finetune command; native figures will be missing');
for (const m of models) {
  const small = m.file === stories;
  let prompt = null;
  for (const threads of THREADS) {
    const row = { model: m.name, threads, fileBytes: statSync(m.file).size };
    const wq = (p) => ({ engine: 'wllama', model: m.url, n: String(nGen), ctx: '512', prompt: p, threads: String(threads), wllama: wllamaConfig });
    for (const p of prompt ? [prompt] : prompts) {
      log(`wllama on ${m.name}, ${threads} thread(s)…`);
      try {
        row.wllama = await measure(wq(p));
        prompt = p;
        break;
      } catch (e) {
        row.wllama = { error: e.message };
        log(`  failed: ${e.message}${p !== prompts.at(-1) ? ' (trying another prompt)' : ''}`);
      }
    }
    row.prompt = prompt;
    const query = { engine: 'wisp', model: m.url, n: String(nGen), ctx: '512', prompt: prompt ?? prompts[0], threads: String(threads) };
    // Rounds alternate the engines, each in a fresh browser, and every figure
    // keeps its best round: the machine may be shared, and load that comes and
    // goes should not decide the comparison.
    for (let round = 1; round <= ROUNDS; round++) {
      if (round > 1 && prompt) {
        log(`wllama on ${m.name}, ${threads} thread(s) (round ${round})…`);
        row.wllama = bestOf(row.wllama, await measure(wq(prompt)).catch((e) => ({ error: e.message })));
      }
      log(`wisp on ${m.name}, ${threads} thread(s)${round > 1 ? ` (round ${round})` : ''}…`);
      row.wisp = bestOf(row.wisp, await measure(query).catch((e) => ({ error: e.message })));
    }
    log(`native wisp on ${m.name}, ${threads} thread(s)…`);
    row.nativeSpeed = nativeSpeed(m.file, threads, row.wisp?.promptTokens ?? 120);
    // Fine-tuning (SmolLM2 Q8_0 and stories260K) in a browser of its own, so its
    // memory is not counted as inference's.
    if (m.finetune) {
      log(`wisp fine-tuning on ${m.name}, ${threads} thread(s)…`);
      const r = await measure({ ...query, n: '4', finetune: small ? '8' : '3', ftopts: JSON.stringify(ftOpts) })
        .catch((e) => ({ error: e.message }));
      row.finetune = r.error ? r : { ...r.finetune, peakRss: r.peakRss };
    }
    if (row.finetune && !row.finetune.error) row.native = nativeFinetune(m.file, ftOpts, small ? 8 : 3, threads);
    results.push(row);
  }
}
server.close();

// ---- report ----

const size = (f) => statSync(f).size;
const wispWasm = path.join(WEB_OUT, 'dist', 'wisp-engine.wasm');
const wllamaWasm = path.join(wllamaDir, 'esm', 'wasm', 'wllama.wasm');
const wispMtWasm = path.join(WEB_OUT, 'dist', 'wisp-engine-mt.wasm');
const sizes = {
  wisp: { wasm: size(wispWasm), gzip: gzipSync(readFileSync(wispWasm)).length },
  wispThreaded: { wasm: size(wispMtWasm), gzip: gzipSync(readFileSync(wispMtWasm)).length },
  wllama: { wasm: size(wllamaWasm), gzip: gzipSync(readFileSync(wllamaWasm)).length },
};
const f1 = (x) => (typeof x === 'number' ? x.toFixed(1) : 'n/a');
const mb = (x) => (typeof x === 'number' ? `${(x / 1048576).toFixed(1)} MiB` : 'n/a');
const ratio = (a, b) => (typeof a === 'number' && typeof b === 'number' && b > 0 ? `${(a / b).toFixed(2)}x` : 'n/a');
const lines = [
  `# wisp vs @wllama/wllama ${wllamaVersion} — Chromium (${execFileSync(CHROMIUM, ['--version'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()}), ${THREADS.join(' and ')} thread(s), cross-origin isolated page`,
  '',
  `Prompts of about 120 tokens (${results.map((r) => `${r.model}: ${r.wisp?.promptTokens ?? '?'}`).join(', ')}), ${nGen} greedy tokens generated, context 512. ` +
    `Best of ${ROUNDS} rounds (fresh browser each) x 3 runs per engine; peak RSS is the highest round's; wasm memory is the instance's linear memory.`,
  '',
  '| model | threads | engine | decode tok/s | prefill tok/s | TTFT ms | load ms | peak RSS (renderer) | wasm memory |',
  '|---|---:|---|---:|---:|---:|---:|---:|---:|',
];
// The threads an engine really ran on (a build without threads runs one).
const ran = (e, x) => (e === 'wisp' ? `${x.threads ?? '?'}${x.whyNotThreaded ? ` (${x.whyNotThreaded})` : ''}`
  : `${x.threads ?? '?'}${x.multithread === false ? ' (single-thread build)' : ''}`);
for (const r of results) {
  for (const e of ['wisp', 'wllama']) {
    const x = r[e] ?? {};
    if (x.error) { lines.push(`| ${r.model} | ${r.threads} | ${e} | failed: ${x.error} | | | | | |`); continue; }
    lines.push(`| ${r.model} | ${ran(e, x)} | ${e}${x.kernels ? ` (${x.kernels})` : ''} | ${f1(x.decodeTps)} | ${f1(x.prefillTps)} | ${f1(x.ttftMs)} | ${f1(x.loadMs)} | ${mb(x.peakRss)} | ${e === 'wisp' ? mb(x.wasmMemory) : 'n/a'} |`);
  }
  const nat = r.nativeSpeed ?? {};
  lines.push(nat.error ? `| ${r.model} | ${r.threads} | native wisp | failed: ${nat.error} | | | | | |`
    : `| ${r.model} | ${nat.threads} | native wisp (${nat.kernels}) | ${f1(nat.decodeTps)} | ${f1(nat.prefillTps)} | | | | |`);
  lines.push(`| ${r.model} | ${r.threads} | **wisp / wllama** | **${ratio(r.wisp?.decodeTps, r.wllama?.decodeTps)}** | **${ratio(r.wisp?.prefillTps, r.wllama?.prefillTps)}** | ${ratio(r.wllama?.ttftMs, r.wisp?.ttftMs)} faster | | ${ratio(r.wisp?.peakRss, r.wllama?.peakRss)} | |`);
  lines.push(`| ${r.model} | ${r.threads} | **wasm / native wisp** | **${ratio(r.wisp?.decodeTps, nat.decodeTps)}** | ${ratio(r.wisp?.prefillTps, nat.prefillTps)} | | | | |`);
}
lines.push('', `Targets: decode >= 1.5x wllama, prefill >= 1.0x; wasm decode >= 0.60x native on the same model and threads.`, '',
  '| .wasm | bytes | gzip |', '|---|---:|---:|',
  `| wisp | ${sizes.wisp.wasm} | ${sizes.wisp.gzip} |`, `| wisp (threaded build) | ${sizes.wispThreaded.wasm} | ${sizes.wispThreaded.gzip} |`,
  `| wllama | ${sizes.wllama.wasm} | ${sizes.wllama.gzip} |`,
  `| wisp / wllama | ${(sizes.wisp.wasm / sizes.wllama.wasm).toFixed(3)} (target <= 0.100) | ${(sizes.wisp.gzip / sizes.wllama.gzip).toFixed(3)} |`,
  '', `LoRA fine-tuning (rank ${ftOpts.rank}, ctx ${ftOpts.ctx}, batch ${ftOpts.batch}, AdamW, cosine schedule; the same data, settings and threads): tokens/s over the whole run`,
  '', '| model | threads | browser (wisp wasm) | native (wisp CLI) | training arena | peak RSS (renderer) |', '|---|---:|---:|---:|---:|---:|');
for (const r of results) {
  if (!r.finetune) continue;
  if (r.finetune.error) { lines.push(`| ${r.model} | ${r.threads} | failed: ${r.finetune.error} | | | |`); continue; }
  lines.push(`| ${r.model} | ${r.threads} | ${f1(r.finetune.tokensPerSecond)} | ${r.native?.tokensPerSecond !== undefined ? f1(r.native.tokensPerSecond) : r.native?.note ?? 'n/a'} | ${mb(r.finetune.trainArena)} | ${mb(r.finetune.peakRss)} |`);
}
const md = lines.join('\n') + '\n';
writeFileSync(path.join(OUT, 'results.md'), md);
writeFileSync(path.join(OUT, 'results.json'), JSON.stringify({ wllamaVersion, sizes, results }, null, 2));
console.log(`\n${md}\n(results in ${path.join(OUT, 'results.md')} and results.json)`);
