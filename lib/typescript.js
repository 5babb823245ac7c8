'use strict';
// TypeScript input. Types are erased by amaro (the stripper Node itself ships, used as a
// library: no ExperimentalWarning, the same on every Node line) in strip-only mode, which
// replaces each type annotation with spaces. Every line and column the sandbox later
// reports (syntax errors, stack frames) is therefore a position in the user's TypeScript.
const path = require('node:path');
const { SandboxValidationError, SandboxTimeoutError } = require('./errors');

const LANGUAGES = Object.freeze(['javascript', 'typescript']);

// Async-body code may `return` and `await` at top level, which a parser rejects outside a
// function; it is parsed inside this one-line wrapper, which is cut off again afterwards.
const BODY_PREFIX = 'async function isolet_body() {\n';
const BODY_SUFFIX = '\n}';

const HINT = {
  UnsupportedSyntax: ' (isolet only erases types; enums, namespaces and parameter properties need a code transform: use a const object, a module-level object and explicit fields instead)',
};

let amaro = null;

function loadAmaro() {
  if (amaro === null) amaro = require('amaro');
  return amaro;
}

// A failure that is not a syntax error (deep nesting overflowing the parser's stack, an
// out-of-bounds access) can leave amaro's WebAssembly instance broken for every later
// call. Drop it: the next call loads a fresh instance (about 0.1 s).
function discardAmaro() {
  amaro = null;
  const dir = require('node:path').dirname(require.resolve('amaro'));
  for (const key of Object.keys(require.cache)) {
    if (key.startsWith(dir)) delete require.cache[key];
  }
}

/** Checks a `language` option; returns the language, `javascript` when unset. */
function checkLanguage(value, where = 'language') {
  if (value === undefined) return 'javascript';
  if (!LANGUAGES.includes(value)) {
    throw new SandboxValidationError(`${where} must be 'javascript' or 'typescript', got ${describe(value)}`);
  }
  return value;
}

/**
 * Returns JavaScript for `code`: unchanged for JavaScript, types erased (positions kept)
 * for TypeScript. Bad TypeScript throws SandboxValidationError with 1-based line and column.
 * Runs on the calling thread: for input that may be large use `stripTypes`.
 *
 * @param {string} code
 * @param {{ language?: 'javascript' | 'typescript', asyncBody?: boolean }} [options]
 */
function toJavaScript(code, options = {}) {
  if (options.language !== 'typescript') return code;
  const wrap = options.asyncBody === true;
  let out;
  try {
    out = loadAmaro().transformSync(wrap ? BODY_PREFIX + code + BODY_SUFFIX : code, { mode: 'strip-only' }).code;
  } catch (err) {
    if (!err || typeof err.startLine !== 'number') discardAmaro();
    throw syntaxError(err, wrap ? 1 : 0);
  }
  return unwrap(out, wrap);
}

function unwrap(out, wrap) {
  return wrap ? out.slice(out.indexOf('\n') + 1, out.length - BODY_SUFFIX.length) : out;
}

/** Input up to this many UTF-16 units is stripped inline (well under a millisecond). */
const INLINE_STRIP_MAX = 8 * 1024;

/** The worker thread that strips larger input; created on first use, replaced if it dies. */
let stripper = null;

function getStripper() {
  if (stripper !== null) return stripper;
  const { Worker } = require('node:worker_threads');
  const worker = new Worker(path.join(__dirname, 'typescript-worker.js'), {
    // amaro's own heap; its WebAssembly memory is bounded by the input it is given.
    resourceLimits: { maxOldGenerationSizeMb: 256 },
    env: {},
    stdout: false,
    stderr: false,
  });
  const s = { worker, pending: new Map(), nextId: 1 };
  const fail = (error) => {
    if (stripper === s) stripper = null;
    for (const p of s.pending.values()) p.settle(error);
    s.pending.clear();
  };
  worker.on('message', (m) => {
    const p = s.pending.get(m.id);
    if (!p) return;
    s.pending.delete(m.id);
    if (s.pending.size === 0) worker.unref();
    p.settle(m.error ? syntaxError(m.error, p.lineOffset) : null, m.code);
  });
  worker.on('error', (err) => fail(new SandboxValidationError(`TypeScript could not be parsed (too deeply nested or too large?): ${err && err.message}`)));
  worker.on('exit', () => fail(new SandboxValidationError('TypeScript could not be parsed: the type stripper stopped')));
  worker.unref();
  stripper = s;
  return s;
}

/**
 * Like `toJavaScript`, but large TypeScript is stripped on a worker thread, so the host's
 * event loop keeps running (8 MB of TypeScript takes seconds). Past `timeoutMs` the worker
 * is ended and the promise rejects with SandboxTimeoutError.
 *
 * @param {string} code
 * @param {{ language?: 'javascript' | 'typescript', asyncBody?: boolean, timeoutMs?: number }} [options]
 * @returns {Promise<string>}
 */
function stripTypes(code, options = {}) {
  if (options.language !== 'typescript' || code.length <= INLINE_STRIP_MAX) {
    try {
      return Promise.resolve(toJavaScript(code, options));
    } catch (err) {
      return Promise.reject(err);
    }
  }
  const wrap = options.asyncBody === true;
  const s = getStripper();
  const id = s.nextId++;
  return new Promise((resolve, reject) => {
    let timer = null;
    const settle = (error, out) => {
      if (timer !== null) clearTimeout(timer);
      if (error) reject(error);
      else resolve(unwrap(out, wrap));
    };
    s.pending.set(id, { settle, lineOffset: wrap ? 1 : 0 });
    s.worker.ref();
    if (options.timeoutMs !== undefined) {
      timer = setTimeout(() => {
        s.pending.delete(id);
        settle(new SandboxTimeoutError(`Erasing TypeScript types exceeded the wall-clock limit of ${options.timeoutMs} ms`));
        // The worker is busy with this input; end it (later calls start a fresh one).
        if (stripper === s) stripper = null;
        for (const p of s.pending.values()) p.settle(new SandboxTimeoutError('The TypeScript stripper was restarted after another input overran its limit'));
        s.pending.clear();
        s.worker.terminate();
      }, options.timeoutMs);
    }
    s.worker.postMessage({ id, source: wrap ? BODY_PREFIX + code + BODY_SUFFIX : code });
  });
}

function syntaxError(err, lineOffset) {
  if (!err || typeof err.startLine !== 'number') {
    return new SandboxValidationError(`TypeScript could not be parsed (too deeply nested or too large?): ${err && err.message ? err.message : String(err)}`);
  }
  const line = err.startLine - lineOffset;
  const column = err.startColumn + 1; // amaro counts columns from 0, V8 from 1
  const kind = err.code === 'UnsupportedSyntax' ? 'UnsupportedSyntax' : 'SyntaxError';
  const message = `${kind}: ${err.message}${HINT[err.code] ?? ''} at line ${line}, column ${column}`;
  return new SandboxValidationError(message, { line, column });
}

function describe(v) {
  return typeof v === 'string' ? JSON.stringify(v) : v === null ? 'null' : typeof v;
}

module.exports = { LANGUAGES, checkLanguage, toJavaScript, stripTypes };
