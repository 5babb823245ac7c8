'use strict';

/**
 * autoFix(): the seed's AI fix pipeline on top of the sandbox. One module per step:
 *
 *   options.js   check the options (natively), resolve them against the environment
 *   1. paths.js     assertSafePath: the file's real path lies inside root's real path, a regular file
 *   2. read.js      the original bytes (bounded, UTF-8 text)
 *   3. prompt.js, provider.js, extract.js
 *                   ask the provider (OpenAI-compatible or custom), take the code from its answer
 *   4. sandbox.js   the suggestion alone, then suggestion + "\n;void 0;\n" + test, fresh isolates
 *      diff.js, approval.js
 *                   the unified diff for review; autoApprove or approve(review)
 *   5. apply.js     only if it passed and was approved: temp file + fsync + rename
 *   6. fail         the file keeps its exact original bytes
 *   7. audit.js     one JSON line per call, whatever happens
 *
 * This file runs the steps in order. Runs on the Node main thread. See docs/autofix.md.
 */

const { performance } = require('node:perf_hooks');
const { STATUSES, FAILURE_REASONS, AutoFixOptionsError, AutoFixAuditError, StepFailure, errCode } = require('./errors');
const { DEFAULT_MODEL, resolveSettings } = require('./options');
const { assertSafePath } = require('./paths');
const { readVetted, decodeText, currentSha256, sha256 } = require('./read');
const { systemPromptFor, buildPrompt } = require('./prompt');
const { chooseProvider, askProvider } = require('./provider');
const { extractCode, suggestionFrom } = require('./extract');
const { sandboxRunner, proveSuggestion } = require('./sandbox');
const { unifiedDiff } = require('./diff');
const { decideApproval } = require('./approval');
const { applyAtomically } = require('./apply');
const { DEFAULT_AUDIT_LOG_NAME, auditPathFor, openAuditLog, auditEntry, appendAudit } = require('./audit');
const { withLock } = require('./lock');
const { ownCopy } = require('../read-options');

async function autoFix(input) {
  // Own properties only, read once: an `autoApprove`, `test` or `auditLog` on
  // Object.prototype is no option (lib/own.js).
  const options = input !== null && typeof input === 'object' ? ownCopy(input) : input;
  const settings = resolveSettings(options);
  const t0 = performance.now();

  const auditPath = auditPathFor(options);
  const audit = await openAuditLog(auditPath);

  const state = {
    file: String(options.filePath).slice(0, 4096),
    filePath: options.filePath,
    sha256Before: null,
    sha256After: null,
    approval: null,
    errorName: null,
    tProvider: [undefined, undefined],
    sandboxMs: null,
  };
  let outcome;
  let internalError;
  try {
    outcome = await pipeline(options, settings, audit, state);
  } catch (err) {
    if (err instanceof StepFailure) {
      const error = err.details.error;
      if (error && typeof error.name === 'string') state.errorName = error.name;
      outcome = {
        status: 'failed',
        reason: err.reason,
        message: err.message,
        auditMessage: err.details.auditMessage || err.message,
        error,
        sandbox: err.details.sandbox,
      };
    } else {
      // A bug in this module: audit it, then reject with it.
      internalError = err;
      state.errorName = (err && err.name) || 'Error';
      outcome = {
        status: 'failed',
        reason: 'internal-error',
        message: 'internal error',
        auditMessage: 'internal error in autoFix',
      };
    }
  }

  const durations = {
    provider: ms(state.tProvider[0], state.tProvider[1]),
    sandbox: state.sandboxMs,
    total: Math.round(performance.now() - t0),
  };
  let auditError;
  try {
    await appendAudit(audit, auditEntry(state, outcome, settings, durations));
  } catch (err) {
    auditError = `the audit entry could not be written: ${errCode(err)}`;
  } finally {
    await audit.fh.close().catch(() => {});
  }
  if (internalError !== undefined) throw internalError;

  const { auditMessage, ...publicOutcome } = outcome;
  const out = {
    ...publicOutcome,
    file: state.file,
    filePath: state.filePath,
    model: settings.model,
    sha256Before: state.sha256Before,
    sha256After: state.sha256After,
    durations,
    auditLog: auditPath,
  };
  if (out.reason === undefined) delete out.reason;
  if (out.error === undefined) delete out.error;
  if (out.sandbox === undefined) delete out.sandbox;
  if (auditError !== undefined) out.auditError = auditError;
  return out;
}

