'use strict';
// Values crossing host <-> isolate are copies made with V8's structured-clone
// serializer on both sides (the same V8 version). The base v8.Serializer is used on
// purpose: it writes typed arrays natively, where Node's DefaultSerializer would write
// them as Node-specific host objects the sandbox cannot read.
const v8 = require('node:v8');

/** Serializes a host value for the sandbox. Throws DataCloneError for functions etc. */
function serialize(value) {
  const s = new v8.Serializer();
  s.writeHeader();
  s.writeValue(value);
  return s.releaseBuffer();
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
    return { name: String(err.name || 'Error'), message: String(err.message ?? '') };
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

module.exports = { serialize, deserialize, describeHostError };
