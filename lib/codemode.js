'use strict';
// isolet/codemode: an Executor for Code Mode (`@cloudflare/codemode`): the model writes one
// async arrow function that calls typed tools (`github.listIssues(...)`), and this runs it
// in a fresh isolate of a SandboxEngine, with that engine's limits. It follows the
// Executor contract of @cloudflare/codemode (`execute(code, providersOrFns, options?)`,
// never throws, console captured as strings with `[warn] ` / `[error] ` prefixes) and
// needs nothing from that package at run time.
const { randomBytes } = require('node:crypto');
const native = require('./native');
const { SandboxEngine } = require('./engine');
const { prepareSource } = require('./source');
const { normalizeCode } = require('./source-transform');
const { Rewrite, remapError, remapLogs } = require('./positions');
const { SandboxTimeoutError, SandboxRuntimeError, SandboxValidationError, errorFromThrown } = require('./errors');
const { own } = require('./own');
const { ownCopy } = require('./read-options');
const { webFetchOf } = require('./capabilities/fetch');

/** The default time limit of a run, as in DynamicWorkerExecutor (isolet-core's CODEMODE_EXECUTOR). */
const DEFAULT_CODEMODE_TIMEOUT_MS = native.entryDefaults().codemode.timeoutMs;

// Names the executor itself relies on inside the sandbox, or that would shadow a global
// the wrapper needs.
const RESERVED = new Set(['globalThis', 'Object', 'Promise', 'Error', 'console', 'data', 'wasm']);
const IDENT = /^[A-Za-z_$][\w$]*$/;
/** Stateful executors: the one host function every tool call goes through. */
const SESSION_TOOL = '__isoletTool';
/** Stateful executors: the sandbox global that builds an execution's namespaces. */
const SESSION_NAMESPACES = '__isoletNamespaces';
/** Names strict code cannot bind: no provider of a stateful executor (its code is strict) takes one. */
const STRICT_RESERVED = new Set(['arguments', 'await', 'eval', 'implements', 'interface', 'let', 'package', 'private', 'protected', 'public', 'static', 'yield']);
/** What a tool call gets when the execution that made it is not the one in flight. */
const LATE_CALL_MESSAGE = 'The execution that made this tool call has finished: await every tool call before returning';

/**
 * Stateful executors: run once in each sandbox as it opens, before any execution's code.
 * Executions share the sandbox, so one could otherwise replace or patch what the next one
 * runs (the tool channel, a built-in, a global) and so call that one's tools or see their
 * arguments and results. After this:
 * - the tool channel (the host function SESSION_TOOL) is reachable only through this
 *   closure; SESSION_NAMESPACES, a non-writable, non-configurable global, builds namespaces
 *   whose calls carry an execution's token, and the host refuses every token but that of
 *   the execution in flight;
 * - every object reachable from the global bindings, their prototypes and the intrinsics
 *   only instances reach (iterator, generator and async function prototypes, ...) is
 *   frozen, and every global binding present now is non-writable and non-configurable;
 *   later globals are an execution's data;
 * - the global object's prototype cannot be replaced (Object.setPrototypeOf,
 *   Reflect.setPrototypeOf and the `__proto__` setter refuse it, and no Proxy may wrap
 *   it): replaced by a Proxy, it would run one execution's code whenever a later one
 *   looked up a name the global lacks (`globalThis.hasOwnProperty(...)`);
 * - RegExp's legacy statics (`RegExp.$1`, `lastMatch`, ...) are gone: they carry one
 *   execution's last match into the next.
 * `modules` are the namespaces of the engine's prelude modules, imported (so evaluated)
 * now: what they export is frozen too.
 * Frozen, a data property of a prototype cannot be assigned over on an object inheriting
 * it (`counts[word] = 1` for the word 'constructor', `this.name = ...` in an Error
 * subclass): those of Object.prototype and of the global error constructors' prototypes
 * become accessors whose setter defines the property on that object (SES's override taming).
 */
