'use strict';
// The six error classes of the @coda/sandbox seed. Every failure of a run is one of
// these, with a stable `code`. Their `stack` never contains host frames: for a runtime
// error it is the sandbox's own stack, otherwise just "Name: message". Options and
// failure records are read by their own properties (lib/own.js): a `stack` or `line` on
// Object.prototype makes no error say what did not happen.
const { own, describeThrown } = require('./own');

class SandboxError extends Error {
  /**
   * @param {string} message
   * @param {{ code?: string, cause?: unknown }} [options]
   */
  constructor(message, options = {}) {
    const cause = own(options, 'cause');
    super(message, cause === undefined ? undefined : { cause });
    Object.defineProperty(this, 'name', { value: new.target.name, enumerable: false, configurable: true, writable: true });
    this.code = own(options, 'code') || 'ERR_ISOLET_INTERNAL';
    this.stack = `${this.name}: ${message}`;
  }
}

class SandboxTimeoutError extends SandboxError {
  /** @param {string} message @param {{ limit?: 'wall' | 'cpu' }} [options] */
  constructor(message, options = {}) {
    super(message, { code: 'ERR_ISOLET_TIMEOUT' });
    /** Which limit was hit: `wall` (wall-clock) or `cpu`. */
    this.limit = own(options, 'limit') || 'wall';
  }
}

class SandboxOOMError extends SandboxError {
  constructor(message) {
    super(message, { code: 'ERR_ISOLET_OOM' });
  }
}

class SandboxRuntimeError extends SandboxError {
  /**
   * @param {string} message
   * @param {{ thrown?: { name: string, message: string, stack?: string }, limit?: string }} [options]
   */
  constructor(message, options = {}) {
    super(message, { code: 'ERR_ISOLET_RUNTIME' });
    /** What the sandboxed code threw: its name, message and (sandbox) stack. */
    const thrown = own(options, 'thrown');
    this.thrown = thrown;
    // Set only when a bridge limit refused the result (`maxOutputBytes`, `maxOutputValues`).
    const limit = own(options, 'limit');
    if (limit) this.limit = limit;
    const stack = own(thrown, 'stack');
    if (stack) this.stack = `${this.name}: ${stack}`;
  }
}

class SandboxValidationError extends SandboxError {
  /** @param {string} message @param {{ line?: number, column?: number }} [options] */
  constructor(message, options = {}) {
    super(message, { code: 'ERR_ISOLET_VALIDATION' });
    const line = own(options, 'line');
    const column = own(options, 'column');
    if (line !== undefined) this.line = line;
    if (column !== undefined) this.column = column;
  }
}

class SandboxAbortedError extends SandboxError {
  constructor(message) {
    super(message, { code: 'ERR_ISOLET_ABORTED' });
  }
}

// The table of error kinds -> codes -> classes is isolet-core's (`ErrorKind`); both the
// native failures and the errors bindings throw carry a code from it.
const CLASSES = {
  SandboxError,
  SandboxTimeoutError,
  SandboxOOMError,
  SandboxRuntimeError,
  SandboxValidationError,
  SandboxAbortedError,
};
const KINDS = Object.freeze(Object.fromEntries(require('./native').errorKinds().map((k) => [k.kind, Object.freeze(k)])));
const BY_CODE = new Map(Object.values(KINDS).map((k) => [k.code, k]));

/** Builds the error of a native failure record `{ code, message, limit?, thrown*, line?, column? }`. */
function errorFromFailure(f) {
  // A native record omits the fields it has no value for: read its own ones only.
  const field = (key) => own(f, key) ?? undefined;
  const kind = BY_CODE.get(field('code')) ?? KINDS.Internal;
  const message = field('message');
  switch (kind.className) {
    case 'SandboxTimeoutError':
      return new SandboxTimeoutError(message, { limit: field('limit') });
    case 'SandboxRuntimeError': {
      const thrown =
        field('thrownName') === undefined
          ? undefined
          : withFields({ name: field('thrownName'), message: field('thrownMessage') ?? '', stack: field('stack') }, field('thrownFields'));
      const described = messageOfFields(thrown);
      if (described === undefined) return new SandboxRuntimeError(message, { limit: field('limit'), thrown });
      return new SandboxRuntimeError(`${thrown.name}: ${described}`, { limit: field('limit'), thrown: { ...thrown, message: described } });
    }
    case 'SandboxValidationError':
      return new SandboxValidationError(message, { line: field('line'), column: field('column') });
    case 'SandboxError':
      return new SandboxError(message, { code: kind.code });
    default:
      return new CLASSES[kind.className](message);
  }
}

