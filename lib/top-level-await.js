'use strict';
// Top-level await in a persistent sandbox's runs. A run is a classic script (so its
// top-level declarations land in the context's global scope and stay for later runs), and
// a classic script cannot contain `await`. Code that only parses with a top-level await is
// rewritten, on its own lines, into a script that declares the same names globally and
// runs the statements in an async function:
//
//   var a = await f();  ->  `var a;` up front, `void ((a = await f()));` in place
//   let/const b = ...   ->  `let b;` up front (a const becomes a let), assigned in place
//   class C {}          ->  `let C;` up front, `C = class C {};` in place
//   function g() {}     ->  stays in place; `var g;` up front and bound to it on entry
//   E  (last statement) ->  `return (E);`: the run's result, as a script's completion
//   E; var N;           ->  `var <v> = (E); ...` and `return <v>;` at the end
//
// Everything up front sits on the first line, so the lines V8 reports are the user's.
// Code without a top-level await, and code that does not parse, is left as it is. Runs
// where lib/source.js has it run: on a worker thread when the code is large.

const { Rewrite } = require('./positions');

let acorn = null;

const DECLARATIONS = new Set(['VariableDeclaration', 'FunctionDeclaration', 'ClassDeclaration', 'EmptyStatement']);
/** Where the completion value waits while declarations after it run. */
const VALUE = '__isoletCompletionValue';

const PARSE = { ecmaVersion: 'latest', sourceType: 'script' };

/** The names a binding pattern declares. */
function boundNames(pattern, out) {
  switch (pattern.type) {
    case 'Identifier':
      out.push(pattern.name);
      break;
    case 'ObjectPattern':
      for (const p of pattern.properties) boundNames(p.type === 'RestElement' ? p.argument : p.value, out);
      break;
    case 'ArrayPattern':
      for (const e of pattern.elements) if (e) boundNames(e, out);
      break;
    case 'RestElement':
      boundNames(pattern.argument, out);
      break;
    case 'AssignmentPattern':
      boundNames(pattern.left, out);
      break;
  }
  return out;
}

/**
 * `code` as a script a persistent sandbox can run, `{ code, map }` (lib/positions.js):
 * unchanged (map []) unless it has a top-level `await`, else rewritten as the header says.
 */
function withTopLevelAwait(code) {
  const unchanged = { code, map: [] };
  // No `await` in the text, none in the code (an escaped one is never the keyword): no
  // parse needed. Parsing takes about a second per 4 MB.
  if (!code.includes('await')) return unchanged;
  if (acorn === null) acorn = require('acorn');
  try {
    acorn.parse(code, PARSE);
    return unchanged; // a classic script already
  } catch {
    // may have a top-level await: see below
  }
  let program;
  try {
    program = acorn.parse(code, { ...PARSE, allowAwaitOutsideFunction: true });
  } catch {
    return unchanged; // V8 reports the syntax error at the user's positions
  }
  const lets = [];
  const vars = [];
  const functions = [];
  const body = program.body;
  // The statement whose value a script completes with: the last that is not a declaration
  // (declarations complete with nothing: `E; var N;` is E's value, as a namespace
  // compiled from TypeScript ends).
  let completion = body.length - 1;
  while (completion >= 0 && DECLARATIONS.has(body[completion].type)) completion--;
  if (completion >= 0 && body[completion].type !== 'ExpressionStatement') completion = -1;
  const last = completion === body.length - 1;
  for (const node of body) {
    if (node.type === 'VariableDeclaration') {
      for (const d of node.declarations) boundNames(d.id, node.kind === 'var' ? vars : lets);
    } else if (node.type === 'ClassDeclaration') {
      lets.push(node.id.name);
    } else if (node.type === 'FunctionDeclaration') {
      functions.push(node.id.name);
    }
  }
  const head = [];
  if (lets.length) head.push(`let ${[...new Set(lets)].join(', ')};`);
  const varNames = [...new Set([...vars, ...functions])];
  if (varNames.length) head.push(`var ${varNames.join(', ')};`);
  const bind = functions.map((name) => `globalThis.${name} = ${name};`).join(' ');
  // The user's tokens are copied, what the rewrite says is inserted: an error in a
  // rewritten declaration still names the user's column.
  const r = new Rewrite(code).insert(`${head.join(' ')} (async () => { ${bind}`);
  let at = 0;
  body.forEach((node, index) => {
    if (node.type === 'VariableDeclaration') {
      r.copy(at, node.start);
      let first = true;
      for (const d of node.declarations) {
        if (!d.init && node.kind === 'var') continue;
        r.insert(first ? 'void ((' : ', (').copy(d.id.start, d.id.end).insert(' = ');
        if (d.init) r.copy(d.init.start, d.init.end);
        else r.insert('undefined');
        r.insert(')');
        first = false;
      }
      r.insert(first ? ';' : ');');
      at = node.end;
    } else if (node.type === 'ClassDeclaration') {
      r.copy(at, node.start).insert(`${node.id.name} = `).copy(node.start, node.end).insert(';');
      at = node.end;
    } else if (index === completion) {
      const end = code[node.end - 1] === ';' ? node.end - 1 : node.end;
      r.copy(at, node.start).insert(last ? 'return (' : `var ${VALUE} = (`).copy(node.start, end).insert(')');
      at = end;
    }
  });
  r.copy(at, code.length);
  if (completion >= 0 && !last) r.insert(`\n;return ${VALUE};`);
  const { code: out, stage } = r.insert('\n})()').finish();
  return { code: out, map: [stage] };
}

module.exports = { withTopLevelAwait };