const HARDEN_SESSION = `(modules) => {
  'use strict';
  const { defineProperty, freeze, getOwnPropertyDescriptor, getPrototypeOf } = Object;
  const { ownKeys } = Reflect;
  const global = globalThis;
  const channel = global.${SESSION_TOOL};
  delete global.${SESSION_TOOL};
  const namespacesOf = (token, providers) => {
    const namespaces = { __proto__: null };
    for (let i = 0; i < providers.length; i++) {
      const provider = providers[i][0];
      const tools = providers[i][1];
      const namespace = { __proto__: null };
      for (let j = 0; j < tools.length; j++) {
        const tool = tools[j];
        namespace[tool] = (...args) => channel(token, provider, tool, args);
      }
      namespaces[provider] = namespace;
    }
    return namespaces;
  };
  defineProperty(global, '${SESSION_NAMESPACES}', { value: namespacesOf, writable: false, enumerable: false, configurable: false });

  const refuseGlobal = (target) => {
    if (target === global) throw new TypeError("A stateful sandbox's global object keeps its prototype: it cannot be given another or wrapped in a Proxy");
    return target;
  };
  const nativeSetPrototypeOf = { object: Object.setPrototypeOf, reflect: Reflect.setPrototypeOf };
  const nativeProtoSetter = getOwnPropertyDescriptor(Object.prototype, '__proto__').set;
  const reflectApply = Reflect.apply;
  const NativeProxy = global.Proxy;
  const tamed = {
    object: { setPrototypeOf: (object, proto) => nativeSetPrototypeOf.object(refuseGlobal(object), proto) },
    reflect: { setPrototypeOf: (target, proto) => target !== global && nativeSetPrototypeOf.reflect(target, proto) },
    proxy: { revocable: (target, handler) => NativeProxy.revocable(refuseGlobal(target), handler) },
    proto: {
      set __proto__(proto) {
        reflectApply(nativeProtoSetter, refuseGlobal(this), [proto]);
      },
    },
  };
  function Proxy(target, handler) {
    if (new.target === undefined) throw new TypeError("Constructor Proxy requires 'new'");
    return new NativeProxy(refuseGlobal(target), handler);
  }
  defineProperty(Proxy, 'revocable', { value: tamed.proxy.revocable, writable: true, configurable: true });
  defineProperty(global, 'Proxy', { value: Proxy });
  defineProperty(Object, 'setPrototypeOf', { value: tamed.object.setPrototypeOf });
  defineProperty(Reflect, 'setPrototypeOf', { value: tamed.reflect.setPrototypeOf });
  defineProperty(Object.prototype, '__proto__', { set: getOwnPropertyDescriptor(tamed.proto, '__proto__').set });

  for (const key of ownKeys(RegExp)) {
    if (typeof key === 'string' && getOwnPropertyDescriptor(RegExp, key).get) delete RegExp[key];
  }

  const overridable = [Object.prototype];
  for (const key of ownKeys(global)) {
    const value = getOwnPropertyDescriptor(global, key).value;
    if (typeof value === 'function' && (value === Error || value.prototype instanceof Error)) overridable.push(value.prototype);
  }
  for (const proto of overridable) {
    for (const key of ownKeys(proto)) {
      const desc = getOwnPropertyDescriptor(proto, key);
      if (!('value' in desc) || !desc.writable) continue;
      const value = desc.value;
      defineProperty(proto, key, {
        get() {
          return value;
        },
        set(replacement) {
          if (this === proto) throw new TypeError('Cannot assign to read only property ' + String(key) + ' of a frozen prototype');
          if (this === null || (typeof this !== 'object' && typeof this !== 'function')) return;
          defineProperty(this, key, { value: replacement, writable: true, enumerable: true, configurable: true });
        },
        enumerable: desc.enumerable,
        configurable: false,
      });
    }
  }

  const seen = new Set([global]);
  const harden = (roots) => {
    const pending = roots;
    while (pending.length > 0) {
      const value = pending.pop();
      if (value === null || (typeof value !== 'object' && typeof value !== 'function') || seen.has(value)) continue;
      seen.add(value);
      freeze(value);
      pending.push(getPrototypeOf(value));
      for (const key of ownKeys(value)) {
        const desc = getOwnPropertyDescriptor(value, key);
        pending.push(desc.value, desc.get, desc.set);
      }
    }
  };
  // Making a Segments object costs ICU's start-up (10-20 ms in a new sandbox host), so its
  // prototype and its iterator's are frozen as the first is made, before any code holds one.
  if (typeof Intl === 'object' && typeof Intl.Segmenter === 'function') {
    const nativeSegment = Intl.Segmenter.prototype.segment;
    const iteratorSymbol = Symbol.iterator;
    const { segment } = {
      segment(string) {
        const segments = reflectApply(nativeSegment, this, [string]);
        harden([getPrototypeOf(segments), getPrototypeOf(segments[iteratorSymbol]())]);
        return segments;
      },
    };
    defineProperty(Intl.Segmenter.prototype, 'segment', { value: segment });
  }
  // Intrinsics that only instances reach.
  const roots = [getPrototypeOf(global), async function () {}, function* () {}, async function* () {}, (function* () {})(),
    (async function* () {})(), [][Symbol.iterator](), ''[Symbol.iterator](), new Map()[Symbol.iterator](),
    new Set()[Symbol.iterator](), /./[Symbol.matchAll]('')];
  if (typeof Iterator === 'function') roots.push(Iterator.from({ next() {} }), [].values().map((x) => x));
  for (const key of ownKeys(global)) {
    const desc = getOwnPropertyDescriptor(global, key);
    roots.push(desc.value, desc.get, desc.set);
  }
  // The engine's prelude modules, shared by every execution: their exports (a module's own
  // namespace cannot be frozen, and needs not: no code outside the module can assign to it).
  for (const namespace of modules) {
    for (const key of ownKeys(namespace)) roots.push(namespace[key]);
  }
  harden(roots);

  for (const key of ownKeys(global)) {
    const desc = getOwnPropertyDescriptor(global, key);
    defineProperty(global, key, 'value' in desc ? { writable: false, configurable: false } : { configurable: false });
  }
}`;
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

