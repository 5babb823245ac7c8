'use strict';
// Values crossing host <-> isolate are copies made with V8's structured-clone
// serializer on both sides (the same V8 version). The base v8.Serializer is used on
// purpose: it writes typed arrays natively, where Node's DefaultSerializer would write
// them as Node-specific host objects the sandbox cannot read.
const v8 = require('node:v8');
const { types } = require('node:util');
const { Reader, ChunkedArrayReader, NOT_CHUNKED, Writer, FALLBACK, SLICE_MS } = require('./codec');

/**
 * Serializes a host value for the sandbox. Throws DataCloneError for functions etc.
 * Errors inside the value are replaced by copies without the host's stack (see
 * `withoutHostStacks`), because V8's serializer copies an Error's `stack`.
 */
function serialize(value) {
  const fast = encodePrimitive(value);
  if (fast !== null) return fast;
  const s = new v8.Serializer();
  s.writeHeader();
  s.writeValue(withoutHostStacks(value));
  return s.releaseBuffer();
}

// A big Uint8Array reply is written by the addon itself (`RunHandle.fulfillUint8Array`)
// in V8's format straight into memory Rust owns: one copy of its bytes instead of
// v8.Serializer's and then the addon's. Only for a Uint8Array over the whole of a plain
// ArrayBuffer (what the addon writes), and only if this Node's serializer writes such an
// array exactly as the addon does (checked once here; otherwise everything serializes).
const DIRECT_BYTES_MIN = 64 * 1024;
const typedArrayBuffer = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Uint8Array.prototype), 'buffer').get;
const arrayBufferResizable = Object.getOwnPropertyDescriptor(ArrayBuffer.prototype, 'resizable')?.get;

/** The serializer's version byte if it writes a whole Uint8Array as the addon does, else 0. */
function directBytesVersion() {
  const s = new v8.Serializer();
  s.writeHeader();
  s.writeValue(new Uint8Array([0xab, 0xcd, 0xef]));
  const b = s.releaseBuffer();
  const expected = [0xff, b[1], 0x42, 3, 0xab, 0xcd, 0xef, 0x56, 0x42, 0, 3, 0];
  return b.length === expected.length && expected.every((x, i) => b[i] === x) ? b[1] : 0;
}
const DIRECT_BYTES_VERSION = directBytesVersion();

// The same for a big ASCII-only string (its UTF-8 bytes are exactly its characters; V8
// would write it as a one-byte string, or as two-byte when that is its representation,
// which the sandbox cannot tell apart). The addon checks that every character is ASCII as
// it copies; checked once here: V8 writes a one-byte string as '"', length, bytes.
function directStringVersion() {
  const b = v8.serialize('abc'); // the header is the base serializer's
  const expected = [0xff, b[1], 0x22, 3, 0x61, 0x62, 0x63];
  return b.length === expected.length && expected.every((x, i) => b[i] === x) ? b[1] : 0;
}
const DIRECT_STRING_VERSION = directStringVersion();

/**
 * The serializer version to offer string `value` to the addon with (long, and ASCII as
 * far as a few characters show), or 0. Most non-ASCII text shows in the sample, which
 * spares it a copy by the addon that would only lead back to the serializer.
 */
function directStringVersionFor(value) {
  if (DIRECT_STRING_VERSION === 0 || typeof value !== 'string' || value.length < DIRECT_BYTES_MIN) return 0;
  const step = Math.floor(value.length / ASCII_SAMPLES);
  for (let i = 0; i < value.length; i += step) if (value.charCodeAt(i) > 0x7f) return 0;
  return DIRECT_STRING_VERSION;
}
const ASCII_SAMPLES = 64;

/**
 * The serializer version to write `value` with directly, or 0 when it must go through
 * `serialize`: a big Uint8Array whose buffer is a plain (not shared, not resizable)
 * ArrayBuffer. The addon checks the rest (offset 0, the whole buffer) itself.
 */
