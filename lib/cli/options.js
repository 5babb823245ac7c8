'use strict';
// Flags shared by `isolet run` and `isolet mcp`: limits, language, capabilities and a JSON
// config file. Flags win over the file. Everything ends up as one SandboxEngine config
// plus per-run request defaults, so an engine option (in the file's `engine` object)
// reaches the engine unchanged.
const fs = require('node:fs');
const path = require('node:path');
const { parseArgs } = require('node:util');
const { own, ownCopy } = require('../own');

/** Thrown for bad flags or config: the CLI prints it with the usage and exits 2. */
class UsageError extends Error {}

const LIMIT_FLAGS = {
  'timeout-ms': { type: 'string' },
  'cpu-time-ms': { type: 'string' },
  'memory-mb': { type: 'string' },
  language: { type: 'string' },
  isolation: { type: 'string' },
  config: { type: 'string' },
  'read-dir': { type: 'string' },
  'allow-origin': { type: 'string', multiple: true },
  help: { type: 'boolean', short: 'h' },
};

const LIMITS_HELP = `  --timeout-ms <ms>        wall-clock limit of one run (default 5000)
  --cpu-time-ms <ms>       CPU-time limit of one run (default: the wall-clock limit)
  --memory-mb <mb>         heap limit of one run (default 64)
  --language <lang>        javascript or typescript (default: typescript for .ts/.mts/.cts)
  --isolation <mode>       process (default: a supervised child process) or thread
  --read-dir <dir>         give the code readFile({ path }) over this directory, read-only
  --allow-origin <origin>  give the code fetch({ url, ... }) to this origin (repeatable)
  --config <file.json>     the same settings as JSON: { "timeoutMs", "cpuTimeMs",
                           "memoryMb", "language", "isolation", "readDir", "allowOrigins": [...],
                           "engine": { ...SandboxEngine config } }; flags win`;

const CONFIG_KEYS = ['timeoutMs', 'cpuTimeMs', 'memoryMb', 'language', 'isolation', 'readDir', 'allowOrigins', 'engine'];

function parse(argv, extra = {}) {
  try {
    return parseArgs({ args: argv, allowPositionals: true, strict: true, options: { ...LIMIT_FLAGS, ...extra } });
  } catch (err) {
    throw new UsageError(err.message);
  }
}

function wholeNumber(name, value) {
  if (value === undefined) return undefined;
  const n = typeof value === 'number' ? value : /^\d+$/.test(String(value)) ? Number(value) : NaN;
  if (!Number.isSafeInteger(n) || n <= 0) throw new UsageError(`${name} must be a positive whole number, got ${JSON.stringify(value)}`);
  return n;
}

/** The config file's settings, own properties only (no prototype: an absent key is absent). */
function readConfig(file) {
  if (file === undefined) return Object.create(null);
  let text;
  try {
    text = fs.readFileSync(path.resolve(file), 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read --config ${file}: ${err.code || err.message}`);
  }
  let config;
  try {
    config = JSON.parse(text);
  } catch (err) {
    throw new UsageError(`--config ${file} is not valid JSON: ${err.message}`);
  }
  if (config === null || typeof config !== 'object' || Array.isArray(config)) throw new UsageError(`--config ${file} must hold a JSON object`);
  config = ownCopy(config);
  for (const key of Object.keys(config)) {
    if (!CONFIG_KEYS.includes(key)) throw new UsageError(`--config ${file}: unknown setting "${key}" (known: ${CONFIG_KEYS.join(', ')})`);
  }
  if (config.engine !== undefined && (config.engine === null || typeof config.engine !== 'object' || Array.isArray(config.engine))) {
    throw new UsageError(`--config ${file}: "engine" must be an object`);
  }
  if (config.allowOrigins !== undefined && (!Array.isArray(config.allowOrigins) || config.allowOrigins.some((o) => typeof o !== 'string'))) {
    throw new UsageError(`--config ${file}: "allowOrigins" must be an array of origin strings`);
  }
  return config;
}

/**
 * Settings from parsed flags: `{ engineConfig, limits, language, capabilities }`.
 * `language` is undefined when neither flag nor file gave one.
 */
function settingsFrom(values) {
  const file = readConfig(values.config);
  const timeoutMs = wholeNumber('--timeout-ms', values['timeout-ms'] ?? file.timeoutMs) ?? 5000;
  const cpuTimeMs = wholeNumber('--cpu-time-ms', values['cpu-time-ms'] ?? file.cpuTimeMs) ?? timeoutMs;
  const memoryMb = wholeNumber('--memory-mb', values['memory-mb'] ?? file.memoryMb) ?? 64;
  const language = values.language ?? file.language;
  if (language !== undefined && language !== 'javascript' && language !== 'typescript') {
    throw new UsageError(`--language must be javascript or typescript, got ${JSON.stringify(language)}`);
  }
  const isolation = values.isolation ?? file.isolation;
  if (isolation !== undefined && isolation !== 'process' && isolation !== 'thread') {
    throw new UsageError(`--isolation must be process or thread, got ${JSON.stringify(isolation)}`);
  }
  const capabilities = {};
  const readDir = values['read-dir'] ?? file.readDir;
  if (readDir !== undefined) {
    const { createFileReadCapability } = require('../capabilities/file-read');
    try {
      capabilities.readFile = {
        description: `Reads a regular file (UTF-8 text) inside the read-only directory given to the server; path is relative to it. Returns { path, content }.`,
        inputSchema: { type: 'object', properties: { path: { type: 'string', description: 'relative path, e.g. "notes/a.txt"' } }, required: ['path'], additionalProperties: false },
        execute: createFileReadCapability(path.resolve(readDir)),
      };
    } catch (err) {
      throw new UsageError(`--read-dir ${readDir}: ${err.message}`);
    }
  }
  const origins = values['allow-origin'] ?? file.allowOrigins;
  if (origins !== undefined && origins.length > 0) {
    const { createFetchCapability } = require('../capabilities/fetch');
    try {
      capabilities.fetch = {
        description: `HTTP request to an allowed origin (${origins.join(', ')}). Returns { status, statusText, headers, body } with body as text.`,
        inputSchema: {
          type: 'object',
          properties: {
            url: { type: 'string' },
            method: { type: 'string' },
            headers: { type: 'object', additionalProperties: { type: 'string' } },
            body: { type: 'string' },
          },
          required: ['url'],
          additionalProperties: false,
        },
        execute: createFetchCapability({ allowedOrigins: origins }),
      };
    } catch (err) {
      throw new UsageError(`--allow-origin: ${err.message}`);
    }
  }
  const limits = { memoryMb, wallTimeMs: timeoutMs, cpuTimeMs };
  const engineConfig = {
    maxConcurrentIsolates: 2,
    warmPoolSize: 1,
    ...(file.engine || {}),
    memoryMb,
    ...(isolation !== undefined ? { isolation } : {}),
    defaultIsolateLimits: { ...(own(file.engine, 'defaultIsolateLimits') || {}), ...limits },
    tools: capabilities,
  };
  return { engineConfig, limits, language, capabilities, toolNames: Object.keys(capabilities) };
}

/** `--language`, else TypeScript for a .ts/.mts/.cts file name, else JavaScript. */
function languageFor(language, fileName) {
  if (language !== undefined) return language;
  return typeof fileName === 'string' && /\.[cm]?ts$/i.test(fileName) ? 'typescript' : 'javascript';
}

module.exports = { UsageError, LIMITS_HELP, parse, settingsFrom, languageFor };
