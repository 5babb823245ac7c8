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
// The inserted text shifts columns on E's first and last lines only; the rewrite's map
// (lib/positions.js) takes reported positions (the error's line and column,
// `sandbox.js:L:C` in its stack) back to the user's code, so a TypeError in the last line
// still points where the user wrote it.
const { Rewrite, remapError } = require('./positions');

const VALUE = '__isoletLastValue';
const RETURN_PREFIX = 'return (';
const VAR_PREFIX = `var ${VALUE} = (`;

let acorn = null;

/**
 * `code` (JavaScript) with its last top-level expression statement made the result, and
 * the map of the rewrite (`{ code, map }`, lib/positions.js). Code that does not parse, or
 * has no such statement, comes back unchanged (map []): V8 then reports its own syntax
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
    return { code, map: [] };
  }
  const body = program.body;
  let index = body.length - 1;
  while (index >= 0 && body[index].type !== 'ExpressionStatement') index--;
  if (index < 0) return { code, map: [] };
  const last = index === body.length - 1;
  const statement = body[index];
  // A directive ('use strict') followed by code must stay one: it is never the result then.
  if (!last && statement.directive !== undefined) return { code, map: [] };
  // The statement's own `;` stays after the closing parenthesis.
  const end = code[statement.end - 1] === ';' ? statement.end - 1 : statement.end;
  const r = new Rewrite(code)
    .copy(0, statement.start)
    .insert(last ? RETURN_PREFIX : VAR_PREFIX)
    .copy(statement.start, end)
    .insert(')')
    .copy(end, code.length);
  if (!last) r.insert(`\n;return ${VALUE};`);
  const { code: out, stage } = r.finish();
  return { code: out, map: [stage] };
}

/**
 * Whether `code` (JavaScript, an async body) ends in an expression statement whose value
 * the author probably meant as the result: not an assignment, `++`/`--`, `void`, `delete`
 * or a `console` call, which are statements in all but syntax.
 */
function endsInBareExpression(code) {
  if (acorn === null) acorn = require('acorn');
  let program;
  try {
    program = acorn.parse(code, { ecmaVersion: 'latest', sourceType: 'script', allowReturnOutsideFunction: true, allowAwaitOutsideFunction: true });
  } catch {
    return false;
  }
  const last = program.body[program.body.length - 1];
  if (!last || last.type !== 'ExpressionStatement' || last.directive !== undefined) return false;
  let e = last.expression;
  if (e.type === 'AwaitExpression') e = e.argument;
  if (e.type === 'AssignmentExpression' || e.type === 'UpdateExpression') return false;
  if (e.type === 'UnaryExpression' && (e.operator === 'void' || e.operator === 'delete')) return false;
  const callee = e.type === 'CallExpression' ? e.callee : null;
  return !(callee && callee.type === 'MemberExpression' && callee.object.type === 'Identifier' && callee.object.name === 'console');
}

module.exports = { withLastExpressionResult, remapError, endsInBareExpression };
