// 05_crypto.js: crypto (Web Cryptography): getRandomValues and randomUUID from the OS
// CSPRNG, and crypto.subtle's digest and HMAC keys (RustCrypto computes).
// (A function body: `src/web/mod.rs` wraps it as `(function (lib) { ... })` with `op`,
// `clone`, `load`, `OP` and `SCRIPT` in scope.)
const { TOKEN, illegalConstructor, requiredArguments, toDOMString, toUSVString, toBoolean, toDictionary, bufferSourceBytes, webidlClass, reportException, newDOMException } = load(SCRIPT.webidl);

const integerArrays = [Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array, Uint32Array, BigInt64Array, BigUint64Array];
const typedArrayTag = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Uint8Array.prototype), Symbol.toStringTag).get;
const integerTags = new Set(integerArrays.map((C) => C.name));
const HASHES = ['SHA-1', 'SHA-256', 'SHA-384', 'SHA-512'];

function algorithmName(algorithm, what) {
  if (typeof algorithm === 'string') return algorithm;
  if (algorithm !== null && typeof algorithm === 'object') {
    if (algorithm.name === undefined) throw new TypeError(`${what}: Algorithm: name: Missing or not a string`);
    return toDOMString(algorithm.name);
  }
  throw new TypeError(`${what}: the algorithm must be a string or an object`);
}

/** A supported name as the registry spells it, or NotSupportedError. */
function normalize(name, among) {
  const found = among.find((n) => n.toUpperCase() === name.toUpperCase());
  if (found === undefined) throw newDOMException(`Unrecognized algorithm name: ${name}`, 'NotSupportedError');
  return found;
}

