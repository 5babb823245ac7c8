#!/usr/bin/env node
'use strict';

// isolet command line: `run`, `mcp` (in lib/cli/) and `autofix` (below).
//
//   isolet run <file|-> [--timeout-ms <ms>] [--memory-limit-mb <mb>] [--language <lang>] ...
//   isolet mcp [the same limit flags]
//
//   isolet autofix <file> --root <dir> [--test <file>] [--yes] [--instruction <text>]
//                  [--model <m>] [--base-url <u>] [--audit-log <file>]
//                  [--timeout-ms <ms>] [--memory-limit-mb <mb>] [--provider-timeout-ms <ms>]
//
// Prints the unified diff of a fix that passed the sandbox. On a terminal it asks y/N
// before writing; without a terminal it writes only with --yes (else: needs-approval).
// Exit codes: 0 applied, 1 failed, 2 usage error, 3 not applied (needs-approval or rejected).

const path = require('node:path');
const fs = require('node:fs');
const readline = require('node:readline');

const EXIT_APPLIED = 0;
const EXIT_FAILED = 1;
const EXIT_USAGE = 2;
const EXIT_NOT_APPLIED = 3;

const DEFAULT_INSTRUCTION = 'Find and fix the bug in this file.';

/** Its own flags; the number flags (`--timeout-ms`, ...) come from isolet-core's AUTOFIX_FLAGS. */
const AUTOFIX_OWN_FLAGS = {
  root: { type: 'string' },
  instruction: { type: 'string', short: 'i' },
  test: { type: 'string' },
  yes: { type: 'boolean', short: 'y' },
  model: { type: 'string' },
  'base-url': { type: 'string' },
  'audit-log': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
};

/** `isolet autofix --help`, with the defaults of isolet-core's AUTOFIX_OPTIONS. */
function autofixUsage() {
  const defaults = require('../lib/native').entryDefaults().autofix;
  return `usage: isolet autofix <file> --root <dir> [options]

Asks a chat model (OpenAI-compatible) for a fix, runs it in a fresh V8 isolate,
shows the diff and writes the file only when the fix passed and you approved it.

options:
  --root <dir>             directory the file must stay inside (required)
  --instruction, -i <text> what is wrong (default: "${DEFAULT_INSTRUCTION}")
  --test <file>            sandbox code that must pass after the fix (same isolate)
  --yes, -y                apply without asking once the sandbox passed
  --model <m>              model (default: $OPENAI_MODEL, else gpt-4o-mini)
  --base-url <u>           API base URL (default: $OPENAI_BASE_URL, else OpenAI)
  --audit-log <file>       JSON-lines audit log (default: <root>/.isolet-audit.jsonl)
  --timeout-ms <ms>        sandbox time limit per run (default ${defaults.timeoutMs})
  --memory-limit-mb <mb>   sandbox heap limit (default ${defaults.memoryLimitMb})
  --provider-timeout-ms <ms>
                           how long to wait for the model (default ${defaults.providerTimeoutMs})
  -h, --help               show this help
  -v, --version            show the version
Renamed (the old spellings still work, with a warning): --timeout, --memory,
--provider-timeout (docs/options.md)

The API key comes from $OPENAI_API_KEY.
exit codes: 0 applied, 1 failed, 2 usage error, 3 not applied (needs approval or rejected)`;
}

function usageError(message) {
  process.stderr.write(require('../lib/cli/options').usageText('isolet autofix', message));
  return EXIT_USAGE;
}

// Terminal control characters a suggestion may carry (C0 except tab and newline, DEL,
// C1, and the bidi overrides that reorder what a reviewer sees), shown as visible escapes
// so that a model's output can neither drive the terminal nor hide code from review.
const CONTROL_CHARS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
const NAMED_ESCAPES = new Map([['\r', '\\r'], ['\b', '\\b'], ['\f', '\\f'], ['\v', '\\v'], ['\0', '\\0']]);

