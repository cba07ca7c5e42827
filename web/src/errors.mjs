// Errors the package throws: a code (the engine's status name, such as
// 'format', 'arena', 'capacity', or 'io' / 'arg' / 'disposed' from the JS
// side) and a message saying what was wrong.
export class WispError extends Error {
  constructor(code, message) {
    super(message);
    this.name = 'WispError';
    this.code = code;
  }
}

export function abortError(reason) {
  if (reason instanceof Error) return reason;
  const e = typeof DOMException === 'function' ? new DOMException('the operation was aborted', 'AbortError')
    : Object.assign(new Error('the operation was aborted'), { name: 'AbortError' });
  return e;
}
