/// <reference path="./globals.d.ts" />
/**
 * autoFix(): ask a model for a fix, prove it in a fresh V8 isolate, apply it only when it
 * passed and was approved, and append one audit line per call. See docs/autofix.md.
 */

/** What autoFix did. Only `applied` changed the file. */
export type AutoFixStatus = 'applied' | 'needs-approval' | 'rejected' | 'failed';

/**
 * Why a `failed` call failed. In every case the file keeps its exact original bytes.
 * - `unsafe-path`: the path failed validation (NUL byte, missing, outside `root`, a symlink
 *   or hard link that may lead out of `root`, not a regular file, the audit log itself).
 * - `read-failure`: the file could not be read, is larger than `maxFileBytes`, or is not UTF-8 text.
 * - `provider-error`: no API key, HTTP error, timeout, malformed or unexpected response.
 * - `no-code`: the answer holds no usable code (no code block, empty, too large, or identical to the file).
 * - `sandbox-failure`: the suggestion on its own did not complete in the sandbox (syntax error,
 *   ES module syntax, thrown error, timeout, out of memory), or the sandbox is unavailable.
 * - `test-failure`: the suggestion ran, but `test` run after it in the same isolate did not complete.
 * - `write-failure`: the file changed since it was read, or the atomic write failed.
 */
export type AutoFixFailureReason =
  'unsafe-path' | 'read-failure' | 'provider-error' | 'no-code' | 'sandbox-failure' | 'test-failure' | 'write-failure';

/** The sandbox result autoFix relied on (same shape as runSandbox's result). */
export type AutoFixSandboxResult =
  | { success: true; output: unknown; stats?: unknown; logs?: unknown }
  | { success: false; error: AutoFixErrorInfo; stats?: unknown; logs?: unknown };

/** An error, copied as plain data. */
export interface AutoFixErrorInfo {
  name: string;
  message: string;
  stack?: string;
  /** HTTP status, for provider errors that have one. */
  status?: number;
  [key: string]: unknown;
}

/** A chat model autoFix can ask for a fix. */
export interface ChatProvider {
  /** Recorded in the audit log; defaults to "custom". */
  name?: string;
  /**
   * Returns the model's answer as text. `signal` aborts when `providerTimeoutMs` elapses;
   * autoFix stops waiting at that moment either way.
   */
  complete(request: ChatRequest): Promise<string>;
}

export interface ChatRequest {
  system: string;
  prompt: string;
  model: string;
  signal: AbortSignal;
}

/** Given to `approve`: everything a reviewer needs to decide. */
export interface AutoFixReview {
  /** Path relative to root (forward slashes). */
  readonly file: string;
  /** Real absolute path of the file that would be replaced. */
  readonly filePath: string;
  /** Real absolute path of root. */
  readonly root: string;
  readonly instruction: string;
  readonly model: string;
  /** The file's current content. */
  readonly original: string;
  /** The proposed new content (passed the sandbox and the test). */
  readonly suggestion: string;
  /** Unified diff, `--- a/<file>` / `+++ b/<file>`, 3 lines of context. */
  readonly diff: string;
  readonly sandbox: AutoFixSandboxResult;
}

export interface AutoFixOptions {
  /** The file to fix. A relative path is resolved against `root`. */
  filePath: string;
  /** The directory the file's real path must stay inside. */
  root: string;
  /** What is wrong: an error message, a failing test's output, a bug report. */
  instruction: string;
  /**
   * Sandbox code that must complete without throwing when run right after the suggestion
   * in the same isolate (as one script: suggestion + "\n;void 0;\n" + test).
   */
  test?: string;
  /** `'openai'` (default) or your own provider. */
  provider?: 'openai' | ChatProvider;
  /** Default: `OPENAI_API_KEY`. Never logged, never returned. */
  apiKey?: string;
  /** Default: `OPENAI_BASE_URL`, else the OpenAI API. */
  baseURL?: string;
  /** Default: `OPENAI_MODEL`, else `"gpt-4o-mini"`. */
  model?: string;
  /** Apply without asking once the sandbox passed. Default false; for trusted CI only. */
  autoApprove?: boolean;
  /** Called (when `autoApprove` is false) after the sandbox passed. Only `true` approves. */
  approve?(review: AutoFixReview): boolean | Promise<boolean>;
  /** JSON-lines audit file. Default `<root>/.isolet-audit.jsonl`. */
  auditLog?: string;
  /**
   * Language the suggestion is run in. Default: `typescript` for a .ts/.mts/.cts file,
   * else `javascript`.
   */
  language?: 'javascript' | 'typescript';
  /** Sandbox heap limit in MB (runSandbox default: 64). */
  memoryLimitMb?: number;
  /** Sandbox time limit per run in ms (runSandbox default: 5000). */
  timeoutMs?: number;
  /** How long to wait for the provider. Default 60000. */
  providerTimeoutMs?: number;
  /** Largest suggestion accepted, in UTF-8 bytes. Default 1 MiB. */
  maxSuggestionBytes?: number;
  /** Largest file autoFix reads and sends to the provider. Default 1 MiB. */
  maxFileBytes?: number;
}

