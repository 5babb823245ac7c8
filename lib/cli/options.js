'use strict';
// Flags shared by `isolet run` and `isolet mcp`: limits, language, capabilities and a JSON
// config file. Flags win over the file. isolet-core checks both (CLI_SETTINGS) and fills in
// the defaults; here they become one SandboxEngine config plus per-run request defaults, so
// an engine option (in the file's `engine` object) reaches the engine unchanged.
const fs = require('node:fs');
const path = require('node:path');
const { parseArgs } = require('node:util');
const native = require('../native');
const { ownCopy } = require('../read-options');

/** Thrown for bad flags or config: the CLI prints it (`usageText`) and exits 2. */
class UsageError extends Error {}

const DEFAULTS = native.entryDefaults().cli;

/**
 * parseArgs options for `isolet <command>`: the flags that set its options, from
 * isolet-core's tables (old spellings too: isolet-core maps them and warns), and `own`.
 */
function commandFlags(command, own) {
  const flags = {};
  for (const f of native.commandFlags(command)) {
    flags[f.name] = f.switch ? { type: 'boolean' } : { type: 'string', ...(f.repeated ? { multiple: true } : {}) };
  }
  return { ...flags, ...own };
}

const LIMIT_FLAGS = commandFlags('run', { config: { type: 'string' }, help: { type: 'boolean', short: 'h' } });

/** The limit flags' help, with the command's own `--language` line(s). */
function limitsHelp(languageLine) {
  return `  --timeout-ms <ms>        wall-clock limit of one run (default ${DEFAULTS.timeoutMs})
  --cpu-time-ms <ms>       CPU-time limit of one run (default: the wall-clock limit)
  --memory-limit-mb <mb>   heap limit of one run (default ${DEFAULTS.memoryLimitMb})
${languageLine}
  --isolation <mode>       process (default: a supervised child process) or thread
  --read-dir <dir>         give the code readFile({ path }) over this directory, read-only
  --allowed-origins <origin>
                           give the code fetch() to this origin (repeatable)
  --no-web                 no web platform APIs (URL, TextEncoder, crypto, timers, fetch
                           with --allowed-origins, ...; docs/web.md): on by default
  --unhandled-rejections <warn|error>
                           a promise rejected with no handler: reported as a warning
                           (default), or the run fails with it
  --config <file.json>     the same settings as JSON: { "timeoutMs", "cpuTimeMs",
                           "memoryLimitMb", "language", "isolation", "readDir",
                           "allowedOrigins": [...], "unhandledRejections", "web",
                           "engine": { ...SandboxEngine config } }; flags win
  Renamed (the old spellings still work, with a warning): --memory-mb, --allow-origin;
  in --config, memoryMb, allowOrigins, statefulIdleMs (docs/options.md)`;
}

/**
 * Parses `argv` for `command` (`isolet run`). A flag it cannot take is a UsageError in
 * isolet's words, never Node's parser's: an unknown one with the nearest known one.
 */
function parse(argv, command, flags = LIMIT_FLAGS) {
  try {
    return parseArgs({ args: argv, allowPositionals: true, strict: true, options: flags });
  } catch (err) {
    if (!String(err.code).startsWith('ERR_PARSE_ARGS_')) throw err;
    const { tokens } = parseArgs({ args: argv, allowPositionals: true, strict: false, tokens: true, options: flags });
    const options = tokens.filter((t) => t.kind === 'option');
    const unknown = options.find((t) => !Object.hasOwn(flags, t.name));
    if (unknown) throw new UsageError(native.unknownFlagMessage(command, unknown.rawName, Object.keys(flags)));
    // A string flag with no value, or (strict parsing refuses it) a value starting with a
    // dash not given as --flag=value; a boolean flag given a value.
    const dashed = (t) => t.value !== undefined && !t.inlineValue && t.value.startsWith('-');
    const bad = options.find((t) => (flags[t.name].type === 'string' ? t.value === undefined || dashed(t) : t.value !== undefined));
    if (bad === undefined) throw new UsageError(`cannot read the command line: ${argv.join(' ')}`);
    if (flags[bad.name].type !== 'string') throw new UsageError(`${bad.rawName} takes no value`);
    throw new UsageError(
      bad.value === undefined ? `${bad.rawName} needs a value` : `${bad.rawName} needs a value; for one starting with a dash, write ${bad.rawName}=${bad.value}`,
    );
  }
}

