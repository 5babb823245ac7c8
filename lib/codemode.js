'use strict';
// isolet/codemode: an Executor for Code Mode (`@cloudflare/codemode`): the model writes one
// async arrow function that calls typed tools (`github.listIssues(...)`), and this runs it
// in a fresh isolate of a SandboxEngine, with that engine's limits. It follows the
// Executor contract of @cloudflare/codemode (`execute(code, providersOrFns, options?)`,
// never throws, console captured as strings with `[warn] ` / `[error] ` prefixes) and
// needs nothing from that package at run time.
const native = require('./native');
const { SandboxEngine } = require('./engine');
const { stripTypes } = require('./typescript');
const { SandboxTimeoutError, SandboxRuntimeError, errorFromThrown } = require('./errors');
const { own, ownCopy } = require('./own');

/** The default time limit of a run, as in DynamicWorkerExecutor (isolet-core's CODEMODE_EXECUTOR). */
const DEFAULT_CODEMODE_TIMEOUT_MS = native.entryDefaults().codemode.timeout;

// Names the executor itself relies on inside the sandbox, or that would shadow a global
// the wrapper needs.
const RESERVED = new Set(['globalThis', 'Object', 'Promise', 'Error', 'console', 'data', 'wasm']);
const IDENT = /^[A-Za-z_$][\w$]*$/;
/** Stateful executors: the one host function every tool call goes through. */
const SESSION_TOOL = '__isoletTool';
const JS_RESERVED = new Set(
  ('abstract arguments await boolean break byte case catch char class const continue debugger default delete do double ' +
    'else enum eval export extends false final finally float for function goto if implements import in instanceof int ' +
    'interface let long native new null package private protected public return short static super switch synchronized ' +
    'this throw throws transient true try typeof undefined var void volatile while with yield').split(' '),
);

/** Same rule as @cloudflare/codemode's sanitizeToolName, so both expose the same names. */
function sanitizeToolName(name) {
  if (!name) return '_';
  let s = String(name).replace(/[-.\s]/g, '_').replace(/[^a-zA-Z0-9_$]/g, '');
  if (!s) return '_';
  if (/^[0-9]/.test(s)) s = `_${s}`;
  if (JS_RESERVED.has(s)) s = `${s}_`;
  return s;
}

/**
 * Code to the source of one async function expression, the way Code Mode passes it:
 * an arrow function is kept; fenced code is unwrapped; anything else is a function body.
 */
function normalizeCode(code) {
  let source = String(code).trim();
  const fence = /^```[\w-]*\s*\n([\s\S]*?)\n?```\s*$/.exec(source);
  if (fence) source = fence[1].trim();
  if (source === '') return 'async () => {}';
  if (/^(?:async\s*)?(?:\([^]*?\)|[A-Za-z_$][\w$]*)\s*(?::[^=]*)?=>/.test(source) || /^(?:async\s+)?function\b/.test(source)) {
    return source;
  }
  return `async () => {\n${source}\n}`;
}

class IsoletExecutor {
  /**
   * @param {object} [options] `timeout` (ms, default 60000), `language`, and any
   *   SandboxEngine config (memoryMb, maxConcurrentIsolates, warmPoolSize,
   *   defaultIsolateLimits, defaultBridgeLimits, ...), passed through to the engine.
   */
  constructor(options = {}) {
    let settings;
    try {
      // Its own options and the engine's names, checked natively; the engine checks its values.
      settings = ownCopy(native.codemodeSettings(options));
    } catch (err) {
      throw errorFromThrown(err);
    }
    const { timeout, language, stateful, idleTimeout, ...engineConfig } = options;
    this.timeout = settings.timeout;
    this.language = settings.language;
    this.stateful = settings.stateful;
    // Stateful: one persistent sandbox for every execution, opened at the first; the
    // tools of the execution in flight (executions take turns).
    this._idleTimeout = settings.idleTimeout ?? undefined;
    this._cpuTimeMs = settings.cpuTimeMs;
    this._sandbox = null;
    this._fns = null;
    this._turn = Promise.resolve();
    // Own properties only, as isolet-core read them: a `defaultIsolateLimits` on Object.prototype is none.
    const given = Object.hasOwn(engineConfig, 'defaultIsolateLimits') ? engineConfig.defaultIsolateLimits : undefined;
    const limits = { ...given, wallTimeMs: settings.timeout, cpuTimeMs: settings.cpuTimeMs };
    // Builds the engine now, so a bad value fails at construction, not at the first run.
    this._engine = new SandboxEngine({ ...engineConfig, defaultIsolateLimits: limits });
    this._ready = null;
  }

  /**
   * Runs `code` (an async arrow function) with each provider's functions under
   * `provider.name`. Resolves with `{ result, error?, logs? }`; never rejects.
   */
  async execute(code, providersOrFns, options = undefined) {
    try {
      return await this._execute(code, providersOrFns, options);
    } catch (err) {
      return { result: undefined, error: err && err.message ? err.message : String(err) };
    }
  }

