#!/usr/bin/env node
// `npm pack` the built package, install the tarball into a fresh project, and
// run a consumer script there: its greedy tokens must be the native CLI's,
// one fine-tuning step must run, the adapter must export, and wasm memory
// must not grow while generating.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { WEB_OUT, WORK, check, checkEqual, cliGreedy, done, fail, shared } from './lib.mjs';

const modelPath = shared('models/stories260K.gguf');
const dir = path.join(WORK, 'npm');
rmSync(dir, { recursive: true, force: true });
mkdirSync(dir, { recursive: true });
const npmEnv = { ...process.env, npm_config_loglevel: 'error', npm_config_fund: 'false', npm_config_audit: 'false',
  npm_config_update_notifier: 'false' };
const npm = (args, cwd) => execFileSync('npm', args, { cwd, env: npmEnv, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

const packed = JSON.parse(npm(['pack', '--json', '--pack-destination', dir, WEB_OUT], dir))[0];
const files = packed.files.map((f) => f.path);
for (const f of ['package.json', 'src/index.mjs', 'src/worker.mjs', 'types/index.d.ts', 'dist/wisp-engine.mjs', 'dist/wisp-engine.wasm',
  'dist/wisp-engine-mt.mjs', 'dist/wisp-engine-mt.wasm', 'dist/wisp-engine-mt.worker.js', 'dist/wisp-engine-64.wasm', 'dist/wisp-engine-64-mt.wasm',
  'src/engine64-worker.mjs', 'dist/package.json',
  'README.md'])
  check(files.includes(f), `the tarball holds ${f}`);
check(!files.some((f) => f.startsWith('demo/') || f.startsWith('test/')), 'the tarball leaves the demo and tests out');
checkEqual(packed.name, 'wisp', 'package name');
console.log(`tarball ${packed.filename}: ${packed.size} bytes packed, ${packed.unpackedSize} unpacked, ${files.length} files`);

const project = path.join(dir, 'consumer');
mkdirSync(project);
writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'wisp-consumer', private: true, type: 'module' }));
npm(['install', '--no-save', '--prefer-offline', path.join(dir, packed.filename)], project);
check(readdirSync(path.join(project, 'node_modules')).includes('wisp'), 'the tarball installed as node_modules/wisp');
cpSync(path.join(path.dirname(fileURLToPath(import.meta.url)), 'npm', 'consumer.mjs'), path.join(project, 'consumer.mjs'));

const prompt = 'Once upon a time';
const n = 40;
let out;
try {
  out = execFileSync('node', ['consumer.mjs', modelPath, prompt, String(n)], { cwd: project, encoding: 'utf8' });
} catch (e) {
  fail(`the consumer script failed:\n${e.stdout}${e.stderr}`);
}
const r = JSON.parse(out.trim().split('\n').at(-1));
const expected = cliGreedy(modelPath, prompt, n);
checkEqual(r.text, expected, 'installed package: greedy text equals `wisp run --temp 0`');
checkEqual(r.ids.length, n, 'one token id per generated token');
checkEqual(r.planTotal, r.initTotal, 'plan() from the header equals the plan init used');
checkEqual(r.afterGenerate, r.afterLoad, 'wasm memory does not grow while generating');
checkEqual(r.progress.length, 1, 'one fine-tuning step, one progress event');
check(Number.isFinite(r.progress[0].loss) && r.progress[0].loss > 0 && r.progress[0].tokensPerSecond > 0,
  `the step reports a loss and tokens/s (${JSON.stringify(r.progress[0])})`);
checkEqual(r.ggufMagic, 'GGUF', 'adapter.toGGUF() writes a GGUF');
checkEqual(r.peftConfig.r, 4, 'adapter.toPEFT() config rank');
check(r.safetensorsBytes > 0, 'adapter.toPEFT() safetensors');
checkEqual(r.adapterInfo.source, 'finetune', 'the adapter came from fine-tuning');
check(typeof r.withAdapter === 'string' && r.withAdapter.length > 0, 'generation with the re-loaded adapter');
const { availableParallelism } = await import('node:os');
const cores = Math.min(8, availableParallelism());
checkEqual(r.threads, cores, 'installed package: the default threads are the reported cores (at most 8)');
checkEqual(r.build, cores > 1 ? 'threaded' : 'single', 'installed package: the build that ran');
console.log(`kernels ${r.kernels}, ${r.threads} thread(s), ${r.build} build, wasm memory ${r.afterLoad} bytes`);
done();
