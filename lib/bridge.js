'use strict';
// Values crossing host <-> isolate are copies made with V8's structured-clone
// serializer on both sides (the same V8 version). The base v8.Serializer is used on
// purpose: it writes typed arrays natively, where Node's DefaultSerializer would write
// them as Node-specific host objects the sandbox cannot read.
const v8 = require('node:v8');

/**
 * Serializes a host value for the sandbox. Throws DataCloneError for functions etc.
 * Errors inside the value are replaced by copies without the host's stack (see
 * `withoutHostStacks`), because V8's serializer copies an Error's `stack`.
 */
function serialize(value) {
  const s = new v8.Serializer();
  s.writeHeader();
  s.writeValue(withoutHostStacks(value));
  return s.releaseBuffer();
}

const ERROR_CLASSES = new Map(
  [EvalError, RangeError, ReferenceError, SyntaxError, TypeError, URIError].map((C) => [C.name, C]),
);

/** A copy of a host Error with its name and message only; its stack names no host frame. */
function sanitizedError(err, seen) {
  let name = 'Error';
  let message = '';
  try {
    name = String(err.name ?? 'Error');
    message = String(err.message ?? '');
  } catch {
    // A throwing getter: keep the defaults.
  }
  const Class = ERROR_CLASSES.get(name) ?? Error;
  const copy = new Class(message);
  if (copy.name !== name) copy.name = name;
  Object.defineProperty(copy, 'stack', { value: `${name}: ${message}`, writable: true, configurable: true });
  let cause;
  try {
    if (Object.prototype.hasOwnProperty.call(err, 'cause')) cause = { value: err.cause };
  } catch {
    // ignore an unreadable cause
  }
  if (cause) copy.cause = rewrite(cause.value, seen);
  return copy;
}

/**
 * Returns `value` unchanged if it holds no Error, else a copy in which every Error
 * (at any depth, in arrays, plain objects, Maps and Sets) is replaced by a
 * sanitized one. The host's objects are never modified.
 */
function withoutHostStacks(value) {
  if (value === null || typeof value !== 'object') return value;
  return rewrite(value, new Map());
}

const DENSE_WALK_MAX = 1 << 24;

function rewrite(value, seen) {
  if (value === null || typeof value !== 'object') return value;
  if (seen.has(value)) return seen.get(value);
  if (value instanceof Error) {
    const copy = sanitizedError(value, seen);
    seen.set(value, copy);
    return copy;
  }
  if (ArrayBuffer.isView(value) || value instanceof ArrayBuffer || value instanceof Date || value instanceof RegExp) {
    return value;
  }
  // Assume unchanged; replace with a copy only when something inside changed.
  seen.set(value, value);
  if (Array.isArray(value)) {
    let out = value;
    // Index by index is fast for ordinary arrays; a huge length (a sparse array of
    // length 2**32-1 holds only a few elements) is walked by its own keys instead.
    const keys = value.length <= DENSE_WALK_MAX ? null : Object.keys(value);
    const n = keys ? keys.length : value.length;
    for (let i = 0; i < n; i++) {
      const key = keys ? keys[i] : i;
      const v = value[key];
      if (v === null || typeof v !== 'object') continue;
      const r = rewrite(v, seen);
      if (r !== v) {
        if (out === value) {
          out = [];
          out.length = value.length;
          Object.assign(out, value);
          seen.set(value, out);
        }
        out[key] = r;
      }
    }
    return out;
  }
  if (value instanceof Map) {
    let changed = false;
    const entries = [];
    for (const [k, v] of value) {
      const rk = rewrite(k, seen);
      const rv = rewrite(v, seen);
      if (rk !== k || rv !== v) changed = true;
      entries.push([rk, rv]);
    }
    if (!changed) return value;
    const out = new Map(entries);
    seen.set(value, out);
    return out;
  }
  if (value instanceof Set) {
    let changed = false;
    const items = [];
    for (const v of value) {
      const r = rewrite(v, seen);
      if (r !== v) changed = true;
      items.push(r);
    }
    if (!changed) return value;
    const out = new Set(items);
    seen.set(value, out);
    return out;
  }
  let out = value;
  // The serializer copies own enumerable properties; so do we.
  for (const key of Object.keys(value)) {
    const v = value[key];
    const r = rewrite(v, seen);
    if (r !== v) {
      if (out === value) {
        out = { ...value };
        seen.set(value, out);
      }
      out[key] = r;
    }
  }
  return out;
}

/** Reads a value the sandbox serialized: plain host data, never a sandbox reference. */
function deserialize(bytes) {
  const d = new v8.Deserializer(bytes);
  d.readHeader();
  return d.readValue();
}

/** Name and message of a thrown host value, as plain strings (never the object). */
function describeHostError(err) {
  if (err instanceof Error) {
    return { name: safeString(err.name || 'Error'), message: safeString(err.message ?? '') };
  }
  return { name: 'Error', message: typeof err === 'string' ? err : safeString(err) };
}

function safeString(v) {
  try {
    return String(v);
  } catch {
    return 'host capability failed';
  }
}

module.exports = { serialize, deserialize, describeHostError, withoutHostStacks };
