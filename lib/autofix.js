'use strict';

/**
 * autoFix(): the seed's AI fix pipeline on top of the sandbox.
 *
 *   1. assertSafePath      the file's real path lies inside root's real path, is a regular file
 *   2. read                the original bytes (bounded, UTF-8 text)
 *   3. ask the provider    OpenAI-compatible chat completions (or a custom provider); extract code
 *   4. sandbox             the suggestion alone, then suggestion + "\n;void 0;\n" + test, fresh isolates
 *   5. apply               only if it passed and was approved: temp file + fsync + rename
 *   6. fail                the file keeps its exact original bytes
 *   7. audit               one JSON line per call, whatever happens
 *
 * Runs on the Node main thread. The sandbox is loaded lazily from the package root
 * (`require('..')`) so that index.js can re-export this module without a require cycle.
 * See docs/autofix.md for the contract.
 */

const fs = require('node:fs');
const fsp = require('node:fs/promises');
const path = require('node:path');
const crypto = require('node:crypto');
const { performance } = require('node:perf_hooks');

const DEFAULT_MODEL = 'gpt-4o-mini';
const DEFAULT_PROVIDER_TIMEOUT_MS = 60_000;
const DEFAULT_MAX_SUGGESTION_BYTES = 1024 * 1024;
const DEFAULT_MAX_FILE_BYTES = 1024 * 1024;
const DEFAULT_AUDIT_LOG_NAME = '.isolet-audit.jsonl';
const AUDIT_VERSION = 1;

const STATUSES = Object.freeze(['applied', 'needs-approval', 'rejected', 'failed']);
const FAILURE_REASONS = Object.freeze([
  'unsafe-path',
  'read-failure',
  'provider-error',
  'no-code',
  'sandbox-failure',
  'test-failure',
  'write-failure',
]);

const O_NOFOLLOW = fs.constants.O_NOFOLLOW || 0;
const O_DIRECTORY = fs.constants.O_DIRECTORY || 0;

/** Programmer errors (wrong option types) reject with this; nothing is read, sent or written. */
class AutoFixOptionsError extends TypeError {
  constructor(message) {
    super(message);
    this.name = 'AutoFixOptionsError';
    this.code = 'ERR_ISOLET_AUTOFIX_OPTIONS';
  }
}

/** The audit log could not be opened; autoFix refuses to run without one. */
class AutoFixAuditError extends Error {
  constructor(message, cause) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'AutoFixAuditError';
    this.code = 'ERR_ISOLET_AUTOFIX_AUDIT';
  }
}

/** A pipeline step failed; carries the typed reason. Internal: autoFix resolves with it. */
class StepFailure extends Error {
  /**
   * @param {string} reason one of FAILURE_REASONS
   * @param {string} message for the caller (may quote the provider or the sandbox, redacted)
   * @param {{ error?: object, auditMessage?: string, sandbox?: object }} [details]
   *   auditMessage: host-written text for the audit log (never provider/sandbox free text)
   */
  constructor(reason, message, details = {}) {
    super(message);
    this.reason = reason;
    this.details = details;
  }
}

// ---------------------------------------------------------------------------
// Options

function validateOptions(options) {
  if (options === null || typeof options !== 'object') {
    throw new AutoFixOptionsError('autoFix(options): options must be an object');
  }
  const o = options;
  for (const key of ['filePath', 'root', 'instruction']) {
    if (typeof o[key] !== 'string') {
      throw new AutoFixOptionsError(`autoFix(options): options.${key} must be a string`);
    }
  }
  if (o.root === '') throw new AutoFixOptionsError('autoFix(options): options.root must not be empty');
  if (o.filePath === '') throw new AutoFixOptionsError('autoFix(options): options.filePath must not be empty');
  if (o.instruction.trim() === '') {
    throw new AutoFixOptionsError('autoFix(options): options.instruction must describe what is wrong');
  }
  for (const key of ['test', 'apiKey', 'baseURL', 'model', 'auditLog']) {
    if (o[key] !== undefined && typeof o[key] !== 'string') {
      throw new AutoFixOptionsError(`autoFix(options): options.${key} must be a string when given`);
    }
  }
  if (o.auditLog === '') throw new AutoFixOptionsError('autoFix(options): options.auditLog must not be empty');
  if (o.auditLog !== undefined && o.auditLog.includes('\0')) {
    throw new AutoFixOptionsError('autoFix(options): options.auditLog must not contain NUL bytes');
  }
  for (const key of ['memoryLimitMb', 'timeoutMs', 'providerTimeoutMs', 'maxSuggestionBytes', 'maxFileBytes']) {
    const v = o[key];
    if (v !== undefined && !(Number.isSafeInteger(v) && v > 0)) {
      throw new AutoFixOptionsError(`autoFix(options): options.${key} must be a positive whole number when given`);
    }
  }
  if (o.language !== undefined && o.language !== 'javascript' && o.language !== 'typescript') {
    throw new AutoFixOptionsError("autoFix(options): options.language must be 'javascript' or 'typescript' when given");
  }
  if (o.autoApprove !== undefined && typeof o.autoApprove !== 'boolean') {
    throw new AutoFixOptionsError('autoFix(options): options.autoApprove must be a boolean when given');
  }
  if (o.approve !== undefined && typeof o.approve !== 'function') {
    throw new AutoFixOptionsError('autoFix(options): options.approve must be a function when given');
  }
  const p = o.provider;
  if (p !== undefined && p !== 'openai') {
    if (p === null || typeof p !== 'object' || typeof p.complete !== 'function') {
      throw new AutoFixOptionsError(
        "autoFix(options): options.provider must be 'openai' or an object with a complete({ system, prompt, model, signal }) method",
      );
    }
  }
}