let secretOf; // (CryptoKey) -> its bytes
class CryptoKey {
  #type;
  #extractable;
  #algorithm;
  #usages;
  #data;
  constructor(token, type, extractable, algorithm, usages, data) {
    if (token !== TOKEN) illegalConstructor();
    this.#type = type;
    this.#extractable = extractable;
    this.#algorithm = algorithm;
    this.#usages = usages;
    this.#data = data;
  }
  get type() { return this.#type; }
  get extractable() { return this.#extractable; }
  get algorithm() { return this.#algorithm; }
  get usages() { return this.#usages; }
  static {
    secretOf = (key) => {
      if (!(#data in key)) throw new TypeError("parameter is not of type 'CryptoKey'.");
      return key.#data;
    };
  }
}

/** An HMAC algorithm's parameters ({ name: 'HMAC', hash, length? }), normalized. */
function hmacParams(algorithm, what) {
  if (algorithm === null || typeof algorithm !== 'object') throw new TypeError(`${what}: HmacImportParams: hash: Missing`);
  if (algorithm.hash === undefined) throw new TypeError(`${what}: HmacImportParams: hash: Missing`);
  const hash = normalize(algorithmName(algorithm.hash, what), HASHES);
  return { name: 'HMAC', hash: { name: hash }, length: algorithm.length };
}

function checkUsages(usages, allowed) {
  const list = [...usages].map(toDOMString);
  for (const u of list) {
    if (!allowed.includes(u)) throw newDOMException(`Unsupported key usage for an HMAC key: ${u}`, 'SyntaxError');
  }
  if (list.length === 0) throw newDOMException('Usages cannot be empty when creating a key.', 'SyntaxError');
  return [...new Set(list)];
}

function hmacKey(algorithm, extractable, usages, data) {
  return new CryptoKey(TOKEN, 'secret', toBoolean(extractable), { name: 'HMAC', hash: algorithm.hash, length: data.length * 8 }, checkUsages(usages, ['sign', 'verify']), data);
}

function usableFor(key, usage, what) {
  const data = secretOf(key);
  if (key.algorithm.name !== 'HMAC') throw newDOMException(`${what}: the key is not an HMAC key`, 'InvalidAccessError');
  if (!key.usages.includes(usage)) throw newDOMException(`${what}: the key does not allow '${usage}'`, 'InvalidAccessError');
  return data;
}

class SubtleCrypto {
  constructor(token) {
    if (token !== TOKEN) illegalConstructor();
  }
  async digest(algorithm, data) {
    const what = "Failed to execute 'digest' on 'SubtleCrypto'";
    requiredArguments(arguments.length, 2, what);
    const name = normalize(algorithmName(algorithm, what), HASHES);
    return op(OP.digest, name, bufferSourceBytes(data, what)).buffer;
  }
  async importKey(format, keyData, algorithm, extractable, keyUsages) {
    const what = "Failed to execute 'importKey' on 'SubtleCrypto'";
    requiredArguments(arguments.length, 5, what);
    format = toDOMString(format);
    const name = normalize(algorithmName(algorithm, what), ['HMAC']);
    const params = hmacParams(algorithm, what);
    let bytes;
    if (format === 'raw') {
      bytes = bufferSourceBytes(keyData, what).slice();
    } else if (format === 'jwk') {
      if (keyData === null || typeof keyData !== 'object' || typeof keyData.k !== 'string') throw new TypeError(`${what}: a JWK needs 'k'`);
      if (keyData.kty !== 'oct') throw newDOMException(`${what}: the JWK's kty must be 'oct'`, 'DataError');
      const b64 = keyData.k.replace(/-/g, '+').replace(/_/g, '/');
      const binary = op(OP.atob, b64);
      bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0));
    } else {
      throw newDOMException(`${what}: format '${format}' is not supported for ${name} keys`, 'NotSupportedError');
    }
    if (bytes.length === 0) throw newDOMException(`${what}: the key is empty`, 'DataError');
    return hmacKey(params, extractable, keyUsages, bytes);
  }
  async generateKey(algorithm, extractable, keyUsages) {
    const what = "Failed to execute 'generateKey' on 'SubtleCrypto'";
    requiredArguments(arguments.length, 3, what);
    normalize(algorithmName(algorithm, what), ['HMAC']);
    const params = hmacParams(algorithm, what);
    const bits = params.length === undefined ? (params.hash.name === 'SHA-384' || params.hash.name === 'SHA-512' ? 1024 : 512) : Number(params.length);
    if (!(bits > 0) || bits % 8 !== 0) throw newDOMException(`${what}: the key length must be a positive multiple of 8`, 'OperationError');
    const bytes = new Uint8Array(bits / 8);
    for (let at = 0; at < bytes.length; at += 65536) op(OP.randomFill, bytes.subarray(at, at + 65536));
    return hmacKey(params, extractable, keyUsages, bytes);
  }
  async exportKey(format, key) {
    const what = "Failed to execute 'exportKey' on 'SubtleCrypto'";
    requiredArguments(arguments.length, 2, what);
    const data = secretOf(key);
    if (!key.extractable) throw newDOMException('key is not extractable', 'InvalidAccessError');
    format = toDOMString(format);
    if (format === 'raw') return data.slice().buffer;
    if (format === 'jwk') {
      const k = op(OP.btoa, String.fromCharCode(...data)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
      return { kty: 'oct', k, alg: `HS${key.algorithm.hash.name.slice(4)}`, key_ops: [...key.usages], ext: true };
    }
    throw newDOMException(`${what}: format '${format}' is not supported`, 'NotSupportedError');
  }
  async sign(algorithm, key, data) {
    const what = "Failed to execute 'sign' on 'SubtleCrypto'";
    requiredArguments(arguments.length, 3, what);
    normalize(algorithmName(algorithm, what), ['HMAC']);
    const secret = usableFor(key, 'sign', what);
    return op(OP.hmacSign, key.algorithm.hash.name, secret, bufferSourceBytes(data, what)).buffer;
  }
  async verify(algorithm, key, signature, data) {
    const what = "Failed to execute 'verify' on 'SubtleCrypto'";
    requiredArguments(arguments.length, 4, what);
    normalize(algorithmName(algorithm, what), ['HMAC']);
    const secret = usableFor(key, 'verify', what);
    return op(OP.hmacVerify, key.algorithm.hash.name, secret, bufferSourceBytes(data, what), bufferSourceBytes(signature, what));
  }
}

const subtle = new SubtleCrypto(TOKEN);

class Crypto {
  constructor(token) {
    if (token !== TOKEN) illegalConstructor();
  }
  get subtle() {
    return subtle;
  }
  getRandomValues(array) {
    requiredArguments(arguments.length, 1, "Failed to execute 'getRandomValues' on 'Crypto'");
    const tag = ArrayBuffer.isView(array) ? typedArrayTag.call(array) : undefined;
    if (!integerTags.has(tag)) {
      throw newDOMException("Failed to execute 'getRandomValues' on 'Crypto': The provided ArrayBufferView is not an integer array type.", 'TypeMismatchError');
    }
    op(OP.randomFill, array);
    return array;
  }
  randomUUID() {
    return op(OP.randomUuid);
  }
}
return {
  crypto: new Crypto(TOKEN),
  Crypto: webidlClass(Crypto),
  SubtleCrypto: webidlClass(SubtleCrypto),
  CryptoKey: webidlClass(CryptoKey),
};
