'use strict';
// `isolet run <file|->`: runs one file (or stdin) in a fresh isolate of a SandboxEngine.
// The code is the body of an async function (as in MCP and SandboxEngine): `await` works,
// and the result is what a `return` gives, or else the value of the last top-level
// expression statement (lib/last-expression.js). The result goes to stdout as JSON,
// console output to stderr, and the exit code says which error class ended the run.
const fs = require('node:fs');
const { UsageError, limitsHelp, parse, settingsFrom, usageText } = require('./options');
const { toJson } = require('./json');
const { stripTypes, prepareCode } = require('../source');
const { remapError, remapLogs } = require('../positions');
const { thrownFieldsText } = require('../errors');

/** Exit codes of `isolet run`, by outcome. */
const RUN_EXIT_CODES = Object.freeze({
  ok: 0,
  SandboxRuntimeError: 1,
  usage: 2,
  SandboxValidationError: 3,
  SandboxTimeoutError: 4,
  SandboxOOMError: 5,
  SandboxAbortedError: 6,
  SandboxError: 7,
});

const RUN_USAGE = `usage: isolet run <file|-> [options]

Runs the file (or standard input, "-") in a fresh V8 isolate: no Node APIs, no file
system, no network, hard memory and time limits. The code is the body of an async
function: use await. The result is what a return gives, or else the value of the last
top-level expression statement (\`const x = 20; x + 22\` prints 42). It is printed as
JSON on stdout, console output on stderr.

options:
${limitsHelp('  --language <lang>        javascript or typescript (default: typescript for .ts/.mts/.cts\n                           files, else javascript)')}
  -h, --help               show this help

exit codes: 0 success, 1 the code threw (SandboxRuntimeError), 2 usage error,
3 invalid code (SandboxValidationError), 4 time limit (SandboxTimeoutError),
5 memory limit (SandboxOOMError), 6 aborted (SandboxAbortedError), 7 other SandboxError`;

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * Whether a syntax error of code run as JavaScript by default (stdin, or a file whose
 * extension is not TypeScript's) came from TypeScript: the code strips as TypeScript, and
 * stripping changed it (it had types).
 */
async function typeScriptHint(error, language, values, code, timeoutMs) {
  if (error.name !== 'SandboxValidationError' || language === 'typescript' || values.language !== undefined) return false;
  try {
    return (await stripTypes(code, { language: 'typescript', asyncBody: true, timeoutMs })) !== code;
  } catch {
    return false;
  }
}

/** Runs the command; resolves with the exit code. */
async function runCommand(argv, io = { stdout: process.stdout, stderr: process.stderr }) {
  let settings;
  let values;
  let file;
  let code;
  try {
    let positionals;
    ({ values, positionals } = parse(argv, 'isolet run'));
    if (values.help) {
      io.stdout.write(RUN_USAGE + '\n');
      return RUN_EXIT_CODES.ok;
    }
    if (positionals.length !== 1) throw new UsageError('run takes exactly one file, or - for standard input');
    file = positionals[0];
    settings = settingsFrom(values, file === '-' ? undefined : file);
    if (file === '-') {
      code = await readStdin();
    } else {
      try {
        code = fs.readFileSync(file, 'utf8');
      } catch (err) {
        throw new UsageError(`cannot read ${file}: ${err.code || err.message}`);
      }
    }
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    io.stderr.write(usageText('isolet run', err.message));
    return RUN_EXIT_CODES.usage;
  }

  const { SandboxEngine } = require('../engine');
  let engine;
  try {
    engine = new SandboxEngine(settings.engineConfig);
    await engine.init();
  } catch (err) {
    io.stderr.write(`isolet run: ${err.message}\n`);
    return RUN_EXIT_CODES.usage;
  }
  try {
    let end;
    // Where the submitted code came from (the last-expression rewrite, a TypeScript transform).
    let map = [];
    try {
      const prepared = await prepareCode(code, settings.language, settings.limits.wallTimeMs);
      map = prepared.edits;
      const session = engine.submit({
        requestId: 'run',
        code: prepared.code,
        language: prepared.language,
        toolPolicy: { allowedTools: settings.toolNames },
        web: settings.web,
      });
      end = await session.done;
    } catch (err) {
      // Bad TypeScript: what the engine would have answered.
      end = { type: 'error', error: err, logs: [] };
    }
    // Stack frames name the user's file, at its positions.
    const name = file === '-' ? '<stdin>' : file;
    for (const entry of remapLogs(end.logs || [], map, name)) io.stderr.write(`${entry.level === 'log' ? '' : `[${entry.level}] `}${entry.message}\n`);
    if (end.type === 'result') {
      io.stdout.write(toJson(end.data) + '\n');
      return RUN_EXIT_CODES.ok;
    }
    const error = remapError(end.error, map, name);
    const where = error.line !== undefined ? ` (line ${error.line}, column ${error.column})` : '';
    const detail = error.thrown && error.thrown.stack ? error.thrown.stack : `${error.name}: ${error.message}`;
    const fields = thrownFieldsText(error);
    io.stderr.write(`isolet run: ${error.name} [${error.code}]${where}\n${detail}\n${fields ? `${fields}\n` : ''}`);
    if (await typeScriptHint(error, settings.language, values, code, settings.limits.wallTimeMs)) io.stderr.write(`isolet run: this looks like TypeScript; pass --language typescript\n`);
    return RUN_EXIT_CODES[error.name] ?? RUN_EXIT_CODES.SandboxError;
  } finally {
    await engine.shutdown();
  }
}

module.exports = { runCommand, RUN_USAGE, RUN_EXIT_CODES };