function escapeControls(text) {
  return text.replace(CONTROL_CHARS, (c) => {
    const named = NAMED_ESCAPES.get(c);
    if (named) return named;
    const code = c.charCodeAt(0);
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}

function colorDiff(rawDiff, enabled) {
  const diff = escapeControls(rawDiff);
  if (!enabled) return diff;
  return diff
    .split('\n')
    .map((line) => {
      if (line.startsWith('+++') || line.startsWith('---')) return `\x1b[1m${line}\x1b[0m`;
      if (line.startsWith('@@')) return `\x1b[36m${line}\x1b[0m`;
      if (line.startsWith('+')) return `\x1b[32m${line}\x1b[0m`;
      if (line.startsWith('-')) return `\x1b[31m${line}\x1b[0m`;
      return line;
    })
    .join('\n');
}

function useColor(stream) {
  return Boolean(stream.isTTY) && !('NO_COLOR' in process.env) && process.env.TERM !== 'dumb';
}

function ask(question) {
  return new Promise((resolve) => {
    const rl = readline.createInterface({ input: process.stdin, output: process.stderr });
    let answered = false;
    rl.on('SIGINT', () => {
      process.stderr.write('\n');
      rl.close();
    });
    rl.on('close', () => {
      if (!answered) resolve(false);
    });
    rl.question(question, (answer) => {
      answered = true;
      rl.close();
      resolve(/^\s*y(es)?\s*$/i.test(answer));
    });
  });
}

async function autofixCommand(argv) {
  const { UsageError, commandFlags, parse } = require('../lib/cli/options');
  const native = require('../lib/native');
  let values;
  let positionals;
  let limits;
  try {
    ({ values, positionals } = parse(argv, 'isolet autofix', commandFlags('autofix', AUTOFIX_OWN_FLAGS)));
    // The number flags, checked (natively) under their own names.
    limits = native.autofixFlags(values);
  } catch (err) {
    if (!(err instanceof UsageError) && err.code !== 'ERR_ISOLET_VALIDATION') throw err;
    return usageError(err.message);
  }
  if (values.help) {
    process.stdout.write(autofixUsage() + '\n');
    return 0;
  }
  if (positionals.length !== 1) return usageError('autofix takes exactly one file');
  if (!values.root) return usageError('--root <dir> is required');

  let test;
  if (values.test !== undefined) {
    try {
      test = fs.readFileSync(path.resolve(values.test), 'utf8');
    } catch (err) {
      return usageError(`cannot read --test ${values.test}: ${err.code || err.message}`);
    }
  }

  const interactive = Boolean(process.stdin.isTTY && process.stderr.isTTY);
  const color = useColor(process.stdout);
  let shownDiff = false;

  const options = {
    // The CLI takes paths relative to the current directory, like any command.
    filePath: path.resolve(positionals[0]),
    root: path.resolve(values.root),
    instruction: values.instruction ?? DEFAULT_INSTRUCTION,
    test,
    model: values.model,
    baseURL: values['base-url'],
    auditLog: values['audit-log'] === undefined ? undefined : path.resolve(values['audit-log']),
    autoApprove: values.yes === true,
  };
  Object.assign(options, limits);
  for (const k of Object.keys(options)) if (options[k] === undefined) delete options[k];
  if (!options.autoApprove && interactive) {
    options.approve = async (review) => {
      process.stdout.write(colorDiff(review.diff, color));
      shownDiff = true;
      return ask(`Apply this change to ${review.file}? [y/N] `);
    };
  }

  const { autoFix } = require('../lib/autofix');
  let result;
  try {
    result = await autoFix(options);
  } catch (err) {
    process.stderr.write(`isolet autofix: ${err.message}\n`);
    return err && err.code === 'ERR_ISOLET_AUTOFIX_OPTIONS' ? EXIT_USAGE : EXIT_FAILED;
  }

  if (typeof result.diff === 'string' && result.diff !== '' && !shownDiff) {
    process.stdout.write(colorDiff(result.diff, color));
  }
  const where = result.file;
  let code;
  switch (result.status) {
    case 'applied':
      process.stderr.write(`isolet autofix: applied ${where}\n`);
      code = EXIT_APPLIED;
      break;
    case 'needs-approval':
      process.stderr.write(
        `isolet autofix: needs-approval: ${where} was not changed; re-run on a terminal to review, or with --yes to apply\n`,
      );
      code = EXIT_NOT_APPLIED;
      break;
    case 'rejected':
      process.stderr.write(`isolet autofix: rejected: ${where} was not changed\n`);
      code = EXIT_NOT_APPLIED;
      break;
    default:
      // The message and logs may come from the suggested code: escaped like the diff.
      process.stderr.write(`isolet autofix: failed (${result.reason}): ${escapeControls(String(result.message))}\n`);
      if (result.sandbox && Array.isArray(result.sandbox.logs) && result.sandbox.logs.length > 0) {
        process.stderr.write(`sandbox logs:\n${result.sandbox.logs.map((l) => '  ' + escapeControls(formatLog(l))).join('\n')}\n`);
      }
      code = EXIT_FAILED;
  }
  if (result.auditError) process.stderr.write(`isolet autofix: warning: ${result.auditError}\n`);
  return code;
}

function formatLog(entry) {
  if (typeof entry === 'string') return entry;
  if (entry && typeof entry === 'object' && 'message' in entry) {
    return `${entry.level ? `[${entry.level}] ` : ''}${entry.message}`;
  }
  try {
    return JSON.stringify(entry);
  } catch {
    return String(entry);
  }
}

const HELP = `usage: isolet <command> [options]

commands:
  run <file|->   run a JavaScript/TypeScript file (or stdin) in a fresh V8 isolate;
                 the result as JSON on stdout, console output on stderr
  mcp            serve an MCP tool (run_code) over stdio that runs code in isolet
  autofix <file> ask a model for a fix, check it in the sandbox, apply when approved
  help           show this help (also -h, --help); -v, --version shows the version

isolet <command> --help describes each command's options and exit codes.`;

const COMMANDS = ['run', 'mcp', 'autofix', 'help'];

function commandError(message) {
  process.stderr.write(`isolet: ${message}\nsee isolet --help\n`);
  return EXIT_USAGE;
}

async function main(argv) {
  const [command, ...rest] = argv;
  if (command === undefined) return commandError(`a command is needed: ${COMMANDS.join(', ')}`);
  if (command === '-h' || command === '--help' || command === 'help') {
    process.stdout.write(HELP + '\n');
    return 0;
  }
  if (command === '-v' || command === '--version') {
    process.stdout.write(require('../package.json').version + '\n');
    return 0;
  }
  if (command === 'autofix') return autofixCommand(rest);
  if (command === 'run') return require('../lib/cli/run').runCommand(rest);
  if (command === 'mcp') return require('../lib/cli/mcp').mcpCommand(rest);
  if (command.startsWith('-')) return commandError(`${command} is not a known option of isolet; options come after the command`);
  return commandError(require('../lib/native').unknownCommandMessage('isolet', command, COMMANDS));
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`isolet: ${(err && err.stack) || err}\n`);
    process.exitCode = EXIT_FAILED;
  },
);