function resolveSettings(o) {
  const env = process.env;
  const custom = o.provider !== undefined && o.provider !== 'openai';
  return {
    custom,
    providerName: custom
      ? typeof o.provider.name === 'string' && o.provider.name
        ? o.provider.name
        : 'custom'
      : 'openai',
    apiKey: o.apiKey ?? nonEmpty(env.OPENAI_API_KEY),
    baseURL: o.baseURL ?? nonEmpty(env.OPENAI_BASE_URL),
    model: o.model ?? nonEmpty(env.OPENAI_MODEL) ?? DEFAULT_MODEL,
    providerTimeoutMs: o.providerTimeoutMs ?? DEFAULT_PROVIDER_TIMEOUT_MS,
    maxSuggestionBytes: o.maxSuggestionBytes ?? DEFAULT_MAX_SUGGESTION_BYTES,
    maxFileBytes: o.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES,
  };
}

function nonEmpty(v) {
  return typeof v === 'string' && v !== '' ? v : undefined;
}

// ---------------------------------------------------------------------------
// Step 1: assertSafePath

function isInside(parent, child) {
  const rel = path.relative(parent, child);
  return rel !== '' && rel !== '..' && !rel.startsWith('..' + path.sep) && !path.isAbsolute(rel);
}

/**
 * Resolves `filePath` (relative paths are taken relative to `root`) and checks that the
 * file it names is a regular file whose real path lies inside root's real path.
 * Throws StepFailure('unsafe-path') otherwise.
 */
async function assertSafePath(filePath, root, auditRealPath) {
  if (root.includes('\0')) throw new StepFailure('unsafe-path', 'root contains a NUL byte');
  if (filePath.includes('\0')) throw new StepFailure('unsafe-path', 'file path contains a NUL byte');

  let rootReal;
  try {
    rootReal = await fsp.realpath(path.resolve(root));
  } catch (err) {
    throw new StepFailure('unsafe-path', `root cannot be resolved: ${errCode(err)}`);
  }
  const rootStat = await fsp.stat(rootReal).catch(() => null);
  if (!rootStat || !rootStat.isDirectory()) throw new StepFailure('unsafe-path', 'root is not a directory');

  const requested = path.resolve(rootReal, filePath);
  let link;
  try {
    link = await fsp.lstat(requested);
  } catch (err) {
    throw new StepFailure('unsafe-path', `file cannot be examined: ${errCode(err)}`);
  }
  let fileReal;
  try {
    fileReal = await fsp.realpath(requested);
  } catch (err) {
    throw new StepFailure('unsafe-path', `file cannot be resolved: ${errCode(err)}`);
  }
  if (fileReal === rootReal) throw new StepFailure('unsafe-path', 'file is root itself, not a regular file');
  if (!isInside(rootReal, fileReal)) {
    throw new StepFailure(
      'unsafe-path',
      link.isSymbolicLink() ? 'file is a symbolic link that leads outside root' : 'file is outside root',
    );
  }
  let st;
  try {
    st = await fsp.lstat(fileReal);
  } catch (err) {
    throw new StepFailure('unsafe-path', `file cannot be examined: ${errCode(err)}`);
  }
  if (!st.isFile()) {
    throw new StepFailure('unsafe-path', `file is not a regular file (${describeType(st)})`);
  }
  if (st.nlink > 1) {
    // Another name for the same bytes may live outside root; reading it would leak that file.
    throw new StepFailure(
      'unsafe-path',
      `file has ${st.nlink} hard links; refusing a file that may be shared outside root`,
    );
  }
  if (auditRealPath !== undefined && auditRealPath === fileReal) {
    throw new StepFailure('unsafe-path', 'file is the audit log');
  }
  return { rootReal, fileReal, rel: toPosix(path.relative(rootReal, fileReal)), stat: st };
}

function describeType(st) {
  if (st.isDirectory()) return 'directory';
  if (st.isSymbolicLink()) return 'symbolic link';
  if (st.isFIFO()) return 'FIFO';
  if (st.isSocket()) return 'socket';
  if (st.isCharacterDevice() || st.isBlockDevice()) return 'device';
  return 'not a file';
}

function toPosix(p) {
  return path.sep === '/' ? p : p.split(path.sep).join('/');
}

function errCode(err) {
  return (err && (err.code || err.message)) || String(err);
}

// ---------------------------------------------------------------------------
// Step 2: read

