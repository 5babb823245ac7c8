// 11_fetch.js: Blob and File (the File API), Headers, Request, Response and fetch (the
// Fetch standard). Bodies are bytes held in the sandbox (Uint8Arrays, so their memory is
// the run's); there are no streams: a body is read whole with text(), json(), arrayBuffer(),
// bytes() or blob(). `fetch` exists only when the run has a fetch capability
// (createFetchCapability): it sends the request to that host function and gets back the
// final URL, the status, the headers and the raw body bytes; the host follows redirects,
// checking each against its allow-list. Aborting the request's signal rejects the fetch at
// once and asks the host to abort its request.
// (A function body: `src/web/mod.rs` wraps it as `(function (lib) { ... })` with `op`,
// `clone`, `load`, `OP`, `SCRIPT` and `LIMITS` in scope.)
const { TOKEN, illegalConstructor, requiredArguments, toDOMString, toUSVString, toDictionary, bufferSourceBytes, webidlClass, newDOMException } = load(SCRIPT.webidl);
// Loaded when first needed: a run that only builds a Response pays for no other family.
const events = () => load(SCRIPT.events);
const isSearchParams = (v) => v !== null && typeof v === 'object' && v instanceof load(SCRIPT.url).URLSearchParams;
const then = Promise.prototype.then;
const apply = Reflect.apply;
const customInspect = Symbol.for('nodejs.util.inspect.custom');

const encode = (s) => op(OP.encode, toUSVString(s));
const decode = (bytes) => op(OP.decode, 'utf-8', bytes, false, false, true)[0];
const isBufferSource = (v) => {
  if (ArrayBuffer.isView(v)) return true;
  try {
    bufferSourceBytes(v, '');
    return true;
  } catch {
    return false;
  }
};
/** A copy of the bytes a BufferSource covers. */
const copyOf = (v, what) => bufferSourceBytes(v, what).slice();

