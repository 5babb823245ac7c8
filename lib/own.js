'use strict';
// Options are read as own properties only. A key another library put on Object.prototype
// (or Array.prototype) must never become an option: `Object.prototype.capabilities`
// would give every run a host function, `Object.prototype.data` a data value,
// `Object.prototype.autoApprove` an unreviewed write. The native side reads the same way
// (own enumerable keys, src/api/options.rs), so JS and Rust see one set of options.

// Taken at load, so later tampering with Object.prototype does not change the check.
const propertyIsEnumerable = Function.prototype.call.bind(Object.prototype.propertyIsEnumerable);

/** `obj[key]` when `obj` has it as an own enumerable property, else undefined. */
function own(obj, key) {
  return obj !== null && (typeof obj === 'object' || typeof obj === 'function') && propertyIsEnumerable(obj, key) ? obj[key] : undefined;
}

/** Whether `obj` has `key` as an own enumerable property. */
function hasOwn(obj, key) {
  return obj !== null && (typeof obj === 'object' || typeof obj === 'function') && propertyIsEnumerable(obj, key);
}

/**
 * A copy of `obj`'s own enumerable string-keyed properties on an object without a
 * prototype: every later read of a key it lacks finds nothing.
 */
function ownCopy(obj) {
  const out = Object.create(null);
  if (obj === null || typeof obj !== 'object') return out;
  for (const key of Object.keys(obj)) out[key] = obj[key];
  return out;
}

module.exports = { own, hasOwn, ownCopy };
