'use strict';

// Step 7, audit: one JSON line per call, whatever happens, written by autoFix itself
// (never the key, the file, the suggestion, the instruction or free text from the provider
// or the sandbox).

const fs = require('node:fs');
const fsp = require('node:fs/promises');
const path = require('node:path');
const { AutoFixOptionsError, AutoFixAuditError, errCode } = require('./errors');
const { O_NOFOLLOW } = require('./read');
const { withLock } = require('./lock');

const DEFAULT_AUDIT_LOG_NAME = '.isolet-audit.jsonl';
const AUDIT_VERSION = 1;

/** `options.auditLog`, else `<root>/.isolet-audit.jsonl`, as an absolute path. */
function auditPathFor(options) {
  if (options.auditLog === undefined && options.root.includes('\0')) {
    throw new AutoFixOptionsError('autoFix(options): root contains a NUL byte and no auditLog was given');
  }
  return path.resolve(options.auditLog ?? path.join(options.root, DEFAULT_AUDIT_LOG_NAME));
}

/** Opens the log for appending (no symlink, a regular file), or rejects with AutoFixAuditError. */
async function openAuditLog(auditPath) {
  let fh;
  try {
    fh = await fsp.open(
      auditPath,
      fs.constants.O_WRONLY | fs.constants.O_APPEND | fs.constants.O_CREAT | O_NOFOLLOW,
      0o600,
    );
  } catch (err) {
    throw new AutoFixAuditError(`autoFix: cannot open the audit log ${auditPath}: ${errCode(err)}`, err);
  }
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw new AutoFixAuditError(`autoFix: the audit log ${auditPath} is not a regular file`);
    return { fh, realPath: await fsp.realpath(auditPath) };
  } catch (err) {
    await fh.close().catch(() => {});
    if (err instanceof AutoFixAuditError) throw err;
    throw new AutoFixAuditError(`autoFix: cannot use the audit log ${auditPath}: ${errCode(err)}`, err);
  }
}

/**
 * The line for one call.
 * @param {object} state what the pipeline recorded (file, hashes, approval, errorName)
 * @param {object} outcome status, reason, message and the host-written auditMessage
 */
function auditEntry(state, outcome, settings, durations) {
  return {
    v: AUDIT_VERSION,
    time: new Date().toISOString(),
    file: state.file,
    status: outcome.status,
    reason: outcome.reason ?? null,
    message: outcome.auditMessage ?? outcome.message,
    sha256Before: state.sha256Before,
    sha256After: state.sha256After,
    model: settings.model,
    provider: settings.providerName,
    approval: state.approval,
    error: errorClassName(state.errorName),
    durations,
  };
}

/** Only an identifier-like class name: a custom provider or sandboxed code chooses `name`. */
function errorClassName(name) {
  if (name === null) return null;
  return typeof name === 'string' && /^[A-Za-z_$][\w$]{0,63}$/.test(name) ? name : 'Error';
}

/** Appends the entry as one write on the O_APPEND descriptor, serialised per log in this process. */
async function appendAudit(audit, entry) {
  const line = Buffer.from(JSON.stringify(entry) + '\n', 'utf8');
  await withLock('audit:' + audit.realPath, async () => {
    let off = 0;
    while (off < line.length) {
      const { bytesWritten } = await audit.fh.write(line, off, line.length - off);
      off += bytesWritten;
    }
  });
}

module.exports = { DEFAULT_AUDIT_LOG_NAME, auditPathFor, openAuditLog, auditEntry, appendAudit };
