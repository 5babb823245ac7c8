'use strict';

// What autoFix can report: its two rejection classes, the outcome vocabulary, and the
// internal StepFailure a pipeline step throws to end the call with a typed reason.

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

/** The short form of a file-system error for messages: its code (ENOENT, ...) when it has one. */
function errCode(err) {
  return (err && (err.code || err.message)) || String(err);
}

module.exports = { STATUSES, FAILURE_REASONS, AutoFixOptionsError, AutoFixAuditError, StepFailure, errCode };