export interface AutoFixDurations {
  /** ms waiting for the provider, null if it was not asked. */
  provider: number | null;
  /** ms in the sandbox (both runs), null if it did not run. */
  sandbox: number | null;
  total: number;
}

export interface AutoFixResultBase {
  status: AutoFixStatus;
  /** Human-readable summary. */
  message: string;
  /** Path relative to root, or the raw input when the path was refused. */
  file: string;
  /** Real absolute path, or the raw input when the path was refused. */
  filePath: string;
  model: string;
  /** sha256 (hex) of the file as read; null if it was not read. */
  sha256Before: string | null;
  /** sha256 (hex) of the file when the call ended; null if unknown. */
  sha256After: string | null;
  durations: AutoFixDurations;
  /** Path of the audit log this call appended to. */
  auditLog: string;
  /** Set when the audit line could not be written (the outcome above still holds). */
  auditError?: string;
}

export interface AutoFixApplied extends AutoFixResultBase {
  status: 'applied';
  diff: string;
  suggestion: string;
  sandbox: AutoFixSandboxResult;
}

export interface AutoFixNeedsApproval extends AutoFixResultBase {
  status: 'needs-approval';
  diff: string;
  suggestion: string;
  sandbox: AutoFixSandboxResult;
}

export interface AutoFixRejected extends AutoFixResultBase {
  status: 'rejected';
  diff: string;
  suggestion: string;
  sandbox: AutoFixSandboxResult;
}

export interface AutoFixFailed extends AutoFixResultBase {
  status: 'failed';
  reason: AutoFixFailureReason;
  /** The sandbox's or the provider's error, when there is one. */
  error?: AutoFixErrorInfo;
  /** The failing sandbox result, for `sandbox-failure` and `test-failure`. */
  sandbox?: AutoFixSandboxResult;
}

export type AutoFixResult = AutoFixApplied | AutoFixNeedsApproval | AutoFixRejected | AutoFixFailed;

/** One line of the audit log. Never holds the API key, the base URL, the file, the suggestion, the instruction or the test. */
export interface AuditEntry {
  /** Format version: 1. */
  v: 1;
  /** ISO 8601. */
  time: string;
  /** Relative to root, or the raw input (up to 4096 characters) when the path was refused. */
  file: string;
  /** `failed` with reason `internal-error` only for a bug in autoFix (the call then rejects). */
  status: AutoFixStatus;
  reason: AutoFixFailureReason | 'internal-error' | null;
  /** Written by autoFix itself; never quotes the provider, the sandboxed code or the file. */
  message: string;
  sha256Before: string | null;
  sha256After: string | null;
  model: string;
  provider: string;
  /** How the write was authorised: `auto`, `approved`, `denied`, `none` (needs-approval), or null (not reached). */
  approval: 'auto' | 'approved' | 'denied' | 'none' | null;
  /** Error class name (e.g. `SandboxTimeoutError`, `APIConnectionTimeoutError`), or null. */
  error: string | null;
  durations: AutoFixDurations;
}

/** Rejection for malformed options; nothing was read, sent, written or logged. */
export declare class AutoFixOptionsError extends TypeError {
  readonly code: 'ERR_ISOLET_AUTOFIX_OPTIONS';
}

/** Rejection when the audit log cannot be opened; nothing was read, sent or written. */
export declare class AutoFixAuditError extends Error {
  readonly code: 'ERR_ISOLET_AUTOFIX_AUDIT';
}

/**
 * Runs the pipeline. Resolves with the outcome (including every failure of the pipeline);
 * rejects only with AutoFixOptionsError or AutoFixAuditError (before touching anything), or
 * with an unexpected internal error (after auditing it).
 */
export declare function autoFix(options: AutoFixOptions): Promise<AutoFixResult>;

/**
 * Unified diff of two texts (what autoFix shows for review), like `diff -u`; '' when equal.
 * Minimal (jsdiff) up to an edit of 1,000 lines or 2 s of work; past that, one hunk that
 * replaces the differing block. Throws AutoFixOptionsError for arguments of the wrong type.
 */
export declare function unifiedDiff(before: string, after: string, name: string, context?: number): string;

/** The code autoFix would take from a model's answer, or null with the reason. */
export declare function extractCode(answer: string): { code: string | null; why: string };

export declare const AUTOFIX_STATUSES: readonly AutoFixStatus[];
export declare const AUTOFIX_FAILURE_REASONS: readonly AutoFixFailureReason[];
export declare const DEFAULT_AUTOFIX_MODEL: string;
export declare const DEFAULT_AUDIT_LOG_NAME: string;
