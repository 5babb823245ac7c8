'use strict';
// createFileReadCapability(dir, options?): a capability handler that reads regular
// files inside one directory, and nothing else.
//
// The security boundary is native (src/capabilities/file_read.rs): `dir` is opened
// once, here, as a cap-std directory handle, and every path the sandbox sends is
// resolved beneath that handle, never by joining strings. This file only validates
// shapes and turns refusals into errors with a stable `code` and a message that never
// contains a host path.

const fs = require('node:fs');
const nodePath = require('node:path');
const native = require('../native');
const { SandboxValidationError } = require('../errors');
const { currentRun } = require('../run-context');
const { ownCopy } = require('../read-options');
const { describeValue, isPlainRecord } = require('./request');

// The options' names, ranges and defaults are isolet-core's (FILE_READ_CAPABILITY).
const { maxBytes: DEFAULT_MAX_BYTES, maxReadsInFlight: DEFAULT_MAX_READS_IN_FLIGHT } = native.entryDefaults().fileRead;
const REQUEST_KEYS = new Set(['path', 'encoding']);
const ENCODINGS = new Map([
  ['utf8', false],
  ['utf-8', false],
  ['base64', true],
]);

function requestError(message) {
  const err = new TypeError(`readFile: ${message}`);
  err.code = 'ERR_ISOLET_INVALID_ARGUMENT';
  return err;
}

function refusal(code, message) {
  const err = new Error(message);
  err.code = code;
  return err;
}

function validateOptions(options) {
  try {
    return ownCopy(native.fileReadCapabilitySettings(options));
  } catch (err) {
    throw new SandboxValidationError(`createFileReadCapability: ${err.message}`);
  }
}

function openRoot(dir) {
  if (typeof dir !== 'string' || dir.length === 0) {
    throw new SandboxValidationError(
      `createFileReadCapability: dir must be a non-empty string, got ${describeValue(dir)}`,
    );
  }
  if (dir.includes('\0')) {
    throw new SandboxValidationError('createFileReadCapability: dir must not contain NUL bytes');
  }
  const absolute = nodePath.resolve(dir);
  let stat;
  try {
    stat = fs.statSync(absolute);
  } catch (cause) {
    throw new SandboxValidationError(
      `createFileReadCapability: directory ${JSON.stringify(dir)} does not exist or cannot be read` +
        (cause && cause.code ? ` (${cause.code})` : ''),
    );
  }
  if (!stat.isDirectory()) {
    throw new SandboxValidationError(
      `createFileReadCapability: ${JSON.stringify(dir)} is not a directory`,
    );
  }
  try {
    return new (native.FileReadRoot)(absolute);
  } catch {
    throw new SandboxValidationError(
      `createFileReadCapability: cannot open directory ${JSON.stringify(dir)}`,
    );
  }
}

/**
 * @param {string} dir directory the capability may read from (validated now)
 * @param {{ maxBytes?: number, maxReadsInFlight?: number }} [options] `maxReadsInFlight`
 *   caps reads in flight per run (default 8); their contents are also held within the
 *   run's `maxPendingHostCallBytes`.
 * @returns {(request: { path: string, encoding?: 'utf8' | 'base64' }) => Promise<{ path: string, content: string }>}
 */
function createFileReadCapability(dir, options) {
  const { maxBytes, maxReadsInFlight } = validateOptions(options);
  const root = openRoot(dir);
  // Outside a sandbox run (host code calling the handler itself) there is no run budget.
  const unbudgeted = { inFlight: 0, maxReads: Infinity, budget: new (native.ReadBudget)(Number.MAX_SAFE_INTEGER) };
  const perRun = (run) => ({
    inFlight: 0,
    maxReads: maxReadsInFlight,
    budget: new (native.ReadBudget)(run.budgets.maxPendingHostCallBytes),
  });

  return async function readFile(request) {
    if (!isPlainRecord(request)) {
      throw requestError(`expected an object like { path: "notes.txt" }, got ${describeValue(request)}`);
    }
    for (const key of Object.keys(request)) {
      if (!REQUEST_KEYS.has(key)) {
        throw requestError(`unknown property "${key.slice(0, 64)}" (allowed: path, encoding)`);
      }
    }
    // What the sandbox sent, own properties only: nothing comes from Object.prototype.
    const { path, encoding = 'utf8' } = ownCopy(request);
    if (typeof path !== 'string') {
      throw requestError(`path must be a string, got ${describeValue(path)}`);
    }
    if (path.length === 0) {
      throw refusal('ERR_ISOLET_INVALID_PATH', 'readFile: invalid path: path is empty');
    }
    if (path.includes('\0')) {
      throw refusal('ERR_ISOLET_INVALID_PATH', 'readFile: invalid path: path contains a NUL byte');
    }
    if (!path.isWellFormed()) {
      // Lone surrogates would be replaced with U+FFFD on the way to UTF-8.
      throw refusal('ERR_ISOLET_INVALID_PATH', 'readFile: invalid path: path is not valid Unicode');
    }
    if (typeof encoding !== 'string' || !ENCODINGS.has(encoding.toLowerCase())) {
      throw requestError('encoding must be "utf8" or "base64"');
    }
    const run = currentRun();
    const state = run ? run.slot(readFile, perRun) : unbudgeted;
    if (state.inFlight >= state.maxReads) {
      throw refusal(
        'ERR_ISOLET_TOO_MANY_READS',
        `readFile: ${state.inFlight} reads are already in flight for this run (maxReadsInFlight ${state.maxReads}); await some before reading more`,
      );
    }
    state.inFlight++;
    let outcome;
    try {
      outcome = await root.read(path, maxBytes, ENCODINGS.get(encoding.toLowerCase()), state.budget);
    } finally {
      state.inFlight--;
    }
    // From here the content is the reply, which the bridge counts until the sandbox has it.
    if (outcome.reserved) state.budget.release(outcome.reserved);
    if (outcome.code !== undefined && outcome.code !== null) {
      throw refusal(outcome.code, outcome.message);
    }
    return { path, content: outcome.content };
  };
}

module.exports = { createFileReadCapability, DEFAULT_MAX_BYTES, DEFAULT_MAX_READS_IN_FLIGHT };