  async _execute(code, providersOrFns, options) {
    if (typeof code !== 'string') return { result: undefined, error: 'code must be a string' };
    const providers = Array.isArray(providersOrFns) ? providersOrFns : [{ name: 'codemode', fns: providersOrFns || {} }];
    const connectors = own(options, 'connectors');
    if (Array.isArray(connectors) && connectors.length > 0) {
      return { result: undefined, error: 'connectors (Workers RPC bindings) are not supported by the isolet executor' };
    }
    const tools = {};
    const header = [];
    const preludes = [];
    const seen = new Set();
    for (let i = 0; i < providers.length; i++) {
      const provider = own(providers, i);
      const name = own(provider, 'name');
      if (typeof name !== 'string' || !IDENT.test(name)) {
        return { result: undefined, error: `Provider name "${String(name)}" is not a valid JavaScript identifier` };
      }
      if (RESERVED.has(name) || name.startsWith('__')) return { result: undefined, error: `Provider name "${name}" is reserved` };
      if (seen.has(name)) return { result: undefined, error: `Duplicate provider name "${name}"` };
      seen.add(name);
      const fns = {};
      const bySanitized = new Map();
      for (const [toolName, fn] of Object.entries(own(provider, 'fns') || {})) {
        if (typeof fn !== 'function') return { result: undefined, error: `Tool "${toolName}" of provider "${name}" is not a function` };
        const safe = sanitizeToolName(toolName);
        const other = bySanitized.get(safe);
        if (other !== undefined && other !== toolName) {
          return { result: undefined, error: `Tool names "${other}" and "${toolName}" both sanitize to "${safe}" in provider "${name}"` };
        }
        bySanitized.set(safe, toolName);
        fns[safe] = own(provider, 'positionalArgs') === false ? (...args) => fn(args[0]) : (...args) => fn(...args);
      }
      // A provider with no functions still gets its (empty) namespace.
      if (Object.keys(fns).length > 0) tools[name] = fns;
      // The native namespace is frozen; the code sees a mutable copy so a prelude can add
      // its own members (which then take precedence, as in codemode).
      header.push(`const ${name} = Object.assign(Object.create(null), globalThis.${name});`);
      const prelude = own(provider, 'prelude');
      if (typeof prelude === 'string' && prelude !== '') preludes.push(prelude);
    }
    let fnSource;
    try {
      fnSource = await stripTypes(normalizeCode(code), { language: this.language });
    } catch (err) {
      return { result: undefined, error: err.message };
    }
    if (this._ready === null) this._ready = this._engine.init();
    await this._ready;
    if (this.stateful) return this._takeTurn(() => this._executeInSession(providers, tools, preludes, fnSource));
    // Line 1: namespaces and preludes; then the function, so its lines are the code's own plus one.
    const body = `${header.join(' ')}${preludes.length ? `\n${preludes.join('\n')}` : ''}\nreturn await (\n${fnSource}\n)();`;
    const session = this._engine.submit({ code: body, tools });
    const end = await session.done;
    const logs = (end.logs || []).map(formatLog);
    if (end.type === 'result') return { result: end.data, logs };
    return { result: undefined, error: describeError(end.error), logs };
  }

  /** Runs `job` after the executions started before it (stateful executors). */
  _takeTurn(job) {
    const result = this._turn.then(job);
    this._turn = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }

  /**
   * Stateful: runs the function in the session's sandbox. Its own declarations are its
   * own (it is a function); what it puts on `globalThis` stays for the next execution.
   * Tools reach the host through one host function that calls this execution's tools.
   */
  async _executeInSession(providers, tools, preludes, fnSource) {
    if (this._sandbox === null || this._sandbox.closed) {
      this._sandbox = await this._engine.openSandbox({
        capabilities: { [SESSION_TOOL]: (provider, name, args) => this._callTool(provider, name, args) },
        memoryLimitMb: this._engine._settings.memoryMb,
        timeoutMs: this.timeout,
        cpuTimeMs: this._cpuTimeMs,
        idleTimeoutMs: this._idleTimeout,
      });
    }
    this._fns = tools;
    const namespaces = providers.map((p) => {
      const name = own(p, 'name');
      const members = Object.keys(tools[name] || {})
        .map((tool) => `${tool}: (...args) => ${SESSION_TOOL}(${JSON.stringify(name)}, ${JSON.stringify(tool)}, args)`)
        .join(', ');
      return `const ${name} = Object.assign(Object.create(null), { ${members} });`;
    });
    // One expression (no top-level declaration is left behind): namespaces and preludes on
    // line 1, then the function.
    const code = `(async () => { ${namespaces.join(' ')}${preludes.length ? `\n${preludes.join('\n')}` : ''}\nreturn await (\n${fnSource}\n)(); })()`;
    try {
      const r = await this._sandbox.run(code);
      const logs = (r.logs || []).map(formatLog);
      if (r.success) return { result: r.output, logs };
      return { result: undefined, error: describeError(r.error), logs };
    } finally {
      this._fns = null;
    }
  }

  _callTool(provider, name, args) {
    const fn = this._fns && this._fns[provider] && this._fns[provider][name];
    if (typeof fn !== 'function') throw new TypeError(`${provider}.${name} is not a tool of this execution`);
    return fn(...(Array.isArray(args) ? args : []));
  }

  /** Stops the engine behind this executor (idempotent). */
  async dispose() {
    await this._engine.shutdown();
  }

  async [Symbol.asyncDispose]() {
    await this.dispose();
  }
}

function formatLog(entry) {
  if (entry.level === 'warn') return `[warn] ${entry.message}`;
  if (entry.level === 'error') return `[error] ${entry.message}`;
  return entry.message;
}

/** The error string of the contract: what the code threw, or why the run was stopped. */
function describeError(error) {
  if (error instanceof SandboxTimeoutError) return 'Execution timed out';
  if (error instanceof SandboxRuntimeError && error.thrown) return error.thrown.message || error.thrown.name;
  return error && error.message ? `${error.name}: ${error.message}` : String(error);
}

/** Creates an executor; the same as `new IsoletExecutor(options)`. */
function createExecutor(options) {
  return new IsoletExecutor(options);
}

module.exports = { IsoletExecutor, createExecutor, normalizeCode, sanitizeToolName, DEFAULT_CODEMODE_TIMEOUT_MS };