function ms(from, to) {
  return from === undefined || to === undefined ? null : Math.round(to - from);
}

async function pipeline(options, settings, audit, state) {
  // 1. assertSafePath
  const safe = await assertSafePath(options.filePath, options.root, audit.realPath);
  state.file = safe.rel;
  state.filePath = safe.fileReal;

  return withLock('file:' + safe.fileReal, async () => {
    try {
      // Check again under the lock: a call queued before us may have replaced the file.
      const fresh = await assertSafePath(options.filePath, options.root, audit.realPath);
      if (fresh.fileReal !== safe.fileReal)
        throw new StepFailure('unsafe-path', 'the path changed while waiting for another autoFix on the same file');
      return await lockedPipeline(options, settings, state, fresh);
    } finally {
      // sha256After: what the file holds when the call ends (null if it cannot be read).
      if (state.sha256Before !== null && state.sha256After === null) {
        state.sha256After = await currentSha256(safe.fileReal);
      }
    }
  });
}

async function lockedPipeline(options, settings, state, safe) {
  // 2. Read the original bytes (inside the lock, so a queued call sees the previous call's result).
  const { bytes: originalBytes, stat } = await readVetted(safe.fileReal, safe.stat, settings.maxFileBytes);
  const expected = {
    ino: stat.ino,
    dev: stat.dev,
    mode: stat.mode,
    uid: stat.uid,
    gid: stat.gid,
    sha256: sha256(originalBytes),
  };
  state.sha256Before = expected.sha256;
  const original = decodeText(originalBytes);

  // The sandbox must be there before we spend a provider call.
  const runSandbox = sandboxRunner();

  // 3. Ask the provider, take the code from its answer.
  const provider = chooseProvider(options, settings);
  const test = options.test !== undefined && options.test.trim() !== '' ? options.test : undefined;
  let answer;
  state.tProvider[0] = performance.now();
  try {
    answer = await askProvider(
      provider,
      {
        system: systemPromptFor(settings.language),
        prompt: buildPrompt(safe.rel, options.instruction, test, original, settings.language),
        model: settings.model,
      },
      settings,
    );
  } finally {
    state.tProvider[1] = performance.now();
  }
  const suggestion = suggestionFrom(answer, original, originalBytes, settings.maxSuggestionBytes);

  // 4. Sandbox: the suggestion alone, then (with a test) suggestion + test in one script.
  const limits = { memoryLimitMb: settings.memoryLimitMb, timeoutMs: settings.timeoutMs, language: settings.language };
  const sandboxStart = performance.now();
  let sandbox;
  try {
    sandbox = await proveSuggestion(runSandbox, suggestion.text, test, limits);
  } finally {
    state.sandboxMs = Math.round(performance.now() - sandboxStart);
  }

  // Approval.
  const diff = unifiedDiff(original, suggestion.text, safe.rel);
  const shown = { diff, suggestion: suggestion.text, sandbox };
  const review = {
    file: safe.rel,
    filePath: safe.fileReal,
    root: safe.rootReal,
    instruction: options.instruction,
    model: settings.model,
    original,
    suggestion: suggestion.text,
    diff,
    sandbox,
  };
  const decision = await decideApproval(options, review, shown);
  state.approval = decision.approval;
  if (decision.outcome !== undefined) return decision.outcome;

  // 5. Apply atomically.
  await applyAtomically(safe.fileReal, safe.rootReal, expected, suggestion.bytes);
  state.sha256After = sha256(suggestion.bytes);
  return { status: 'applied', message: 'applied: the suggestion passed the sandbox and was approved', ...shown };
}

module.exports = {
  autoFix,
  unifiedDiff,
  extractCode,
  AutoFixOptionsError,
  AutoFixAuditError,
  AUTOFIX_STATUSES: STATUSES,
  AUTOFIX_FAILURE_REASONS: FAILURE_REASONS,
  DEFAULT_AUTOFIX_MODEL: DEFAULT_MODEL,
  DEFAULT_AUDIT_LOG_NAME,
};
