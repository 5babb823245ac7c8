'use strict';
// Persistent sandboxes: `createSandbox(options)` and `engine.openSandbox(options)`. One
// isolate and one context serve many runs: what a run declares at top level or puts on
// globalThis is there for the next. Options are checked natively (isolet-core's sandbox
// table); what closes a sandbox is isolet-core's too (src/isolate/persistent.rs carries it
// out). Runs of one sandbox take turns: a run or call made while another is in flight
// starts when it has ended. A run may be an ES module (`type: 'module'`): the modules it
// imports stay loaded in the sandbox (src/v8 keeps its module graph) for later runs.
const native = require('./native');
const { execute, EMPTY_STATS } = require('./execute');
const { intoSandbox } = require('./bridge');
const { normalizeTools, useWebFetch } = require('./tools');
const { stripTypes, preparePlan } = require('./source');
const { remapResult } = require('./positions');
const { SandboxValidationError, SandboxAbortedError, errorFromThrown, errorFromFailure } = require('./errors');
const { isPlainObject, describeThrown } = require('./own');
const { readOptions } = require('./read-options');
const { getDefaultEngine, unlisten } = require('./run-sandbox');

const abortedOf = Object.getOwnPropertyDescriptor(AbortSignal.prototype, 'aborted').get;
const addListener = EventTarget.prototype.addEventListener;

function failure(error) {
  return { success: false, error, stats: { ...EMPTY_STATS }, logs: [] };
}

function record(r) {
  return r.ok ? { success: true, output: r.value, stats: r.stats, logs: r.logs } : { success: false, error: r.error, stats: r.stats, logs: r.logs };
}

/**
 * Splits `createSandbox` options into what is checked natively, the tool handlers and the
 * sandbox's module resolver; strips the types of the sandbox's TypeScript modules.
 */
async function settingsOf(options) {
  let tools = { names: [], handlers: Object.create(null) };
  let shaped = options;
  let resolve;
  if (isPlainObject(options)) {
    shaped = readOptions(options, 'createSandbox options', '');
    const capabilities = shaped.capabilities;
    if (capabilities !== undefined) tools = normalizeTools(capabilities);
    shaped.capabilities = capabilities === undefined ? undefined : tools.names;
    // Checked natively to be a function (or absent); serves every run's imports.
    resolve = shaped.resolve;
  }
  const settings = new native.SandboxSettings(shaped);
  for (const key of settings.typescriptModules) {
    let code;
    try {
      code = await stripTypes(settings.moduleSource(key), { language: 'typescript', asyncBody: false });
    } catch (err) {
      if (!(err instanceof SandboxValidationError)) throw err;
      throw new SandboxValidationError(`modules['${key}']: ${err.message}`, { line: err.line, column: err.column });
    }
    settings.setModule(key, code);
  }
  return { settings, handlers: useWebFetch(settings, tools.handlers, tools.webFetch), resolve };
}

/** Per-run options: the signal is shaped here, the rest checked natively. */
function runOptionsOf(options) {
  if (options === undefined || !isPlainObject(options)) return { shaped: options, signal: undefined, resolve: undefined };
  const shaped = readOptions(options, 'sandbox.run options', '');
  const signal = shaped.signal;
  if (signal !== undefined) {
    try {
      abortedOf.call(signal);
    } catch {
      throw new SandboxValidationError(`signal must be an AbortSignal, got ${signal === null ? 'null' : typeof signal}`);
    }
  }
  shaped.signal = undefined;
  // Checked natively to be a function (or absent); this run's, over the sandbox's.
  return { shaped, signal, resolve: shaped.resolve };
}

class Sandbox {
  /** @internal Use createSandbox() or engine.openSandbox(). */
  constructor(nativeSandbox, handlers, resolve) {
    this._native = nativeSandbox;
    this._handlers = handlers;
    this._resolve = resolve;
    this._turn = Promise.resolve();
  }

  /** True once the sandbox is closed (by close(), a limit, idleness or its engine). */
  get closed() {
    return this._native.closeReason !== null;
  }

  /**
   * Why it is closed: 'closed', 'idleTimeout', 'outOfMemory', 'unresponsive',
   * 'totalCpuTime', 'totalHostCalls', 'shutdown', 'hostLost' or 'internal'; null while open.
   */
  get closeReason() {
    return this._native.closeReason;
  }

  /** What the sandbox has used of its sandbox-wide limits: runs, CPU time, host calls. */
  get usage() {
    return { ...this._native.usage };
  }

  /**
   * Evaluates `code` in the sandbox's context (a classic script, or with `type: 'module'`
   * an ES module); resolves to runSandbox's result record.
   */
  run(code, options = undefined) {
    return this._take(() => this._run(code, options, undefined));
  }