function directBytesVersionFor(value) {
  if (DIRECT_BYTES_VERSION === 0 || !types.isUint8Array(value)) return 0;
  const buffer = typedArrayBuffer.call(value);
  if (!types.isArrayBuffer(buffer) || (arrayBufferResizable !== undefined && arrayBufferResizable.call(buffer))) return 0;
  return buffer.byteLength >= DIRECT_BYTES_MIN ? DIRECT_BYTES_VERSION : 0;
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
  // Before the cause: an error that is its own cause (or cycles back) finds the copy.
  seen.set(err, copy);
  let cause;
  try {
    if (Object.hasOwn(err, 'cause')) cause = { value: err.cause };
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
  if (holdsNoError(value)) return value;
  return rewrite(value, new Map());
}

// Most values hold no Error: a scan without a visited-set says so at a fraction of the
// cost of `rewrite` (whose Map of every object visited is 85% of its time). Cycles are
// caught by the ancestor path; past a depth or a visit count (a DAG that shares
// subtrees can make a set-less scan exponential) the scan gives up and `rewrite` runs.
const SCAN_MAX_DEPTH = 64;
const SCAN_MAX_VISITS = 1 << 20;

/** True only if no Error is reachable from `root` (false: one is, or the scan gave up). */
function holdsNoError(root) {
  const state = { path: [], visits: 0 };
  return scanClean(root, state);
}

function scanClean(value, state) {
  if (++state.visits > SCAN_MAX_VISITS) return false;
  const path = state.path;
  if (path.length >= SCAN_MAX_DEPTH) return false;
  if (path.includes(value)) return true; // a cycle: that ancestor is being scanned
  if (value instanceof Error) return false;
  if (ArrayBuffer.isView(value) || value instanceof ArrayBuffer || value instanceof Date || value instanceof RegExp) return true;
  path.push(value);
  let clean = true;
  if (Array.isArray(value)) {
    const keys = value.length <= DENSE_WALK_MAX ? null : Object.keys(value);
    const n = keys ? keys.length : value.length;
    for (let i = 0; i < n && clean; i++) {
      const v = value[keys ? keys[i] : i];
      if (v !== null && typeof v === 'object') clean = scanClean(v, state);
    }
  } else if (value instanceof Map) {
    for (const [k, v] of value) {
      if ((k !== null && typeof k === 'object' && !scanClean(k, state)) || (v !== null && typeof v === 'object' && !scanClean(v, state))) {
        clean = false;
        break;
      }
    }
  } else if (value instanceof Set) {
    for (const v of value) {
      if (v !== null && typeof v === 'object' && !scanClean(v, state)) {
        clean = false;
        break;
      }
    }
  } else {
    // Inherited enumerable keys too: more than the serializer copies, never less.
    for (const key in value) {
      const v = value[key];
      if (v !== null && typeof v === 'object' && !scanClean(v, state)) {
        clean = false;
        break;
      }
    }
  }
  path.pop();
  return clean;
}

const DENSE_WALK_MAX = 1 << 24;

/**
 * A copy of `value` in which every Error is sanitized. Every container (array, plain
 * object, Map, Set) is copied, and registered before its contents are, so a cycle or a
 * shared subtree leads to the copy, never back to an original that still holds a host
 * Error. Runs only when the scan found an Error (or gave up).
 */
function rewrite(value, seen) {
  if (value === null || typeof value !== 'object') return value;
  const prior = seen.get(value);
  if (prior !== undefined) return prior;
  if (value instanceof Error) return sanitizedError(value, seen);
  // Values the serializer writes by their own type, with no Error inside.
  if (ArrayBuffer.isView(value) || types.isAnyArrayBuffer(value) || types.isBoxedPrimitive(value) || value instanceof Date || value instanceof RegExp) {
    return value;
  }
  if (value instanceof Map) {
    const out = new Map();
    seen.set(value, out);
    for (const [k, v] of value) out.set(rewrite(k, seen), rewrite(v, seen));
    return out;
  }
  if (value instanceof Set) {
    const out = new Set();
    seen.set(value, out);
    for (const v of value) out.add(rewrite(v, seen));
    return out;
  }
  // Arrays keep their length and holes; other objects become plain ones with the same
  // own enumerable properties, which is all the serializer copies of them.
  const out = Array.isArray(value) ? new Array(value.length) : {};
  seen.set(value, out);
  for (const key of Object.keys(value)) out[key] = rewrite(value[key], seen);
  return out;
}

// Fast paths for the values most host calls carry (numbers, booleans, short strings, an
// argument list of those). Creating a v8.Serializer/Deserializer costs about 1.5 µs each,
// a third of a host call's budget. The bytes are V8's own wire format, the same that
// v8.Serializer writes (checked against it in __test__/bridge-codec.spec.ts); anything
// else, and anything unexpected while decoding, takes the general path.
const HEADER = (() => {
  const s = new v8.Serializer();
  s.writeHeader();
  return s.releaseBuffer();
})();
const VERSION = HEADER.length === 2 ? HEADER[1] : -1;
const TAG = {
  int32: 0x49, // 'I', zig-zag varint
  double: 0x4e, // 'N', 8 bytes little endian
  true: 0x54, // 'T'
  false: 0x46, // 'F'
  null: 0x30, // '0'
  undefined: 0x5f, // '_'
  oneByteString: 0x22, // '"', varint byte length, Latin-1 bytes
  sparseArray: 0x61, // 'a', varint length, key/value pairs, '@', varint count, varint length
  endSparseArray: 0x40, // '@'
};
const FAST_STRING_MAX = 256;
const scratch = new Float64Array(1);
const scratchBytes = new Uint8Array(scratch.buffer);
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

function varintLength(n) {
  let len = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 128);
    len += 1;
  }
  return len;
}

