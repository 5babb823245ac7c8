'use strict';

// autoFix's options: checked once up front (a wrong type rejects before anything is read,
// sent or written), then resolved against the environment and the defaults.

const { AutoFixOptionsError } = require('./errors');

const DEFAULT_MODEL = 'gpt-4o-mini';
const DEFAULT_PROVIDER_TIMEOUT_MS = 60_000;
const DEFAULT_MAX_SUGGESTION_BYTES = 1024 * 1024;
const DEFAULT_MAX_FILE_BYTES = 1024 * 1024;

function validateOptions(options) {
  if (options === null || typeof options !== 'object') {
    throw new AutoFixOptionsError('autoFix(options): options must be an object');
  }
  const o = options;
  for (const key of ['filePath', 'root', 'instruction']) {
    if (typeof o[key] !== 'string') {
      throw new AutoFixOptionsError(`autoFix(options): options.${key} must be a string`);
    }
  }
  if (o.root === '') throw new AutoFixOptionsError('autoFix(options): options.root must not be empty');
  if (o.filePath === '') throw new AutoFixOptionsError('autoFix(options): options.filePath must not be empty');
  if (o.instruction.trim() === '') {
    throw new AutoFixOptionsError('autoFix(options): options.instruction must describe what is wrong');
  }
  for (const key of ['test', 'apiKey', 'baseURL', 'model', 'auditLog']) {
    if (o[key] !== undefined && typeof o[key] !== 'string') {
      throw new AutoFixOptionsError(`autoFix(options): options.${key} must be a string when given`);
    }
  }
  if (o.auditLog === '') throw new AutoFixOptionsError('autoFix(options): options.auditLog must not be empty');
  if (o.auditLog !== undefined && o.auditLog.includes('\0')) {
    throw new AutoFixOptionsError('autoFix(options): options.auditLog must not contain NUL bytes');
  }
  for (const key of ['memoryLimitMb', 'timeoutMs', 'providerTimeoutMs', 'maxSuggestionBytes', 'maxFileBytes']) {
    const v = o[key];
    if (v !== undefined && !(Number.isSafeInteger(v) && v > 0)) {
      throw new AutoFixOptionsError(`autoFix(options): options.${key} must be a positive whole number when given`);
    }
  }
  if (o.language !== undefined && o.language !== 'javascript' && o.language !== 'typescript') {
    throw new AutoFixOptionsError("autoFix(options): options.language must be 'javascript' or 'typescript' when given");
  }
  if (o.autoApprove !== undefined && typeof o.autoApprove !== 'boolean') {
    throw new AutoFixOptionsError('autoFix(options): options.autoApprove must be a boolean when given');
  }
  if (o.approve !== undefined && typeof o.approve !== 'function') {
    throw new AutoFixOptionsError('autoFix(options): options.approve must be a function when given');
  }
  const p = o.provider;
  if (p !== undefined && p !== 'openai') {
    if (p === null || typeof p !== 'object' || typeof p.complete !== 'function') {
      throw new AutoFixOptionsError(
        "autoFix(options): options.provider must be 'openai' or an object with a complete({ system, prompt, model, signal }) method",
      );
    }
  }
}

/** Validated options plus the environment and the defaults: what the pipeline uses. */
function resolveSettings(o) {
  const env = process.env;
  const custom = o.provider !== undefined && o.provider !== 'openai';
  return {
    custom,
    providerName: custom
      ? typeof o.provider.name === 'string' && o.provider.name
        ? o.provider.name
        : 'custom'
      : 'openai',
    apiKey: o.apiKey ?? nonEmpty(env.OPENAI_API_KEY),
    baseURL: o.baseURL ?? nonEmpty(env.OPENAI_BASE_URL),
    model: o.model ?? nonEmpty(env.OPENAI_MODEL) ?? DEFAULT_MODEL,
    language: languageOf(o),
    providerTimeoutMs: o.providerTimeoutMs ?? DEFAULT_PROVIDER_TIMEOUT_MS,
    maxSuggestionBytes: o.maxSuggestionBytes ?? DEFAULT_MAX_SUGGESTION_BYTES,
    maxFileBytes: o.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES,
  };
}

/** The language a file is checked in: `options.language`, else TypeScript for .ts/.mts/.cts. */
function languageOf(options) {
  if (options.language !== undefined) return options.language;
  return /\.[cm]?ts$/i.test(options.filePath) ? 'typescript' : 'javascript';
}

function nonEmpty(v) {
  return typeof v === 'string' && v !== '' ? v : undefined;
}

module.exports = { DEFAULT_MODEL, validateOptions, resolveSettings };
