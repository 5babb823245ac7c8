'use strict';
// What a program's text goes through before it is submitted, as one synchronous function,
// `transformSource`, that Node's thread runs for small input and the source worker
// (lib/source-worker.js) for large input, so that both give the same bytes:
//   1. Code Mode's rule (`normalizeCode`): the source of one function expression;
//   2. TypeScript to JavaScript by amaro (the transformer Node itself ships, used as a
//      library: no ExperimentalWarning, the same on every Node line). Strip-only mode
//      first, which replaces each annotation with spaces, so every line and column the
//      sandbox reports is a position in the user's TypeScript; when the code needs more
//      than erasing (enum, namespace, parameter properties, `import x = N.y`), transform
//      mode, whose source map takes positions back to the user's (lib/positions.js);
//   3. the last-expression rewrite (lib/last-expression.js) or the top-level-await rewrite
//      (lib/top-level-await.js), each with the map of what it moved.
// Nothing here loads the addon or lib/errors.js: the worker runs it.
const { stripBody, BODY_PREFIX, BODY_LINE_OFFSET, suffixLine } = require('./typescript-body');
const { withLastExpressionResult, endsInBareExpression } = require('./last-expression');
const { withTopLevelAwait } = require('./top-level-await');
const { Rewrite, fromSourceMap, mapPosition } = require('./positions');

