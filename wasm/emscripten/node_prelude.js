// Put before the threaded build's ES module (--extern-pre-js): in Node its
// glue calls require() and reads __dirname to start worker threads, and ES
// modules have neither. Browsers skip this (no Node process).
const require = typeof process === 'object' && process.versions != null && process.versions.node != null
  ? (await import('node:module')).createRequire(import.meta.url) : undefined;
const __dirname = require ? require('node:path').dirname(require('node:url').fileURLToPath(import.meta.url)) : undefined;