/** Reads through a descriptor opened without following a final symlink; checks it is the file we vetted. */
async function readVetted(fileReal, expected, maxBytes) {
  let fh;
  try {
    fh = await fsp.open(fileReal, fs.constants.O_RDONLY | O_NOFOLLOW);
  } catch (err) {
    throw new StepFailure('read-failure', `file cannot be opened: ${errCode(err)}`);
  }
  try {
    const st = await fh.stat();
    if (!st.isFile() || (expected && (st.ino !== expected.ino || st.dev !== expected.dev))) {
      throw new StepFailure('read-failure', 'file was replaced while it was being checked');
    }
    if (st.size > maxBytes) {
      throw new StepFailure('read-failure', `file is ${st.size} bytes, over maxFileBytes (${maxBytes})`);
    }
    const bytes = await fh.readFile();
    if (bytes.length > maxBytes) {
      throw new StepFailure('read-failure', `file is over maxFileBytes (${maxBytes})`);
    }
    return { bytes, stat: st };
  } catch (err) {
    if (err instanceof StepFailure) throw err;
    throw new StepFailure('read-failure', `file cannot be read: ${errCode(err)}`);
  } finally {
    await fh.close().catch(() => {});
  }
}

function decodeText(bytes) {
  if (bytes.includes(0)) throw new StepFailure('read-failure', 'file contains NUL bytes: not a text file');
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    throw new StepFailure('read-failure', 'file is not valid UTF-8 text');
  }
}

function sha256(bytes) {
  return crypto.createHash('sha256').update(bytes).digest('hex');
}

// ---------------------------------------------------------------------------
// Step 3: provider

const SYSTEM_PROMPT = [
  'You fix bugs in JavaScript source files.',
  'You receive one file and a description of what is wrong with it.',
  'Reply with the complete corrected file in a single ```js fenced code block and nothing else.',
  'Change only what the fix needs; keep the rest of the file as it is.',
  'The file is checked by running it as a classic script (not an ES module) in a bare JavaScript engine:',
  'there is no require() of other modules, no Node.js API, no file system, no network and no timers;',
  '`module.exports` and `exports` are available.',
].join(' ');

function fenceFor(text) {
  let longest = 0;
  for (const m of text.matchAll(/`+/g)) longest = Math.max(longest, m[0].length);
  return '`'.repeat(Math.max(3, longest + 1));
}

/** The language a file is checked in: `options.language`, else TypeScript for .ts/.mts/.cts. */
function languageOf(options) {
  if (options.language !== undefined) return options.language;
  return /\.[cm]?ts$/i.test(options.filePath) ? 'typescript' : 'javascript';
}

/** The system prompt, naming TypeScript when the file is TypeScript. */
function systemPromptFor(language) {
  if (language !== 'typescript') return SYSTEM_PROMPT;
  return SYSTEM_PROMPT.replace('JavaScript source files', 'TypeScript source files')
    .replace('```js fenced', '```ts fenced')
    .replace('in a bare JavaScript engine:', 'in a bare JavaScript engine after its types are erased (no enum, namespace or parameter properties):');
}

function buildPrompt(rel, instruction, test, content, language = 'javascript') {
  const tag = language === 'typescript' ? 'ts' : 'js';
  const parts = [`File: ${rel}`, '', 'What is wrong:', instruction.trim(), ''];
  if (test !== undefined && test.trim() !== '') {
    const f = fenceFor(test);
    parts.push(
      'After the file, this check runs in the same script and must complete without throwing:',
      `${f}${tag}`,
      test,
      f,
      '',
    );
  }
  const f = fenceFor(content);
  parts.push('Current content of the file:', `${f}${tag}`, content.endsWith('\n') ? content.slice(0, -1) : content, f);
  return parts.join('\n');
}

/** The default provider's client library: an optional peer dependency, loaded only here. */
function loadOpenAI() {
  try {
    return require('openai').OpenAI;
  } catch (err) {
    if (err && err.code === 'MODULE_NOT_FOUND' && String(err.message).includes("'openai'")) {
      throw new OpenAIMissingError();
    }
    throw err;
  }
}

class OpenAIMissingError extends Error {
  constructor() {
    super(
      "autoFix's default provider needs the `openai` package, an optional peer dependency of isolet: " +
        'run `npm install openai`, or pass options.provider',
    );
    this.name = 'OpenAIMissingError';
  }
}

function openAIProvider(settings) {
  const OpenAI = loadOpenAI();
  const client = new OpenAI({
    apiKey: settings.apiKey,
    baseURL: settings.baseURL,
    timeout: settings.providerTimeoutMs,
    maxRetries: 0,
  });
  return {
    name: 'openai',
    async complete({ system, prompt, model, signal }) {
      const completion = await client.chat.completions.create(
        {
          model,
          messages: [
            { role: 'system', content: system },
            { role: 'user', content: prompt },
          ],
        },
        { signal, timeout: settings.providerTimeoutMs, maxRetries: 0 },
      );
      if (completion === null || typeof completion !== 'object' || !Array.isArray(completion.choices)) {
        throw new ProviderResponseError('the response is not a chat completion (no choices array)');
      }
      const choice = completion.choices[0];
      if (!choice || typeof choice !== 'object' || !choice.message || typeof choice.message !== 'object') {
        throw new ProviderResponseError('the response has no message in choices[0]');
      }
      if (choice.finish_reason === 'length') {
        throw new ProviderResponseError('the answer was cut off (finish_reason "length")');
      }
      if (typeof choice.message.content !== 'string') {
        const refusal = typeof choice.message.refusal === 'string' ? ' (the model refused)' : '';
        throw new ProviderResponseError(`the response message has no text content${refusal}`);
      }
      return choice.message.content;
    },
  };
}

class ProviderResponseError extends Error {
  constructor(message) {
    super(message);
    this.name = 'ProviderResponseError';
  }
}

class ProviderTimeoutError extends Error {
  constructor(ms) {
    super(`the provider did not answer within ${ms} ms`);
    this.name = 'ProviderTimeoutError';
  }
}

async function askProvider(provider, request, timeoutMs) {
  const controller = new AbortController();
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => {
      const err = new ProviderTimeoutError(timeoutMs);
      controller.abort(err);
      reject(err);
    }, timeoutMs);
  });
  try {
    const answer = await Promise.race([
      Promise.resolve().then(() => provider.complete({ ...request, signal: controller.signal })),
      timeout,
    ]);
    if (typeof answer !== 'string') {
      throw new ProviderResponseError(
        `the provider returned ${answer === null ? 'null' : typeof answer}, not a string`,
      );
    }
    return answer;
  } finally {
    clearTimeout(timer);
  }
}

