'use strict';
// What a program's text goes through before it is submitted, as one synchronous function,
// `transformSource`, that Node's thread runs for small input and the source worker
// (lib/source-worker.js) for large input, so that both give the same bytes:
//   1. Code Mode's rule (`normalizeCode`): the source of one async function expression;
//   2. TypeScript's types erased by amaro (the stripper Node itself ships, used as a
//      library: no ExperimentalWarning, the same on every Node line) in strip-only mode,
//      which replaces each annotation with spaces, so every line and column the sandbox
//      reports is a position in the user's TypeScript;
//   3. the last-expression rewrite (lib/last-expression.js) or the top-level-await rewrite
//      (lib/top-level-await.js).
// Nothing here loads the addon or lib/errors.js: the worker runs it.
const { stripBody, BODY_LINE_OFFSET } = require('./typescript-body');
const { withLastExpressionResult } = require('./last-expression');
const { withTopLevelAwait } = require('./top-level-await');

const HINT = {
  UnsupportedSyntax: ' (isolet only erases types; enums, namespaces and parameter properties need a code transform: use a const object, a module-level object and explicit fields instead)',
};

/** amaro on this thread: 'unloaded', 'loaded', or 'discarded' once a failure broke it. */
let amaroState = 'unloaded';
let amaro = null;

function loadAmaro() {
  if (amaro === null) {
    amaro = require('amaro');
    amaroState = 'loaded';
  }
  return amaro;
}

// A failure that is not a syntax error (deep nesting overflowing the parser's stack, an
// out-of-bounds access) can leave amaro's WebAssembly instance broken for every later
// call. Drop it: the next call loads a fresh instance (about 0.1 s).
function discardAmaro() {
  amaro = null;
  amaroState = 'discarded';
  const dir = require('node:path').dirname(require.resolve('amaro'));
  for (const key of Object.keys(require.cache)) {
    if (key.startsWith(dir)) delete require.cache[key];
  }
}

/** Whether a failure has discarded this thread's amaro (lib/source.js then strips on the worker). */
function amaroDiscarded() {
  return amaroState === 'discarded';
}

/** JavaScript for TypeScript `code`; throws what amaro throws. */
function stripTypeScript(code, asyncBody) {
  const transform = (source) => loadAmaro().transformSync(source, { mode: 'strip-only' }).code;
  return asyncBody ? stripBody(transform, code) : transform(code);
}

/** Why an input could not be parsed at all (no position): a SandboxValidationError's message. */
function unparsable(recipe, reason) {
  const what = recipe.language === 'typescript' ? 'TypeScript' : 'The code';
  return { message: `${what} could not be parsed (too deeply nested or too large?): ${reason}` };
}

/** amaro's error as a SandboxValidationError's message, line and column (1-based, the user's). */
function describeFailure(err, recipe) {
  if (!err || typeof err.startLine !== 'number') return unparsable(recipe, err && err.message ? err.message : String(err));
  const line = err.startLine - (recipe.asyncBody === true ? BODY_LINE_OFFSET : 0);
  const column = err.startColumn + 1; // amaro counts columns from 0, V8 from 1
  const kind = err.code === 'UnsupportedSyntax' ? 'UnsupportedSyntax' : 'SyntaxError';
  return { message: `${kind}: ${err.message}${HINT[err.code] ?? ''} at line ${line}, column ${column}`, line, column };
}

const FUNCTION = /^(?:async\s+)?function\b/;
const ASYNC = /^async\s*/;
const SPACE = /\s*/y;
// One identifier as the parameter; the type after `:` runs to the first `=`.
const IDENTIFIER_ARROW = /[A-Za-z_$][\w$]*\s*(?::[^=]*)?=>/y;
const FENCE_OPEN = /^```[\w-]*\s*\n/;
const FENCE_CLOSE = '```';

/**
 * Whether some `)` at or after `from` is followed by `=>`, or by a return type up to the
 * first `=`, which starts `=>` (`(a): T => ...`); whitespace may come before either. One
 * pass: when that `=` is not `=>`, no `)` before it can be followed by an arrow either.
 */
function arrowAfterParameters(source, from) {
  let at = from;
  for (;;) {
    const close = source.indexOf(')', at);
    if (close < 0) return false;
    SPACE.lastIndex = close + 1;
    SPACE.exec(source);
    const next = SPACE.lastIndex;
    if (source.startsWith('=>', next)) return true;
    if (source[next] !== ':') {
      at = close + 1;
      continue;
    }
    const equals = source.indexOf('=', next);
    if (equals < 0) return false;
    if (source[equals + 1] === '>') return true;
    at = equals + 1;
  }
}

/** Whether `source` starts as a function: `function`, or an arrow with or without `async`. */
function isFunctionSource(source) {
  if (FUNCTION.test(source)) return true;
  const async = ASYNC.exec(source);
  for (const start of async === null ? [0] : [async[0].length, 0]) {
    if (source[start] === '(') {
      if (arrowAfterParameters(source, start + 1)) return true;
    } else {
      IDENTIFIER_ARROW.lastIndex = start;
      if (IDENTIFIER_ARROW.test(source)) return true;
    }
  }
  return false;
}

/**
 * Code to the source of one async function expression, the way Code Mode passes it:
 * an arrow function is kept; fenced code is unwrapped; anything else is a function body.
 * Linear in the code's length (a backtracking pattern here took hours on 4 MB).
 */
function normalizeCode(code) {
  let source = String(code).trim();
  // Trimmed, a fenced block ends with its closing fence.
  const open = FENCE_OPEN.exec(source);
  if (open !== null && source.endsWith(FENCE_CLOSE) && source.length - FENCE_CLOSE.length >= open[0].length) {
    source = source.slice(open[0].length, source.length - FENCE_CLOSE.length).trim();
  }
  if (source === '') return 'async () => {}';
  if (isFunctionSource(source)) return source;
  return `async () => {\n${source}\n}`;
}

/**
 * `code` prepared as `recipe` says, in this order:
 *   normalizeCode: true        Code Mode's rule (`normalizeCode`)
 *   language: 'typescript'     types erased; asyncBody: true strips it as an async function body
 *   rewrite: 'lastExpression'  the last expression statement made the result
 *   rewrite: 'topLevelAwait'   a persistent sandbox's script with a top-level await
 * Returns `{ code, edits }` (edits: the last-expression rewrite's insertions, for
 * remapError), or `{ failure: { message, line?, column? } }` for TypeScript that does
 * not strip.
 */
function transformSource(code, recipe) {
  let source = recipe.normalizeCode === true ? normalizeCode(code) : code;
  if (recipe.language === 'typescript') {
    try {
      source = stripTypeScript(source, recipe.asyncBody === true);
    } catch (err) {
      if (!err || typeof err.startLine !== 'number') discardAmaro();
      return { failure: describeFailure(err, recipe) };
    }
  }
  if (recipe.rewrite === 'lastExpression') return withLastExpressionResult(source);
  if (recipe.rewrite === 'topLevelAwait') return { code: withTopLevelAwait(source), edits: [] };
  return { code: source, edits: [] };
}

module.exports = { transformSource, normalizeCode, unparsable, amaroDiscarded };
