'use strict';
// The run a capability call belongs to. `lib/execute.js` calls every host handler
// through `callInRun(ctx, ...)`, so a capability finds its run with `currentRun()`
// without any change to its signature: an AbortSignal that aborts when the run ends
// (whatever ends it), the run's budgets, and a per-run slot for its own accounting.
//
// `currentRun()` answers during the synchronous part of the handler call: read it
// before the first `await` and keep the value. (AsyncLocalStorage would follow the
// handler across awaits, but on Node 20 and 22 it installs promise hooks that doubled
// the cost of a host call, 0.009 -> 0.017 ms, and slow every promise of the host.)

let current;

/** Bytes held against a limit; `reserve` refuses (returns false) past it. */
class ByteBudget {
  constructor(limit) {
    this.limit = limit;
    this.used = 0;
  }

  reserve(bytes) {
    if (bytes > this.limit - this.used) return false;
    this.used += bytes;
    return true;
  }

  release(bytes) {
    this.used = Math.max(0, this.used - bytes);
  }
}

function runEndedReason() {
  const reason = new Error('the sandbox run has ended');
  reason.name = 'AbortError';
  reason.code = 'ERR_ISOLET_RUN_ENDED';
  return reason;
}

class RunContext {
  /**
   * @param {{ maxPendingHostCallBytes: number, maxPendingHostCalls: number }} budgets
   */
  constructor(budgets) {
    // Made on first use of `signal`: most runs never read it, and an AbortController
    // plus its abort at run end cost every run about 10 µs.
    this._controller = null;
    this._ended = false;
    /** The run's in-flight budgets (bridge limits), for capabilities to size their own. */
    this.budgets = Object.freeze({ ...budgets });
    this._slots = new Map();
  }

  /**
   * Per-run state of one capability, created on first use by `init()`. `key` is any
   * object the capability owns (e.g. its handler), so two capabilities never collide.
   */
  slot(key, init) {
    let value = this._slots.get(key);
    if (value === undefined) {
      value = init(this);
      this._slots.set(key, value);
    }
    return value;
  }

  /** Aborts when the run ends, with a SandboxAbortedError-like reason. */
  get signal() {
    if (this._controller === null) {
      this._controller = new AbortController();
      if (this._ended) this._controller.abort(runEndedReason());
    }
    return this._controller.signal;
  }

  /** Called once by execute when the run has ended. */
  _end() {
    if (this._ended) return;
    this._ended = true;
    if (this._controller !== null) this._controller.abort(runEndedReason());
    this._slots.clear();
  }
}

/**
 * The run whose host call is being made, or undefined outside a run. Valid in the
 * synchronous part of a handler (before its first await).
 */
function currentRun() {
  return current;
}

/** Calls `fn(...args)` with `ctx` as the current run for its synchronous part. */
function callInRun(ctx, fn, args) {
  const previous = current;
  current = ctx;
  try {
    return fn(...args);
  } finally {
    current = previous;
  }
}

module.exports = { RunContext, ByteBudget, currentRun, callInRun };
