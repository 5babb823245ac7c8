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
const { SandboxValidationError } = require('../errors');

const DEFAULT_MAX_BYTES = 10 * 1024 * 1024;
// A larger file could not become one JS string (base64 grows it by a third).
const MAX_MAX_BYTES = 256 * 1024 * 1024;
const OPTION_KEYS = new Set(['maxBytes']);
const REQUEST_KEYS = new Set(['path', 'encoding']);
const ENCODINGS = new Map([
  ['utf8', false],
  ['utf-8', false],
  ['base64', true],
]);

let native;
function binding() {
  // Loaded on first use so that requiring the package for fetch alone never needs it.
  if (!native) native = require('../native');
  return native;
}

function isPlainObject(value) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function describe(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

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
  if (options === undefined) return { maxBytes: DEFAULT_MAX_BYTES };
  if (!isPlainObject(options)) {
    throw new SandboxValidationError(
      `createFileReadCapability: options must be an object, got ${describe(options)}`,
    );
  }
  for (const key of Object.keys(options)) {
    if (!OPTION_KEYS.has(key)) {
      throw new SandboxValidationError(`createFileReadCapability: unknown option "${key}"`);
    }
  }
  let maxBytes = DEFAULT_MAX_BYTES;
  if (options.maxBytes !== undefined) {
    maxBytes = options.maxBytes;
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 0 || maxBytes > MAX_MAX_BYTES) {
      throw new SandboxValidationError(
        `createFileReadCapability: maxBytes must be an integer from 0 to ${MAX_MAX_BYTES}`,
      );
    }
  }
  return { maxBytes };
}

function openRoot(dir) {
  if (typeof dir !== 'string' || dir.length === 0) {
    throw new SandboxValidationError(
      `createFileReadCapability: dir must be a non-empty string, got ${describe(dir)}`,
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
    return new (binding().FileReadRoot)(absolute);
  } catch (cause) {
    throw new SandboxValidationError(
      `createFileReadCapability: cannot open directory ${JSON.stringify(dir)}`,
    );
  }
}

/**
 * @param {string} dir directory the capability may read from (validated now)
 * @param {{ maxBytes?: number }} [options]
 * @returns {(request: { path: string, encoding?: 'utf8' | 'base64' }) => Promise<{ path: string, content: string }>}
 */
function createFileReadCapability(dir, options) {
  const { maxBytes } = validateOptions(options);
  const root = openRoot(dir);

  return async function readFile(request) {
    if (!isPlainObject(request)) {
      throw requestError(`expected an object like { path: "notes.txt" }, got ${describe(request)}`);
    }
    for (const key of Object.keys(request)) {
      if (!REQUEST_KEYS.has(key)) {
        throw requestError(`unknown property "${key.slice(0, 64)}" (allowed: path, encoding)`);
      }
    }
    const { path, encoding = 'utf8' } = request;
    if (typeof path !== 'string') {
      throw requestError(`path must be a string, got ${describe(path)}`);
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
    const outcome = await root.read(path, maxBytes, ENCODINGS.get(encoding.toLowerCase()));
    if (outcome.code !== undefined && outcome.code !== null) {
      throw refusal(outcome.code, outcome.message);
    }
    return { path, content: outcome.content };
  };
}

module.exports = { createFileReadCapability, DEFAULT_MAX_BYTES };
