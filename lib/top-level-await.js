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
//
// Everything up front sits on the first line, so the lines V8 reports are the user's.
// Code without a top-level await, and code that does not parse, is left as it is. Runs
// where lib/source.js has it run: on a worker thread when the code is large.

let acorn = null;

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
 * `code` as a script a persistent sandbox can run: unchanged unless it has a top-level
 * `await`, else rewritten as the header says.
 */
function withTopLevelAwait(code) {
  // No `await` in the text, none in the code (an escaped one is never the keyword): no
  // parse needed. Parsing takes about a second per 4 MB.
  if (!code.includes('await')) return code;
  if (acorn === null) acorn = require('acorn');
  try {
    acorn.parse(code, PARSE);
    return code; // a classic script already
  } catch {
    // may have a top-level await: see below
  }
  let program;
  try {
    program = acorn.parse(code, { ...PARSE, allowAwaitOutsideFunction: true });
  } catch {
    return code; // V8 reports the syntax error at the user's positions
  }
  const lets = [];
  const vars = [];
  const functions = [];
  const edits = [];
  const src = (node) => code.slice(node.start, node.end);
  const body = program.body;
  body.forEach((node, index) => {
    if (node.type === 'VariableDeclaration') {
      const names = [];
      const assignments = [];
      for (const d of node.declarations) {
        boundNames(d.id, names);
        if (d.init) assignments.push(`(${src(d.id)} = ${src(d.init)})`);
        else if (node.kind !== 'var') assignments.push(`(${src(d.id)} = undefined)`);
      }
      (node.kind === 'var' ? vars : lets).push(...names);
      edits.push({ start: node.start, end: node.end, text: assignments.length ? `void (${assignments.join(', ')});` : ';' });
    } else if (node.type === 'ClassDeclaration') {
      lets.push(node.id.name);
      edits.push({ start: node.start, end: node.end, text: `${node.id.name} = ${src(node)};` });
    } else if (node.type === 'FunctionDeclaration') {
      functions.push(node.id.name);
    } else if (node.type === 'ExpressionStatement' && index === body.length - 1) {
      const end = code[node.end - 1] === ';' ? node.end - 1 : node.end;
      edits.push({ start: node.start, end, text: `return (${code.slice(node.start, end)})` });
    }
  });
  let out = '';
  let at = 0;
  for (const e of edits) {
    out += code.slice(at, e.start) + e.text;
    at = e.end;
  }
  out += code.slice(at);
  const head = [];
  if (lets.length) head.push(`let ${[...new Set(lets)].join(', ')};`);
  const varNames = [...new Set([...vars, ...functions])];
  if (varNames.length) head.push(`var ${varNames.join(', ')};`);
  const bind = functions.map((name) => `globalThis.${name} = ${name};`).join(' ');
  return `${head.join(' ')} (async () => { ${bind}${out}\n})()`;
}

module.exports = { withTopLevelAwait };
