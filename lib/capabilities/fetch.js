'use strict';
// createFetchCapability(options): a capability handler that lets sandboxed code make
// HTTP(S) requests to an explicit allow-list of origins, through the host's own global
// `fetch`. Nothing network-related ever enters the isolate: the sandbox sends a plain
// request object and gets a plain response object back.
//
// Enforced here, on the host, for every request and every redirect hop:
// - exact origin match against the allow-list (scheme + host + port), http(s) only,
//   no credentials in URLs;
// - method allow-list; hop-by-hop and routing headers (Host, Content-Length, ...) refused;
// - request body size cap; one overall deadline (AbortSignal.timeout) covering all hops
//   and the body; response body streamed and cut off (stream cancelled) past the cap;
// - redirects followed manually, at most MAX_REDIRECTS, each target re-checked;
// - per run (lib/run-context.js): every request is aborted, and its socket closed, when
//   the run that made it ends; response bytes in flight for one run stay within the
//   run's maxPendingHostCallBytes.

const native = require('../native');
const { SandboxValidationError } = require('../errors');
const { ByteBudget, currentRun } = require('../run-context');
const { ownCopy } = require('../read-options');
const { describeValue, isPlainRecord } = require('./request');

const MAX_REDIRECTS = 5;
// The options' names, ranges and number defaults are isolet-core's (FETCH_CAPABILITY).
const DEFAULT_METHODS = Object.freeze(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE']);
const KNOWN_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
const REQUEST_KEYS = new Set(['url', 'method', 'headers', 'body']);
const MAX_URL_LENGTH = 8192;
const MAX_HEADERS = 64;
const MAX_HEADER_NAME = 256;
const MAX_HEADER_VALUE = 8192;
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const FORBIDDEN_HEADERS = new Set([
  'host',
  'connection',
  'content-length',
  'transfer-encoding',
  'keep-alive',
  'upgrade',
  'te',
  'trailer',
  'expect',
  'proxy-authorization',
  'proxy-connection',
]);
// Dropped when a redirect changes origin (as browsers drop Authorization).
const CREDENTIAL_HEADERS = ['authorization', 'cookie'];
// Dropped when a redirect turns the request into a body-less GET.
const BODY_HEADERS = ['content-type', 'content-encoding', 'content-language', 'content-location'];

function invalidOption(message) {
  return new SandboxValidationError(`createFetchCapability: ${message}`);
}

function requestError(message) {
  const err = new TypeError(`fetch: ${message}`);
  err.code = 'ERR_ISOLET_INVALID_ARGUMENT';
  return err;
}

function refusal(code, message) {
  const err = new Error(`fetch: ${message}`);
  err.code = code;
  return err;
}

function normaliseOrigin(entry, index) {
  if (typeof entry !== 'string' || entry.length === 0) {
    throw invalidOption(`allowedOrigins[${index}] must be a non-empty string`);
  }
  let url;
  try {
    url = new URL(entry);
  } catch {
    throw invalidOption(`allowedOrigins[${index}] is not a valid URL: ${JSON.stringify(entry)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw invalidOption(`allowedOrigins[${index}] must be an http: or https: origin`);
  }
  if (url.username || url.password) {
    throw invalidOption(`allowedOrigins[${index}] must not contain credentials`);
  }
  if (url.pathname !== '/' || url.search || url.hash) {
    // An entry like https://api.example.com/v1 would silently allow the whole origin.
    throw invalidOption(
      `allowedOrigins[${index}] must be a bare origin such as "https://api.example.com" (no path, query or fragment)`,
    );
  }
  return url.origin;
}

function validateOptions(options) {
  let checked;
  try {
    checked = ownCopy(native.fetchCapabilitySettings(options));
  } catch (err) {
    throw invalidOption(err.message);
  }
  const origins = new Set(checked.allowedOrigins.map(normaliseOrigin));
  const methods = (checked.allowedMethods ?? DEFAULT_METHODS).map((m, i) => {
    const upper = m.toUpperCase();
    if (!KNOWN_METHODS.has(upper)) throw invalidOption(`allowedMethods[${i}] must be one of ${[...KNOWN_METHODS].join(', ')}`);
    return upper;
  });
  const { timeoutMs, maxResponseBytes, maxRequestBytes } = checked;
  return { origins, timeoutMs, maxResponseBytes, maxRequestBytes, methods: new Set(methods) };
}

/** Parses and checks a URL against the allow-list. `what` names it in messages. */
function checkUrl(input, base, origins, what) {
  let url;
  try {
    url = base === undefined ? new URL(input) : new URL(input, base);
  } catch {
    throw refusal('ERR_ISOLET_INVALID_URL', `${what} is not a valid absolute URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw refusal('ERR_ISOLET_INVALID_URL', `${what} must use http: or https:`);
  }
  if (url.username || url.password) {
    throw refusal('ERR_ISOLET_INVALID_URL', `${what} must not contain credentials`);
  }
  if (!origins.has(url.origin)) {
    throw refusal(
      'ERR_ISOLET_ORIGIN_NOT_ALLOWED',
      base === undefined
        ? `origin ${url.origin} is not in the allow-list`
        : `refused a redirect to an origin that is not in the allow-list`,
    );
  }
  url.hash = '';
  return url;
}

function validateHeaders(headers) {
  const out = {};
  if (headers === undefined) return out;
  if (!isPlainRecord(headers)) {
    throw requestError(`headers must be a plain object of name: value, got ${describeValue(headers)}`);
  }
  const names = Object.keys(headers);
  if (names.length > MAX_HEADERS) throw requestError(`at most ${MAX_HEADERS} headers are allowed`);
  for (const name of names) {
    if (name.length > MAX_HEADER_NAME || !HEADER_NAME.test(name)) {
      throw requestError(`invalid header name ${JSON.stringify(name.slice(0, 64))}`);
    }
    const lower = name.toLowerCase();
    if (FORBIDDEN_HEADERS.has(lower) || lower.startsWith('proxy-')) {
      throw requestError(`header "${lower}" may not be set`);
    }
    let value = headers[name];
    if (typeof value === 'number' || typeof value === 'boolean') value = String(value);
    if (typeof value !== 'string') {
      throw requestError(`header "${lower}" must be a string, got ${describeValue(value)}`);
    }
    if (value.length > MAX_HEADER_VALUE || /[\0\r\n]/.test(value)) {
      throw requestError(`header "${lower}" has an invalid or overlong value`);
    }
    if (Object.hasOwn(out, lower)) {
      throw requestError(`header "${lower}" is given more than once`);
    }
    out[lower] = value;
  }
  return out;
}

function validateBody(body, method, maxRequestBytes) {
  if (body === undefined || body === null) return undefined;
  let bytes;
  if (typeof body === 'string') {
    bytes = Buffer.from(body, 'utf8');
  } else if (body instanceof ArrayBuffer) {
    bytes = Buffer.from(new Uint8Array(body.slice(0)));
  } else if (ArrayBuffer.isView(body)) {
    bytes = Buffer.from(new Uint8Array(body.buffer, body.byteOffset, body.byteLength));
  } else {
    throw requestError(`body must be a string or bytes, got ${describeValue(body)}`);
  }
  if (method === 'GET' || method === 'HEAD') {
    throw requestError(`a ${method} request cannot have a body`);
  }
  if (bytes.length > maxRequestBytes) {
    throw refusal(
      'ERR_ISOLET_REQUEST_TOO_LARGE',
      `request body is larger than the limit of ${maxRequestBytes} bytes`,
    );
  }
  return bytes;
}

function headersToRecord(headers) {
  const record = Object.create(null);
  for (const [name, value] of headers) {
    record[name] = name in record ? `${record[name]}, ${value}` : value;
  }
  return { ...record };
}

async function cancelBody(response) {
  try {
    if (response.body) await response.body.cancel();
  } catch {
    // Already errored or closed: nothing left to release.
  }
}

/** The body's bytes, read as readBody reads it (same limits), as one Uint8Array. */
async function readBytes(response, maxBytes, held) {
  if (!response.body) return new Uint8Array(0);
  const chunks = [];
  let received = 0;
  await readChunks(response, maxBytes, held, (value) => {
    chunks.push(value);
    received += value.byteLength;
  });
  if (chunks.length === 1 && chunks[0].byteOffset === 0 && chunks[0].byteLength === chunks[0].buffer.byteLength) return chunks[0];
  const out = new Uint8Array(received);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

async function readBody(response, maxBytes, held) {
  if (!response.body) return '';
  const decoder = new TextDecoder('utf-8');
  let text = '';
  await readChunks(response, maxBytes, held, (value) => {
    text += decoder.decode(value, { stream: true });
  });
  return text + decoder.decode();
}

/** Reads the body a chunk at a time into `take`, within the limits (the stream cancelled past them). */
async function readChunks(response, maxBytes, held, take) {
  const reader = response.body.getReader();
  let received = 0;
  const abandon = async () => {
    try {
      await reader.cancel();
    } catch {
      // ignore: we are abandoning the stream either way
    }
  };
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    received += value.byteLength;
    if (received > maxBytes) {
      await abandon();
      throw refusal(
        'ERR_ISOLET_RESPONSE_TOO_LARGE',
        `response body is larger than the limit of ${maxBytes} bytes`,
      );
    }
    if (!held.take(value.byteLength)) {
      await abandon();
      throw refusal(
        'ERR_ISOLET_RESPONSE_BUDGET',
        `responses in flight for this run would hold more than ${held.limit} bytes (maxPendingHostCallBytes); await some before fetching more`,
      );
    }
    take(value);
  }
}

/** Bytes one request holds in its run's budget; `free()` gives them all back. */
function holder(budget) {
  let taken = 0;
  return {
    limit: budget.limit,
    take(n) {
      if (!budget.reserve(n)) return false;
      taken += n;
      return true;
    },
    free() {
      budget.release(taken);
      taken = 0;
    },
  };
}

function isRedirect(status) {
  return status === 301 || status === 302 || status === 303 || status === 307 || status === 308;
}

// Node's fetch (undici) keeps an aborted request's socket open until its keep-alive
// timeout on Node < 26. Each run therefore gets its own connection pool, destroyed when
// the run ends, built from the class of Node's own default dispatcher (found under the
// symbol undici shares across copies). Where that is not an undici Agent (a custom
// global dispatcher, or Node 26's wrapper), requests are only aborted.
const UNDICI_GLOBAL_DISPATCHER = Symbol.for('undici.globalDispatcher.1');
let poolClass;
function runPoolClass(hostFetch) {
  if (poolClass !== undefined) return poolClass;
  if (globalThis[UNDICI_GLOBAL_DISPATCHER] === undefined) {
    // The first call loads undici, which installs its default dispatcher; a data: URL
    // never touches the network.
    try {
      hostFetch('data:,').then((r) => r.arrayBuffer()).catch(() => {});
    } catch {
      // no fetch machinery: abort-only
    }
  }
  const dispatcher = globalThis[UNDICI_GLOBAL_DISPATCHER];
  const Class = dispatcher && dispatcher.constructor;
  poolClass = Class && Class.name === 'Agent' && typeof Class.prototype.destroy === 'function' ? Class : null;
  return poolClass;
}

function runPool(run, hostFetch) {
  const Pool = runPoolClass(hostFetch);
  // An ended run's requests fail on its aborted signal anyway.
  if (!Pool || run.signal.aborted) return undefined;
  return run.slot(runPool, () => {
    const pool = new Pool();
    run.signal.addEventListener('abort', () => pool.destroy().catch(() => {}), { once: true });
    return pool;
  });
}

function translateFailure(err, signal, timeoutMs, runSignal) {
  if (err && typeof err.code === 'string' && err.code.startsWith('ERR_ISOLET_')) return err;
  if (runSignal && runSignal.aborted) {
    return refusal('ERR_ISOLET_RUN_ENDED', 'request aborted: the sandbox run has ended');
  }
  if (signal.aborted) {
    return refusal('ERR_ISOLET_FETCH_TIMEOUT', `request timed out after ${timeoutMs} ms`);
  }
  // undici reports "fetch failed" with the socket error as `cause`; keep only its code.
  const cause = err && err.cause;
  const code = cause && typeof cause.code === 'string' ? cause.code : undefined;
  return refusal('ERR_ISOLET_FETCH_FAILED', `network error${code ? ` (${code})` : ''}`);
}

/**
 * @param {{ allowedOrigins: string[], timeoutMs?: number, maxResponseBytes?: number,
 *           maxRequestBytes?: number, allowedMethods?: string[] }} options
 * @returns {(request: { url: string, method?: string, headers?: Record<string, string>,
 *           body?: string | Uint8Array }) => Promise<{ status: number, statusText: string,
 *           headers: Record<string, string>, body: string }>}
 */
function createFetchCapability(options) {
  const config = validateOptions(options);
  const hostFetch = globalThis.fetch;
  if (typeof hostFetch !== 'function') {
    throw invalidOption('this Node.js has no global fetch (Node.js >= 18 is required)');
  }
  const { origins, timeoutMs, maxResponseBytes, maxRequestBytes, methods } = config;
  // Outside a sandbox run (host code calling the handler itself): no run budget.
  const unbudgeted = new ByteBudget(Infinity);
  const perRun = (run) => new ByteBudget(run.budgets.maxPendingHostCallBytes);

  /**
   * Sends one checked request, following redirects (each hop checked against the
   * allow-list) unless `redirect` is 'manual' (the 3xx answer is the response) or 'error'
   * (a redirect is refused). `signal` (optional) aborts it too. The response with its body
   * read whole: as text, or as bytes when `bytes`.
   */
  async function send({ url, method, headers, body, redirect = 'follow', signal: callerSignal, bytes = false }, run) {
    const timeout = AbortSignal.timeout(timeoutMs);
    // Aborting tears the connection down, so no socket outlives the run.
    const signals = [timeout];
    if (run) signals.push(run.signal);
    if (callerSignal) signals.push(callerSignal);
    const signal = signals.length === 1 ? timeout : AbortSignal.any(signals);
    const held = holder(run ? run.slot(fetch, perRun) : unbudgeted);
    const dispatcher = run ? runPool(run, hostFetch) : undefined;
    try {
      for (let redirects = 0; ; redirects++) {
        const init = { method, headers, body, redirect: 'manual', signal };
        if (dispatcher) init.dispatcher = dispatcher;
        const response = await hostFetch(url.href, init);
        const location = response.headers.get('location');
        if (isRedirect(response.status) && location !== null && redirect !== 'manual') {
          await cancelBody(response);
          if (redirect === 'error') {
            throw refusal('ERR_ISOLET_REDIRECT', `the response is a redirect (${response.status}) and the request's redirect mode is 'error'`);
          }
          if (redirects >= MAX_REDIRECTS) {
            throw refusal('ERR_ISOLET_TOO_MANY_REDIRECTS', `more than ${MAX_REDIRECTS} redirects`);
          }
          const next = checkUrl(location, url, origins, 'redirect location');
          const status = response.status;
          if ((status === 303 && method !== 'HEAD') || ((status === 301 || status === 302) && method === 'POST')) {
            method = 'GET';
            body = undefined;
            headers = { ...headers };
            for (const name of BODY_HEADERS) delete headers[name];
          }
          if (next.origin !== url.origin) {
            headers = { ...headers };
            for (const name of CREDENTIAL_HEADERS) delete headers[name];
          }
          url = next;
          continue;
        }
        const read = bytes ? readBytes : readBody;
        const content = method === 'HEAD' ? (await cancelBody(response), bytes ? new Uint8Array(0) : '') : await read(response, maxResponseBytes, held);
        return { response, url, redirected: redirects > 0, content };
      }
    } catch (err) {
      if (callerSignal && callerSignal.aborted && !(run && run.signal.aborted)) {
        throw refusal('ERR_ISOLET_FETCH_ABORTED', 'request aborted by the sandbox (its signal)');
      }
      throw translateFailure(err, timeout, timeoutMs, run && run.signal);
    } finally {
      // The body now lives in the reply, which the bridge counts until the sandbox has it.
      held.free();
    }
  }

  async function fetch(request) {
    if (!isPlainRecord(request)) {
      throw requestError(
        `expected an object like { url, method?, headers?, body? }, got ${describeValue(request)}`,
      );
    }
    for (const key of Object.keys(request)) {
      if (!REQUEST_KEYS.has(key)) {
        throw requestError(
          `unknown property "${key.slice(0, 64)}" (allowed: url, method, headers, body)`,
        );
      }
    }
    // What the sandbox sent, own properties only: nothing comes from Object.prototype.
    request = ownCopy(request);
    const { url, method } = checkRequest(request.url, request.method);
    const headers = validateHeaders(request.headers);
    const body = validateBody(request.body, method, maxRequestBytes);
    const run = currentRun();
    const sent = await send({ url, method, headers, body }, run);
    return {
      status: sent.response.status,
      statusText: sent.response.statusText,
      headers: headersToRecord(sent.response.headers),
      body: sent.content,
    };
  }

  /** The URL and method of a request, checked (allow-list, methods). */
  function checkRequest(rawUrl, rawMethod) {
    if (typeof rawUrl !== 'string') {
      throw requestError(`url must be a string, got ${describeValue(rawUrl)}`);
    }
    if (rawUrl.length > MAX_URL_LENGTH) {
      throw requestError(`url is longer than ${MAX_URL_LENGTH} characters`);
    }
    let method = 'GET';
    if (rawMethod !== undefined) {
      if (typeof rawMethod !== 'string') {
        throw requestError(`method must be a string, got ${describeValue(rawMethod)}`);
      }
      method = rawMethod.toUpperCase();
    }
    if (!methods.has(method)) {
      throw refusal('ERR_ISOLET_METHOD_NOT_ALLOWED', `method ${method.slice(0, 32)} is not allowed`);
    }
    return { url: checkUrl(rawUrl, undefined, origins, 'url'), method };
  }

  // The web layer's protocol (`web: true`: the sandbox's WHATWG fetch, src/web/js/11_fetch.js):
  // { url, method, headers: [[name, value]...], body?: Uint8Array, redirect, id } answered with
  // { status, statusText, url, redirected, headers: [[name, value]...], body: Uint8Array }
  // (the final URL, the raw bytes); { abort: id } aborts request `id` of the run.
  const aborts = new Map();
  async function webFetch(request) {
    if (!isPlainRecord(request)) throw requestError(`expected a request object, got ${describeValue(request)}`);
    request = ownCopy(request);
    const run = currentRun();
    // Request ids are the run's: one run cannot abort another's requests.
    const pending = run ? run.slot(webFetch, () => new Map()) : aborts;
    if (Object.keys(request).length === 1 && request.abort !== undefined) {
      const id = requestId(request.abort);
      const controller = pending.get(id);
      if (controller === undefined) {
        // The request has not been seen yet (its body still being read): refused when it is.
        if (pending.size < MAX_PENDING_ABORTS) pending.set(id, null);
      } else if (controller !== null) {
        controller.abort();
      }
      return undefined;
    }
    for (const key of Object.keys(request)) {
      if (!WEB_REQUEST_KEYS.has(key)) throw requestError(`unknown property "${key.slice(0, 64)}" of a request`);
    }
    const id = requestId(request.id);
    const { url, method } = checkRequest(request.url, request.method);
    const headers = validateHeaders(headerPairs(request.headers));
    const body = validateBody(request.body === undefined ? undefined : bytesOf(request.body), method, maxRequestBytes);
    const redirect = request.redirect === undefined ? 'follow' : request.redirect;
    if (!REDIRECT_MODES.has(redirect)) throw requestError(`redirect must be 'follow', 'error' or 'manual'`);
    if (pending.get(id) === null) {
      pending.delete(id);
      throw refusal('ERR_ISOLET_FETCH_ABORTED', 'request aborted by the sandbox (its signal)');
    }
    if (pending.has(id)) throw requestError(`request id ${id} is in use`);
    const controller = new AbortController();
    pending.set(id, controller);
    try {
      const sent = await send({ url, method, headers, body, redirect, signal: controller.signal, bytes: true }, run);
      return {
        status: sent.response.status,
        statusText: sent.response.statusText,
        url: sent.url.href,
        redirected: sent.redirected,
        headers: [...sent.response.headers],
        body: sent.content,
      };
    } finally {
      pending.delete(id);
    }
  }
  Object.defineProperty(fetch, WEB_FETCH, { value: webFetch });
  return fetch;
}

const WEB_REQUEST_KEYS = new Set(['url', 'method', 'headers', 'body', 'redirect', 'id']);
const REDIRECT_MODES = new Set(['follow', 'error', 'manual']);
// Abort messages for requests not seen yet that one run may leave behind.
const MAX_PENDING_ABORTS = 1024;
/** The web protocol's handler of a fetch capability (lib/tools.js uses it with `web`). */
const WEB_FETCH = Symbol('isolet web fetch');

/** The web protocol handler of `capability` if it is a fetch capability, else undefined. */
function webFetchOf(capability) {
  if (typeof capability !== 'function') return undefined;
  const d = Object.getOwnPropertyDescriptor(capability, WEB_FETCH);
  return d && typeof d.value === 'function' ? d.value : undefined;
}

function requestId(id) {
  if (!Number.isSafeInteger(id) || id < 0) throw requestError('a request id must be a whole number');
  return id;
}

/** [[name, value]...] as the record validateHeaders checks: names lowercased, repeats joined. */
function headerPairs(pairs) {
  if (pairs === undefined) return undefined;
  if (!Array.isArray(pairs) || pairs.length > MAX_HEADERS) {
    throw requestError(`headers must be at most ${MAX_HEADERS} [name, value] pairs`);
  }
  const record = {};
  for (const pair of pairs) {
    if (!Array.isArray(pair) || pair.length !== 2 || typeof pair[0] !== 'string' || typeof pair[1] !== 'string') {
      throw requestError('each header must be a [name, value] pair of strings');
    }
    const name = pair[0].toLowerCase();
    record[name] = Object.hasOwn(record, name) ? `${record[name]}, ${pair[1]}` : pair[1];
  }
  return record;
}

function bytesOf(body) {
  if (!(body instanceof Uint8Array)) throw requestError(`body must be bytes, got ${describeValue(body)}`);
  return body;
}

const FETCH_DEFAULTS = Object.freeze({ ...native.entryDefaults().fetch, allowedMethods: DEFAULT_METHODS });

module.exports = { createFetchCapability, FETCH_DEFAULTS, MAX_REDIRECTS, webFetchOf };