  /** Calls global function `name` of the sandbox with copies of `args`. */
  call(name, ...args) {
    return this._take(() => this._run('', undefined, { name, args }));
  }

  /** Closes the sandbox: a run in flight is aborted, later ones fail. Idempotent. */
  close() {
    this._native.close();
  }

  async [Symbol.asyncDispose]() {
    this.close();
  }

  /** Runs `job` after every run or call made before it. */
  _take(job) {
    const result = this._turn.then(job);
    this._turn = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }

  async _run(code, options, call) {
    const reason = this._native.closedMessage;
    if (reason !== null) return failure(new SandboxValidationError(reason));
    let handle = null;
    let aborted = false;
    const onAbort = () => {
      aborted = true;
      if (handle) handle.abort();
    };
    let signal;
    let listening = false;
    let done;
    // Where the code the run compiles came from, when a rewrite or TypeScript moved it.
    let map = [];
    try {
      const run = runOptionsOf(options);
      signal = run.signal;
      const plan = this._native.plan(code, run.shaped);
      let bytes;
      if (call === undefined) {
        // A module has top-level await of its own; a script gets it by a rewrite.
        map = await preparePlan(plan, plan.mode === 'script' ? 'topLevelAwait' : undefined);
      } else {
        if (typeof call.name !== 'string' || call.name.length === 0) {
          throw new SandboxValidationError(`sandbox.call: name must be a non-empty string, got ${call.name === null ? 'null' : typeof call.name}`);
        }
        // Big arguments are written a slice at a time (lib/codec.js).
        bytes = await new Promise((resolve, reject) => {
          intoSandbox(call.args, plan.maxMessageBytes, `sandbox.call(${call.name}): arguments`, (problem, written) => {
            if (problem) reject(new SandboxValidationError(problem.message));
            else resolve(written);
          });
        });
      }
      if (signal !== undefined) {
        try {
          addListener.call(signal, 'abort', onAbort, { once: true });
        } catch (err) {
          throw new SandboxValidationError(`signal must be an AbortSignal: adding a listener threw ${describeThrown(err)}`);
        }
        listening = true;
        if (abortedOf.call(signal)) aborted = true;
      }
      if (aborted) {
        unlisten(signal, onAbort, listening);
        return failure(new SandboxAbortedError('Execution was aborted before it started'));
      }
      const target =
        call === undefined
          ? this._native
          : {
              submit: (p, onEvent, started) => this._native.submitCall(p, call.name, bytes, onEvent, started),
              handleOf: (runId) => this._native.handleOf(runId),
            };
      const resolve = run.resolve !== undefined ? run.resolve : this._resolve;
      ({ done, handle } = execute(target, plan, { handlers: this._handlers, resolve }));
    } catch (err) {
      unlisten(signal, onAbort, listening);
      return failure(errorFromThrown(err));
    }
    try {
      return record(remapResult(await done, map));
    } finally {
      unlisten(signal, onAbort, listening);
    }
  }
}


/** Opens a sandbox on a NativeEngine; rejects with a typed error (bad options, past the engine's bounds on open sandboxes). */
async function openOn(nativeEngine, options) {
  let planned;
  try {
    planned = await settingsOf(options);
  } catch (err) {
    throw errorFromThrown(err);
  }
  return openWith(nativeEngine, planned);
}

async function openWith(nativeEngine, { settings, handlers, resolve }) {
  let nativeSandbox;
  try {
    nativeSandbox = native.openSandbox(nativeEngine, settings);
  } catch (err) {
    throw errorFromThrown(err);
  }
  // Process isolation: the sandbox's own host process starts now; it is handed out once
  // that host serves, or its open fails with why.
  let failed;
  try {
    failed = await nativeSandbox.ready();
  } catch (err) {
    nativeSandbox.close();
    throw errorFromThrown(err);
  }
  if (failed !== null) {
    nativeSandbox.close();
    throw errorFromFailure(failed);
  }
  return new Sandbox(nativeSandbox, handlers, resolve);
}

/**
 * Opens a persistent sandbox on runSandbox's default engine of its isolation. Resolves
 * to a Sandbox; rejects with a typed error for bad options or past the engine's bounds on
 * open sandboxes (`maxOpenSandboxes`, `maxOpenSandboxesPerTenant`). An idle sandbox holds
 * no isolate slot: its runs wait for one in the engine's queue like one-shot runs.
 */
async function createSandbox(options = undefined) {
  let planned;
  try {
    planned = await settingsOf(options);
  } catch (err) {
    throw errorFromThrown(err);
  }
  const engine = getDefaultEngine(planned.settings.isolation);
  try {
    // Process isolation: a sandbox opens in a host that serves.
    await engine.ready();
  } catch (err) {
    throw errorFromThrown(err);
  }
  return openWith(engine, planned);
}

module.exports = { Sandbox, createSandbox, openOn };
