// Small helpers shared by the model, the trainer and the worker.
import { WispError } from './errors.mjs';

// Node.js, not a browser or a worker of one (engine.mjs re-exports it).
export const isNode = typeof process === 'object' && process.versions != null && process.versions.node != null &&
  typeof window === 'undefined' && typeof importScripts !== 'function';

export const now = () => (typeof performance === 'object' ? performance.now() : Date.now());

// One operation at a time on a model: calls queue up in order.
export class Lock {
  #tail = Promise.resolve();

  acquire() {
    let release;
    const held = new Promise((resolve) => { release = resolve; });
    const ready = this.#tail.then(() => release);
    this.#tail = this.#tail.then(() => held);
    return ready;
  }

  async run(fn) {
    const release = await this.acquire();
    try {
      return await fn();
    } finally {
      release();
    }
  }
}

// Give the event loop a turn (so a page can repaint and abort signals can
// fire) without the 4 ms clamp of nested setTimeout.
let channel;
const waiting = [];
export function yieldToEventLoop() {
  if (typeof setImmediate === 'function') return new Promise((resolve) => setImmediate(resolve));
  if (typeof MessageChannel === 'function') {
    if (!channel) {
      channel = new MessageChannel();
      channel.port1.onmessage = () => waiting.shift()?.();
    }
    return new Promise((resolve) => { waiting.push(resolve); channel.port2.postMessage(0); });
  }
  return new Promise((resolve) => setTimeout(resolve, 0));
}

// Calls yieldToEventLoop at most every `ms` of work.
export function makeYielder(ms = 10) {
  let last = now();
  return async () => {
    if (now() - last < ms) return;
    await yieldToEventLoop();
    last = now();
  };
}

// A 64-bit seed as two uint32 halves; undefined picks a random one.
export function seedHalves(seed) {
  if (seed === undefined || seed === null) {
    const r = new Uint32Array(2);
    globalThis.crypto.getRandomValues(r);
    return [r[0], r[1]];
  }
  if (typeof seed === 'bigint') {
    const s = BigInt.asUintN(64, seed);
    return [Number(s & 0xffffffffn), Number(s >> 32n)];
  }
  if (!Number.isSafeInteger(seed) || seed < 0) throw new WispError('arg', `seed must be a non-negative integer or a bigint (got ${seed})`);
  return [seed % 2 ** 32, Math.floor(seed / 2 ** 32)];
}

export function checkNumber(name, v, { min = -Infinity, max = Infinity, integer = false } = {}) {
  if (typeof v !== 'number' || Number.isNaN(v) || v < min || v > max || (integer && !Number.isInteger(v)))
    throw new WispError('arg', `${name} must be ${integer ? 'an integer' : 'a number'} in ${min}..${max} (got ${v})`);
  return v;
}

export function checkOptions(what, options, allowed) {
  if (options === undefined || options === null) return {};
  if (typeof options !== 'object') throw new WispError('arg', `${what}: options must be an object`);
  for (const k of Object.keys(options))
    if (!allowed.includes(k)) throw new WispError('arg', `${what}: unknown option '${k}' (known: ${allowed.join(', ')})`);
  return options;
}

// The symbols `using` and `await using` call (explicit resource management):
// the runtime's own; where it has none, the registered symbols Node 20 and
// TypeScript's down-level helpers use for them, so older runtimes can still
// call them by hand.
export const disposeSymbol = Symbol.dispose ?? Symbol.for('nodejs.dispose');
export const asyncDisposeSymbol = Symbol.asyncDispose ?? Symbol.for('nodejs.asyncDispose');
