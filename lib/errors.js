'use strict';
// The six error classes of the @coda/sandbox seed. Every failure of a run is one of
// these, with a stable `code`. Their `stack` never contains host frames: for a runtime
// error it is the sandbox's own stack, otherwise just "Name: message".

class SandboxError extends Error {
  /**
   * @param {string} message
   * @param {{ code?: string, cause?: unknown }} [options]
   */
  constructor(message, options = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    Object.defineProperty(this, 'name', { value: new.target.name, enumerable: false, configurable: true, writable: true });
    this.code = options.code || 'ERR_ISOLET_INTERNAL';
    this.stack = `${this.name}: ${message}`;
  }
}

class SandboxTimeoutError extends SandboxError {
  /** @param {string} message @param {{ limit?: 'wall' | 'cpu' }} [options] */
  constructor(message, options = {}) {
    super(message, { code: 'ERR_ISOLET_TIMEOUT' });
    /** Which limit was hit: `wall` (wall-clock) or `cpu`. */
    this.limit = options.limit || 'wall';
  }
}

class SandboxOOMError extends SandboxError {
  constructor(message) {
    super(message, { code: 'ERR_ISOLET_OOM' });
  }
}

class SandboxRuntimeError extends SandboxError {
  /**
   * @param {string} message
   * @param {{ thrown?: { name: string, message: string, stack?: string } }} [options]
   */
  constructor(message, options = {}) {
    super(message, { code: 'ERR_ISOLET_RUNTIME' });
    /** What the sandboxed code threw: its name, message and (sandbox) stack. */
    this.thrown = options.thrown;
    if (options.thrown && options.thrown.stack) this.stack = `${this.name}: ${options.thrown.stack}`;
  }
}

class SandboxValidationError extends SandboxError {
  /** @param {string} message @param {{ line?: number, column?: number }} [options] */
  constructor(message, options = {}) {
    super(message, { code: 'ERR_ISOLET_VALIDATION' });
    if (options.line !== undefined) this.line = options.line;
    if (options.column !== undefined) this.column = options.column;
  }
}

class SandboxAbortedError extends SandboxError {
  constructor(message) {
    super(message, { code: 'ERR_ISOLET_ABORTED' });
  }
}

/** Builds the right error instance from a native failure record. */
function errorFromFailure(f) {
  switch (f.className) {
    case 'SandboxTimeoutError':
      return new SandboxTimeoutError(f.message, { limit: f.limit });
    case 'SandboxOOMError':
      return new SandboxOOMError(f.message);
    case 'SandboxRuntimeError':
      return new SandboxRuntimeError(f.message, {
        thrown:
          f.thrownName == null
            ? undefined
            : { name: f.thrownName, message: f.thrownMessage ?? '', stack: f.stack ?? undefined },
      });
    case 'SandboxValidationError':
      return new SandboxValidationError(f.message, { line: f.line ?? undefined, column: f.column ?? undefined });
    case 'SandboxAbortedError':
      return new SandboxAbortedError(f.message);
    default:
      return new SandboxError(f.message, { code: f.code });
  }
}

module.exports = {
  SandboxError,
  SandboxTimeoutError,
  SandboxOOMError,
  SandboxRuntimeError,
  SandboxValidationError,
  SandboxAbortedError,
  errorFromFailure,
};