/** What a usage error prints: one line naming the problem, then where the help is. */
function usageText(command, message) {
  return `${command}: ${message}\nsee ${command} --help\n`;
}

/** The parsed JSON of `--config <file>`, or undefined; its keys are checked with the flags. */
function readConfig(file) {
  if (file === undefined) return undefined;
  let text;
  try {
    text = fs.readFileSync(path.resolve(file), 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read --config ${file}: ${err.code || err.message}`);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new UsageError(`--config ${file} is not valid JSON: ${err.message}`);
  }
}

/**
 * Settings from parsed flags: `{ engineConfig, limits, language, capabilities, toolNames }`.
 * `sourceFile` (the file `isolet run` runs) gives the language when neither flag nor file
 * does; `language` is undefined when nothing gave one. `config`, when given, stands for
 * the `--config` file's parsed JSON (the MCP module's programmatic API).
 */
function settingsFrom(values, sourceFile, config) {
  const file = config !== undefined ? config : readConfig(values.config);
  let s;
  try {
    // A null-prototype copy: an absent field is absent, whatever Object.prototype holds.
    s = ownCopy(native.cliSettings(values, file, values.config, sourceFile));
  } catch (err) {
    throw new UsageError(err.message);
  }
  // A capability's own refusal names the flag (as given), or the config key, that gave its value.
  const givenAs = (option) => {
    const flag = native.commandFlags('mcp').find((f) => f.option === option && values[f.name] !== undefined);
    return flag !== undefined ? `--${flag.name}` : `--config ${values.config}: ${option}`;
  };
  const capabilities = {};
  const readDir = s.readDir;
  if (readDir !== undefined) {
    const { createFileReadCapability } = require('../capabilities/file-read');
    try {
      capabilities.readFile = {
        description: `Reads a regular file (UTF-8 text) inside the read-only directory given to the server; path is relative to it. Returns { path, content }.`,
        inputSchema: { type: 'object', properties: { path: { type: 'string', description: 'relative path, e.g. "notes/a.txt"' } }, required: ['path'], additionalProperties: false },
        execute: createFileReadCapability(path.resolve(readDir)),
      };
    } catch (err) {
      throw new UsageError(`${givenAs('readDir')} ${readDir}: ${err.message}`);
    }
  }
  const origins = s.allowedOrigins;
  if (origins.length > 0) {
    const { createFetchCapability } = require('../capabilities/fetch');
    try {
      // With the web APIs, `fetch` is WHATWG fetch over the capability (docs/web.md).
      capabilities.fetch = s.web ? {
        description: `fetch(input, init?) as in browsers and Node (WHATWG fetch), to an allowed origin (${origins.join(', ')}); resolves to a Response (status, ok, headers, url, text(), json(), arrayBuffer(), bytes()). Redirects are followed within the allowed origins.`,
        execute: createFetchCapability({ allowedOrigins: origins }),
      } : {
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
      throw new UsageError(`${givenAs('allowedOrigins')}: ${err.message}`);
    }
  }
  const limits = { memoryMb: s.memoryLimitMb, wallTimeMs: s.timeoutMs, cpuTimeMs: s.cpuTimeMs };
  const engine = file !== undefined && Object.hasOwn(file, 'engine') ? { ...file.engine } : {};
  // The CLI's memoryLimitMb is the engine's, whichever name the file's engine gave it under.
  if (s.engineMemoryKey !== undefined) delete engine[s.engineMemoryKey];
  const engineConfig = {
    ...engine,
    maxConcurrentIsolates: s.maxConcurrentIsolates,
    warmPoolSize: s.warmPoolSize,
    memoryLimitMb: s.memoryLimitMb,
    ...(s.isolation !== undefined ? { isolation: s.isolation } : {}),
    ...(s.unhandledRejections !== undefined ? { unhandledRejections: s.unhandledRejections } : {}),
    defaultIsolateLimits: { ...(Object.hasOwn(engine, 'defaultIsolateLimits') ? engine.defaultIsolateLimits : {}), ...limits },
    tools: capabilities,
    web: s.web,
  };
  return {
    engineConfig,
    limits,
    language: s.language,
    capabilities,
    toolNames: Object.keys(capabilities),
    web: s.web,
    stateful: s.stateful,
    idleTimeoutMs: s.idleTimeoutMs,
  };
}

module.exports = { UsageError, LIMIT_FLAGS, commandFlags, limitsHelp, parse, readConfig, settingsFrom, usageText };
