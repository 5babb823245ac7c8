'use strict';
// A sandbox result as JSON text. Results are structured-clone copies, so they may hold
// what JSON lacks: undefined, BigInt, Map, Set, Date, typed arrays, cycles. Each gets a
// plain stand-in instead of making JSON.stringify throw.

function toJson(value, indent) {
  const seen = new WeakSet();
  const replace = (v) => {
    if (v === undefined) return null;
    if (typeof v === 'bigint') return v.toString();
    if (typeof v === 'number' && !Number.isFinite(v)) return String(v);
    if (v === null || typeof v !== 'object') return v;
    if (seen.has(v)) return '[Circular]';
    seen.add(v);
    let out;
    if (v instanceof Date) out = Number.isNaN(v.getTime()) ? null : v.toISOString();
    else if (v instanceof Map) out = Object.fromEntries([...v].map(([k, x]) => [String(k), replace(x)]));
    else if (v instanceof Set) out = [...v].map(replace);
    else if (ArrayBuffer.isView(v)) out = Array.from(v instanceof DataView ? new Uint8Array(v.buffer, v.byteOffset, v.byteLength) : v, (x) => replace(x));
    else if (v instanceof ArrayBuffer) out = Array.from(new Uint8Array(v));
    else if (v instanceof Error) out = { name: v.name, message: v.message };
    else if (Array.isArray(v)) out = v.map(replace);
    else out = Object.fromEntries(Object.entries(v).map(([k, x]) => [k, replace(x)]));
    seen.delete(v);
    return out;
  };
  return JSON.stringify(replace(value), null, indent);
}

module.exports = { toJson };
