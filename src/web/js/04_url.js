// 04_url.js: URL and URLSearchParams (the WHATWG URL standard; ada parses, in Rust). A URL
// keeps one record from the parser: [href, ...offsets] (isolet-core `url::UrlParts`: where
// each component starts and ends in the href, and the scheme's type); an attribute is a
// slice of the href made when read, as Node's URL reads ada's components.
// (A function body: `src/web/mod.rs` wraps it as `(function (lib) { ... })` with `op`,
// `clone`, `load`, `OP` and `SCRIPT` in scope.)
const { TOKEN, illegalConstructor, requiredArguments, toDOMString, toUSVString, toBoolean, toDictionary, bufferSourceBytes, webidlClass, reportException, newDOMException } = load(SCRIPT.webidl);

const HREF = 0, PROTOCOL_END = 1, USERNAME_END = 2, HOST_START = 3, HOST_END = 4, PORT = 5, PATHNAME_START = 6,
  SEARCH_START = 7, HASH_START = 8, SCHEME = 9;
const NOT_SPECIAL = 1, FILE = 6, HTTP = 0, HTTPS = 2;

// The attributes of a record (`isolet_core::web::url::UrlParts::record` reads them the same way).
const protocolOf = (r) => r[HREF].slice(0, r[PROTOCOL_END]);
const hostStart = (r) => (r[HREF][r[HOST_START]] === '@' ? r[HOST_START] + 1 : r[HOST_START]);
const hostnameOf = (r) => r[HREF].slice(hostStart(r), Math.max(hostStart(r), r[HOST_END]));
const hostOf = (r) => (hostStart(r) === r[HOST_END] ? '' : r[HREF].slice(hostStart(r), r[PATHNAME_START]));
function pathnameOf(r) {
  if (r[PATHNAME_START] < 0) return '';
  return r[HREF].slice(r[PATHNAME_START], r[SEARCH_START] >= 0 ? r[SEARCH_START] : r[HASH_START] >= 0 ? r[HASH_START] : undefined);
}
function searchOf(r) {
  if (r[SEARCH_START] < 0) return '';
  const end = r[HASH_START] >= 0 ? r[HASH_START] : r[HREF].length;
  return end - r[SEARCH_START] <= 1 ? '' : r[HREF].slice(r[SEARCH_START], end);
}
const hashOf = (r) => (r[HASH_START] < 0 || r[HREF].length - r[HASH_START] <= 1 ? '' : r[HREF].slice(r[HASH_START]));
function originOf(r) {
  const scheme = r[SCHEME];
  if (scheme === FILE) return 'null';
  if (scheme !== NOT_SPECIAL) return `${protocolOf(r)}//${hostOf(r)}`;
  const path = pathnameOf(r);
  if (protocolOf(r) === 'blob:' && path.length > 0) {
    const inner = parse(path, undefined);
    if (inner !== null && (inner[SCHEME] === HTTP || inner[SCHEME] === HTTPS)) return `${protocolOf(inner)}//${hostOf(inner)}`;
  }
  return 'null';
}
// The parser's offsets, written here by the ops (see `record` in src/web/mod.rs).
const slots = new Int32Array(SCHEME);
/** A record from an op's answer: null, the href, or true (argument 0 unchanged). */
function fromAnswer(answer, input) {
  if (answer === null) return null;
  const s = slots;
  return [answer === true ? input : answer, s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8]];
}
const parse = (input, base) => fromAnswer(op(OP.urlParse, input, base, slots), input);
const setPart = (href, which, value) => fromAnswer(op(OP.urlSet, href, which, value, slots), href);
let paramsOf; // (URL) -> its URLSearchParams, or null
let recordOf; // (URL) -> its record
let setQuery; // (URL, serialized query) -> void: the params changed
let replaceList; // (URLSearchParams, query) -> void: the URL's query changed
let listOf; // (URLSearchParams) -> its list of [name, value]

