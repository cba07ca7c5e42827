// Run a WASI command module (the wisp CLI or a unit test built for
// wasm32-wasi) under node's built-in WASI, as if it were a native program:
// arguments, environment, stdin/stdout/stderr and the exit code pass
// through. WASI has no ambient file system access: the module sees only the
// preopened folders, which by default are the root (so absolute paths such
// as ../shared resolved by the caller work) — narrow them with --dir.
//
// usage: node --no-warnings --single-threaded wasm/run-wasi.mjs [--dir HOST_DIR]... MODULE.wasm [ARG]...
// (--single-threaded: node 20 crashes at exit, now and then, after a module
// has grown its memory by tens of MB; without V8's helper threads it does not)
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import process from 'node:process';
import { WASI } from 'node:wasi';

const argv = process.argv.slice(2);
const dirs = [];
while (argv[0] === '--dir' && argv.length >= 2) {
  dirs.push(resolve(argv[1]));
  argv.splice(0, 2);
}
if (argv.length < 1) {
  process.stderr.write('usage: node --no-warnings --single-threaded run-wasi.mjs [--dir HOST_DIR]... MODULE.wasm [ARG]...\n');
  process.exit(2);
}
const [file, ...args] = argv;
const preopens = {};
for (const d of dirs.length ? dirs : ['/']) preopens[d] = d;

const wasi = new WASI({
  version: 'preview1',
  args: [file.replace(/^.*\//, '').replace(/\.wasm$/, ''), ...args],
  env: process.env,
  preopens,
  returnOnExit: true,
});
let code;
try {
  const module = await WebAssembly.compile(await readFile(file));
  const instance = await WebAssembly.instantiate(module, wasi.getImportObject());
  code = wasi.start(instance);
} catch (e) {
  // a trap (out-of-bounds access, unreachable) is a crash: report it like a signal would be
  process.stderr.write(`run-wasi: ${file}: ${e && e.message ? e.message : e}\n`);
  code = 134;
}
process.exitCode = code;