function writeVarint(buf, at, n) {
  while (n >= 0x80) {
    buf[at++] = (n & 0x7f) | 0x80;
    n = Math.floor(n / 128);
  }
  buf[at++] = n;
  return at;
}

/** V8 wire bytes of a number, boolean, null, undefined or short Latin-1 string; else null. */
function encodePrimitive(value) {
  if (VERSION < 0 || !LITTLE_ENDIAN) return null;
  let out;
  switch (typeof value) {
    case 'number':
      if ((value | 0) === value && !Object.is(value, -0)) {
        const zz = value >= 0 ? value * 2 : -value * 2 - 1;
        out = Buffer.allocUnsafe(3 + varintLength(zz));
        out[2] = TAG.int32;
        writeVarint(out, 3, zz);
      } else {
        out = Buffer.allocUnsafe(11);
        out[2] = TAG.double;
        scratch[0] = value;
        out.set(scratchBytes, 3);
      }
      break;
    case 'boolean':
      out = Buffer.allocUnsafe(3);
      out[2] = value ? TAG.true : TAG.false;
      break;
    case 'undefined':
      out = Buffer.allocUnsafe(3);
      out[2] = TAG.undefined;
      break;
    case 'object':
      if (value !== null) return null;
      out = Buffer.allocUnsafe(3);
      out[2] = TAG.null;
      break;
    case 'string': {
      const n = value.length;
      if (n > FAST_STRING_MAX) return null;
      for (let i = 0; i < n; i++) if (value.charCodeAt(i) > 0xff) return null;
      const at = 3 + varintLength(n);
      out = Buffer.allocUnsafe(at + n);
      out[2] = TAG.oneByteString;
      writeVarint(out, 3, n);
      out.latin1Write(value, at, n);
      break;
    }
    default:
      return null;
  }
  out[0] = 0xff;
  out[1] = VERSION;
  return out;
}

const NOT_FAST = Symbol('not fast');

/** A tiny cursor over untrusted bytes: every read is bounds-checked. */
function readVarint(bytes, cur) {
  let result = 0;
  let scale = 1;
  for (let i = 0; i < 5; i++) {
    if (cur.at >= bytes.length) return -1;
    const b = bytes[cur.at++];
    result += (b & 0x7f) * scale;
    if ((b & 0x80) === 0) return result;
    scale *= 128;
  }
  return -1;
}

function readPrimitive(bytes, cur) {
  if (cur.at >= bytes.length) return NOT_FAST;
  const tag = bytes[cur.at++];
  switch (tag) {
    case TAG.int32: {
      const zz = readVarint(bytes, cur);
      if (zz < 0 || zz > 0xffffffff) return NOT_FAST;
      return zz % 2 === 0 ? zz / 2 : -(zz + 1) / 2;
    }
    case TAG.double:
      if (cur.at + 8 > bytes.length) return NOT_FAST;
      for (let i = 0; i < 8; i++) scratchBytes[i] = bytes[cur.at + i];
      cur.at += 8;
      return scratch[0];
    case TAG.true:
      return true;
    case TAG.false:
      return false;
    case TAG.null:
      return null;
    case TAG.undefined:
      return undefined;
    case TAG.oneByteString: {
      const n = readVarint(bytes, cur);
      if (n < 0 || n > FAST_STRING_MAX || cur.at + n > bytes.length) return NOT_FAST;
      const str = bytes.latin1Slice(cur.at, cur.at + n);
      cur.at += n;
      return str;
    }
    default:
      return NOT_FAST;
  }
}

