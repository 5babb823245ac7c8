'use strict';

// autoFix's options: checked once up front by isolet-core (its AUTOFIX_OPTIONS table: names,
// kinds, ranges, defaults; a typo is refused with the nearest name), so a wrong option
// rejects before anything is read, sent or written; then resolved against the environment.

const native = require('../native');
const { ownCopy } = require('../read-options');
const { AutoFixOptionsError } = require('./errors');

const DEFAULT_MODEL = 'gpt-4o-mini';

/** The checked options plus the environment and the defaults: what the pipeline uses. */
function resolveSettings(options) {
  let checked;
  try {
    // A null-prototype copy: an absent field is absent, whatever Object.prototype holds.
    checked = ownCopy(native.autofixSettings(shapeProvider(options)));
  } catch (err) {
    if (err.code !== 'ERR_ISOLET_VALIDATION') throw err;
    throw new AutoFixOptionsError(`autoFix(options): ${err.message}`);
  }
  const env = process.env;
  return {
    custom: checked.customProvider !== undefined,
    providerName: checked.customProvider ?? 'openai',
    apiKey: options.apiKey ?? nonEmpty(env.OPENAI_API_KEY),
    baseURL: options.baseURL ?? nonEmpty(env.OPENAI_BASE_URL),
    model: options.model ?? nonEmpty(env.OPENAI_MODEL) ?? DEFAULT_MODEL,
    language: checked.language,
    memoryLimitMb: checked.memoryLimitMb,
    timeoutMs: checked.timeoutMs,
    providerTimeoutMs: checked.providerTimeoutMs,
    maxSuggestionBytes: checked.maxSuggestionBytes,
    maxFileBytes: checked.maxFileBytes,
  };
}

/** A custom provider as `{ name, complete }`: its methods may live on its prototype. */
function shapeProvider(options) {
  if (options === null || typeof options !== 'object') return options;
  const p = options.provider;
  if (p === null || typeof p !== 'object') return options;
  return { ...options, provider: { name: p.name, complete: p.complete } };
}

function nonEmpty(v) {
  return typeof v === 'string' && v !== '' ? v : undefined;
}

module.exports = { DEFAULT_MODEL, resolveSettings };
