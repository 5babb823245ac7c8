'use strict';
// TypeScript input. Types are erased by amaro (the stripper Node itself ships, used as a
// library: no ExperimentalWarning, the same on every Node line) in strip-only mode, which
// replaces each type annotation with spaces. Every line and column the sandbox later
// reports (syntax errors, stack frames) is therefore a position in the user's TypeScript.
const { SandboxValidationError } = require('./errors');

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
  return wrap ? out.slice(out.indexOf('\n') + 1, out.length - BODY_SUFFIX.length) : out;
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

module.exports = { LANGUAGES, checkLanguage, toJavaScript };
