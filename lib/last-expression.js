'use strict';
// Last-expression results, for `isolet run` and the MCP tool: code that runs to its end
// without executing `return` answers with the value of its last top-level expression
// statement, as a REPL or notebook prints it; a `return` that runs still wins.
//
// The code stays an async function body (the engine wraps it, unchanged); this layer only
// rewrites that one statement before the code is submitted:
//   E;          ->  return (E);                            E is the last statement
//   E; S1; S2   ->  var <v> = (E); S1; S2 \n;return <v>;    statements follow it
// so runSandbox and engine requests keep their own rule (only `return` gives a result).
// The inserted text shifts columns on E's first and last lines only; `remapError` takes
// reported positions (the error's line and column, `sandbox.js:L:C` in its stack) back to
// the user's code, so a TypeError in the last line still points where the user wrote it.

const VALUE = '__isoletLastValue';
const RETURN_PREFIX = 'return (';
const VAR_PREFIX = `var ${VALUE} = (`;

let acorn = null;

/**
 * `code` (JavaScript) with its last top-level expression statement made the result, and
 * the insertions made (generated positions, 1-based), for `remapError`. Code that does not
 * parse, or has no such statement, comes back unchanged: V8 then reports its own syntax
 * error at the user's positions.
 */
function withLastExpressionResult(code) {
  if (acorn === null) acorn = require('acorn');
  let program;
  try {
    program = acorn.parse(code, {
      ecmaVersion: 'latest',
      sourceType: 'script',
      allowReturnOutsideFunction: true,
      allowAwaitOutsideFunction: true,
    });
  } catch {
    return { code, edits: [] };
  }
  const body = program.body;
  let index = body.length - 1;
  while (index >= 0 && body[index].type !== 'ExpressionStatement') index--;
  if (index < 0) return { code, edits: [] };
  const last = index === body.length - 1;
  const statement = body[index];
  // A directive ('use strict') followed by code must stay one: it is never the result then.
  if (!last && statement.directive !== undefined) return { code, edits: [] };
  const prefix = last ? RETURN_PREFIX : VAR_PREFIX;
  // The statement's own `;` stays after the closing parenthesis.
  const end = code[statement.end - 1] === ';' ? statement.end - 1 : statement.end;
  // Positions of these two places only: `locations` on every node doubles acorn's memory.
  const startLoc = acorn.getLineInfo(code, statement.start);
  const endLoc = acorn.getLineInfo(code, end);
  let out = code.slice(0, statement.start) + prefix + code.slice(statement.start, end) + ')' + code.slice(end);
  if (!last) out += `\n;return ${VALUE};`;
  const edits = [
    { line: startLoc.line, column: startLoc.column + 1, length: prefix.length },
    { line: endLoc.line, column: endLoc.column + 1 + (endLoc.line === startLoc.line ? prefix.length : 0), length: 1 },
  ];
  return { code: out, edits };
}

/** Maps one generated position; inserted text maps to the user's character after it. */
function mapPosition(line, column, edits) {
  let shift = 0;
  // Edits on a line are in order, so each one's generated column is compared as is.
  for (const e of edits) {
    if (e.line !== line || column < e.column) continue;
    shift += column >= e.column + e.length ? e.length : column - e.column;
  }
  return column - shift;
}

/**
 * Takes the positions `error` reports (from a run of rewritten code) back to the user's
 * code. Returns a fresh error object of the same class; the original is left alone.
 */
function remapError(error, edits) {
  if (!error || edits.length === 0) return error;
  const copy = Object.create(Object.getPrototypeOf(error));
  Object.defineProperties(copy, Object.getOwnPropertyDescriptors(error));
  const remapText = (text) =>
    typeof text === 'string'
      ? text
          .replace(/sandbox\.js:(\d+):(\d+)/g, (_, l, c) => `sandbox.js:${l}:${mapPosition(+l, +c, edits)}`)
          .replace(/at line (\d+), column (\d+)/g, (_, l, c) => `at line ${l}, column ${mapPosition(+l, +c, edits)}`)
      : text;
  if (typeof copy.line === 'number' && typeof copy.column === 'number') copy.column = mapPosition(copy.line, copy.column, edits);
  if (copy.thrown && typeof copy.thrown === 'object') copy.thrown = { ...copy.thrown, stack: remapText(copy.thrown.stack), message: remapText(copy.thrown.message) };
  copy.message = remapText(copy.message);
  copy.stack = remapText(copy.stack);
  return copy;
}

/**
 * What `isolet run` and the MCP tool submit for `code`: JavaScript (TypeScript has its
 * types erased here, positions kept, so the rewrite parses it) with the last-expression
 * rule applied, on a worker thread when the code is large, within `timeoutMs`. Resolves
 * with `{ code, language: 'javascript', edits }`; bad TypeScript rejects with the
 * SandboxValidationError the engine would have given.
 */
async function prepareCode(code, language, timeoutMs) {
  // Required here: the source worker loads this module for the rewrite, and lib/source.js
  // (lib/errors.js with it) loads the addon.
  const { prepareSource } = require('./source');
  const { code: out, edits } = await prepareSource(code, { language, asyncBody: true, rewrite: 'lastExpression' }, { timeoutMs });
  return { code: out, language: 'javascript', edits };
}

module.exports = { withLastExpressionResult, remapError, prepareCode, mapPosition };
