#!/usr/bin/env node
// TypeScript (tsc from npm) type-checks a consumer of the package's .d.ts in
// strict mode, including misuses that must be rejected (@ts-expect-error).
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { WEB_DEPS, WEB_OUT, WORK, check, done, skip } from './lib.mjs';

const tsc = path.join(WEB_DEPS, 'node_modules', '.bin', 'tsc');
if (!existsSync(tsc)) skip(`tsc is not installed in ${WEB_DEPS} (make web-deps)`);
const dir = path.join(WORK, 'types-check');
rmSync(dir, { recursive: true, force: true });
mkdirSync(path.join(dir, 'node_modules'), { recursive: true });
cpSync(path.join(path.dirname(fileURLToPath(import.meta.url)), 'types'), dir, { recursive: true });
writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'wisp-types-check', private: true, type: 'module' }));
symlinkSync(WEB_OUT, path.join(dir, 'node_modules', 'wisp'), 'dir');
const version = execFileSync(tsc, ['--version'], { encoding: 'utf8' }).trim();
let errors = '';
try {
  execFileSync(tsc, ['-p', dir], { encoding: 'utf8', stdio: 'pipe' });
} catch (e) {
  errors = `${e.stdout}${e.stderr}` || 'tsc failed';
}
check(errors === '', `tsc accepts check.ts and flags every misuse marked @ts-expect-error:\n${errors}`);
// A negative control: the types are really the package's, not `any`.
writeFileSync(path.join(dir, 'bad.ts'), "import { loadModel } from 'wisp';\nconst n: number = await loadModel(new Uint8Array(0));\nconsole.log(n);\n");
writeFileSync(path.join(dir, 'tsconfig.bad.json'), JSON.stringify({ extends: './tsconfig.json', files: ['bad.ts'] }));
let rejected = '';
try {
  execFileSync(tsc, ['-p', path.join(dir, 'tsconfig.bad.json')], { encoding: 'utf8', stdio: 'pipe' });
} catch (e) {
  rejected = e.stdout + e.stderr;
}
check(/Model/.test(rejected), `tsc rejects assigning a Model to a number (output: ${rejected || 'none, it passed'})`);
console.log(`${version}: check.ts passes, misuses are rejected`);
done();