/** application/x-www-form-urlencoded serializing of one name or value. */
function formEncode(s) {
  return encodeURIComponent(s).replace(/[!'()~]|%20/g, (c) => (c === '%20' ? '+' : `%${c.charCodeAt(0).toString(16).toUpperCase()}`));
}

function parseQuery(query) {
  if (query === '') return [];
  const joined = op(OP.urlencodedParse, query);
  const list = [];
  let at = 0;
  let pair = [];
  while (at < joined.length) {
    const colon = joined.indexOf(':', at);
    const length = +joined.slice(at, colon);
    pair.push(joined.slice(colon + 1, colon + 1 + length));
    at = colon + 1 + length;
    if (pair.length === 2) {
      list.push(pair);
      pair = [];
    }
  }
  return list;
}

class URL {
  #record;
  #params = null;
  constructor(url, base = undefined) {
    if (base === TOKEN) {
      this.#record = url;
      return;
    }
    requiredArguments(arguments.length, 1, "Failed to construct 'URL'");
    const record = parse(toUSVString(url), base === undefined ? undefined : toUSVString(base));
    if (record === null) throw invalidUrl(url, base);
    this.#record = record;
  }
  static parse(url, base = undefined) {
    requiredArguments(arguments.length, 1, "Failed to execute 'parse' on 'URL'");
    const record = parse(toUSVString(url), base === undefined ? undefined : toUSVString(base));
    return record === null ? null : new URL(record, TOKEN);
  }
  static canParse(url, base = undefined) {
    requiredArguments(arguments.length, 1, "Failed to execute 'canParse' on 'URL'");
    return op(OP.urlCanParse, toUSVString(url), base === undefined ? undefined : toUSVString(base));
  }
  #set(which, value) {
    const record = setPart(this.#record[HREF], which, toUSVString(value));
    if (record === null) throw invalidUrl(value);
    const queryChanged = searchOf(record) !== searchOf(this.#record);
    this.#record = record;
    if (queryChanged && this.#params !== null) replaceList(this.#params, searchOf(record).slice(1));
  }
  get href() { return this.#record[HREF]; }
  set href(v) { this.#set('href', v); }
  get origin() { return originOf(this.#record); }
  get protocol() { return protocolOf(this.#record); }
  set protocol(v) { this.#set('protocol', v); }
  get username() {
    const r = this.#record;
    return r[PROTOCOL_END] + 2 < r[USERNAME_END] ? r[HREF].slice(r[PROTOCOL_END] + 2, r[USERNAME_END]) : '';
  }
  set username(v) { this.#set('username', v); }
  get password() {
    const r = this.#record;
    return r[HOST_START] - r[USERNAME_END] > 0 ? r[HREF].slice(r[USERNAME_END] + 1, r[HOST_START]) : '';
  }
  set password(v) { this.#set('password', v); }
  get host() { return hostOf(this.#record); }
  set host(v) { this.#set('host', v); }
  get hostname() { return hostnameOf(this.#record); }
  set hostname(v) { this.#set('hostname', v); }
  get port() { return this.#record[PORT] < 0 ? '' : `${this.#record[PORT]}`; }
  set port(v) { this.#set('port', v); }
  get pathname() { return pathnameOf(this.#record); }
  set pathname(v) { this.#set('pathname', v); }
  get search() { return searchOf(this.#record); }
  set search(v) { this.#set('search', v); }
  get searchParams() {
    if (this.#params === null) this.#params = new URLSearchParams(this, TOKEN);
    return this.#params;
  }
  get hash() { return hashOf(this.#record); }
  set hash(v) { this.#set('hash', v); }
  toString() { return this.#record[HREF]; }
  toJSON() { return this.#record[HREF]; }
  static {
    recordOf = (url) => url.#record;
    paramsOf = (url) => url.#params;
    setQuery = (url, query) => {
      // The standard: an empty serialization is no query at all.
      url.#record = setPart(url.#record[HREF], 'search', query);
    };
  }
}

function invalidUrl(url, base) {
  const e = new TypeError(base === undefined ? `Invalid URL: ${toUSVString(url)}` : `Invalid URL: ${toUSVString(url)} against base ${toUSVString(base)}`);
  e.code = 'ERR_INVALID_URL';
  return e;
}

class URLSearchParams {
  #list = [];
  #url = null;
  constructor(init = '', token = undefined) {
    if (token === TOKEN) {
      this.#url = init;
      this.#list = parseQuery(searchOf(recordOf(init)).slice(1));
      return;
    }
    if (init !== null && (typeof init === 'object' || typeof init === 'function')) {
      if (init[Symbol.iterator] !== undefined) {
        if (typeof init[Symbol.iterator] !== 'function') throw new TypeError("Failed to construct 'URLSearchParams': The object's @@iterator is not callable.");
        for (const pair of init) {
          if (pair === null || (typeof pair !== 'object' && typeof pair !== 'function') || typeof pair[Symbol.iterator] !== 'function') {
            throw new TypeError("Failed to construct 'URLSearchParams': The provided value cannot be converted to a sequence.");
          }
          const items = [...pair];
          if (items.length !== 2) {
            throw new TypeError("Failed to construct 'URLSearchParams': Sequence initializer must only contain pair elements");
          }
          this.#list.push([toUSVString(items[0]), toUSVString(items[1])]);
        }
      } else {
        for (const key of Reflect.ownKeys(init)) {
          if (typeof key !== 'string') continue;
          const d = Reflect.getOwnPropertyDescriptor(init, key);
          if (d === undefined || !d.enumerable) continue;
          const value = toUSVString(init[key]);
          const name = toUSVString(key);
          const existing = this.#list.find((p) => p[0] === name);
          if (existing) existing[1] = value;
          else this.#list.push([name, value]);
        }
      }
    } else {
      let query = toUSVString(init);
      if (query.startsWith('?')) query = query.slice(1);
      this.#list = parseQuery(query);
    }
  }
  #update() {
    if (this.#url !== null) setQuery(this.#url, this.toString());
  }
  get size() {
    return this.#list.length;
  }
  append(name, value) {
    requiredArguments(arguments.length, 2, "Failed to execute 'append' on 'URLSearchParams'");
    this.#list.push([toUSVString(name), toUSVString(value)]);
    this.#update();
  }
  delete(name, value = undefined) {
    requiredArguments(arguments.length, 1, "Failed to execute 'delete' on 'URLSearchParams'");
    name = toUSVString(name);
    if (value === undefined) this.#list = this.#list.filter((p) => p[0] !== name);
    else {
      value = toUSVString(value);
      this.#list = this.#list.filter((p) => p[0] !== name || p[1] !== value);
    }
    this.#update();
  }
  get(name) {
    requiredArguments(arguments.length, 1, "Failed to execute 'get' on 'URLSearchParams'");
    name = toUSVString(name);
    const pair = this.#list.find((p) => p[0] === name);
    return pair === undefined ? null : pair[1];
  }
  getAll(name) {
    requiredArguments(arguments.length, 1, "Failed to execute 'getAll' on 'URLSearchParams'");
    name = toUSVString(name);
    return this.#list.filter((p) => p[0] === name).map((p) => p[1]);
  }
  has(name, value = undefined) {
    requiredArguments(arguments.length, 1, "Failed to execute 'has' on 'URLSearchParams'");
    name = toUSVString(name);
    if (value === undefined) return this.#list.some((p) => p[0] === name);
    value = toUSVString(value);
    return this.#list.some((p) => p[0] === name && p[1] === value);
  }
  set(name, value) {
    requiredArguments(arguments.length, 2, "Failed to execute 'set' on 'URLSearchParams'");
    name = toUSVString(name);
    value = toUSVString(value);
    const at = this.#list.findIndex((p) => p[0] === name);
    if (at === -1) this.#list.push([name, value]);
    else {
      this.#list[at][1] = value;
      this.#list = this.#list.filter((p, i) => i <= at || p[0] !== name);
    }
    this.#update();
  }
  sort() {
    // Stable, by code units of the names (Array.prototype.sort is stable).
    this.#list.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    this.#update();
  }
  forEach(callback, thisArg = undefined) {
    requiredArguments(arguments.length, 1, "Failed to execute 'forEach' on 'URLSearchParams'");
    if (typeof callback !== 'function') throw new TypeError("Failed to execute 'forEach' on 'URLSearchParams': parameter 1 is not of type 'Function'.");
    for (let i = 0; i < this.#list.length; i++) {
      const [name, value] = this.#list[i];
      callback.call(thisArg, value, name, this);
    }
  }
  keys() {
    return new ParamsIterator(this, 'key');
  }
  values() {
    return new ParamsIterator(this, 'value');
  }
  entries() {
    return new ParamsIterator(this, 'key+value');
  }
  toString() {
    return this.#list.map(([n, v]) => `${formEncode(n)}=${formEncode(v)}`).join('&');
  }
  static {
    replaceList = (params, query) => {
      params.#list = parseQuery(query);
    };
    listOf = (params) => params.#list;
  }
}
Object.defineProperty(URLSearchParams.prototype, Symbol.iterator, {
  value: URLSearchParams.prototype.entries,
  writable: true,
  configurable: true,
});

// The "URLSearchParams Iterator": live over the list, as the standard's pair iterators are.
const IteratorPrototype = Object.getPrototypeOf(Object.getPrototypeOf([][Symbol.iterator]()));
class ParamsIterator {
  #params;
  #kind;
  #index = 0;
  constructor(params, kind) {
    this.#params = params;
    this.#kind = kind;
  }
  next() {
    const list = listOf(this.#params);
    if (this.#index >= list.length) return { value: undefined, done: true };
    const [name, value] = list[this.#index++];
    return { value: this.#kind === 'key' ? name : this.#kind === 'value' ? value : [name, value], done: false };
  }
}
Object.setPrototypeOf(ParamsIterator.prototype, IteratorPrototype);
Object.defineProperty(ParamsIterator.prototype, Symbol.toStringTag, { value: 'URLSearchParams Iterator', configurable: true });
Object.defineProperty(ParamsIterator.prototype, 'next', { enumerable: true });

return { URL: webidlClass(URL), URLSearchParams: webidlClass(URLSearchParams) };
