// Run a WASI command module (the wisp CLI or a unit test built for
// wasm32-wasi) under node's built-in WASI, as if it were a native program:
// arguments, environment, stdin/stdout/stderr and the exit code pass
// through. WASI has no ambient file system access: the module sees only the
// preopened folders, which by default are the root (so absolute paths such
// as ../shared resolved by the caller work) — narrow them with --dir.
//
// usage: node --no-warnings --no-turbo-fast-api-calls wasm/run-wasi.mjs [--dir HOST_DIR]... MODULE.wasm [ARG]...
//
// --no-turbo-fast-api-calls is required (checked below). Node 20 (V8 11.3,
// measured on v20.20.2) lets wasm call node:wasi's C++ functions as V8 "fast
// API calls", which must not meet a GC. Once a module has grown its memory by
// some 32 MB, V8 counts that as external memory and starts incremental
// marking; its Mark-Compact lands mid-run (--trace-gc shows it), and a later
// WASI call or the return to JavaScript faults: SIGSEGV, exit 139 (gdb:
// Builtins_GetKeyedPropertyHandler), usually after the program's last line.
// A 20-line C program (malloc+memset 64 MB, then fopen/fread/fclose 10 times)
// crashes 5 runs in 5 (8 in 10 without --single-threaded); with 16 MB 0 in 5;
// with --no-incremental-marking 0 in 10; with this flag 0 in 10. So the
// fault is in node's fast-call path, not in the module. Upstream:
// nodejs/node#46777 (a fast WASI call can trigger a GC), #53087. Without fast
// calls every WASI call takes V8's ordinary callback path; a wasm trap or a
// genuine crash still fails the run (trap -> 134, signal -> its code).
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
const usage = 'usage: node --no-warnings --no-turbo-fast-api-calls run-wasi.mjs [--dir HOST_DIR]... MODULE.wasm [ARG]...\n';
if (argv.length < 1) {
  process.stderr.write(usage);
  process.exit(2);
}
// refuse rather than crash at random (see the top of this file)
if (!process.execArgv.includes('--no-turbo-fast-api-calls')) {
  process.stderr.write('run-wasi: node must run with --no-turbo-fast-api-calls (its fast WASI calls crash after memory growth)\n' + usage);
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
