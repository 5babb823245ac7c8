'use strict';
// What the capabilities check of a request a sandbox sent (copied out of the sandbox by
// structured clone, so an object's prototype is Object.prototype or null).

/** Whether `value` is an object made of named fields: not null, an array or a class instance. */
function isPlainRecord(value) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** What `value` is, as an error message says it ("an array", "a number"). */
function describeValue(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

module.exports = { isPlainRecord, describeValue };