/** amaro's transform mode, as Node's --experimental-transform-types runs it, refusing `import x = require()`. */
const TRANSFORM = {
  mode: 'transform',
  sourceMap: true,
  transform: { verbatimModuleSyntax: true, nativeClassProperties: true, noEmptyExport: true, importNotUsedAsValues: 'preserve', importExportAssignConfig: 'EsNext' },
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

/** JavaScript for TypeScript `code` with only its types erased (positions kept); throws what amaro throws. */
function stripTypeScript(code, asyncBody) {
  const transform = (source) => loadAmaro().transformSync(source, { mode: 'strip-only' }).code;
  return asyncBody ? stripBody(transform, code) : transform(code);
}

/**
 * `{ code, map }` for TypeScript `code`: its types erased when that is all it needs (the
 * fast path: no map), else transformed (enum, namespace, parameter properties), with the
 * map of the transformer's source map. Throws what amaro throws, or a `Refusal`.
 */
function compileTypeScript(code, asyncBody) {
  let out;
  // Code that plainly needs transform mode skips a strip-only attempt bound to fail
  // (about 1.5 ms of a 200-line program); a guess either way still compiles right.
  if (NEEDS_TRANSFORM.test(code)) {
    try {
      out = transformTypeScript(code, asyncBody);
      refuseDecorators(out);
      return out;
    } catch (err) {
      if (err instanceof Refusal || !err || typeof err.startLine !== 'number') throw err;
      // a syntax error: strip-only mode's own words for it, below
    }
  }
  try {
    out = { code: stripTypeScript(code, asyncBody), map: [] };
  } catch (err) {
    // An `import x = N.y` in an async body is refused as module code by the parser, before
    // the stripper would call it unsupported: transform mode takes it too.
    const transformable = err && (err.code === 'UnsupportedSyntax' || (asyncBody && typeof err.startLine === 'number' && aliasAt(code, err) >= 0));
    if (!transformable) throw err;
    out = transformTypeScript(code, asyncBody);
  }
  refuseDecorators(out);
  return out;
}

/** An enum or namespace declaration, or `import x =`: what strip-only mode refuses most often. */
const NEEDS_TRANSFORM = /(?:^|[^.\w$])(?:enum|namespace)\s+[A-Za-z_$]|(?:^|[^.\w$])import\s+[A-Za-z_$][\w$]*\s*=/m;

/** A construct isolet refuses, with a message and the user's position. */
class Refusal extends Error {
  constructor(message, line, column) {
    super(message);
    this.refusal = { message: `UnsupportedSyntax: ${message} at line ${line}, column ${column}`, line, column };
  }
}

const IMPORT_EQUALS = 'import x = require(...) is not supported: a sandbox has no require. Import what the run provides (`import x from "..."` of a module in `modules`) or call a capability';
const EXPORT_EQUALS = '`export =` is not supported: use `export default` (or, in a script, `module.exports` of your own)';

/** `code` in amaro's transform mode; as an async body, in a wrapper that is cut off again. */
function transformTypeScript(code, asyncBody) {
  const transform = (source) => loadAmaro().transformSync(source, TRANSFORM);
  if (!asyncBody) {
    const out = transform(code);
    return { code: out.code, map: [fromSourceMap(out.map)] };
  }
  let out;
  let body = code;
  for (;;) {
    try {
      out = transform(BODY_PREFIX + body + BODY_SUFFIX_LINE);
      break;
    } catch (err) {
      if (!err || typeof err.startLine !== 'number') throw err;
      // Strip-only mode read all of it, so a fault past the user's last line is a stray
      // `}` that closed the wrapper early: named at the end of the user's code.
      if (err.startLine >= suffixLine(code)) {
        const lines = code.split(/\r\n|[\n\r\u2028\u2029]/);
        throw Object.assign(new Error(`${err.message} (a \`}\` with no \`{\` before it?)`), { startLine: lines.length + BODY_LINE_OFFSET, startColumn: lines[lines.length - 1].length });
      }
      // `import x = N.y` is top-level code of the user's, inside the wrapper only: the
      // alias is a `const` (`import` and `const ` have the same length: no position moves).
      const alias = aliasAt(body, err);
      if (alias < 0) throw err;
      body = `${body.slice(0, alias)}const ${body.slice(alias + 6)}`;
    }
  }
  // Printed again by the transformer: the wrapper's first line, the body, its `}`.
  const text = out.code;
  const first = text.indexOf('\n');
  const end = text.trimEnd();
  if (text.slice(0, first + 1) !== BODY_PREFIX || !end.endsWith('}')) throw new Error('the TypeScript transformer moved code out of the async body');
  return { code: text.slice(first + 1, end.length - 1), map: [fromSourceMap(out.map, BODY_LINE_OFFSET)] };
}
const BODY_SUFFIX_LINE = '\n}';

/**
 * The offset in the body of an `import x = N.y` (no require) that `err` refuses as
 * module code outside a module, or -1.
 */
function aliasAt(body, err) {
  if (!/cannot be used outside of module code/.test(err.message)) return -1;
  const lines = body.split(/(?<=\r\n|[\n\r\u2028\u2029])(?!\n)/);
  const index = err.startLine - BODY_LINE_OFFSET - 1;
  if (index < 0 || index >= lines.length) return -1;
  const offset = lines.slice(0, index).reduce((n, l) => n + l.length, 0) + err.startColumn;
  return /^import\s+[A-Za-z_$][\w$]*\s*=\s*(?!require\s*\()[A-Za-z_$]/.test(body.slice(offset)) ? offset : -1;
}

/**
 * Decorators pass through amaro untouched and V8 cannot run them: refused at the user's
 * position of the first `@` that is a token (not in a string, comment or regexp).
 */
function refuseDecorators(out) {
  if (!out.code.includes('@')) return;
  if (acorn === null) acorn = require('acorn');
  let at;
  try {
    for (const token of acorn.tokenizer(out.code, { ecmaVersion: 'latest', allowHashBang: true })) void token;
    return;
  } catch (err) {
    if (!/Unexpected character '@'/.test(err && err.message) || !err.loc) return;
    at = mapPosition(out.map, err.loc.line, err.loc.column + 1);
  }
  throw new Refusal('decorators are not supported: amaro (Node\'s TypeScript transformer) leaves them as written and V8 does not run them yet; call the decorator as a function instead (`const A = logged(class A {})`)', at.line, at.column);
}

/** Why an input could not be parsed at all (no position): a SandboxValidationError's message. */
function unparsable(recipe, reason) {
  const what = recipe.language === 'typescript' ? 'TypeScript' : 'The code';
  return { message: `${what} could not be parsed (too deeply nested or too large?): ${reason}` };
}

/** amaro's error (or a Refusal) as a SandboxValidationError's message, line and column (1-based, the user's). */
function describeFailure(err, recipe, code = '') {
  if (err instanceof Refusal) return err.refusal;
  if (!err || typeof err.startLine !== 'number') return unparsable(recipe, err && err.message ? err.message : String(err));
  const line = err.startLine - (recipe.asyncBody === true ? BODY_LINE_OFFSET : 0);
  const column = err.startColumn + 1; // amaro counts columns from 0, V8 from 1
  let message = err.message;
  let kind = err.code === 'UnsupportedSyntax' ? 'UnsupportedSyntax' : 'SyntaxError';
  if (/^Import assignment cannot be used/.test(message) || (/cannot be used outside of module code/.test(message) && /^import\s+[\w$]+\s*=/.test(lineOf(code, line).slice(column - 1)))) {
    [kind, message] = ['UnsupportedSyntax', IMPORT_EQUALS];
  } else if (/^Export assignment cannot be used/.test(message)) {
    [kind, message] = ['UnsupportedSyntax', EXPORT_EQUALS];
  }
  return { message: `${kind}: ${message} at line ${line}, column ${column}`, line, column };
}

/** Line `line` (1-based) of `code`. */
function lineOf(code, line) {
  return code.split(/\r\n|[\n\r\u2028\u2029]/)[line - 1] ?? '';
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
 * Returned as pieces, in order: the text written (strings) and the `[from, to)` ranges of
 * `source` kept, so that positions can be mapped back.
 */
function functionPieces(source) {
  if (source === '') return ['async () => {}'];
  const program = parseProgram(source);
  const body = ['async () => {\n', [0, source.length], '\n}'];
  if (program === null || program.body.length === 0) return body;
  const statements = program.body;
  const only = statements.length === 1 ? statements[0] : null;
  if (only !== null && only.type === 'ExpressionStatement') {
    const type = only.expression.type;
    if (type === 'ArrowFunctionExpression' || type === 'FunctionExpression') {
      const end = withoutSemicolon(source, only);
      return [[0, end], [end + (end === only.end ? 0 : 1), source.length]];
    }
  }
  if (only !== null && only.type === 'ExportDefaultDeclaration') {
    const declaration = only.declaration;
    const from = declaration.start;
    const to = withoutSemicolon(source, declaration);
    if (declaration.type === 'FunctionDeclaration') return [[from, to]];
    if (declaration.type === 'ClassDeclaration') return ['async () => {\nreturn (', [from, to], ');\n}'];
    // That, by these rules: its pieces, as ranges of `source`.
    return functionPieces(source.slice(from, to)).map((p) => (typeof p === 'string' ? p : [p[0] + from, p[1] + from]));
  }
  if (only !== null && only.type === 'FunctionDeclaration') {
    return ['async () => {\n', [0, source.length], `\nreturn ${only.id.name}();\n}`];
  }
  const last = statements[statements.length - 1];
  if (last.type !== 'ExpressionStatement') return body;
  // `return (` goes where the statement starts; its own `;` and what follows stay.
  const end = withoutSemicolon(source, last);
  return ['async () => {\n', [0, last.start], 'return (', [last.start, end], ')', [end, source.length], '\n}'];
}

/**
 * Code Mode's function for `code` (unfenced, then `functionSource`'s rule), with the stage
 * that maps its positions back to `code`'s: `{ code, stage }`.
 */
function functionRewrite(code) {
  const { source, start } = unfence(code);
  const rewrite = new Rewrite(code);
  for (const p of functionPieces(source)) {
    if (typeof p === 'string') rewrite.insert(p);
    else rewrite.copy(start + p[0], start + p[1]);
  }
  return rewrite.finish();
}

/**
 * Code to the source of one function expression, the way Code Mode passes it (see
 * `functionSource`): Markdown fences and surrounding blank space are dropped first.
 */
function normalizeCode(code) {
  return functionRewrite(code).code;
}

/**
 * `code` prepared as `recipe` says, in this order:
 *   normalizeCode: true        Code Mode's rule (`normalizeCode`)
 *   language: 'typescript'     made JavaScript; asyncBody: true reads it as an async function body
 *   rewrite: 'lastExpression'  the last expression statement made the result
 *   rewrite: 'topLevelAwait'   a persistent sandbox's script with a top-level await
 *   rewrite: 'bareLastExpression'  nothing rewritten; `bareLastExpression` says whether
 *                              the body ends in an expression statement (the return hint)
 * Returns `{ code, map }` (map: lib/positions.js, from positions in `code` as returned to
 * the user's; [] when nothing moved), or `{ failure: { message, line?, column? } }` for
 * TypeScript that does not compile.
 */
function transformSource(code, recipe) {
  const typescript = recipe.language === 'typescript';
  let source = code;
  let map = [];
  if (recipe.normalizeCode === true) {
    if (!typescript) {
      const f = functionRewrite(code);
      source = f.code;
      map = [f.stage];
    } else {
      // Types first (the shape is decided from a parse, and only JavaScript parses), on
      // the text as a program, or else as an async body (it may `return`).
      const { source: text, start } = unfence(code);
      const js = typeScriptProgram(text);
      if (js.failure) return { failure: shiftFailure(js.failure, code, start) };
      const f = functionRewrite(js.code);
      source = f.code;
      // The function to the JavaScript, to the TypeScript, to the fenced text.
      map = [new Rewrite(code).copy(start, start + text.length).finish().stage, ...js.map, f.stage];
    }
  } else if (typescript) {
    const asyncBody = recipe.asyncBody === true;
    try {
      ({ code: source, map } = compileTypeScript(source, asyncBody));
    } catch (err) {
      return { failure: typeScriptFailure(err, asyncBody, code) };
    }
  }
  // Nothing rewritten: whether the body ends in a bare expression (the return hint).
  if (recipe.rewrite === 'bareLastExpression') return { code: source, map, bareLastExpression: endsInBareExpression(source) };
  let rewritten = null;
  if (recipe.rewrite === 'lastExpression') rewritten = withLastExpressionResult(source);
  else if (recipe.rewrite === 'topLevelAwait') rewritten = withTopLevelAwait(source);
  if (rewritten === null) return { code: source, map };
  return { code: rewritten.code, map: map.concat(rewritten.map) };
}

/** amaro's error as a failure; one that is no syntax error may have broken amaro: it is dropped. */
function typeScriptFailure(err, asyncBody, code) {
  if (!(err instanceof Refusal) && (!err || typeof err.startLine !== 'number')) discardAmaro();
  return describeFailure(err, { language: 'typescript', asyncBody }, code);
}

/**
 * TypeScript `text` (Code Mode's program: a function, or a body) as JavaScript: compiled
 * as a program, else, when that is a syntax error (a `return` at top level), as an async
 * body. `{ code, map }` or `{ failure }` (the body's, when both fail).
 */
function typeScriptProgram(text) {
  if (text === '') return { code: text, map: [] };
  try {
    return compileTypeScript(text, false);
  } catch (err) {
    if (err instanceof Refusal || !err || typeof err.startLine !== 'number' || err.code === 'UnsupportedSyntax') return { failure: typeScriptFailure(err, false, text) };
  }
  try {
    return compileTypeScript(text, true);
  } catch (err) {
    return { failure: typeScriptFailure(err, true, text) };
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