class IsoletExecutor {
  /**
   * @param {object} [options] `timeoutMs` (default 60000), `language`, `stateful`,
   *   `idleTimeoutMs`, `fetch`, and any SandboxEngine config (memoryLimitMb,
   *   maxConcurrentIsolates, warmPoolSize, defaultIsolateLimits, defaultBridgeLimits, ...),
   *   passed through to the engine; `web` defaults to true here (`web: false` turns the web
   *   platform APIs off). `timeout` and `idleTimeout` are deprecated spellings.
   */
  constructor(options = {}) {
    let settings;
    try {
      // Its own options and the engine's names, checked natively; the engine checks its values.
      settings = ownCopy(native.codemodeSettings(options));
    } catch (err) {
      throw errorFromThrown(err);
    }
    const fetch = own(options, 'fetch');
    // The rest is the engine's config: every key but the executor's own (as spelled).
    const engineConfig = { ...options };
    for (const key of settings.ownKeys) delete engineConfig[key];
    // Every execution's global `fetch` (WHATWG fetch with the web APIs) over this capability.
    if (fetch !== undefined && webFetchOf(fetch) === undefined) {
      throw new SandboxValidationError('fetch must be a fetch capability made by createFetchCapability({ allowedOrigins })');
    }
    this._fetch = fetch;
    // The web platform APIs are on unless `web: false` (the engine checks the value): the
    // model's code may use URL, TextEncoder, crypto, timers... as in a Worker.
    this.web = Object.hasOwn(engineConfig, 'web') ? engineConfig.web : true;
    this.timeoutMs = settings.timeoutMs;
    this.language = settings.language;
    this.stateful = settings.stateful;
    // Stateful: one persistent sandbox for every execution, opened at the first; the
    // tools and the token of the execution in flight (executions take turns).
    this._idleTimeoutMs = settings.idleTimeoutMs ?? undefined;
    this._cpuTimeMs = settings.cpuTimeMs;
    this._sandbox = null;
    this._fns = null;
    this._token = null;
    this._turn = Promise.resolve();
    // Own properties only, as isolet-core read them: a `defaultIsolateLimits` on Object.prototype is none.
    const given = Object.hasOwn(engineConfig, 'defaultIsolateLimits') ? engineConfig.defaultIsolateLimits : undefined;
    const limits = { ...given, wallTimeMs: settings.timeoutMs, cpuTimeMs: settings.cpuTimeMs };
    // Builds the engine now, so a bad value fails at construction, not at the first run.
    this._engine = new SandboxEngine({ ...engineConfig, web: this.web, defaultIsolateLimits: limits });
    // Stateful: hardening freezes what the engine's prelude modules export (their keys checked by the engine).
    this._preludeModules = Object.keys(own(own(engineConfig, 'prelude'), 'modules') ?? {});
    this._ready = null;
  }