function concat(chunks, length) {
  const out = new Uint8Array(length);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

// ---- Blob and File -------------------------------------------------------------------

let blobBytes; // (Blob) -> its bytes, for the classes below
class Blob {
  #bytes;
  #type;
  constructor(blobParts = undefined, options = undefined) {
    const what = "Failed to construct 'Blob'";
    options = toDictionary(options, what);
    const chunks = [];
    let length = 0;
    if (blobParts !== undefined) {
      if (blobParts === null || typeof blobParts !== 'object' || typeof blobParts[Symbol.iterator] !== 'function') {
        throw new TypeError(`${what}: The provided value cannot be converted to a sequence.`);
      }
      for (const part of blobParts) {
        let bytes;
        if (part instanceof Blob) bytes = part.#bytes;
        else if (isBufferSource(part)) bytes = copyOf(part, what);
        else bytes = encode(part);
        chunks.push(bytes);
        length += bytes.length;
      }
    }
    this.#bytes = chunks.length === 1 && !(blobParts[0] instanceof Blob) ? chunks[0] : concat(chunks, length);
    const type = options.type === undefined ? '' : toDOMString(options.type);
    this.#type = /^[\x20-\x7e]*$/.test(type) ? type.toLowerCase() : '';
  }
  get size() {
    return this.#bytes.length;
  }
  get type() {
    return this.#type;
  }
  slice(start = undefined, end = undefined, contentType = undefined) {
    const size = this.#bytes.length;
    const clamp = (v, fallback) => {
      if (v === undefined) return fallback;
      const n = Math.trunc(Number(v)) || 0;
      return n < 0 ? Math.max(size + n, 0) : Math.min(n, size);
    };
    const from = clamp(start, 0);
    const to = clamp(end, size);
    const blob = new Blob([], { type: contentType === undefined ? '' : contentType });
    blob.#bytes = this.#bytes.slice(from, Math.max(from, to));
    return blob;
  }
  text() {
    return Promise.resolve(decode(this.#bytes));
  }
  arrayBuffer() {
    return Promise.resolve(this.#bytes.slice().buffer);
  }
  bytes() {
    return Promise.resolve(this.#bytes.slice());
  }
  [customInspect](depth, options, inspect) {
    return `Blob { size: ${this.#bytes.length}, type: ${inspect(this.#type)} }`;
  }
  static {
    blobBytes = (blob) => blob.#bytes;
  }
}

class File extends Blob {
  #name;
  #lastModified;
  constructor(fileBits, fileName, options = undefined) {
    requiredArguments(arguments.length, 2, "Failed to construct 'File'");
    super(fileBits, options);
    options = toDictionary(options, "Failed to construct 'File'");
    this.#name = toUSVString(fileName);
    this.#lastModified = options.lastModified === undefined ? Date.now() : Math.trunc(Number(options.lastModified)) || 0;
  }
  get name() {
    return this.#name;
  }
  get lastModified() {
    return this.#lastModified;
  }
}

// ---- Headers -------------------------------------------------------------------------

const TOKEN_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const HTTP_WHITESPACE = /^[\t\n\r ]+|[\t\n\r ]+$/g;

function headerName(name, what) {
  name = toDOMString(name);
  if (!TOKEN_NAME.test(name)) throw new TypeError(`${what}: Invalid name "${name.slice(0, 64)}"`);
  return name.toLowerCase();
}

function headerValue(value, what) {
  value = toDOMString(value).replace(HTTP_WHITESPACE, '');
  if (/[\0\r\n]/.test(value) || /[^\x00-\xff]/.test(value)) throw new TypeError(`${what}: Invalid value`);
  return value;
}

let headersList; // (Headers) -> its list of [lowercase name, value]
let headersGuard; // (Headers, guard) -> void
class Headers {
  /** [lowercase name, value] in insertion order. */
  #list = [];
  /** 'none' or 'immutable' (a fetched response's). */
  #guard = 'none';
  constructor(init = undefined) {
    if (init === undefined) return;
    const what = "Failed to construct 'Headers'";
    if (init === null || (typeof init !== 'object' && typeof init !== 'function')) {
      throw new TypeError(`${what}: The provided value is not of type '(record<ByteString, ByteString> or sequence<sequence<ByteString>>)'.`);
    }
    if (init instanceof Headers) {
      for (const [n, v] of init.#list) this.#list.push([n, v]);
    } else if (typeof init[Symbol.iterator] === 'function') {
      for (const pair of init) {
        const entry = [...pair];
        if (entry.length !== 2) throw new TypeError(`${what}: Invalid value`);
        this.append(entry[0], entry[1]);
      }
    } else {
      for (const key of Reflect.ownKeys(init)) {
        const d = Reflect.getOwnPropertyDescriptor(init, key);
        if (d === undefined || !d.enumerable) continue;
        if (typeof key === 'symbol') throw new TypeError(`${what}: Invalid name`);
        this.append(key, init[key]);
      }
    }
  }
  #mutable(what) {
    if (this.#guard === 'immutable') throw new TypeError(`${what}: Headers are immutable`);
  }
  append(name, value) {
    const what = "Failed to execute 'append' on 'Headers'";
    requiredArguments(arguments.length, 2, what);
    name = headerName(name, what);
    value = headerValue(value, what);
    this.#mutable(what);
    this.#list.push([name, value]);
  }
  delete(name) {
    const what = "Failed to execute 'delete' on 'Headers'";
    requiredArguments(arguments.length, 1, what);
    name = headerName(name, what);
    this.#mutable(what);
    this.#list = this.#list.filter(([n]) => n !== name);
  }
  get(name) {
    const what = "Failed to execute 'get' on 'Headers'";
    requiredArguments(arguments.length, 1, what);
    name = headerName(name, what);
    const values = this.#list.filter(([n]) => n === name).map(([, v]) => v);
    return values.length === 0 ? null : values.join(', ');
  }
  getSetCookie() {
    return this.#list.filter(([n]) => n === 'set-cookie').map(([, v]) => v);
  }
  has(name) {
    const what = "Failed to execute 'has' on 'Headers'";
    requiredArguments(arguments.length, 1, what);
    name = headerName(name, what);
    return this.#list.some(([n]) => n === name);
  }
  set(name, value) {
    const what = "Failed to execute 'set' on 'Headers'";
    requiredArguments(arguments.length, 2, what);
    name = headerName(name, what);
    value = headerValue(value, what);
    this.#mutable(what);
    const at = this.#list.findIndex(([n]) => n === name);
    if (at === -1) {
      this.#list.push([name, value]);
      return;
    }
    this.#list[at] = [name, value];
    this.#list = this.#list.filter(([n], i) => i <= at || n !== name);
  }
  /** The sorted, combined list the iterators walk (set-cookie values stay apart). */
  #sorted() {
    const names = [...new Set(this.#list.map(([n]) => n))].sort();
    const out = [];
    for (const name of names) {
      if (name === 'set-cookie') for (const v of this.getSetCookie()) out.push([name, v]);
      else out.push([name, this.get(name)]);
    }
    return out;
  }
  forEach(callback, thisArg = undefined) {
    requiredArguments(arguments.length, 1, "Failed to execute 'forEach' on 'Headers'");
    if (typeof callback !== 'function') throw new TypeError("Failed to execute 'forEach' on 'Headers': parameter 1 is not of type 'Function'.");
    for (const [n, v] of this.#sorted()) Reflect.apply(callback, thisArg, [v, n, this]);
  }
  *entries() {
    yield* this.#sorted();
  }
  *keys() {
    for (const [n] of this.#sorted()) yield n;
  }
  *values() {
    for (const [, v] of this.#sorted()) yield v;
  }
  [Symbol.iterator]() {
    return this.entries();
  }
  [customInspect](depth, options, inspect) {
    const shown = {};
    for (const [n] of this.#sorted()) shown[n] = this.get(n);
    return `Headers ${inspect(shown, options)}`;
  }
  static {
    headersList = (h) => h.#list;
    headersGuard = (h, guard) => {
      h.#guard = guard;
    };
  }
}

// ---- Bodies --------------------------------------------------------------------------

/** A body and its content type, extracted from what Request or Response was given. */
function extractBody(body, what) {
  if (typeof body === 'string') return { bytes: encode(body), type: 'text/plain;charset=UTF-8' };
  if (body instanceof Blob) return { bytes: blobBytes(body).slice(), type: body.type === '' ? null : body.type };
  if (isBufferSource(body)) return { bytes: copyOf(body, what), type: null };
  if (isSearchParams(body)) return { bytes: encode(body.toString()), type: 'application/x-www-form-urlencoded;charset=UTF-8' };
  return { bytes: encode(`${body}`), type: 'text/plain;charset=UTF-8' };
}

let requestBody; // (Request) -> its Body, or undefined for anything else
let responseBody; // (Response) -> its Body, or undefined for anything else
/** The Body of a Request or Response (a TypeError for anything else, as a brand check). */
function bodyOf(r) {
  const body = r !== null && typeof r === 'object' ? requestBody(r) ?? responseBody(r) : undefined;
  if (body === undefined) throw new TypeError('Illegal invocation');
  return body;
}
/** What Request and Response share: the body, read once. */
class Body {
  /** Uint8Array, or null for no body. */
  bytes = null;
  used = false;
  consume(what) {
    if (this.used) return Promise.reject(new TypeError(`${what}: Body has already been used`));
    this.used = this.bytes !== null;
    return Promise.resolve(this.bytes ?? new Uint8Array(0));
  }
}

function bodyMethods(cls, name) {
  const p = cls.prototype;
  const read = (self, method) => bodyOf(self).consume(`Failed to execute '${method}' on '${name}'`);
  Object.assign(p, {
    text() {
      return apply(then, read(this, 'text'), [decode]);
    },
    json() {
      return apply(then, read(this, 'json'), [(bytes) => JSON.parse(decode(bytes))]);
    },
    arrayBuffer() {
      return apply(then, read(this, 'arrayBuffer'), [(bytes) => (bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength ? bytes.buffer : bytes.slice().buffer)]);
    },
    bytes() {
      return read(this, 'bytes');
    },
    blob() {
      const type = this.headers.get('content-type') ?? '';
      return apply(then, read(this, 'blob'), [(bytes) => new Blob([bytes], { type })]);
    },
  });
  Object.defineProperty(p, 'bodyUsed', {
    get() {
      return bodyOf(this).used;
    },
    configurable: true,
  });
}

// ---- Request -------------------------------------------------------------------------

const METHODS = new Map(['DELETE', 'GET', 'HEAD', 'OPTIONS', 'POST', 'PUT'].map((m) => [m.toLowerCase(), m]));
const FORBIDDEN_METHODS = new Set(['connect', 'trace', 'track']);
const REDIRECTS = new Set(['follow', 'error', 'manual']);

function parseUrl(input, what) {
  const { URL } = load(SCRIPT.url);
  let url;
  try {
    url = new URL(input);
  } catch {
    throw new TypeError(`${what}: Invalid URL ${JSON.stringify(`${input}`.slice(0, 200))} (a sandbox has no base URL: give an absolute one)`);
  }
  if (url.username !== '' || url.password !== '') throw new TypeError(`${what}: Request cannot be constructed from a URL that includes credentials`);
  return url;
}

let requestState; // (Request) -> its state
class Request {
  #s;
  #body = new Body();
  constructor(input, init = undefined) {
    const what = "Failed to construct 'Request'";
    requiredArguments(arguments.length, 1, what);
    init = toDictionary(init, what);
    let base = null;
    if (input instanceof Request) base = input.#s;
    const url = base ? base.url : parseUrl(toUSVString(input), what).href;
    let method = base ? base.method : 'GET';
    if (init.method !== undefined) {
      method = toDOMString(init.method);
      if (!TOKEN_NAME.test(method)) throw new TypeError(`${what}: '${method}' is not a valid HTTP method.`);
      if (FORBIDDEN_METHODS.has(method.toLowerCase())) throw new TypeError(`${what}: '${method}' HTTP method is unsupported.`);
      method = METHODS.get(method.toLowerCase()) ?? method;
    }
    let redirect = base ? base.redirect : 'follow';
    if (init.redirect !== undefined) {
      redirect = toDOMString(init.redirect);
      if (!REDIRECTS.has(redirect)) throw new TypeError(`${what}: The provided value '${redirect}' is not a valid enum value of type RequestRedirect.`);
    }
    let signal = base ? base.signal : null;
    if (init.signal !== undefined) {
      if (init.signal !== null && !(init.signal instanceof events().AbortSignal)) throw new TypeError(`${what}: member signal is not of type AbortSignal.`);
      signal = init.signal;
    }
    const headers = new Headers(init.headers !== undefined ? init.headers : base ? base.headers : undefined);
    let bytes = null;
    if (init.body !== undefined && init.body !== null) {
      if (method === 'GET' || method === 'HEAD') throw new TypeError(`${what}: Request with GET/HEAD method cannot have body.`);
      const extracted = extractBody(init.body, what);
      bytes = extracted.bytes;
      if (extracted.type !== null && !headers.has('content-type')) headers.append('content-type', extracted.type);
    } else if (base !== null && init.body === undefined) {
      const from = bodyOf(input);
      if (from.used) throw new TypeError(`${what}: Cannot construct a Request with a Request object that has already been used.`);
      bytes = from.bytes;
      if (bytes !== null) from.used = true;
    }
    this.#body.bytes = bytes;
    this.#s = {
      url,
      method,
      headers,
      redirect,
      // As the standard: the request's own signal follows the one given.
      signal: signal === null ? new (events().AbortController)().signal : events().AbortSignal.any([signal]),
      mode: init.mode !== undefined ? toDOMString(init.mode) : base ? base.mode : 'cors',
      credentials: init.credentials !== undefined ? toDOMString(init.credentials) : base ? base.credentials : 'same-origin',
      cache: init.cache !== undefined ? toDOMString(init.cache) : base ? base.cache : 'default',
      referrer: init.referrer !== undefined ? toUSVString(init.referrer) || '' : base ? base.referrer : 'about:client',
      referrerPolicy: init.referrerPolicy !== undefined ? toDOMString(init.referrerPolicy) : base ? base.referrerPolicy : '',
      integrity: init.integrity !== undefined ? toDOMString(init.integrity) : base ? base.integrity : '',
      keepalive: init.keepalive !== undefined ? !!init.keepalive : base ? base.keepalive : false,
    };
  }
  get method() { return this.#s.method; }
  get url() { return this.#s.url; }
  get headers() { return this.#s.headers; }
  get destination() { return ''; }
  get referrer() { return this.#s.referrer === 'no-referrer' ? '' : this.#s.referrer; }
  get referrerPolicy() { return this.#s.referrerPolicy; }
  get mode() { return this.#s.mode; }
  get credentials() { return this.#s.credentials; }
  get cache() { return this.#s.cache; }
  get redirect() { return this.#s.redirect; }
  get integrity() { return this.#s.integrity; }
  get keepalive() { return this.#s.keepalive; }
  get isReloadNavigation() { return false; }
  get isHistoryNavigation() { return false; }
  get signal() { return this.#s.signal; }
  get duplex() { return 'half'; }
  clone() {
    if (this.#body.used) throw new TypeError("Failed to execute 'clone' on 'Request': Request body is already used");
    const copy = new Request(this);
    this.#body.used = false;
    copy.#body.bytes = this.#body.bytes === null ? null : this.#body.bytes.slice();
    return copy;
  }
  [customInspect](depth, options, inspect) {
    return `Request ${inspect({ method: this.#s.method, url: this.#s.url, headers: this.#s.headers, redirect: this.#s.redirect, bodyUsed: this.#body.used }, options)}`;
  }
  static {
    requestState = (r) => r.#s;
    requestBody = (r) => (#body in r ? r.#body : undefined);
  }
}

// ---- Response ------------------------------------------------------------------------

const NULL_BODY_STATUS = new Set([101, 103, 204, 205, 304]);
const REDIRECT_STATUS = new Set([301, 302, 303, 307, 308]);
const REASON_PHRASE = /^[\t\x20-\x7e\x80-\xff]*$/;

class Response {
  #s;
  #body = new Body();
  constructor(body = null, init = undefined) {
    const what = "Failed to construct 'Response'";
    if (body === TOKEN) {
      // Made here: `init` is the whole state.
      this.#s = init.state;
      this.#body.bytes = init.bytes;
      return;
    }
    const extracted = body === null || body === undefined ? null : extractBody(body, what);
    this.#initialize(init, extracted, what);
  }
  /** The standard's "initialize a response" with `extracted` ({ bytes, type } or null). */
  #initialize(init, extracted, what) {
    init = toDictionary(init, what);
    const status = init.status === undefined ? 200 : Number(init.status);
    if (!Number.isInteger(status) || status < 200 || status > 599) {
      throw new RangeError(`${what}: The status provided (${init.status}) is outside the range [200, 599].`);
    }
    const statusText = init.statusText === undefined ? '' : toDOMString(init.statusText);
    if (!REASON_PHRASE.test(statusText)) throw new TypeError(`${what}: Invalid statusText`);
    const headers = new Headers(init.headers);
    if (extracted !== null) {
      if (NULL_BODY_STATUS.has(status)) throw new TypeError(`${what}: Response with null body status cannot have body`);
      this.#body.bytes = extracted.bytes;
      if (extracted.type !== null && !headers.has('content-type')) headers.append('content-type', extracted.type);
    }
    this.#s = { type: 'default', url: '', redirected: false, status, statusText, headers };
  }
  static error() {
    const headers = new Headers();
    headersGuard(headers, 'immutable');
    return new Response(TOKEN, { state: { type: 'error', url: '', redirected: false, status: 0, statusText: '', headers }, bytes: null });
  }
  static redirect(url, status = 302) {
    const what = "Failed to execute 'redirect' on 'Response'";
    requiredArguments(arguments.length, 1, what);
    const href = parseUrl(toUSVString(url), what).href;
    status = Number(status);
    if (!REDIRECT_STATUS.has(status)) throw new RangeError(`${what}: Invalid status code ${status}`);
    const headers = new Headers([['location', href]]);
    headersGuard(headers, 'immutable');
    return new Response(TOKEN, { state: { type: 'default', url: '', redirected: false, status, statusText: '', headers }, bytes: null });
  }
  static json(data, init = undefined) {
    const what = "Failed to execute 'json' on 'Response'";
    requiredArguments(arguments.length, 1, what);
    const text = JSON.stringify(data);
    if (text === undefined) throw new TypeError(`${what}: Value is not JSON serializable`);
    const response = new Response();
    response.#initialize(init, { bytes: encode(text), type: 'application/json' }, what);
    return response;
  }
  get type() { return this.#s.type; }
  get url() { return this.#s.url; }
  get redirected() { return this.#s.redirected; }
  get status() { return this.#s.status; }
  get ok() { return this.#s.status >= 200 && this.#s.status <= 299; }
  get statusText() { return this.#s.statusText; }
  get headers() { return this.#s.headers; }
  clone() {
    if (this.#body.used) throw new TypeError("Failed to execute 'clone' on 'Response': Response body is already used");
    const headers = new Headers(this.#s.headers);
    headersGuard(headers, this.#s.type === 'default' && this.#s.url === '' ? 'none' : 'immutable');
    return new Response(TOKEN, { state: { ...this.#s, headers }, bytes: this.#body.bytes === null ? null : this.#body.bytes.slice() });
  }
  [customInspect](depth, options, inspect) {
    const s = this.#s;
    return `Response ${inspect({ status: s.status, statusText: s.statusText, headers: s.headers, body: this.#body.bytes === null ? null : `<${this.#body.bytes.length} bytes>`, bodyUsed: this.#body.used, ok: this.ok, redirected: s.redirected, type: s.type, url: s.url }, options)}`;
  }
  static {
    responseBody = (r) => (#body in r ? r.#body : undefined);
  }
}
bodyMethods(Request, 'Request');
bodyMethods(Response, 'Response');

// ---- fetch ---------------------------------------------------------------------------

let host; // the fetch capability's host function, made on first use
let nextId = 1;

/** A response from the host's answer: { status, statusText, url, redirected, headers, body }. */
function responseOf(answer) {
  const headers = new Headers();
  const list = headersList(headers);
  for (const [n, v] of answer.headers) list.push([`${n}`.toLowerCase(), `${v}`]);
  headersGuard(headers, 'immutable');
  const state = { type: 'basic', url: answer.url, redirected: answer.redirected, status: answer.status, statusText: answer.statusText, headers };
  const bytes = NULL_BODY_STATUS.has(answer.status) ? null : answer.body;
  return new Response(TOKEN, { state, bytes });
}

function fetch(input, init = undefined) {
  let request;
  try {
    requiredArguments(arguments.length, 1, "Failed to execute 'fetch'");
    request = new Request(input, init);
  } catch (e) {
    return Promise.reject(e);
  }
  const s = requestState(request);
  if (s.signal.aborted) return Promise.reject(s.signal.reason);
  if (host === undefined) {
    const index = op(OP.fetchTool);
    if (index < 0) return Promise.reject(new TypeError('fetch: this sandbox has no fetch capability'));
    host = lib.host(index);
  }
  const body = bodyOf(request);
  const bytes = body.bytes;
  body.used = bytes !== null;
  const id = nextId++;
  const message = { url: s.url, method: s.method, headers: headersList(s.headers).map(([n, v]) => [n, v]), redirect: s.redirect, id };
  if (bytes !== null) message.body = bytes;
  return new Promise((resolve, reject) => {
    let settled = false;
    const onAbort = () => {
      if (settled) return;
      settled = true;
      reject(s.signal.reason);
      // The host aborts its request; what it answers then is no one's.
      apply(then, host({ abort: id }), [undefined, () => {}]);
    };
    s.signal.addEventListener('abort', onAbort, { once: true });
    let sent;
    try {
      sent = host(message);
    } catch (e) {
      settled = true;
      reject(e);
      return;
    }
    apply(then, sent, [
      (answer) => {
        if (settled) return;
        settled = true;
        s.signal.removeEventListener('abort', onAbort);
        try {
          resolve(responseOf(answer));
        } catch (e) {
          reject(new TypeError(`fetch: the host's answer could not be read: ${e && e.message}`));
        }
      },
      (err) => {
        if (settled) return;
        settled = true;
        s.signal.removeEventListener('abort', onAbort);
        // As fetch reports a network error: a TypeError, the host's reason as its message and cause.
        reject(new TypeError(err && typeof err.message === 'string' ? err.message : 'fetch failed', { cause: err }));
      },
    ]);
  });
}

return {
  Blob: webidlClass(Blob),
  File: webidlClass(File),
  Headers: webidlClass(Headers),
  Request: webidlClass(Request),
  Response: webidlClass(Response),
  fetch,
};
