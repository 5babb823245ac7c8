'use strict';

// Step 4, sandbox: the suggestion alone, then suggestion + test, each in a fresh isolate
// through runSandbox; a failure says which part and which line.

const { StepFailure } = require('./errors');

/** runSandbox from the package root, or a StepFailure('sandbox-failure') when it cannot load. */
function sandboxRunner() {
  try {
    // Lazy: index.js re-exports autoFix, so requiring the root at load time would be a cycle.
    const root = require('../..');
    if (typeof root.runSandbox !== 'function') {
      throw new Error('runSandbox is not exported by the isolet package root');
    }
    return root.runSandbox;
  } catch (err) {
    throw new StepFailure('sandbox-failure', `the isolet sandbox is not available: ${(err && err.message) || err}`, {
      error: { name: 'Error', message: (err && err.message) || String(err) },
      auditMessage: 'the isolet sandbox is not available',
    });
  }
}

/**
 * Runs the suggestion alone, then (with a test) suggestion + test in one script. Returns
 * the last passing result; throws StepFailure('sandbox-failure' | 'test-failure') carrying
 * the failing result.
 * @param {{ memoryLimitMb: number, timeoutMs: number, language: string }} limits
 */
async function proveSuggestion(runSandbox, suggestion, test, limits) {
  const alone = await runInSandbox(runSandbox, suggestion, undefined, limits);
  if (alone.result.success !== true) throw sandboxFailure('sandbox-failure', alone, suggestion);
  if (test === undefined) return alone.result;
  const withTest = await runInSandbox(runSandbox, suggestion, test, limits);
  if (withTest.result.success !== true) throw sandboxFailure('test-failure', withTest, suggestion);
  return withTest.result;
}

/**
 * The suggestion runs as a classic script. A one-line preamble (on the suggestion's first
 * code line, so line numbers are unchanged) gives it CommonJS-style `module`, `exports`
 * and a `require` that throws a clear error. A leading 'use strict' directive is kept
 * in force by repeating it at the very start.
 */