/** Removes anything that looks like a credential from a provider message. */
function redact(text, apiKey) {
  let out = String(text);
  if (typeof apiKey === 'string' && apiKey.length >= 4) out = out.split(apiKey).join('[redacted]');
  out = out.replace(/\bsk-[A-Za-z0-9_*.-]{4,}/g, 'sk-[redacted]');
  out = out.replace(/\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=*-]{8,}/gi, '$1 [redacted]');
  return out.length > 500 ? out.slice(0, 500) + '…' : out;
}

function describeProviderError(err, apiKey) {
  let name = (err && err.name) || 'Error';
  if (name === 'Error' && err && err.constructor && typeof err.constructor.name === 'string')
    name = err.constructor.name;
  const status = err && typeof err.status === 'number' ? err.status : undefined;
  const detail = redact((err && err.message) || String(err), apiKey);
  const head =
    err instanceof ProviderTimeoutError || name === 'APIConnectionTimeoutError'
      ? 'provider request timed out'
      : status !== undefined
        ? `provider answered HTTP ${status}`
        : err instanceof SyntaxError
          ? 'provider response is not valid JSON'
          : 'provider request failed';
  return {
    name,
    status,
    message: `${head}: ${detail}`,
    auditMessage: `${head} (${name}${status !== undefined ? ` ${status}` : ''})`,
  };
}

// ---------------------------------------------------------------------------
// Step 3b: extract code

const CODE_LANGS = new Set(['', 'js', 'javascript', 'jsx', 'mjs', 'cjs', 'ts', 'typescript', 'tsx', 'node']);

/**
 * Returns the code of the first fenced block whose language is JavaScript/TypeScript (or
 * unlabelled); without any fence, the whole answer if it looks like code; else null.
 */