/** The value of `bytes` if it is one primitive or an argument list of primitives. */
function decodeFast(input) {
  if (!LITTLE_ENDIAN || !(input instanceof Uint8Array) || input.length < 3 || input[0] !== 0xff || input[1] !== VERSION) return NOT_FAST;
  // Bytes that came over a process channel are a Uint8Array: view them as a Buffer.
  const bytes = Buffer.isBuffer(input) ? input : Buffer.from(input.buffer, input.byteOffset, input.byteLength);
  const cur = { at: 2 };
  if (bytes[2] !== TAG.sparseArray) {
    const v = readPrimitive(bytes, cur);
    return cur.at === bytes.length ? v : NOT_FAST;
  }
  cur.at = 3;
  const length = readVarint(bytes, cur);
  if (length < 0 || length > 16) return NOT_FAST;
  const out = [];
  for (let i = 0; i < length; i++) {
    if (bytes[cur.at] !== TAG.int32) return NOT_FAST;
    if (readPrimitive(bytes, cur) !== i) return NOT_FAST;
    const v = readPrimitive(bytes, cur);
    if (v === NOT_FAST) return NOT_FAST;
    out.push(v);
  }
  if (bytes[cur.at++] !== TAG.endSparseArray) return NOT_FAST;
  if (readVarint(bytes, cur) !== length || readVarint(bytes, cur) !== length) return NOT_FAST;
  return cur.at === bytes.length ? out : NOT_FAST;
}

// A fast path for one long string out of the sandbox (V8's format read in the exact shapes
// V8 writes, anything else going to v8.Deserializer), so that a thread-mode result can
// become an external string over the result's own bytes instead of a copy. Measured and
// left out: the same for typed arrays / ArrayBuffers (an ArrayBuffer over napi's external
// memory is untransferable on Node 26 and not detached by a transfer on 20, so they are
// copied, which v8.Deserializer does as fast), and writing big values into the sandbox
// without v8.Serializer (it sizes a big raw write in one step; no faster either way).
const FLAT_MIN = 1024;
const TWO_BYTE_STRING_TAG = 0x63; // 'c', varint byte length, UTF-16LE code units
const PADDING_TAG = 0x00;

/**
 * The value of `bytes` if it is one string; else NOT_FAST. `owned`: the caller hands
 * `bytes` over for good (nothing else holds or reuses its memory), so a long string may
 * be made over it instead of copied.
 */
function decodeFlat(input, owned) {
  if (!LITTLE_ENDIAN || !(input instanceof Uint8Array) || input.length < 3 || input[0] !== 0xff || input[1] !== VERSION) return NOT_FAST;
  const bytes = Buffer.isBuffer(input) ? input : Buffer.from(input.buffer, input.byteOffset, input.byteLength);
  const cur = { at: 2 };
  // V8 pads before a two-byte string to align its code units; its reader skips any
  // number of padding tags, this one a few (more go to V8).
  while (cur.at < 6 && bytes[cur.at] === PADDING_TAG) cur.at++;
  const tag = bytes[cur.at++];
  if (tag !== TAG.oneByteString && tag !== TWO_BYTE_STRING_TAG) return NOT_FAST;
  const n = readVarint(bytes, cur);
  if (n < 0 || cur.at + n !== bytes.length || (tag === TWO_BYTE_STRING_TAG && n % 2 !== 0)) return NOT_FAST;
  const twoByte = tag === TWO_BYTE_STRING_TAG;
  // An external string over the bytes themselves: no copy, and no big string in the heap.
  const shared = owned && n >= SHARE_MIN ? shareNative('shareString')(bytes, cur.at, n, twoByte) : null;
  if (shared !== null) return shared;
  return twoByte ? bytes.ucs2Slice(cur.at, cur.at + n) : bytes.latin1Slice(cur.at, cur.at + n);
}