/**
 * `thrown` with the own enumerable fields the thrown object had (`throw { code: 'E_AUTH',
 * status: 401 }`), as far as they could be copied out; its name, message and stack stay
 * the ones described. Fields that cannot be read back are left out.
 */
function withFields(thrown, bytes) {
  if (bytes === undefined) return thrown;
  let fields;
  try {
    fields = require('./bridge').deserialize(bytes);
  } catch {
    return thrown;
  }
  if (fields === null || typeof fields !== 'object' || Array.isArray(fields)) return thrown;
  return { ...fields, name: thrown.name, message: thrown.message, stack: thrown.stack };
}

/**
 * The message of an object thrown with neither a message nor a `toString` of its own
 * (`[object Object]`): its fields as JSON, `{"code":"E_AUTH","status":401}`.
 */
function messageOfFields(thrown) {
  if (thrown === undefined || thrown.message !== '[object Object]') return undefined;
  const text = thrownFieldsText({ thrown });
  return text === '' ? undefined : text.slice('thrown fields: '.length);
}

/**
 * The fields a thrown object kept (see `withFields`) as one line of JSON for a human
 * (`isolet run`, the MCP tool): `thrown fields: {"code":"E_AUTH","status":401}`, or ''.
 */
function thrownFieldsText(error) {
  const thrown = error && error.thrown;
  if (!thrown || typeof thrown !== 'object') return '';
  const fields = {};
  let any = false;
  for (const key of Object.keys(thrown)) {
    if (key === 'name' || key === 'message' || key === 'stack') continue;
    fields[key] = thrown[key];
    any = true;
  }
  if (!any) return '';
  let text;
  try {
    text = JSON.stringify(fields, (_, v) => (typeof v === 'bigint' ? `${v}n` : v));
  } catch {
    return '';
  }
  return `thrown fields: ${text.length > 2000 ? `${text.slice(0, 2000)}…` : text}`;
}

/**
 * The isolet error for something a binding threw: its kind comes from its `code`
 * (`ERR_ISOLET_*`); napi's own `InvalidArg` (a value of the wrong type) is a validation
 * error; anything else is internal.
 */
function errorFromThrown(err) {
  try {
    if (err instanceof SandboxError) return err;
    const message = err && err.message !== undefined ? String(err.message) : String(err);
    const code = err && err.code;
    const kind = BY_CODE.get(code) ?? (code === 'InvalidArg' ? KINDS.Validation : KINDS.Internal);
    return errorFromFailure({ code: kind.code, message });
  } catch {
    // A thrown value whose getters (or Proxy traps) throw too: described, never re-thrown.
    return errorFromFailure({ code: KINDS.Internal.code, message: describeThrown(err) });
  }
}

/** A native-shaped failure record of `kind` (a name in isolet-core's `ErrorKind`). */
function failureOf(kind, message, extra = {}) {
  const k = KINDS[kind];
  if (k === undefined) throw new TypeError(`unknown error kind ${kind}`);
  return { className: k.className, code: k.code, message, ...extra };
}

/** The error of `kind` (a name in isolet-core's `ErrorKind`). */
function errorOfKind(kind, message) {
  return errorFromFailure(failureOf(kind, message));
}

module.exports = {
  ...CLASSES,
  errorFromFailure,
  errorFromThrown,
  errorOfKind,
  failureOf,
  thrownFieldsText,
  ERROR_KINDS: KINDS,
};