function extractCode(answer) {
  const lines = answer.split(/\r?\n/);
  let sawFence = false;
  for (let i = 0; i < lines.length; i++) {
    const open = /^ {0,3}(`{3,}|~{3,})\s*([\w+-]*)[^`]*$/.exec(lines[i]);
    if (!open) continue;
    sawFence = true;
    const fence = open[1];
    const lang = open[2].toLowerCase();
    let end = -1;
    for (let j = i + 1; j < lines.length; j++) {
      const close = /^ {0,3}(`{3,}|~{3,})\s*$/.exec(lines[j]);
      if (close && close[1][0] === fence[0] && close[1].length >= fence.length) {
        end = j;
        break;
      }
    }
    if (end === -1) return { code: null, why: 'the answer has an unterminated code block' };
    if (CODE_LANGS.has(lang)) {
      const code = lines.slice(i + 1, end).join('\n');
      if (code.trim() === '') return { code: null, why: 'the code block in the answer is empty' };
      return { code, why: 'fenced' };
    }
    i = end;
  }
  if (sawFence) return { code: null, why: 'the answer has no JavaScript code block' };
  const trimmed = answer.trim();
  if (trimmed !== '' && looksLikeCode(trimmed)) return { code: trimmed, why: 'whole answer' };
  return { code: null, why: 'the answer contains no code' };
}

const CODE_START =
  /^(?:const|let|var|function|async|class|return|if|else|for|while|do|switch|case|try|catch|finally|throw|import|export|module\.exports|exports\.|'use strict'|"use strict"|\/\/|\/\*|\*|#!|\}|\)|\]|[\w$.]+\s*(?:=|\())/;
const CODE_END = /[;{}()[\],]$|\*\/$/;

function looksLikeCode(text) {
  const lines = text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l !== '');
  if (lines.length === 0) return false;
  let codeish = 0;
  let strong = 0;
  for (const line of lines) {
    const start = CODE_START.test(line);
    const end = CODE_END.test(line);
    if (start || end) codeish++;
    if (/[;{}]|=>/.test(line)) strong++;
  }
  return strong > 0 && codeish / lines.length >= 0.6;
}

/** Keeps the original file's conventions: line endings and trailing newline. */
function normaliseSuggestion(code, original) {
  let out = code.replace(/\r\n/g, '\n');
  if (original.endsWith('\n') && !out.endsWith('\n')) out += '\n';
  const crlf = (original.match(/\r\n/g) || []).length;
  const lf = (original.match(/\n/g) || []).length;
  if (crlf > 0 && crlf * 2 >= lf) out = out.replace(/\n/g, '\r\n');
  if (original.charCodeAt(0) === 0xfeff && out.charCodeAt(0) !== 0xfeff) out = '\ufeff' + out;
  return out;
}

// ---------------------------------------------------------------------------
// Step 4: sandbox

function loadRunSandbox() {
  // Lazy: index.js may re-export this module, so requiring it at load time would be a cycle.
  const root = require('..');
  if (typeof root.runSandbox !== 'function') {
    throw new Error('runSandbox is not exported by the isolet package root');
  }
  return root.runSandbox;
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
  const options = {};
  if (limits.memoryLimitMb !== undefined) options.memoryLimitMb = limits.memoryLimitMb;
  if (limits.timeoutMs !== undefined) options.timeoutMs = limits.timeoutMs;
  if (limits.language !== undefined) options.language = limits.language;
  let result;
  try {
    result = await runSandbox(shape.script, options);
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

function sandboxFailure(reason, result, shape, suggestion) {
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
  return new StepFailure(reason, `${what}: ${name}${at}${detail ? `: ${detail}` : ''}`, { error, auditMessage });
}

// ---------------------------------------------------------------------------
// Diff (unified, 3 lines of context)

function splitLines(text) {
  if (text === '') return [];
  const out = text.split(/(?<=\n)/);
  return out;
}

/** Line-level edit script: common prefix/suffix trimmed, LCS in between (bounded, else block replace). */
function diffLines(a, b) {
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const ops = [];
  for (let i = 0; i < start; i++) ops.push({ op: ' ', text: a[i] });
  const n = endA - start;
  const m = endB - start;
  if (n > 0 && m > 0 && n * m <= 4_000_000) {
    // LCS table over the differing middle, suffix-based so we can walk forward.
    const w = m + 1;
    const t = new Uint32Array((n + 1) * w);
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) {
        t[i * w + j] =
          a[start + i] === b[start + j] ? t[(i + 1) * w + j + 1] + 1 : Math.max(t[(i + 1) * w + j], t[i * w + j + 1]);
      }
    }
    let i = 0;
    let j = 0;
    while (i < n && j < m) {
      if (a[start + i] === b[start + j]) {
        ops.push({ op: ' ', text: a[start + i] });
        i++;
        j++;
      } else if (t[(i + 1) * w + j] >= t[i * w + j + 1]) {
        ops.push({ op: '-', text: a[start + i++] });
      } else {
        ops.push({ op: '+', text: b[start + j++] });
      }
    }
    while (i < n) ops.push({ op: '-', text: a[start + i++] });
    while (j < m) ops.push({ op: '+', text: b[start + j++] });
  } else {
    for (let i = start; i < endA; i++) ops.push({ op: '-', text: a[i] });
    for (let j = start; j < endB; j++) ops.push({ op: '+', text: b[j] });
  }
  for (let i = endA; i < a.length; i++) ops.push({ op: ' ', text: a[i] });
  return ops;
}

function renderLine(op, text) {
  if (text.endsWith('\n')) return op + text.slice(0, text.endsWith('\r\n') ? -2 : -1) + '\n';
  return op + text + '\n\\ No newline at end of file\n';
}

/** Unified diff of two texts, `--- a/<name>` / `+++ b/<name>`; '' when they are equal. */
function unifiedDiff(before, after, name, context = 3) {
  const a = splitLines(before);
  const b = splitLines(after);
  const ops = diffLines(a, b);
  if (!ops.some((o) => o.op !== ' ')) return '';
  let out = `--- a/${name}\n+++ b/${name}\n`;
  let idx = 0;
  while (idx < ops.length) {
    // Find the next change.
    while (idx < ops.length && ops[idx].op === ' ') idx++;
    if (idx >= ops.length) break;
    let hunkStart = Math.max(0, idx - context);
    // Extend the hunk while changes are within 2*context of each other.
    let hunkEnd = idx;
    let k = idx;
    while (k < ops.length) {
      if (ops[k].op !== ' ') {
        hunkEnd = k;
        k++;
        continue;
      }
      let run = 0;
      while (k + run < ops.length && ops[k + run].op === ' ') run++;
      if (k + run >= ops.length || run > 2 * context) break;
      k += run;
    }
    const stop = Math.min(ops.length, hunkEnd + context + 1);
    // Line numbers at hunkStart.
    let aLine = 1;
    let bLine = 1;
    for (let q = 0; q < hunkStart; q++) {
      if (ops[q].op !== '+') aLine++;
      if (ops[q].op !== '-') bLine++;
    }
    let aCount = 0;
    let bCount = 0;
    let body = '';
    for (let q = hunkStart; q < stop; q++) {
      const o = ops[q];
      if (o.op !== '+') aCount++;
      if (o.op !== '-') bCount++;
      body += renderLine(o.op, o.text);
    }
    const aStart = aCount === 0 ? aLine - 1 : aLine;
    const bStart = bCount === 0 ? bLine - 1 : bLine;
    out += `@@ -${aStart}${aCount === 1 ? '' : ',' + aCount} +${bStart}${bCount === 1 ? '' : ',' + bCount} @@\n` + body;
    idx = stop;
    hunkStart = stop;
  }
  return out;
}

// ---------------------------------------------------------------------------
// Step 5: atomic apply

async function applyAtomically(fileReal, rootReal, expected, newBytes) {
  const dir = path.dirname(fileReal);
  const tmp = path.join(
    dir,
    `.${path.basename(fileReal)}.isolet-${process.pid}-${crypto.randomBytes(6).toString('hex')}.tmp`,
  );
  let created = false;
  try {
    const fh = await fsp.open(
      tmp,
      fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | O_NOFOLLOW,
      0o600,
    );
    created = true;
    try {
      await fh.chmod(expected.mode & 0o7777);
      if (
        typeof process.getuid === 'function' &&
        (expected.uid !== process.getuid() || expected.gid !== process.getgid())
      ) {
        await fh.chown(expected.uid, expected.gid).catch(() => {});
      }
      let off = 0;
      while (off < newBytes.length) {
        const { bytesWritten } = await fh.write(newBytes, off, newBytes.length - off, off);
        off += bytesWritten;
      }
      await fh.sync();
    } finally {
      await fh.close();
    }

    // The file must be exactly what we read (same inode, same bytes) and still inside root.
    const dirReal = await fsp.realpath(dir);
    if (!isInside(rootReal, path.join(dirReal, path.basename(fileReal)))) {
      throw new StepFailure('write-failure', "the file's directory moved outside root; not written");
    }
    let current;
    try {
      current = await readVetted(fileReal, expected, Number.MAX_SAFE_INTEGER);
    } catch {
      throw new StepFailure('write-failure', 'the file was replaced or removed since it was read; not written');
    }
    if (sha256(current.bytes) !== expected.sha256) {
      throw new StepFailure('write-failure', 'the file changed since it was read; not written');
    }
    await fsp.rename(tmp, fileReal);
    created = false;
    await fsyncDir(dir);
  } catch (err) {
    if (created) await fsp.unlink(tmp).catch(() => {});
    if (err instanceof StepFailure) throw err;
    throw new StepFailure('write-failure', `the file could not be written: ${errCode(err)}`, {
      error: { name: (err && err.name) || 'Error', message: errCode(err) },
    });
  }
}

async function fsyncDir(dir) {
  let fh;
  try {
    fh = await fsp.open(dir, fs.constants.O_RDONLY | O_DIRECTORY);
    await fh.sync();
  } catch {
    // Not every platform / file system can fsync a directory; the rename is already done.
  } finally {
    if (fh) await fh.close().catch(() => {});
  }
}

// ---------------------------------------------------------------------------
// Audit log and locks

/** One promise chain per key: callers with the same key run one after another, in call order. */
const locks = new Map();

async function withLock(key, fn) {
  const previous = locks.get(key) || Promise.resolve();
  let release;
  const mine = new Promise((resolve) => {
    release = resolve;
  });
  const tail = previous.then(() => mine);
  locks.set(key, tail);
  await previous;
  try {
    return await fn();
  } finally {
    release();
    if (locks.get(key) === tail) locks.delete(key);
  }
}

async function openAuditLog(auditPath) {
  let fh;
  try {
    fh = await fsp.open(
      auditPath,
      fs.constants.O_WRONLY | fs.constants.O_APPEND | fs.constants.O_CREAT | O_NOFOLLOW,
      0o600,
    );
  } catch (err) {
    throw new AutoFixAuditError(`autoFix: cannot open the audit log ${auditPath}: ${errCode(err)}`, err);
  }
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw new AutoFixAuditError(`autoFix: the audit log ${auditPath} is not a regular file`);
    return { fh, realPath: await fsp.realpath(auditPath) };
  } catch (err) {
    await fh.close().catch(() => {});
    if (err instanceof AutoFixAuditError) throw err;
    throw new AutoFixAuditError(`autoFix: cannot use the audit log ${auditPath}: ${errCode(err)}`, err);
  }
}

async function appendAudit(audit, entry) {
  const line = Buffer.from(JSON.stringify(entry) + '\n', 'utf8');
  await withLock('audit:' + audit.realPath, async () => {
    let off = 0;
    while (off < line.length) {
      const { bytesWritten } = await audit.fh.write(line, off, line.length - off);
      off += bytesWritten;
    }
  });
}

// ---------------------------------------------------------------------------
// autoFix

function ms(from, to) {
  return from === undefined || to === undefined ? null : Math.round(to - from);
}

async function autoFix(options) {
  validateOptions(options);
  const settings = resolveSettings(options);
  const t0 = performance.now();

  if (options.auditLog === undefined && options.root.includes('\0')) {
    throw new AutoFixOptionsError('autoFix(options): root contains a NUL byte and no auditLog was given');
  }
  const auditPath = path.resolve(options.auditLog ?? path.join(options.root, DEFAULT_AUDIT_LOG_NAME));
  const audit = await openAuditLog(auditPath);

  const state = {
    file: String(options.filePath).slice(0, 4096),
    filePath: options.filePath,
    sha256Before: null,
    sha256After: null,
    approval: null,
    errorName: null,
    tProvider: [undefined, undefined],
    sandboxMs: null,
  };
  let result;
  let internalError;
  try {
    result = await pipeline(options, settings, audit, state);
  } catch (err) {
    if (err instanceof StepFailure) {
      const error = err.details.error;
      if (error && typeof error.name === 'string') state.errorName = error.name;
      result = {
        status: 'failed',
        reason: err.reason,
        message: err.message,
        auditMessage: err.details.auditMessage || err.message,
        error,
        sandbox: err.details.sandbox,
      };
    } else {
      // A bug in this module: audit it, then reject with it.
      internalError = err;
      state.errorName = (err && err.name) || 'Error';
      result = {
        status: 'failed',
        reason: 'internal-error',
        message: 'internal error',
        auditMessage: 'internal error in autoFix',
      };
    }
  }

  const durations = {
    provider: ms(state.tProvider[0], state.tProvider[1]),
    sandbox: state.sandboxMs,
    total: Math.round(performance.now() - t0),
  };
  const { auditMessage, ...publicResult } = result;
  const entry = {
    v: AUDIT_VERSION,
    time: new Date().toISOString(),
    file: state.file,
    status: result.status,
    reason: result.reason ?? null,
    message: auditMessage ?? result.message,
    sha256Before: state.sha256Before,
    sha256After: state.sha256After,
    model: settings.model,
    provider: settings.providerName,
    approval: state.approval,
    // Only an identifier-like class name: a custom provider or sandboxed code chooses `name`.
    error:
      typeof state.errorName === 'string' && /^[A-Za-z_$][\w$]{0,63}$/.test(state.errorName)
        ? state.errorName
        : state.errorName === null
          ? null
          : 'Error',
    durations,
  };
  let auditError;
  try {
    await appendAudit(audit, entry);
  } catch (err) {
    auditError = `the audit entry could not be written: ${errCode(err)}`;
  } finally {
    await audit.fh.close().catch(() => {});
  }
  if (internalError !== undefined) throw internalError;

  const out = {
    ...publicResult,
    file: state.file,
    filePath: state.filePath,
    model: settings.model,
    sha256Before: state.sha256Before,
    sha256After: state.sha256After,
    durations,
    auditLog: auditPath,
  };
  if (out.reason === undefined) delete out.reason;
  if (out.error === undefined) delete out.error;
  if (out.sandbox === undefined) delete out.sandbox;
  if (auditError !== undefined) out.auditError = auditError;
  return out;
}

async function pipeline(options, settings, audit, state) {
  // 1. assertSafePath
  const safe = await assertSafePath(options.filePath, options.root, audit.realPath);
  state.file = safe.rel;
  state.filePath = safe.fileReal;

  return withLock('file:' + safe.fileReal, async () => {
    try {
      // Check again under the lock: a call queued before us may have replaced the file.
      const fresh = await assertSafePath(options.filePath, options.root, audit.realPath);
      if (fresh.fileReal !== safe.fileReal)
        throw new StepFailure('unsafe-path', 'the path changed while waiting for another autoFix on the same file');
      return await lockedPipeline(options, settings, state, fresh);
    } finally {
      // sha256After: what the file holds when the call ends (null if it cannot be read).
      if (state.sha256Before !== null && state.sha256After === null) {
        try {
          state.sha256After = sha256(await fsp.readFile(safe.fileReal, { flag: fs.constants.O_RDONLY | O_NOFOLLOW }));
        } catch {
          state.sha256After = null;
        }
      }
    }
  });
}

async function lockedPipeline(options, settings, state, safe) {
  // 2. Read the original bytes (inside the lock, so a queued call sees the previous call's result).
  const { bytes: originalBytes, stat } = await readVetted(safe.fileReal, safe.stat, settings.maxFileBytes);
  const expected = {
    ino: stat.ino,
    dev: stat.dev,
    mode: stat.mode,
    uid: stat.uid,
    gid: stat.gid,
    sha256: sha256(originalBytes),
  };
  state.sha256Before = expected.sha256;
  const original = decodeText(originalBytes);

  // The sandbox must be there before we spend a provider call.
  let runSandbox;
  try {
    runSandbox = loadRunSandbox();
  } catch (err) {
    throw new StepFailure('sandbox-failure', `the isolet sandbox is not available: ${(err && err.message) || err}`, {
      error: { name: 'Error', message: (err && err.message) || String(err) },
      auditMessage: 'the isolet sandbox is not available',
    });
  }

  // 3. Ask the provider.
  let provider;
  if (settings.custom) {
    provider = options.provider;
  } else {
    if (settings.apiKey === undefined) {
      throw new StepFailure('provider-error', 'no API key: pass apiKey or set OPENAI_API_KEY', {
        error: { name: 'OpenAIError', message: 'no API key' },
      });
    }
    try {
      provider = openAIProvider(settings);
    } catch (err) {
      if (err instanceof OpenAIMissingError) {
        throw new StepFailure('provider-error', err.message, {
          error: { name: err.name, message: err.message },
          auditMessage: 'the openai package is not installed',
        });
      }
      const d = describeProviderError(err, settings.apiKey);
      throw new StepFailure('provider-error', d.message, {
        error: { name: d.name, message: d.message },
        auditMessage: d.auditMessage,
      });
    }
  }
  const test = options.test !== undefined && options.test.trim() !== '' ? options.test : undefined;
  let answer;
  state.tProvider[0] = performance.now();
  try {
    answer = await askProvider(
      provider,
      {
        system: systemPromptFor(languageOf(options)),
        prompt: buildPrompt(safe.rel, options.instruction, test, original, languageOf(options)),
        model: settings.model,
      },
      settings.providerTimeoutMs,
    );
  } catch (err) {
    const d = describeProviderError(err, settings.apiKey);
    throw new StepFailure('provider-error', d.message, {
      error: { name: d.name, message: d.message, ...(d.status !== undefined ? { status: d.status } : {}) },
      auditMessage: d.auditMessage,
    });
  } finally {
    state.tProvider[1] = performance.now();
  }

  const answerBytes = Buffer.byteLength(answer, 'utf8');
  if (answerBytes > settings.maxSuggestionBytes * 4 + 65536) {
    throw new StepFailure(
      'no-code',
      `the answer is ${answerBytes} bytes, far over maxSuggestionBytes (${settings.maxSuggestionBytes})`,
    );
  }
  const extracted = extractCode(answer);
  if (extracted.code === null) throw new StepFailure('no-code', extracted.why);
  const suggestion = normaliseSuggestion(extracted.code, original);
  const suggestionBytes = Buffer.from(suggestion, 'utf8');
  if (suggestionBytes.length > settings.maxSuggestionBytes) {
    throw new StepFailure(
      'no-code',
      `the suggested code is ${suggestionBytes.length} bytes, over maxSuggestionBytes (${settings.maxSuggestionBytes})`,
    );
  }
  if (suggestionBytes.equals(originalBytes)) {
    throw new StepFailure('no-code', 'the suggestion is identical to the current file; nothing to apply');
  }

  // 4. Sandbox: the suggestion alone, then (with a test) suggestion + test in one script.
  const limits = { memoryLimitMb: options.memoryLimitMb, timeoutMs: options.timeoutMs, language: languageOf(options) };
  const sandboxStart = performance.now();
  let sandbox;
  try {
    const alone = await runInSandbox(runSandbox, suggestion, undefined, limits);
    sandbox = alone.result;
    if (sandbox.success !== true) {
      const f = sandboxFailure('sandbox-failure', sandbox, alone.shape, suggestion);
      f.details.sandbox = sandbox;
      throw f;
    }
    if (test !== undefined) {
      const withTest = await runInSandbox(runSandbox, suggestion, test, limits);
      sandbox = withTest.result;
      if (sandbox.success !== true) {
        const f = sandboxFailure('test-failure', sandbox, withTest.shape, suggestion);
        f.details.sandbox = sandbox;
        throw f;
      }
    }
  } finally {
    state.sandboxMs = Math.round(performance.now() - sandboxStart);
  }

  // Approval.
  const diff = unifiedDiff(original, suggestion, safe.rel);
  const shown = { diff, suggestion, sandbox };
  if (options.autoApprove === true) {
    state.approval = 'auto';
  } else if (options.approve !== undefined) {
    const review = {
      file: safe.rel,
      filePath: safe.fileReal,
      root: safe.rootReal,
      instruction: options.instruction,
      model: settings.model,
      original,
      suggestion,
      diff,
      sandbox,
    };
    let approved;
    try {
      approved = (await options.approve(Object.freeze(review))) === true;
    } catch (err) {
      state.approval = 'denied';
      return {
        status: 'rejected',
        message: `not applied: approve() threw ${(err && err.name) || 'an error'}: ${(err && err.message) || String(err)}`,
        auditMessage: 'not applied: approve() threw',
        ...shown,
      };
    }
    if (!approved) {
      state.approval = 'denied';
      return { status: 'rejected', message: 'not applied: the change was not approved', ...shown };
    }
    state.approval = 'approved';
  } else {
    state.approval = 'none';
    return {
      status: 'needs-approval',
      message: 'not applied: the suggestion passed the sandbox and needs approval (pass approve or autoApprove)',
      ...shown,
    };
  }

  // 5. Apply atomically.
  await applyAtomically(safe.fileReal, safe.rootReal, expected, suggestionBytes);
  state.sha256After = sha256(suggestionBytes);
  return { status: 'applied', message: 'applied: the suggestion passed the sandbox and was approved', ...shown };
}

module.exports = {
  autoFix,
  unifiedDiff,
  extractCode,
  AutoFixOptionsError,
  AutoFixAuditError,
  AUTOFIX_STATUSES: STATUSES,
  AUTOFIX_FAILURE_REASONS: FAILURE_REASONS,
  DEFAULT_AUTOFIX_MODEL: DEFAULT_MODEL,
  DEFAULT_AUDIT_LOG_NAME,
};