// Below this, copying a string costs less than an external one (a napi reference and a
// finalizer).
const SHARE_MIN = 64 * 1024;
let binding = null;
const NO_SHARE = () => null;
/** The addon's `shareString` (loaded on first use), or a no-op that copies. */
function shareNative(name) {
  if (binding === null) binding = require('./native');
  return typeof binding[name] === 'function' ? binding[name] : NO_SHARE;
}

/**
 * Reads a value the sandbox serialized: plain host data, never a sandbox reference.
 * `owned`: `bytes` is handed over for good (a thread-mode result), see decodeFlat.
 */
function deserialize(bytes, owned = false) {
  const fast = decodeFast(bytes);
  if (fast !== NOT_FAST) return fast;
  if (bytes.length >= FLAT_MIN) {
    const flat = decodeFlat(bytes, owned === true);
    if (flat !== NOT_FAST) return flat;
  }
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

// ---------------------------------------------------------------- in slices

// Values big enough to hold Node's thread for more than a few milliseconds are built (out
// of the sandbox) and written (into it) a slice at a time (lib/codec.js): between slices
// the event loop runs timers, I/O and other runs' events. Below this, one piece.
const SLICED_MIN = 64 * 1024;

// One budget of SLICE_MS per turn of the event loop, shared by every value being read or
// written a slice at a time: eight big results at once hold the loop no longer than one
// does. The smallest job goes first, so a small value is not kept behind a big one, and
// big ones are built one after another rather than side by side: the first is done in its
// own time instead of all of them in four times theirs, and the parent holds one half-built
// value, not four (2e6-string results on Node 26, four at once: each settled 2 s late). A
// job queued AGED_MS ago or more goes first regardless (the oldest), until it is done: none
// starves, and under overload the order becomes first come, first served.
const sliceJobs = [];
/** The slice a value is first written in, at once (most host-call answers end in it). */
const FIRST_SLICE_MS = 0.5;
const AGED_MS = 500;
let slicesScheduled = false;

/** The job to run next: the oldest if it was queued AGED_MS ago, else the smallest. */
function nextJob(now) {
  let waiting = 0;
  let smallest = 0;
  for (let i = 1; i < sliceJobs.length; i++) {
    if (sliceJobs[i].queuedAt < sliceJobs[waiting].queuedAt) waiting = i;
    if (sliceJobs[i].size < sliceJobs[smallest].size) smallest = i;
  }
  return sliceJobs.splice(now - sliceJobs[waiting].queuedAt >= AGED_MS ? waiting : smallest, 1)[0];
}

function runSlices() {
  slicesScheduled = false;
  const deadline = performance.now() + SLICE_MS;
  let now;
  while (sliceJobs.length > 0 && (now = performance.now()) < deadline) {
    const job = nextJob(now);
    if (job.stop !== undefined && job.stop()) continue;
    let finished;
    try {
      finished = job.run(deadline);
    } catch (err) {
      job.fail(err);
      continue;
    }
    if (finished) job.finish();
    else sliceJobs.push(job);
  }
  scheduleSlices();
}

function scheduleSlices() {
  if (slicesScheduled || sliceJobs.length === 0) return;
  slicesScheduled = true;
  setImmediate(runSlices);
}

/**
 * Runs `run(deadline)` (true once finished) in slices from later turns, then `finish()`;
 * `fail(error)` if it throws. Nothing more happens once `stop()` is true. `size` (bytes)
 * orders the jobs: smallest first.
 */
function inSlices(size, run, finish, fail, stop) {
  sliceJobs.push({ size, queuedAt: performance.now(), run, finish, fail, stop });
  scheduleSlices();
}

/**
 * Reads bytes the sandbox serialized, as `deserialize`; long ones a slice at a time.
 * `done(error, value)` is called once: at once when the value was read in one piece, else
 * from a later turn. Nothing more happens once `stop()` is true.
 */
function deserializeInSlices(bytes, owned, done, stop) {
  if (bytes.length < SLICED_MIN) {
    let value;
    try {
      value = deserialize(bytes, owned);
    } catch (err) {
      done(err);
      return;
    }
    done(null, value);
    return;
  }
  let reader;
  try {
    const flat = decodeFlat(bytes, owned === true);
    if (flat !== NOT_FAST) {
      done(null, flat);
      return;
    }
    // An array of elements that share nothing (most results) is built by V8 in chunks;
    // anything else by the Reader (see lib/codec.js).
    try {
      reader = new ChunkedArrayReader(bytes);
    } catch (err) {
      if (err !== NOT_CHUNKED) throw err;
      reader = new Reader(bytes, owned);
    }
  } catch (err) {
    done(err);
    return;
  }
  const fail = (err) => {
    if (err !== NOT_CHUNKED) return done(err);
    // Not that shape after all: read again from the start, with the Reader.
    try {
      reader = new Reader(bytes, owned);
    } catch (e) {
      return done(e);
    }
    inSlices(bytes.length, (deadline) => reader.run(deadline), () => done(null, reader.value), done, stop);
  };
  inSlices(bytes.length, (deadline) => reader.run(deadline), () => done(null, reader.value), fail, stop);
}

let namedKeysNative;
/** The addon's `namedKeys` (see lib/codec.js), or null where it has none. */
function namedKeys() {
  if (namedKeysNative === undefined) {
    const n = shareNative('namedKeys');
    namedKeysNative = n === NO_SHARE ? null : n;
  }
  return namedKeysNative;
}

/**
 * Serializes a host value for the sandbox, as `serialize`; plain data a slice at a time
 * (anything else by v8.Serializer, whole). `done(error, bytes, length)`: `bytes` is null
 * when `length` passed `maxBytes` (counted, not kept). Called at once when written in one
 * piece, else from a later turn; nothing more happens once `stop()` is true.
 */
function serializeInSlices(value, maxBytes, done, stop) {
  const fast = encodePrimitive(value);
  if (fast !== null) {
    done(null, fast.length > maxBytes ? null : fast, fast.length);
    return;
  }
  const whole = () => {
    let bytes;
    try {
      bytes = serialize(value);
    } catch (err) {
      done(err);
      return;
    }
    done(null, bytes.length > maxBytes ? null : bytes, bytes.length);
  };
  let writer;
  try {
    writer = new Writer(value, maxBytes, namedKeys());
  } catch (err) {
    done(err);
    return;
  }
  const fail = (err) => (err === FALLBACK ? whole() : done(err));
  // Most answers are small: written at once, in a short first slice.
  let finished;
  try {
    finished = writer.run(performance.now() + FIRST_SLICE_MS);
  } catch (err) {
    fail(err);
    return;
  }
  if (finished) done(null, writer.bytes(), writer.length);
  // Its size is not known before it is written: what 0.5 ms wrote, and more to come.
  else inSlices(2 * writer.length, (deadline) => writer.run(deadline), () => done(null, writer.bytes(), writer.length), fail, stop);
}

/**
 * The host side of `maxMessageBytes` for values: a tool's reply, a data answer and
 * `sandbox.call` arguments are written through here (a module source, a string, is
 * compared with the same message in lib/execute.js). The bridge's writer stops at
 * `maxBytes`; a value only v8.Serializer writes (a class instance, a sparse array) is
 * written whole, then compared. `done(problem, bytes)`: `problem` is null, or
 * `{ name, message }` naming `what` (`get's reply`, `respond(3): value`): a DataCloneError
 * for a value that cannot be copied, a RangeError for one over the limit. Timing as
 * serializeInSlices.
 */
function intoSandbox(value, maxBytes, what, done, stop) {
  serializeInSlices(
    value,
    maxBytes,
    (err, bytes, length) => {
      if (err) done({ name: 'DataCloneError', message: `${what} cannot be copied into the sandbox: ${describeHostError(err).message}` });
      else if (bytes === null) done(overMaxMessageBytes(what, length, maxBytes));
      else done(null, bytes);
    },
    stop,
  );
}

/** The RangeError of a value of `length` bytes over `maxBytes` (see intoSandbox). */
function overMaxMessageBytes(what, length, maxBytes) {
  return { name: 'RangeError', message: `${what}: ${length} bytes, over the bridge limit of ${maxBytes} bytes (maxMessageBytes)` };
}

module.exports = {
  serialize,
  serializeInSlices,
  intoSandbox,
  overMaxMessageBytes,
  directBytesVersionFor,
  directStringVersionFor,
  deserialize,
  deserializeInSlices,
  describeHostError,
  withoutHostStacks,
  decodeFlat,
  NOT_FAST,
};
