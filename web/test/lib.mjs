// Helpers for the web tests (make test-web runs each web/test/test_*.mjs
// through tests/run_each.sh). A test exits 0 when it passes (having checked
// something), 77 when it cannot run here (printing "SKIP: why"; run_each.sh
// fails such a skip unless it is a fact of the platform), anything else when
// it fails. Environment: WEB_OUT (the built package), WEB_DEPS (npm tools),
// WISP (native CLI), WISP_SHARED (reference data), WORK (scratch).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { CHROMIUM, launchChromium as launchIn } from './chromium.mjs';

function env(name) {
  const v = process.env[name];
  if (!v) {
    console.log(`FAIL: ${name} is not set (run through make test-web)`);
    process.exit(1);
  }
  return v;
}

export const WEB_OUT = env('WEB_OUT');
export const WEB_DEPS = env('WEB_DEPS');
export const WISP = env('WISP');
export const SHARED = env('WISP_SHARED');
export const WORK = env('WORK');
mkdirSync(WORK, { recursive: true });

let checks = 0;

export function fail(msg) {
  console.log(`FAIL: ${msg}`);
  process.exit(1);
}

export function check(cond, msg) {
  if (!cond) fail(msg);
  checks++;
}

export function checkEqual(actual, expected, what) {
  if (actual !== expected) fail(`${what}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`);
  checks++;
}

// Expect `fn` to reject/throw a WispError with this code (or one of these).
export async function expectError(fn, code, what) {
  const codes = Array.isArray(code) ? code : [code];
  try {
    await fn();
  } catch (e) {
    if (e?.name !== 'WispError' || !codes.includes(e.code)) fail(`${what}: expected WispError '${codes.join("' or '")}', got ${e?.name} '${e?.code}': ${e?.message}`);
    if (!e.message) fail(`${what}: the error has no message`);
    checks++;
    return e;
  }
  fail(`${what}: expected an error '${code}', but it succeeded`);
}

export function done() {
  if (checks === 0) fail('no checks ran'); // a test that asserts nothing fails
  console.log(`ok: ${checks} checks`);
  process.exit(0);
}

export function skip(why) {
  console.log(`SKIP: ${why}`);
  process.exit(77);
}

// A file under the shared reference folder, or skip loudly.
export function shared(rel) {
  const p = path.join(SHARED, rel);
  if (!existsSync(p)) skip(`missing ${p} (set WISP_SHARED to the shared reference folder)`);
  return p;
}

// An npm package installed by `make web-deps`.
export async function dep(name) {
  const require = createRequire(path.join(WEB_DEPS, 'node_modules', '.resolve'));
  let resolved;
  try {
    resolved = require.resolve(name);
  } catch {
    skip(`npm package ${name} is not installed in ${WEB_DEPS} (make web-deps)`);
  }
  return import(pathToFileURL(resolved).href);
}

// The browser tests call this first, so that they skip before any
// expensive setup. Returns playwright-core, for launchChromium.
export function requireChromium() {
  if (!existsSync(CHROMIUM)) skip(`no Chromium at ${CHROMIUM} (apt-get install chromium)`);
  return dep('playwright-core');
}

// chromium.mjs's launchChromium, with the profile under WORK.
export function launchChromium(playwright, options = {}) {
  return launchIn(playwright, { dir: WORK, ...options });
}

export function wispPackage() {
  return import(pathToFileURL(path.join(WEB_OUT, 'src', 'index.mjs')).href);
}

// The native CLI's greedy continuation (what `wisp run --temp 0` prints).
export function cliGreedy(model, prompt, n) {
  const out = execFileSync(WISP, ['run', '-m', model, '-p', prompt, '-n', String(n), '--temp', '0', '--no-echo', '-q'],
    { encoding: 'utf8' });
  return out.endsWith('\n') ? out.slice(0, -1) : out;
}