function sandboxScript(suggestion, test) {
  let head = '';
  let body = suggestion.charCodeAt(0) === 0xfeff ? suggestion.slice(1) : suggestion;
  if (body.startsWith('#!')) {
    const nl = body.indexOf('\n');
    head = nl === -1 ? body : body.slice(0, nl + 1);
    body = nl === -1 ? '' : body.slice(nl + 1);
  }
  const strict = /^(?:\s|\/\/[^\n]*\n|\/\*[\s\S]*?\*\/)*(['"])use strict\1/.test(body);
  const preamble =
    (strict ? "'use strict'; " : '') +
    'globalThis.module = { exports: {} }; globalThis.exports = globalThis.module.exports; ' +
    'globalThis.require = function require(id) { throw new Error("require(" + JSON.stringify(String(id)) + ") is not available in the isolet sandbox: the code must be self-contained"); }; ';
  const script = head + preamble + body;
  const suggestionLines = suggestion.split('\n').length;
  const common = { suggestionLines, preambleLine: head ? 2 : 1, preambleLength: preamble.length };
  // The separator line resets the completion value, so the suggestion's own last value
  // (often `module.exports = { fn }`, which holds functions and cannot be copied out of the
  // isolate) never becomes the result; with a test, the test's last value is the result
  // (a Promise, e.g. from an async IIFE, is awaited by runSandbox).
  if (test === undefined) return { script: script + SEPARATOR, testStartLine: undefined, ...common };
  return { script: script + SEPARATOR + test, testStartLine: suggestionLines + 2, ...common };
}

const SEPARATOR = '\n;void 0;\n';

const MODULE_SYNTAX =
  /^[ \t]*(?:import\s*(?:[\w$*{]|["'])|export\s+(?:default\b|const\b|let\b|var\b|function\b|async\b|class\b|\{|\*))/m;

async function runInSandbox(runSandbox, suggestion, test, limits) {
  const shape = sandboxScript(suggestion, test);
  let result;
  try {
    result = await runSandbox(shape.script, limits);
  } catch (err) {
    // runSandbox never rejects for what sandboxed code does; this is an engine or option problem.
    result = {
      success: false,
      error: { name: (err && err.name) || 'Error', message: (err && err.message) || String(err) },
    };
  }
  if (!result || typeof result !== 'object') {
    result = { success: false, error: { name: 'Error', message: 'runSandbox returned no result' } };
  }
  return { result, shape };
}

/** A sandbox error as plain data (runSandbox gives Error instances with extra fields). */
function plainError(error) {
  if (error === null || typeof error !== 'object') return { name: 'Error', message: String(error) };
  const out = {};
  for (const [k, v] of Object.entries(error)) out[k] = v;
  out.name = typeof error.name === 'string' ? error.name : 'Error';
  out.message = typeof error.message === 'string' ? error.message : '';
  if (typeof error.stack === 'string') out.stack = error.stack;
  return out;
}

/** Stack frames `at ... :line:column` of a sandbox error, innermost first. */
function frames(error) {
  const stacks = [];
  if (error.thrown && typeof error.thrown === 'object' && typeof error.thrown.stack === 'string')
    stacks.push(error.thrown.stack);
  if (typeof error.stack === 'string') stacks.push(error.stack);
  for (const stack of stacks) {
    const found = [];
    for (const line of stack.split('\n')) {
      const m = /^\s*at .*?:(\d+):(\d+)\)?\s*$/.exec(line);
      if (m) found.push({ line: Number(m[1]), column: Number(m[2]) });
    }
    if (found.length > 0) return found;
  }
  return [];
}

/** Where (suggestion or test, which line) a sandbox error points, when it says. */
function locate(error, shape) {
  const inPreamble = (f) => f.line === shape.preambleLine && f.column <= shape.preambleLength;
  let where;
  if (typeof error.line === 'number') {
    where = { line: error.line, column: typeof error.column === 'number' ? error.column : undefined };
  } else {
    where = frames(error).find((f) => !inPreamble(f));
  }
  if (where === undefined) return undefined;
  let { line, column } = where;
  if (line === shape.preambleLine && column !== undefined && column > shape.preambleLength)
    column -= shape.preambleLength;
  if (shape.testStartLine !== undefined && line >= shape.testStartLine) {
    return { part: 'test', line: line - shape.testStartLine + 1, column };
  }
  return { part: 'suggestion', line, column };
}

/** The StepFailure for a failed run: full text for the caller, fixed phrases for the audit log. */
function sandboxFailure(reason, { result, shape }, suggestion) {
  const error = plainError(result.error);
  const name = error.name;
  const where = locate(error, shape);
  const at = where
    ? ` at line ${where.line}${where.column !== undefined ? `, column ${where.column}` : ''} of the ${where.part}`
    : '';
  const detail = error.message;
  const lineText = where && where.part === 'suggestion' ? suggestion.split('\n')[where.line - 1] || '' : '';
  if (
    name === 'SandboxValidationError' &&
    (where === undefined || where.part === 'suggestion') &&
    (/outside a module|Unexpected token '(?:export|import)'/.test(detail) || MODULE_SYNTAX.test(lineText))
  ) {
    const message =
      'ES module syntax (import/export) is not supported: the suggestion runs as a classic script in the sandbox' +
      (detail ? ` (${detail})` : '');
    return new StepFailure('sandbox-failure', message, {
      error,
      sandbox: result,
      auditMessage: `suggestion uses ES module syntax, which the sandbox does not run${at}`,
    });
  }
  // The thrown value's class name helps the reader; only a plain identifier goes to the audit log.
  const thrownName =
    error.thrown && typeof error.thrown.name === 'string' && /^[A-Za-z_$][\w$]{0,63}$/.test(error.thrown.name)
      ? ` (${error.thrown.name})`
      : '';
  const what =
    reason === 'test-failure' ? 'the test failed against the suggestion' : 'the suggestion failed in the sandbox';
  const auditMessage = `${what}: ${name}${thrownName}${at}`;
  return new StepFailure(reason, `${what}: ${name}${at}${detail ? `: ${detail}` : ''}`, {
    error,
    sandbox: result,
    auditMessage,
  });
}

module.exports = { sandboxRunner, proveSuggestion };