  /** @deprecated `timeoutMs`. */
  get timeout() {
    return this.timeoutMs;
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
      if (RESERVED.has(name) || name.startsWith('__') || (name === 'fetch' && this._fetch !== undefined)) return { result: undefined, error: `Provider name "${name}" is reserved` };
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
    let map;
    try {
      ({ code: fnSource, map } = await prepareSource(code, { normalizeCode: true, language: this.language }, { timeoutMs: this.timeoutMs }));
    } catch (err) {
      return { result: undefined, error: err.message };
    }
    if (this._ready === null) this._ready = this._engine.init();
    await this._ready;
    if (this.stateful) return this._takeTurn(() => this._executeInSession(providers, tools, preludes, fnSource, map));
    // Line 1: namespaces and preludes; then the function.
    const prefix = `${header.join(' ')}${preludes.length ? `\n${preludes.join('\n')}` : ''}\nreturn await (\n`;
    const suffix = '\n)();';
    const session = this._engine.submit({ code: prefix + fnSource + suffix, tools: this._fetch === undefined ? tools : { ...tools, fetch: this._fetch } });
    const end = await session.done;
    const { logs, error } = atUserPositions(end.logs || [], end.type === 'result' ? undefined : end.error, map, prefix, fnSource, suffix);
    if (end.type === 'result') return { result: end.data, logs };
    return { result: undefined, error, logs };
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
   * Its code is strict (as Code Mode's Workers executor runs a module), so a function of
   * another execution it calls cannot reach its frames through `caller`. Its tool calls
   * carry this execution's token, which only this wrapper's script holds.
   */
  async _executeInSession(providers, tools, preludes, fnSource, map) {
    const names = providers.map((p) => own(p, 'name'));
    const reserved = names.find((name) => STRICT_RESERVED.has(name));
    if (reserved !== undefined) return { result: undefined, error: `Provider name "${reserved}" is reserved` };
    if (this._sandbox === null || this._sandbox.closed) {
      const opened = await this._openSession();
      if (opened.error !== undefined) return { result: undefined, error: opened.error };
      this._sandbox = opened.sandbox;
    }
    const token = randomBytes(16).toString('hex');
    const spec = names.map((name) => [name, Object.keys(tools[name] || {})]);
    // Script-level strict; namespaces and preludes on line 1, then the function. It reads
    // one global, SESSION_NAMESPACES, which hardening made non-writable and non-configurable.
    const prefix = `'use strict'; (async ({ ${names.join(', ')} }) => {${preludes.length ? `\n${preludes.join('\n')}` : ''}\nreturn await (\n`;
    const suffix = `\n)(); })(${SESSION_NAMESPACES}(${JSON.stringify(token)}, ${JSON.stringify(spec)}))`;
    this._fns = tools;
    this._token = token;
    try {
      const r = await this._sandbox.run(prefix + fnSource + suffix);
      const { logs, error } = atUserPositions(r.logs || [], r.success ? undefined : r.error, map, prefix, fnSource, suffix);
      if (r.success) return { result: r.output, logs };
      return { result: undefined, error, logs };
    } finally {
      this._fns = null;
      this._token = null;
    }
  }

  /** Opens the session's sandbox and hardens it (HARDEN_SESSION) before any execution runs in it. */
  async _openSession() {
    const sandbox = await this._engine.openSandbox({
      capabilities: {
        [SESSION_TOOL]: (token, provider, name, args) => this._callTool(token, provider, name, args),
        ...(this._fetch === undefined ? {} : { fetch: this._fetch }),
      },
      memoryLimitMb: this._engine._settings.memoryMb,
      timeoutMs: this.timeoutMs,
      cpuTimeMs: this._cpuTimeMs,
      idleTimeoutMs: this._idleTimeoutMs,
      web: this.web,
    });
    // A module, so that it can import the prelude's modules; it also skips the host-side
    // parse a script run gets for top-level await.
    const imports = this._preludeModules.map((key, i) => `import * as module${i} from ${JSON.stringify(key)};\n`).join('');
    const namespaces = this._preludeModules.map((_, i) => `module${i}`).join(', ');
    const hardened = await sandbox.run(`${imports}(${HARDEN_SESSION})([${namespaces}]);`, { type: 'module' });
    if (hardened.success) return { sandbox };
    sandbox.close();
    return { error: `The stateful sandbox could not be hardened: ${describeError(hardened.error)}` };
  }

  /** A tool call from the sandbox: only the execution in flight, only its own tools. */
  _callTool(token, provider, name, args) {
    if (this._token === null || token !== this._token) throw new Error(LATE_CALL_MESSAGE);
    const fns = Object.hasOwn(this._fns, provider) ? this._fns[provider] : undefined;
    const fn = fns !== undefined && Object.hasOwn(fns, name) ? fns[name] : undefined;
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

/**
 * An execution's logs and error at the user's positions: `map` (from `fn` to the code the
 * user gave) composed with the wrapper's (`prefix + fn + suffix` is the script the run
 * compiles); a frame in a prelude names the code's start. The wrapper's map is made only
 * when some text names a position: counting a 4 MB program's lines is tens of ms of
 * Node's thread.
 */
function atUserPositions(logs, error, map, prefix, fn, suffix) {
  let positions = null;
  const mapped = () => (positions ??= [...map, new Rewrite(fn).insert(prefix).copy(0, fn.length).insert(suffix).finish().stage]);
  const names = (text) => typeof text === 'string' && text.includes('sandbox.');
  const shown = (logs.some((e) => names(e.message)) ? remapLogs(logs, mapped()) : logs).map(formatLog);
  if (error === undefined) return { logs: shown };
  const placed = names(error.message) || names(error.stack) || typeof error.line === 'number' || (error.thrown && names(error.thrown.stack));
  return { logs: shown, error: describeError(placed ? remapError(error, mapped()) : error) };
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
