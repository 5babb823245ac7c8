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

const FENCE_OPEN = /^```[\w-]*[ \t]*\r?\n/;
const FENCE_CLOSE = '```';

let acorn = null;

/** The program acorn reads `source` as, or null: an async body (script), else a module. */
function parseProgram(source) {
  if (acorn === null) acorn = require('acorn');
  const options = { ecmaVersion: 'latest', allowReturnOutsideFunction: true, allowAwaitOutsideFunction: true };
  // A script: the body runs as a function's (sloppy unless it says otherwise), so `return`
  // and `await` are allowed at its top level. A module (strict) only for what only a
  // module has (`export default`): a second parse of anything else fails the same way.
  try {
    return acorn.parse(source, { ...options, sourceType: 'script' });
  } catch (err) {
    if (!/sourceType: module/.test(err && err.message)) return null;
  }
  try {
    return acorn.parse(source, { ...options, sourceType: 'module' });
  } catch {
    return null;
  }
}

/** `source` trimmed and out of its Markdown fence, with where that text starts in `code`. */
function unfence(code) {
  const text = String(code);
  let start = text.length - text.trimStart().length;
  let source = text.trim();
  // Trimmed, a fenced block ends with its closing fence.
  const open = FENCE_OPEN.exec(source);
  if (open !== null && source.endsWith(FENCE_CLOSE) && source.length - FENCE_CLOSE.length >= open[0].length) {
    const inner = source.slice(open[0].length, source.length - FENCE_CLOSE.length);
    start += open[0].length + (inner.length - inner.trimStart().length);
    source = inner.trim();
  }
  return { source, start };
}

/** The source of `node` without the `;` that ends it (its own, or ASI's: none). */
function withoutSemicolon(source, node) {
  return source[node.end - 1] === ';' ? node.end - 1 : node.end;
}

/**
 * JavaScript `source` (trimmed, unfenced) as one function expression, decided from its
 * parse, as @cloudflare/codemode's executor does:
 *   - one arrow or function expression: that function (its `;` dropped), called by the executor;
 *   - `export default` of a function: that function; of a class: an async function
 *     returning it; of anything else: that, by these rules;
 *   - one function declaration: a body that declares it and returns its call;
 *   - otherwise a body, `async () => {...}`; when its last statement is an expression
 *     statement, that expression is returned (a `return` that runs first still wins).
 * Code that parses neither as a script nor as a module is a body, for V8 to report.
 */
function functionSource(source) {
  if (source === '') return 'async () => {}';
  const program = parseProgram(source);
  const body = `async () => {\n${source}\n}`;
  if (program === null || program.body.length === 0) return body;
  const statements = program.body;
  const only = statements.length === 1 ? statements[0] : null;
  if (only !== null && only.type === 'ExpressionStatement') {
    const type = only.expression.type;
    if (type === 'ArrowFunctionExpression' || type === 'FunctionExpression') {
      const end = withoutSemicolon(source, only);
      return source.slice(0, end) + source.slice(end + (end === only.end ? 0 : 1));
    }
  }
  if (only !== null && only.type === 'ExportDefaultDeclaration') {
    const declaration = only.declaration;
    const inner = source.slice(declaration.start, withoutSemicolon(source, declaration));
    if (declaration.type === 'FunctionDeclaration') return inner;
    if (declaration.type === 'ClassDeclaration') return `async () => {\nreturn (${inner});\n}`;
    return functionSource(inner);
  }
  if (only !== null && only.type === 'FunctionDeclaration') {
    return `async () => {\n${source}\nreturn ${only.id.name}();\n}`;
  }
  const last = statements[statements.length - 1];
  if (last.type !== 'ExpressionStatement') return body;
  // `return (` goes where the statement starts; its own `;` and what follows stay.
  const end = withoutSemicolon(source, last);
  return `async () => {\n${source.slice(0, last.start)}return (${source.slice(last.start, end)})${source.slice(end)}\n}`;
}

/**
 * Code to the source of one function expression, the way Code Mode passes it (see
 * `functionSource`): Markdown fences and surrounding blank space are dropped first.
 */
function normalizeCode(code) {
  return functionSource(unfence(code).source);
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
  const typescript = recipe.language === 'typescript';
  let source = code;
  if (recipe.normalizeCode === true) {
    if (!typescript) {
      source = normalizeCode(code);
    } else {
      // Types first (the shape is decided from a parse, and only JavaScript parses), on
      // the text as a program, or else as an async body (it may `return`).
      const { source: text, start } = unfence(code);
      const js = typeScriptProgram(text);
      if (js.failure) return { failure: shiftFailure(js.failure, code, start) };
      source = functionSource(js.code);
    }
  } else if (typescript) {
    try {
      source = stripTypeScript(source, recipe.asyncBody === true);
    } catch (err) {
      return { failure: typeScriptFailure(err, recipe.asyncBody === true) };
    }
  }
  if (recipe.rewrite === 'lastExpression') return withLastExpressionResult(source);
  if (recipe.rewrite === 'topLevelAwait') return { code: withTopLevelAwait(source), edits: [] };
  return { code: source, edits: [] };
}

/** amaro's error as a failure; one that is no syntax error may have broken amaro: it is dropped. */
function typeScriptFailure(err, asyncBody) {
  if (!err || typeof err.startLine !== 'number') discardAmaro();
  return describeFailure(err, { language: 'typescript', asyncBody });
}

/**
 * TypeScript `text` (Code Mode's program: a function, or a body) as JavaScript: stripped
 * as a program, else, when that is a syntax error (a `return` at top level), as an async
 * body. `{ code }` or `{ failure }` (the body's, when both fail).
 */
function typeScriptProgram(text) {
  if (text === '') return { code: text };
  try {
    return { code: stripTypeScript(text, false) };
  } catch (err) {
    if (!err || typeof err.startLine !== 'number' || err.code === 'UnsupportedSyntax') return { failure: typeScriptFailure(err, false) };
  }
  try {
    return { code: stripTypeScript(text, true) };
  } catch (err) {
    return { failure: typeScriptFailure(err, true) };
  }
}

/** `failure` (positions in the text at UTF-16 offset `start` of `code`) with positions in `code`. */
function shiftFailure(failure, code, start) {
  if (typeof failure.line !== 'number' || start === 0) return failure;
  const before = code.slice(0, start).split(/\r\n|\r|\n|\u2028|\u2029/);
  const lines = before.length - 1;
  const line = failure.line + lines;
  const column = failure.line === 1 ? failure.column + before[lines].length : failure.column;
  const message = failure.message.replace(/at line \d+, column \d+$/, `at line ${line}, column ${column}`);
  return { ...failure, message, line, column };
}

module.exports = { transformSource, normalizeCode, unparsable, amaroDiscarded };
