'use strict';
// Options are read as own properties only. A key another library put on Object.prototype
// (or Array.prototype) must never become an option: `Object.prototype.capabilities`
// would give every run a host function, `Object.prototype.data` a data value,
// `Object.prototype.autoApprove` an unreviewed write. The native side reads the same way
// (own enumerable keys, src/api/options.rs), so JS and Rust see one set of options.
//
// A read may run the caller's code (a getter, a Proxy trap) and that code may throw: the
// read* helpers below turn that into a SandboxValidationError naming the option, as the
// native side does (`Raw::Unreadable`), so a bad option never surfaces as an exception of
// unknown kind or a rejection.

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

/**
 * A copy of `obj`'s own enumerable string-keyed properties on an object without a
 * prototype: every later read of a key it lacks finds nothing. `what` names `obj` in the
 * error thrown when a read throws.
 */
function ownCopy(obj, what = 'options') {
  const out = Object.create(null);
  if (obj === null || typeof obj !== 'object') return out;
  for (const [key, value] of readEntries(obj, what)) out[key] = value;
  return out;
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

/** The error for option `path`, whose read threw `err`. */
function unreadable(path, err) {
  // Required here, not at load: lib/errors.js requires this module.
  const { SandboxValidationError } = require('./errors');
  return new SandboxValidationError(`${path} could not be read: reading it threw ${describeThrown(err)}`);
}

/** `own(obj, key)`, or a SandboxValidationError naming `path` if the read throws. */
function readOwn(obj, key, path) {
  try {
    return own(obj, key);
  } catch (err) {
    throw unreadable(path, err);
  }
}

/**
 * `obj`'s own enumerable string-keyed [key, value] pairs, each read once; a read that
 * throws is a SandboxValidationError naming `what` (the keys) or `what.key`. `prefix`
 * is what keys are named under (`''` for the top level of runSandbox's options).
 */
function readEntries(obj, what, prefix = what) {
  let keys;
  try {
    keys = Object.keys(obj);
  } catch (err) {
    throw unreadable(what, err);
  }
  const out = [];
  for (const key of keys) {
    try {
      out.push([key, obj[key]]);
    } catch (err) {
      throw unreadable(prefix === '' ? key : `${prefix}.${key}`, err);
    }
  }
  return out;
}

/**
 * An options object read once: its own enumerable properties on a plain object, with
 * `replace`'s keys set over them (the shaped ones). Anything but a plain object is given
 * back as it is, for the native check to name its type.
 */
function readOptions(obj, what, prefix, replace = undefined) {
  if (!isPlainObject(obj)) return obj;
  // No prototype: an own `__proto__` key is copied as data, not made the prototype.
  const out = Object.create(null);
  for (const [key, value] of readEntries(obj, what, prefix)) out[key] = value;
  if (replace !== undefined) Object.assign(out, replace);
  return out;
}

module.exports = { own, hasOwn, ownCopy, isPlainObject, readOwn, readEntries, readOptions, describeThrown };
