'use strict';

// Step 3, the provider: the default OpenAI-compatible client (an optional peer dependency),
// a bounded wait for any provider's answer, and provider errors described without secrets.

const { StepFailure } = require('./errors');

/** The default provider's client library: an optional peer dependency, loaded only here. */
function loadOpenAI() {
  try {
    return require('openai').OpenAI;
  } catch (err) {
    if (err && err.code === 'MODULE_NOT_FOUND' && String(err.message).includes("'openai'")) {
      throw new OpenAIMissingError();
    }
    throw err;
  }
}

class OpenAIMissingError extends Error {
  constructor() {
    super(
      "autoFix's default provider needs the `openai` package, an optional peer dependency of isolet: " +
        'run `npm install openai`, or pass options.provider',
    );
    this.name = 'OpenAIMissingError';
  }
}

class ProviderResponseError extends Error {
  constructor(message) {
    super(message);
    this.name = 'ProviderResponseError';
  }
}

class ProviderTimeoutError extends Error {
  constructor(ms) {
    super(`the provider did not answer within ${ms} ms`);
    this.name = 'ProviderTimeoutError';
  }
}

function openAIProvider(settings) {
  const OpenAI = loadOpenAI();
  const client = new OpenAI({
    apiKey: settings.apiKey,
    baseURL: settings.baseURL,
    timeout: settings.providerTimeoutMs,
    maxRetries: 0,
  });
  return {
    name: 'openai',
    async complete({ system, prompt, model, signal }) {
      const completion = await client.chat.completions.create(
        {
          model,
          messages: [
            { role: 'system', content: system },
            { role: 'user', content: prompt },
          ],
        },
        { signal, timeout: settings.providerTimeoutMs, maxRetries: 0 },
      );
      if (completion === null || typeof completion !== 'object' || !Array.isArray(completion.choices)) {
        throw new ProviderResponseError('the response is not a chat completion (no choices array)');
      }
      const choice = completion.choices[0];
      if (!choice || typeof choice !== 'object' || !choice.message || typeof choice.message !== 'object') {
        throw new ProviderResponseError('the response has no message in choices[0]');
      }
      if (choice.finish_reason === 'length') {
        throw new ProviderResponseError('the answer was cut off (finish_reason "length")');
      }
      if (typeof choice.message.content !== 'string') {
        const refusal = typeof choice.message.refusal === 'string' ? ' (the model refused)' : '';
        throw new ProviderResponseError(`the response message has no text content${refusal}`);
      }
      return choice.message.content;
    },
  };
}

/** The provider this call asks: the caller's own, or the default one (needs an API key and `openai`). */
function chooseProvider(options, settings) {
  if (settings.custom) return options.provider;
  if (settings.apiKey === undefined) {
    throw new StepFailure('provider-error', 'no API key: pass apiKey or set OPENAI_API_KEY', {
      error: { name: 'OpenAIError', message: 'no API key' },
    });
  }
  try {
    return openAIProvider(settings);
  } catch (err) {
    if (err instanceof OpenAIMissingError) {
      throw new StepFailure('provider-error', err.message, {
        error: { name: err.name, message: err.message },
        auditMessage: 'the openai package is not installed',
      });
    }
    throw providerFailure(err, settings.apiKey);
  }
}

/** The provider's answer as a string, or a StepFailure('provider-error'); never waits past timeoutMs. */
async function askProvider(provider, request, settings) {
  try {
    return await completeWithin(provider, request, settings.providerTimeoutMs);
  } catch (err) {
    throw providerFailure(err, settings.apiKey);
  }
}

async function completeWithin(provider, request, timeoutMs) {
  const controller = new AbortController();
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => {
      const err = new ProviderTimeoutError(timeoutMs);
      controller.abort(err);
      reject(err);
    }, timeoutMs);
  });
  try {
    const answer = await Promise.race([
      Promise.resolve().then(() => provider.complete({ ...request, signal: controller.signal })),
      timeout,
    ]);
    if (typeof answer !== 'string') {
      throw new ProviderResponseError(
        `the provider returned ${answer === null ? 'null' : typeof answer}, not a string`,
      );
    }
    return answer;
  } finally {
    clearTimeout(timer);
  }
}

/** Removes anything that looks like a credential from a provider message. */
function redact(text, apiKey) {
  let out = String(text);
  if (typeof apiKey === 'string' && apiKey.length >= 4) out = out.split(apiKey).join('[redacted]');
  out = out.replace(/\bsk-[A-Za-z0-9_*.-]{4,}/g, 'sk-[redacted]');
  out = out.replace(/\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=*-]{8,}/gi, '$1 [redacted]');
  return out.length > 500 ? out.slice(0, 500) + '…' : out;
}

/** A provider error as a StepFailure: redacted text for the caller, class name and status for the audit. */
function providerFailure(err, apiKey) {
  let name = (err && err.name) || 'Error';
  if (name === 'Error' && err && err.constructor && typeof err.constructor.name === 'string')
    name = err.constructor.name;
  const status = err && typeof err.status === 'number' ? err.status : undefined;
  const detail = redact((err && err.message) || String(err), apiKey);
  const head =
    err instanceof ProviderTimeoutError || name === 'APIConnectionTimeoutError'
      ? 'provider request timed out'
      : status !== undefined
        ? `provider answered HTTP ${status}`
        : err instanceof SyntaxError
          ? 'provider response is not valid JSON'
          : 'provider request failed';
  const message = `${head}: ${detail}`;
  return new StepFailure('provider-error', message, {
    error: { name, message, ...(status !== undefined ? { status } : {}) },
    auditMessage: `${head} (${name}${status !== undefined ? ` ${status}` : ''})`,
  });
}

module.exports = { chooseProvider, askProvider };
