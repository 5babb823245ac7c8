// 00_webidl.js: WebIDL helpers shared by the families below. Everything here is
// declared inside the installer's function: sandbox code never sees `op`, `lazy` or
// `clone`, only the classes the families make.
// (A function body: `src/web/mod.rs` wraps it as `(function (lib) { ... })` with `op`,
// `clone`, `load`, `OP` and `SCRIPT` in scope.)
/** Marks an internal constructor call: `new URL(record, TOKEN)` etc. */
const TOKEN = Symbol('isolet internal');

function illegalConstructor() {
throw new TypeError('Illegal constructor');
}

function requiredArguments(given, needed, what) {
if (given < needed) {
  throw new TypeError(`${what}: ${needed} argument${needed === 1 ? '' : 's'} required, but only ${given} present.`);
}
}

/** WebIDL DOMString: ToString (a symbol throws a TypeError). */
function toDOMString(value) {
return `${value}`;
}

/** WebIDL USVString: a DOMString with lone surrogates replaced by U+FFFD. */
function toUSVString(value) {
return `${value}`.toWellFormed();
}

/** WebIDL boolean. */
function toBoolean(value) {
return !!value;
}

/** A dictionary argument: undefined and null are empty; any other non-object is a TypeError. */
function toDictionary(value, what) {
if (value === undefined || value === null) return {};
if (typeof value !== 'object' && typeof value !== 'function') {
  throw new TypeError(`${what}: the options argument is not an object.`);
}
return value;
}

/** WebIDL BufferSource (ArrayBuffer, SharedArrayBuffer or a view), as a Uint8Array over it. */
function bufferSourceBytes(value, what) {
if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
if (isArrayBuffer(value)) return new Uint8Array(value);
throw new TypeError(`${what}: the provided value is not of type '(ArrayBuffer or ArrayBufferView)'.`);
}

const arrayBufferByteLength = Object.getOwnPropertyDescriptor(ArrayBuffer.prototype, 'byteLength').get;
const sharedByteLength = Object.getOwnPropertyDescriptor(SharedArrayBuffer.prototype, 'byteLength').get;
function isArrayBuffer(value) {
for (const getter of [arrayBufferByteLength, sharedByteLength]) {
  try {
    getter.call(value);
    return true;
  } catch {}
}
return false;
}

/**
 * Gives a class the shape WebIDL gives an interface: its prototype's members enumerable,
 * a `Symbol.toStringTag`, and its methods not constructors (class methods already are not).
 */
function webidlClass(cls, tag = cls.name) {
const proto = cls.prototype;
for (const key of Reflect.ownKeys(proto)) {
  if (key === 'constructor' || typeof key === 'symbol') continue;
  const d = Object.getOwnPropertyDescriptor(proto, key);
  d.enumerable = true;
  Object.defineProperty(proto, key, d);
}
Object.defineProperty(proto, Symbol.toStringTag, { value: tag, configurable: true });
return cls;
}

/** Reports an exception a callback threw (a listener's, a timer's): the run ends with it. */
function reportException(error) {
const text = (get) => {
  try {
    const v = get();
    return v === undefined ? undefined : `${v}`;
  } catch {
    return undefined;
  }
};
const isObject = error !== null && (typeof error === 'object' || typeof error === 'function');
const name = isObject ? text(() => error.name) : undefined;
const message = isObject ? text(() => error.message) : text(() => error);
const stack = isObject ? text(() => error.stack) : undefined;
op(OP.reportError, name ?? 'Error', message ?? '', stack);
}

/** A DOMException (the class is made on first use). */
function newDOMException(message, name) {
  return new (load(SCRIPT.domexception).DOMException)(message, name);
}

return {
  TOKEN, illegalConstructor, requiredArguments, toDOMString, toUSVString, toBoolean, toDictionary, bufferSourceBytes,
  webidlClass, reportException, newDOMException,
};
