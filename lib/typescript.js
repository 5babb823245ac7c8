'use strict';
// TypeScript input. Types are erased by amaro (the stripper Node itself ships, used as a
// library: no ExperimentalWarning, the same on every Node line) in strip-only mode, which
// replaces each type annotation with spaces. Every line and column the sandbox later
// reports (syntax errors, stack frames) is therefore a position in the user's TypeScript.
const path = require('node:path');
const { SandboxValidationError, SandboxTimeoutError } = require('./errors');
const { own } = require('./own');
const { stripBody, BODY_LINE_OFFSET } = require('./typescript-body');

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

/**
 * Returns JavaScript for `code`: unchanged for JavaScript, types erased (positions kept)
 * for TypeScript. Bad TypeScript throws SandboxValidationError with 1-based line and column.
 * Runs on the calling thread: for input that may be large use `stripTypes`.
 *
 * @param {string} code
 * @param {{ language?: 'javascript' | 'typescript', asyncBody?: boolean }} [options]
 */
function toJavaScript(code, options = {}) {
  if (own(options, 'language') !== 'typescript') return code;
  const wrap = own(options, 'asyncBody') === true;
  const transform = (source) => loadAmaro().transformSync(source, { mode: 'strip-only' }).code;
  try {
    return wrap ? stripBody(transform, code) : transform(code);
  } catch (err) {
    if (!err || typeof err.startLine !== 'number') discardAmaro();
    throw syntaxError(err, wrap ? BODY_LINE_OFFSET : 0);
  }
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
  // Jobs by id, in the order posted: the worker answers them one at a time, in order.
  const s = { worker, pending: new Map(), nextId: 1 };
  worker.on('message', (m) => {
    const job = s.pending.get(m.id);
    if (!job) return;
    s.pending.delete(m.id);
    if (s.pending.size === 0) worker.unref();
    job.settle(m.error ? syntaxError(m.error, job.lineOffset) : null, m.code);
  });
  const died = (message) => {
    // The input in progress (the oldest) is the one that broke it; the others are
    // handed to a fresh worker.
    const first = s.pending.values().next().value;
    if (first) abandon(first, new SandboxValidationError(`TypeScript could not be parsed (too deeply nested or too large?): ${message}`));
  };
  worker.on('error', (err) => died(String(err && err.message)));
  worker.on('exit', () => died('the type stripper stopped'));
  worker.unref();
  stripper = s;
  return s;
}

function post(job) {
  const s = getStripper();
  job.stripper = s;
  job.id = s.nextId++;
  s.pending.set(job.id, job);
  s.worker.ref();
  s.worker.postMessage({ id: job.id, code: job.code, asyncBody: job.asyncBody });
}

/**
 * Ends `job` with `error`. If the worker is busy with it (or died on it), the worker is
 * ended and the inputs waiting there move to a fresh one: one input that overruns its
 * limit or breaks the stripper fails only its own run.
 */
function abandon(job, error) {
  const s = job.stripper;
  const inProgress = s.pending.values().next().value === job;
  s.pending.delete(job.id);
  job.settle(error);
  // Still queued: the worker's answer to it will find no job and be dropped.
  if (!inProgress) return;
  if (stripper === s) stripper = null;
  const rest = [...s.pending.values()];
  s.pending.clear();
  s.worker.terminate();
  for (const other of rest) post(other);
}

/**
 * Like `toJavaScript`, but large TypeScript is stripped on a worker thread, so the host's
 * event loop keeps running (8 MB of TypeScript takes seconds). Past `timeoutMs` the worker
 * is ended (inputs queued behind move to a new one) and the promise rejects with
 * SandboxTimeoutError.
 *
 * @param {string} code
 * @param {{ language?: 'javascript' | 'typescript', asyncBody?: boolean, timeoutMs?: number }} [options]
 * @returns {Promise<string>}
 */
function stripTypes(code, options = {}) {
  if (own(options, 'language') !== 'typescript' || code.length <= INLINE_STRIP_MAX) {
    try {
      return Promise.resolve(toJavaScript(code, options));
    } catch (err) {
      return Promise.reject(err);
    }
  }
  const wrap = own(options, 'asyncBody') === true;
  return new Promise((resolve, reject) => {
    let timer = null;
    const job = {
      code,
      asyncBody: wrap,
      lineOffset: wrap ? BODY_LINE_OFFSET : 0,
      stripper: null,
      id: 0,
      settle: (error, out) => {
        if (timer !== null) clearTimeout(timer);
        if (error) reject(error);
        else resolve(out);
      },
    };
    const timeoutMs = own(options, 'timeoutMs');
    if (timeoutMs !== undefined) {
      timer = setTimeout(() => {
        timer = null;
        abandon(job, new SandboxTimeoutError(`Erasing TypeScript types exceeded the wall-clock limit of ${timeoutMs} ms`));
      }, timeoutMs);
    }
    post(job);
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

/**
 * Strips a checked plan's TypeScript in place (natively, the plan says what is
 * TypeScript): its code, and each TypeScript module of its `modules` map, whose errors
 * name the module.
 */
async function stripPlan(plan) {
  const timeoutMs = plan.wallTimeMs;
  if (plan.language === 'typescript') {
    plan.code = await stripTypes(plan.code, { language: 'typescript', asyncBody: plan.mode === 'asyncBody', timeoutMs });
  }
  for (const key of plan.typescriptModules) {
    let code;
    try {
      code = await stripTypes(plan.moduleSource(key), { language: 'typescript', asyncBody: false, timeoutMs });
    } catch (err) {
      if (!(err instanceof SandboxValidationError)) throw err;
      throw new SandboxValidationError(`modules['${key}']: ${err.message}`, { line: err.line, column: err.column });
    }
    plan.setModule(key, code);
  }
}

module.exports = { toJavaScript, stripTypes, stripPlan };
