'use strict';
// Options are read as own properties only. A key another library put on Object.prototype
// (or Array.prototype) must never become an option: `Object.prototype.capabilities`
// would give every run a host function, `Object.prototype.data` a data value,
// `Object.prototype.autoApprove` an unreviewed write. The native side reads the same way
// (own enumerable keys, src/api/options.rs), so JS and Rust see one set of options.
//
// A read may run the caller's code (a getter, a Proxy trap) and that code may throw: the
// read* helpers of lib/read-options.js turn that into a SandboxValidationError naming the
// option. This module requires nothing, so lib/errors.js may use it.

// Taken at load, so later tampering with Object.prototype does not change the check.
const isOwnEnumerable = Function.prototype.call.bind(Object.prototype.propertyIsEnumerable);

/** `obj[key]` when `obj` has it as an own enumerable property, else undefined. */
function own(obj, key) {
  return obj !== null && (typeof obj === 'object' || typeof obj === 'function') && isOwnEnumerable(obj, key) ? obj[key] : undefined;
}

/** Whether `obj` has `key` as an own enumerable property. */
function hasOwn(obj, key) {
  return obj !== null && (typeof obj === 'object' || typeof obj === 'function') && isOwnEnumerable(obj, key);
}

/** Whether `v` is an object and not an array; false (never a throw) for a revoked Proxy. */
function isPlainObject(v) {
  if (v === null || typeof v !== 'object') return false;
  try {
    return !Array.isArray(v);
  } catch {
    return true; // a revoked Proxy: reading it fails, under the option's name
  }
}

/** Longest description of a thrown value in a message. */
const MAX_THROWN_CHARS = 200;

/** What a read threw, as a message shows it (`Error: boom`); never throws itself. */
function describeThrown(err) {
  let text;
  try {
    if (typeof err === 'string') text = `'${err}'`;
    else if (err instanceof Error) text = `${String(err.name)}: ${String(err.message)}`;
    else if (err === null || (typeof err !== 'object' && typeof err !== 'function')) text = String(err);
    else text = typeof err === 'function' ? 'a function' : 'an object';
  } catch {
    text = 'an Error';
  }
  return text.length > MAX_THROWN_CHARS ? `${text.slice(0, MAX_THROWN_CHARS)}…` : text;
}

module.exports = { own, hasOwn, isPlainObject, describeThrown };
