'use strict';
// Options read as own properties (lib/own.js), where a read that runs the caller's code (a
// getter, a Proxy trap) and throws becomes a SandboxValidationError naming the option, as
// the native side does (`Raw::Unreadable`): a bad option never surfaces as an exception of
// unknown kind or a rejection.
const { SandboxValidationError } = require('./errors');
const { own, isPlainObject, describeThrown } = require('./own');

/** The error for option `path`, whose read threw `err`. */
function unreadable(path, err) {
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

module.exports = { readOwn, readEntries, readOptions, ownCopy };
