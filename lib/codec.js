'use strict';
// Values built in slices: a reader and a writer of V8's structured-clone format (the one
// v8.Serializer and the seam write) that do their work a few milliseconds at a time, so a
// big result, host-call argument list or reply never holds Node's event loop in one piece.
//
// The reader builds what V8's ValueDeserializer builds (the same objects, ids and
// references, prototypes from this realm, own properties defined, never set through a
// setter), for every tag the value count (isolet-core `value_count`) lets through; the
// few values whose construction V8 owns (Errors, RegExps, BigInts) are built by V8 from
// their own bytes. The writer writes plain data (primitives, plain objects, arrays, Maps,
// Sets, Dates, ArrayBuffers and views) and gives everything else to v8.Serializer whole:
// what it cannot write exactly, V8 does.
const v8 = require('node:v8');
const { types } = require('node:util');

/** How long one slice may hold the thread, in ms. */
const SLICE_MS = 4;
/** Work units between two looks at the clock. */
const CHECK_EVERY = 512;

const HEADER = (() => {
  const s = new v8.Serializer();
  s.writeHeader();
  return s.releaseBuffer();
})();
const VERSION = HEADER.length === 2 ? HEADER[1] : -1;
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

const T = {
  padding: 0x00,
  verifyCount: 0x3f, // '?'
  hole: 0x2d, // '-'
  undefined: 0x5f, // '_'
  null: 0x30, // '0'
  true: 0x54, // 'T'
  false: 0x46, // 'F'
  int32: 0x49, // 'I'
  uint32: 0x55, // 'U'
  double: 0x4e, // 'N'
  bigint: 0x5a, // 'Z'
  utf8: 0x53, // 'S'
  oneByte: 0x22, // '"'
  twoByte: 0x63, // 'c'
  ref: 0x5e, // '^'
  object: 0x6f, // 'o'
  endObject: 0x7b, // '{'
  sparse: 0x61, // 'a'
  endSparse: 0x40, // '@'
  dense: 0x41, // 'A'
  endDense: 0x24, // '$'
  date: 0x44, // 'D'
  trueObject: 0x79, // 'y'
  falseObject: 0x78, // 'x'
  numberObject: 0x6e, // 'n'
  bigintObject: 0x7a, // 'z'
  stringObject: 0x73, // 's'
  regexp: 0x52, // 'R'
  map: 0x3b, // ';'
  endMap: 0x3a, // ':'
  set: 0x27, // "'"
  endSet: 0x2c, // ','
  arrayBuffer: 0x42, // 'B'
  resizableArrayBuffer: 0x7e, // '~'
  view: 0x56, // 'V'
  error: 0x72, // 'r'
};
const ERROR_END = 0x2e; // '.'
const ERROR_MESSAGE = 0x6d; // 'm'
const ERROR_CAUSE = 0x63; // 'c'
const ERROR_STACK = 0x73; // 's'
const ERROR_PROTOTYPES = new Set([0x45, 0x52, 0x46, 0x53, 0x54, 0x55]); // E R F S T U

const VIEWS = new Map(
  [
    ['b', Int8Array],
    ['B', Uint8Array],
    ['C', Uint8ClampedArray],
    ['w', Int16Array],
    ['W', Uint16Array],
    ['d', Int32Array],
    ['D', Uint32Array],
    ['f', Float32Array],
    ['F', Float64Array],
    ['q', BigInt64Array],
    ['Q', BigUint64Array],
    ['h', globalThis.Float16Array],
    ['?', DataView],
  ]
    .filter(([, C]) => typeof C === 'function')
    .map(([tag, C]) => [tag.charCodeAt(0), C]),
);

// The original methods, as V8's deserializer calls them (never a patched one).
const mapSet = Map.prototype.set;
const setAdd = Set.prototype.add;
const defineProperty = Object.defineProperty;
const hasOwn = Object.prototype.hasOwnProperty;

const DESCRIPTOR = { value: undefined, writable: true, enumerable: true, configurable: true };
/** Properties of one object assigned (the rest are defined, see Reader#define). */
const FAST_ASSIGNMENTS = 12;
/**
 * Longest dense array made at its length up front, as V8's deserializer does. Longer ones
 * grow as they are read: making one at its length is one long step (40 ms for 1.5 M
 * elements, and as long again to turn its holes into doubles), growing is many short ones
 * (at most half their length again in slack, which the value count charges for).
 */
const PREALLOCATE_MAX = 1 << 16;

class DecodeError extends Error {}
const fail = (what) => {
  throw new DecodeError(`unreadable value (${what})`);
};

// Frames of containers being read.
const OBJECT = 1;
const DENSE = 2;
const SPARSE = 3;
const MAP = 4;
const SET = 5;
const ERROR = 6;

/** A placeholder for an object whose id is taken but which is not built yet. */
const PENDING = Symbol('pending');

/**
 * Keys an assignment could not define as V8 does (an accessor or a read-only property of
 * that name on the prototype chain of a fresh object or array, `__proto__` among them):
 * those are defined with Object.defineProperty. Read when a value starts to be read, so a
 * host that changes its prototypes later is seen.
 */
function guardedKeys() {
  const guarded = new Set(['__proto__']);
  let indices = false;
  for (const proto of [Object.prototype, Array.prototype]) {
    for (const key of Reflect.ownKeys(proto)) {
      if (typeof key !== 'string') continue;
      const d = Object.getOwnPropertyDescriptor(proto, key);
      if (d.get !== undefined || d.set !== undefined || d.writable === false) guarded.add(key);
      if (/^(0|[1-9]\d*)$/.test(key)) indices = true;
    }
  }
  return { guarded, indices, frozen: Object.isFrozen(Object.prototype) || Object.isFrozen(Array.prototype) };
}

/** Reads V8 structured-clone bytes, a slice at a time. */
class Reader {
  constructor(bytes, owned) {
    this.b = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.owned = owned === true;
    this.at = 0;
    this.ids = [];
    this.stack = [];
    this.done = false;
    this.value = undefined;
    this.f64 = new Float64Array(1);
    this.f64b = new Uint8Array(this.f64.buffer);
    const g = guardedKeys();
    this.guarded = g.guarded;
    // In a host that changed no prototype, `__proto__` is the only key to define.
    this.onlyProto = g.guarded.size === 1;
    this.guardIndices = g.indices;
    // Positional cache of property keys: rows of one shape repeat their keys in order.
    this.keyAt = [];
    this.keyLen = [];
    this.keyStr = [];
    if (this.b.length < 2 || this.b[0] !== 0xff) fail('header');
    this.at = 1;
    this.version = this.varint();
    if (this.version < 13 || this.version > VERSION) fail('format version');
  }

  varint() {
    const b = this.b;
    let at = this.at;
    let result = 0;
    let shift = 0;
    for (;;) {
      if (at >= b.length) fail('truncated');
      const byte = b[at++];
      if (shift < 28) result |= (byte & 0x7f) << shift;
      else if (shift === 28) result += (byte & 0x0f) * 268435456; // bits 28-31
      shift += 7;
      if ((byte & 0x80) === 0) break;
      if (shift >= 35) {
        // V8 reads a uint32 varint from at most 5 bytes and ignores the rest of them.
        // Skip continuation bytes as its loop does.
        while (at < b.length && (b[at] & 0x80) !== 0) at++;
        if (at >= b.length) fail('truncated');
        at++;
        break;
      }
    }
    this.at = at;
    return result >>> 0;
  }

  tag() {
    const b = this.b;
    while (this.at < b.length && b[this.at] === T.padding) this.at++;
    if (this.at >= b.length) fail('truncated');
    return b[this.at++];
  }

  peek() {
    const b = this.b;
    while (this.at < b.length && b[this.at] === T.padding) this.at++;
    return this.at < b.length ? b[this.at] : -1;
  }

  double() {
    const b = this.b;
    const at = this.at;
    if (at + 8 > b.length) fail('truncated');
    const f = this.f64b;
    f[0] = b[at];
    f[1] = b[at + 1];
    f[2] = b[at + 2];
    f[3] = b[at + 3];
    f[4] = b[at + 4];
    f[5] = b[at + 5];
    f[6] = b[at + 6];
    f[7] = b[at + 7];
    this.at = at + 8;
    return this.f64[0];
  }

  bytesOf(n) {
    const start = this.at;
    if (n > this.b.length - start) fail('truncated');
    this.at = start + n;
    return start;
  }

  /** A string whose tag was read. */
  stringOf(tag) {
    const n = this.varint();
    const start = this.bytesOf(n);
    const b = this.b;
    if (tag === T.oneByte) return b.latin1Slice(start, start + n);
    if (tag === T.twoByte) {
      if (n % 2 !== 0) fail('two-byte string');
      return b.ucs2Slice(start, start + n);
    }
    return b.utf8Slice(start, start + n);
  }

  /** A property key: a one-byte string from the positional cache when it repeats. */
  keyOf(tag, ordinal) {
    if (tag !== T.oneByte || ordinal >= 64) return this.stringOf(tag);
    const n = this.varint();
    const start = this.bytesOf(n);
    const b = this.b;
    if (this.keyLen[ordinal] === n) {
      const prior = this.keyAt[ordinal];
      let i = 0;
      while (i < n && b[prior + i] === b[start + i]) i++;
      if (i === n) return this.keyStr[ordinal];
    }
    const s = b.latin1Slice(start, start + n);
    if (n <= 64) {
      this.keyAt[ordinal] = start;
      this.keyLen[ordinal] = n;
      this.keyStr[ordinal] = s;
    }
    return s;
  }

  /** Bytes `from .. to` of the input after a header, read by V8 itself. */
  byV8(from, to, suffix) {
    const head = Buffer.from([0xff, this.version]);
    const parts = [head, this.b.subarray(from, to)];
    if (suffix) parts.push(suffix);
    const d = new v8.Deserializer(Buffer.concat(parts));
    d.readHeader();
    return d.readValue();
  }

  /**
   * Defines property `key` of `o` (its `ordinal`-th) as V8's deserializer does. Past the
   * first few, an assignment with a computed key would turn the object into a dictionary
   * (V8 allows 12 out-of-object properties to keyed stores, 128 to named definitions):
   * those are defined, keeping the object's shape as V8's deserializer makes it.
   */
  define(o, key, value, isArray, ordinal) {
    if (typeof key === 'string') {
      if (isArray && key === 'length') fail('array length as a property');
      if (ordinal >= FAST_ASSIGNMENTS || (this.onlyProto ? key === '__proto__' : this.guarded.has(key))) {
        DESCRIPTOR.value = value;
        defineProperty(o, key, DESCRIPTOR);
        DESCRIPTOR.value = undefined;
        return;
      }
    } else if (this.guardIndices) {
      DESCRIPTOR.value = value;
      defineProperty(o, key, DESCRIPTOR);
      DESCRIPTOR.value = undefined;
      return;
    }
    o[key] = value;
  }

  /** After an ArrayBuffer (read or referenced): the view on it that may follow. */
  maybeView(buffer) {
    if (this.peek() !== T.view) return buffer;
    this.at++;
    const sub = this.varint();
    const offset = this.varint();
    const length = this.varint();
    const flags = this.version >= 14 ? this.varint() : 0;
    const id = this.ids.length;
    this.ids.push(PENDING);
    const C = VIEWS.get(sub);
    if (C === undefined) fail('view type');
    const total = buffer.byteLength;
    if (offset > total || length > total - offset) fail('view bounds');
    const tracking = (flags & 1) !== 0;
    const rab = (flags & 2) !== 0;
    const resizable = buffer.resizable === true;
    if ((tracking || rab) && !resizable) fail('view flags');
    if (resizable && !rab) fail('view flags');
    let view;
    if (C === DataView) view = tracking ? new DataView(buffer, offset) : new DataView(buffer, offset, length);
    else {
      const size = C.BYTES_PER_ELEMENT;
      if (offset % size !== 0 || length % size !== 0) fail('view alignment');
      view = tracking ? new C(buffer, offset) : new C(buffer, offset, length / size);
    }
    this.ids[id] = view;
    return view;
  }

  /**
   * Reads until done (true) or until `deadline` (ms, performance.now()) passes (false).
   * Throws DecodeError (or V8's own error) for bytes it cannot read.
   */
  run(deadline) {
    const b = this.b;
    const stack = this.stack;
    const ids = this.ids;
    let ops = 0;
    for (;;) {
      if (++ops >= CHECK_EVERY) {
        ops = 0;
        if (performance.now() > deadline) return false;
      }
      let value;
      let have = false;
      const top = stack.length === 0 ? null : stack[stack.length - 1];
      if (top !== null) {
        if (top.kind === DENSE && top.i < top.length) {
          // A hole, or a run of numbers and short strings read without the general path.
          let at = this.at;
          if (b[at] === T.hole) {
            this.at = at + 1;
            top.i++;
            if (top.arr.length < top.i) top.arr.length = top.i;
            continue;
          }
          if (b[at] === T.double && top.i + 1 < top.length) {
            const arr = top.arr;
            let i = top.i;
            const end = Math.min(top.length, i + 256);
            const f = this.f64b;
            const f64 = this.f64;
            const grows = arr.length === i;
            while (i < end && b[at] === T.double && at + 9 <= b.length) {
              f[0] = b[at + 1];
              f[1] = b[at + 2];
              f[2] = b[at + 3];
              f[3] = b[at + 4];
              f[4] = b[at + 5];
              f[5] = b[at + 6];
              f[6] = b[at + 7];
              f[7] = b[at + 8];
              if (grows) arr.push(f64[0]);
              else arr[i] = f64[0];
              at += 9;
              i++;
            }
            if (i > top.i) {
              this.at = at;
              ops += i - top.i;
              top.i = i;
              continue;
            }
            // Fewer than 9 bytes left: the general path below reports the truncation.
          }
        } else if (top.atKey) {
          const next = this.peek();
          if (next === top.end) {
            this.at++;
            stack.pop();
            value = this.close(top);
            have = true;
          }
        }
      } else if (this.done) {
        if (this.at !== b.length) fail('bytes after the value');
        return true;
      }
      if (!have) {
        const tag = this.tag();
        switch (tag) {
          case T.verifyCount:
            this.varint();
            continue;
          case T.undefined:
            value = undefined;
            break;
          case T.null:
            value = null;
            break;
          case T.true:
            value = true;
            break;
          case T.false:
            value = false;
            break;
          case T.int32: {
            const zz = this.varint();
            value = (zz >>> 1) ^ -(zz & 1);
            break;
          }
          case T.uint32:
            value = this.varint();
            break;
          case T.double:
            value = this.double();
            if (Number.isNaN(value)) value = NaN;
            break;
          case T.oneByte:
          case T.twoByte:
          case T.utf8:
            if (top !== null && top.atKey && (top.kind === OBJECT || top.i >= top.length)) value = this.keyOf(tag, top.n);
            else value = this.stringOf(tag);
            break;
          case T.ref: {
            const id = this.varint();
            value = id < ids.length ? ids[id] : PENDING;
            if (value === PENDING) fail('reference');
            if (types.isArrayBuffer(value)) value = this.maybeView(value);
            break;
          }
          case T.object: {
            const o = {};
            ids.push(o);
            stack.push({ kind: OBJECT, end: T.endObject, o, n: 0, atKey: true, key: undefined, arr: null, i: 0, length: 0 });
            continue;
          }
          case T.dense: {
            const length = this.varint();
            if (length > b.length - this.at) fail('dense array length');
            // V8's deserializer makes it at its length (holey) too.
            const arr = length <= PREALLOCATE_MAX ? new Array(length) : [];
            ids.push(arr);
            stack.push({ kind: DENSE, end: T.endDense, o: arr, n: 0, atKey: true, key: undefined, arr, i: 0, length });
            continue;
          }
          case T.sparse: {
            const length = this.varint();
            const arr = [];
            arr.length = length;
            ids.push(arr);
            stack.push({ kind: SPARSE, end: T.endSparse, o: arr, n: 0, atKey: true, key: undefined, arr, i: 0, length });
            continue;
          }
          case T.map: {
            const m = new Map();
            ids.push(m);
            stack.push({ kind: MAP, end: T.endMap, o: m, n: 0, atKey: true, key: undefined, arr: null, i: 0, length: 0 });
            continue;
          }
          case T.set: {
            const s = new Set();
            ids.push(s);
            stack.push({ kind: SET, end: T.endSet, o: s, n: 0, atKey: true, key: undefined, arr: null, i: 0, length: 0 });
            continue;
          }
          case T.date:
            value = new Date(this.double());
            ids.push(value);
            break;
          case T.trueObject:
          case T.falseObject:
            value = Object(tag === T.trueObject);
            ids.push(value);
            break;
          case T.numberObject: {
            const id = ids.length;
            ids.push(PENDING);
            value = Object(this.double());
            ids[id] = value;
            break;
          }
          case T.stringObject: {
            const id = ids.length;
            ids.push(PENDING);
            const t = this.tag();
            if (t !== T.oneByte && t !== T.twoByte && t !== T.utf8) fail('string object');
            value = Object(this.stringOf(t));
            ids[id] = value;
            break;
          }
          case T.bigint:
          case T.bigintObject:
          case T.regexp: {
            // Built by V8 from their own bytes (flags and digits are V8's to read).
            const from = this.at - 1;
            const id = tag === T.bigint ? -1 : ids.length;
            if (id >= 0) ids.push(PENDING);
            if (tag === T.regexp) {
              const t = this.tag();
              if (t !== T.oneByte && t !== T.twoByte && t !== T.utf8) fail('regexp source');
              this.bytesOf(this.varint());
              this.varint();
            } else {
              const bits = this.varint();
              this.bytesOf((bits >>> 1) & 0x3fffffff);
            }
            value = this.byV8(from, this.at);
            if (id >= 0) ids[id] = value;
            break;
          }
          case T.arrayBuffer:
          case T.resizableArrayBuffer: {
            const id = ids.length;
            ids.push(PENDING);
            const n = this.varint();
            const max = tag === T.resizableArrayBuffer ? this.varint() : n;
            if (n > max) fail('resizable array buffer');
            const start = this.bytesOf(n);
            const buffer = tag === T.resizableArrayBuffer ? new ArrayBuffer(n, { maxByteLength: max }) : new ArrayBuffer(n);
            if (n > 0) new Uint8Array(buffer).set(b.subarray(start, start + n));
            ids[id] = buffer;
            value = this.maybeView(buffer);
            break;
          }
          case T.error: {
            const id = ids.length;
            ids.push(PENDING);
            const frame = { kind: ERROR, end: -1, o: null, n: 0, atKey: false, key: undefined, arr: null, i: 0, length: 0, id, parts: [], cause: undefined, hasCause: false };
            if (this.errorParts(frame)) {
              stack.push(frame);
              continue;
            }
            value = this.close(frame);
            break;
          }
          default:
            fail(`tag ${tag}`);
        }
      }
      // Hand the value to the container it belongs to; a container it completes is
      // handed on in turn.
      for (;;) {
        const into = stack.length === 0 ? null : stack[stack.length - 1];
        if (into === null) {
          this.value = value;
          this.done = true;
          break;
        }
        const kind = into.kind;
        if (kind === DENSE && into.i < into.length) {
          const arr = into.arr;
          if (arr.length === into.i) arr.push(value);
          else arr[into.i] = value;
          into.i++;
        } else if (kind === SET) {
          setAdd.call(into.o, value);
          into.n++;
        } else if (kind === ERROR) {
          into.cause = value;
          into.hasCause = true;
          if (this.errorParts(into)) fail('error with two causes');
          stack.pop();
          value = this.close(into);
          continue;
        } else if (into.atKey) {
          if (kind !== MAP && typeof value !== 'string' && typeof value !== 'number') fail('property key');
          into.key = value;
          into.atKey = false;
        } else {
          if (kind === MAP) mapSet.call(into.o, into.key, value);
          else this.define(into.o, into.key, value, kind !== OBJECT, into.n);
          into.n += kind === MAP ? 2 : 1;
          into.atKey = true;
        }
        break;
      }
    }
  }

  /**
   * Reads an Error's parts up to its end (false) or its cause (true: the cause is the
   * next value). The parts other than the cause are kept, for V8 to build the error from.
   */
  errorParts(frame) {
    for (;;) {
      const start = this.at;
      const sub = this.varint();
      if (sub > 0x7f) fail('error part');
      if (ERROR_PROTOTYPES.has(sub)) {
        frame.parts.push(this.b.subarray(start, this.at));
      } else if (sub === ERROR_MESSAGE || sub === ERROR_STACK) {
        const t = this.tag();
        if (t !== T.oneByte && t !== T.twoByte && t !== T.utf8) fail('error string');
        this.bytesOf(this.varint());
        frame.parts.push(this.b.subarray(start, this.at));
      } else if (sub === ERROR_CAUSE) {
        if (frame.hasCause) fail('error with two causes');
        // A placeholder where the cause goes, so V8 installs it in its place.
        frame.parts.push(Buffer.from([ERROR_CAUSE, T.undefined]));
        return true;
      } else if (sub === ERROR_END) {
        return false;
      } else {
        fail('error part');
      }
    }
  }

  /** The value a complete frame stands for; checks its trailer. */
  close(frame) {
    switch (frame.kind) {
      case OBJECT:
        if (this.varint() !== frame.n) fail('object property count');
        return frame.o;
      case DENSE:
      case SPARSE: {
        if (this.varint() !== frame.n) fail('array property count');
        if (this.varint() !== frame.length) fail('array length');
        return frame.o;
      }
      case MAP:
        if (!frame.atKey || this.varint() !== frame.n) fail('map length');
        return frame.o;
      case SET:
        if (this.varint() !== frame.n) fail('set length');
        return frame.o;
      case ERROR: {
        const head = Buffer.from([0xff, this.version, T.error]);
        const d = new v8.Deserializer(Buffer.concat([head, ...frame.parts, Buffer.from([ERROR_END])]));
        d.readHeader();
        const err = d.readValue();
        if (frame.hasCause) err.cause = frame.cause;
        this.ids[frame.id] = err;
        return err;
      }
      default:
        return fail('frame');
    }
  }
}


// ---------------------------------------------------------------- writer

/** Thrown by the writer for a value it leaves to v8.Serializer (whole). */
const FALLBACK = Symbol('v8.Serializer');

const typedArrayTag = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Uint8Array.prototype), Symbol.toStringTag).get;
const typedArrayBuffer = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Uint8Array.prototype), 'buffer').get;
const typedArrayOffset = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Uint8Array.prototype), 'byteOffset').get;
const typedArrayLength = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Uint8Array.prototype), 'byteLength').get;
const dataViewBuffer = Object.getOwnPropertyDescriptor(DataView.prototype, 'buffer').get;
const dataViewOffset = Object.getOwnPropertyDescriptor(DataView.prototype, 'byteOffset').get;
const dataViewLength = Object.getOwnPropertyDescriptor(DataView.prototype, 'byteLength').get;
const arrayBufferLength = Object.getOwnPropertyDescriptor(ArrayBuffer.prototype, 'byteLength').get;
const arrayBufferResizable = Object.getOwnPropertyDescriptor(ArrayBuffer.prototype, 'resizable')?.get;
const arrayBufferDetached = Object.getOwnPropertyDescriptor(ArrayBuffer.prototype, 'detached')?.get;
const dateGetTime = Date.prototype.getTime;
const mapForEach = Map.prototype.forEach;
const setForEach = Set.prototype.forEach;
const objectKeys = Object.keys;
const getPrototypeOf = Object.getPrototypeOf;
const isArray = Array.isArray;
const NOT_LATIN1 = /[^\x00-\xff]/;
const INDEX = /^(?:0|[1-9]\d{0,9})$/;
const VIEW_SUBTAGS = new Map([...VIEWS].filter(([, C]) => C !== DataView).map(([tag, C]) => [C.name, tag]));

// Writer frames.
const W_OBJECT = 1;
const W_ARRAY = 2;
const W_LIST = 3; // a Map's or Set's entries, snapshot when it starts

const NO_KEYS = Object.freeze([]);
/** Strings written by the array loop (a one-byte length fits one varint byte). */
const FAST_STRING_MAX = 64;
/** Arrays longer than this have their named properties read by the addon (see namedKeysOf). */
const KEYS_BY_JS_MAX = 1024;
/** A dense walk of an array past this many holes (and more holes than elements) goes to V8. */
const HOLES_MAX = 1 << 16;

/**
 * Writes a host value in V8's format, a slice at a time. Plain data only: anything else
 * throws FALLBACK before or while it is met, and the caller serializes the whole value
 * with v8.Serializer instead. Past `maxBytes`, bytes are counted and no longer kept.
 * Resizable ArrayBuffers are written as fixed-length ones (their current bytes).
 */
class Writer {
  constructor(value, maxBytes, namedKeys) {
    this.max = maxBytes;
    this.buf = Buffer.allocUnsafe(Math.min(64 * 1024, Math.max(16, maxBytes)));
    this.at = 0;
    this.length = 0; // bytes written or counted
    this.over = false;
    this.ids = new Map();
    this.stack = [];
    this.namedKeys = namedKeys;
    this.byte(0xff);
    this.byte(VERSION);
    this.root = value;
    this.started = false;
    this.dv = null;
  }

  reserve(n) {
    if (this.over) return false;
    if (this.length + n > this.max) {
      this.over = true;
      this.buf = null;
      return false;
    }
    return this.room(n);
  }

  /**
   * Makes room for up to `n` more bytes without passing `maxBytes` (false: it would; the
   * caller then writes them one by one, and the first past the limit switches to counting).
   */
  room(n) {
    if (this.over || this.length + n > this.max) return false;
    if (this.at + n > this.buf.length) {
      const grown = Buffer.allocUnsafe(Math.min(this.max, Math.max(this.at + n, 2 * this.buf.length)));
      grown.set(this.buf.subarray(0, this.at));
      this.buf = grown;
    }
    return true;
  }

  byte(v) {
    if (this.reserve(1)) this.buf[this.at++] = v;
    this.length += 1;
  }

  varint(v) {
    let n = 1;
    for (let x = v; x >= 0x80; x = Math.floor(x / 128)) n++;
    if (this.reserve(n)) {
      const buf = this.buf;
      while (v >= 0x80) {
        buf[this.at++] = (v & 0x7f) | 0x80;
        v = Math.floor(v / 128);
      }
      buf[this.at++] = v;
    }
    this.length += n;
  }

  double(v) {
    if (this.reserve(8)) {
      this.dataView().setFloat64(this.at, v, true);
      this.at += 8;
    }
    this.length += 8;
  }

  raw(bytes) {
    const n = bytes.length;
    if (this.reserve(n)) {
      this.buf.set(bytes, this.at);
      this.at += n;
    }
    this.length += n;
  }

  string(s) {
    const n = s.length;
    // Short one-byte strings (keys, most values): written here, no call into Buffer.
    if (n <= FAST_STRING_MAX && this.room(n + 2)) {
      const buf = this.buf;
      const at = this.at;
      let k = 0;
      for (; k < n; k++) {
        const c = s.charCodeAt(k);
        if (c > 0xff) break;
        buf[at + 2 + k] = c;
      }
      if (k === n) {
        buf[at] = T.oneByte;
        buf[at + 1] = n;
        this.at = at + 2 + n;
        this.length += 2 + n;
        return;
      }
    }
    let oneByte = true;
    if (n <= 64) {
      for (let i = 0; i < n; i++) {
        if (s.charCodeAt(i) > 0xff) {
          oneByte = false;
          break;
        }
      }
    } else {
      oneByte = !NOT_LATIN1.test(s);
    }
    if (oneByte) {
      this.byte(T.oneByte);
      this.varint(n);
      if (this.reserve(n)) this.at += this.buf.latin1Write(s, this.at, n);
      this.length += n;
      return;
    }
    // As V8: two-byte characters start at an even offset (a padding byte before the tag).
    const bytes = 2 * n;
    let head = 1;
    for (let x = bytes; x >= 0x80; x = Math.floor(x / 128)) head++;
    if ((this.length + 1 + head) % 2 === 1) this.byte(T.padding);
    this.byte(T.twoByte);
    this.varint(bytes);
    if (this.reserve(bytes)) this.at += this.buf.ucs2Write(s, this.at, bytes);
    this.length += bytes;
  }

  number(v) {
    if ((v | 0) === v && (v !== 0 || 1 / v > 0)) {
      this.byte(T.int32);
      this.varint(((v << 1) ^ (v >> 31)) >>> 0);
    } else {
      this.byte(T.double);
      this.double(v);
    }
  }

  bigint(v) {
    // Bit 0 the sign, then the digits' byte length; digits as 64-bit words, low first.
    const negative = v < 0n;
    let hex = (negative ? -v : v).toString(16);
    if (hex === '0') hex = '';
    const words = Math.ceil(hex.length / 16);
    hex = hex.padStart(words * 16, '0');
    this.byte(T.bigint);
    this.varint((words * 8 * 2) | (negative ? 1 : 0));
    const bytes = Buffer.alloc(words * 8);
    for (let i = 0; i < words * 8; i++) {
      const at = hex.length - 2 * (i + 1);
      bytes[i] = parseInt(hex.slice(at, at + 2), 16);
    }
    this.raw(bytes);
  }

  /** Writes `v`; a container opens a frame that run() fills. */
  value(v) {
    switch (typeof v) {
      case 'undefined':
        this.byte(T.undefined);
        return;
      case 'boolean':
        this.byte(v ? T.true : T.false);
        return;
      case 'number':
        this.number(v);
        return;
      case 'string':
        this.string(v);
        return;
      case 'bigint':
        this.bigint(v);
        return;
      case 'object':
        if (v === null) {
          this.byte(T.null);
          return;
        }
        this.object(v);
        return;
      default:
        // Functions and symbols: V8 throws DataCloneError, with its own message.
        throw FALLBACK;
    }
  }

  reference(v) {
    const id = this.ids.get(v);
    if (id === undefined) return false;
    this.byte(T.ref);
    this.varint(id);
    return true;
  }

  id(v) {
    this.ids.set(v, this.ids.size);
  }

  object(v) {
    if (this.reference(v)) return;
    if (types.isProxy(v)) throw FALLBACK;
    const proto = getPrototypeOf(v);
    if (isArray(v)) {
      if (proto !== Array.prototype) throw FALLBACK;
      this.id(v);
      const length = v.length;
      this.byte(T.dense);
      this.varint(length);
      this.stack.push({ kind: W_ARRAY, o: v, keys: null, i: 0, length, written: 0, holes: 0 });
      return;
    }
    if (proto === Object.prototype || proto === null) {
      if (types.isArgumentsObject(v) || types.isModuleNamespaceObject(v) || types.isExternal(v)) throw FALLBACK;
      this.id(v);
      this.byte(T.object);
      this.stack.push({ kind: W_OBJECT, o: v, keys: objectKeys(v), i: 0, length: 0, written: 0, holes: 0 });
      return;
    }
    if (types.isMap(v) || types.isSet(v)) {
      this.id(v);
      const flat = [];
      if (types.isMap(v)) {
        mapForEach.call(v, (value, key) => {
          flat.push(key, value);
        });
      } else {
        setForEach.call(v, (value) => {
          flat.push(value);
        });
      }
      this.byte(types.isMap(v) ? T.map : T.set);
      this.stack.push({ kind: W_LIST, o: v, keys: flat, i: 0, length: flat.length, written: types.isMap(v) ? T.endMap : T.endSet, holes: 0 });
      return;
    }
    if (types.isDate(v)) {
      this.id(v);
      this.byte(T.date);
      this.double(dateGetTime.call(v));
      return;
    }
    if (types.isArrayBuffer(v)) {
      this.arrayBuffer(v);
      return;
    }
    if (ArrayBuffer.isView(v)) {
      this.view(v);
      return;
    }
    // Boxed primitives, RegExps, Errors, SharedArrayBuffers, class instances, host objects.
    throw FALLBACK;
  }

  arrayBuffer(ab) {
    if (this.reference(ab)) return;
    const n = arrayBufferLength.call(ab);
    if (arrayBufferDetached !== undefined ? arrayBufferDetached.call(ab) : n === 0 && detached(ab)) throw FALLBACK;
    this.id(ab);
    // A resizable buffer goes in as a fixed-length one of its current length.
    this.byte(T.arrayBuffer);
    this.varint(n);
    this.raw(new Uint8Array(ab, 0, n));
  }

  view(v) {
    let tag;
    let buffer;
    let offset;
    let length;
    const name = typedArrayTag.call(v);
    if (name !== undefined) {
      tag = VIEW_SUBTAGS.get(name);
      buffer = typedArrayBuffer.call(v);
      offset = typedArrayOffset.call(v);
      length = typedArrayLength.call(v);
    } else {
      tag = '?'.charCodeAt(0);
      buffer = dataViewBuffer.call(v);
      offset = dataViewOffset.call(v);
      length = dataViewLength.call(v);
    }
    if (tag === undefined || !types.isArrayBuffer(buffer)) throw FALLBACK;
    // Out of bounds of a shrunk resizable buffer: V8 refuses it, with its message.
    const resizable = arrayBufferResizable !== undefined && arrayBufferResizable.call(buffer);
    if (resizable && offset + length > arrayBufferLength.call(buffer)) throw FALLBACK;
    this.arrayBuffer(buffer);
    this.id(v);
    this.byte(T.view);
    this.varint(tag);
    this.varint(offset);
    this.varint(length);
    if (VERSION >= 14) this.varint(0); // fixed length, on a fixed-length buffer
  }

  /**
   * The elements of array frame `f` from `f.i` on that are numbers or short one-byte
   * strings, written in one loop (at most a few hundred): true if it wrote any.
   */
  numbersAndShortStrings(f) {
    const a = f.o;
    const end = Math.min(f.length, f.i + 256);
    // At most 11 bytes per element here: a tag and 8 bytes or a varint, or a short string.
    if (!this.room((end - f.i) * (FAST_STRING_MAX + 2))) return false;
    const buf = this.buf;
    const dv = this.dataView();
    let at = this.at;
    let i = f.i;
    for (; i < end; i++) {
      const v = a[i];
      if (typeof v === 'number') {
        if ((v | 0) === v && (v !== 0 || 1 / v > 0)) {
          buf[at++] = T.int32;
          let zz = ((v << 1) ^ (v >> 31)) >>> 0;
          while (zz >= 0x80) {
            buf[at++] = (zz & 0x7f) | 0x80;
            zz >>>= 7;
          }
          buf[at++] = zz;
        } else {
          buf[at] = T.double;
          dv.setFloat64(at + 1, v, true);
          at += 9;
        }
      } else if (typeof v === 'string' && v.length <= FAST_STRING_MAX) {
        const n = v.length;
        let k = 0;
        for (; k < n; k++) {
          const c = v.charCodeAt(k);
          if (c > 0xff) break;
          buf[at + 2 + k] = c;
        }
        if (k < n) break;
        buf[at] = T.oneByte;
        buf[at + 1] = n;
        at += 2 + n;
      } else {
        break;
      }
    }
    const wrote = i - f.i;
    this.length += at - this.at;
    this.at = at;
    f.i = i;
    return wrote > 0;
  }

  /** A DataView over the current buffer. */
  dataView() {
    if (this.dv === null || this.dv.buffer !== this.buf.buffer) this.dv = new DataView(this.buf.buffer, this.buf.byteOffset, this.buf.length);
    return this.dv;
  }

  /** Named (non-index) own enumerable keys of array `a`. */
  namedKeysOf(a, length) {
    if (length > KEYS_BY_JS_MAX && this.namedKeys !== null) return this.namedKeys(a);
    const keys = objectKeys(a);
    // Indices come first, names after: an array whose keys end at its last index has none.
    if (keys.length === length && (length === 0 || keys[length - 1] === String(length - 1))) return NO_KEYS;
    const out = [];
    for (const key of keys) if (!INDEX.test(key) || Number(key) >= 4294967295) out.push(key);
    return out;
  }

  /** Writes until done (true) or `deadline` passes (false). */
  run(deadline) {
    if (!this.started) {
      this.started = true;
      this.value(this.root);
      this.root = undefined;
    }
    const stack = this.stack;
    let ops = 0;
    while (stack.length > 0) {
      if (++ops >= CHECK_EVERY) {
        ops = 0;
        if (performance.now() > deadline) return false;
      }
      const f = stack[stack.length - 1];
      if (f.kind === W_ARRAY) {
        const a = f.o;
        if (f.i < f.length && !this.over) {
          const from = f.i;
          if (this.numbersAndShortStrings(f)) {
            ops += f.i - from;
            continue;
          }
        }
        if (f.i < f.length) {
          const i = f.i++;
          const v = a[i];
          if (v === undefined && !hasOwn.call(a, i)) {
            this.byte(T.hole);
            // A sparse array (a length far past its elements) is V8's to write sparse.
            if (++f.holes > HOLES_MAX && f.holes > i - f.holes) throw FALLBACK;
          } else {
            this.value(v);
          }
          continue;
        }
        if (f.keys === null) f.keys = this.namedKeysOf(a, f.length);
        if (f.written < f.keys.length) {
          const key = f.keys[f.written++];
          this.string(key);
          this.value(a[key]);
          continue;
        }
        stack.pop();
        this.byte(T.endDense);
        this.varint(f.keys.length);
        this.varint(f.length);
        continue;
      }
      if (f.kind === W_OBJECT) {
        if (f.i < f.keys.length) {
          const key = f.keys[f.i++];
          this.string(key);
          this.value(f.o[key]);
          continue;
        }
        stack.pop();
        this.byte(T.endObject);
        this.varint(f.keys.length);
        continue;
      }
      // A Map's or Set's entries.
      if (f.i < f.length) {
        this.value(f.keys[f.i++]);
        continue;
      }
      stack.pop();
      this.byte(f.written);
      this.varint(f.length);
    }
    return true;
  }

  /** The bytes written (a Buffer), or null when they passed `maxBytes`; see `length`. */
  bytes() {
    return this.over ? null : this.buf.subarray(0, this.at);
  }
}

function detached(ab) {
  try {
    new Uint8Array(ab);
    return false;
  } catch {
    return true;
  }
}


// ---------------------------------------------------------------- arrays in chunks

/**
 * A dense array at the top of the bytes (a run's `return rows.map(...)`) whose elements
 * hold no reference to another object (no `^` tag: nothing read before is shared): each
 * element is then whole in its own bytes, so runs of them are built by V8's own
 * deserializer, a few hundred at a time, at its speed; an element too long for one step is
 * read by a Reader of its own, a slice at a time. What does not fit that shape (a
 * reference, a property or hole on the array, an Error) makes `run` throw NOT_CHUNKED
 * before anything is returned: the caller reads the bytes with a Reader instead.
 */
class ChunkedArrayReader {
  constructor(bytes) {
    this.b = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const b = this.b;
    if (b.length < 4 || b[0] !== 0xff) throw NOT_CHUNKED;
    this.version = b[1];
    if (this.version < 13 || this.version > VERSION || (b[1] & 0x80) !== 0) throw NOT_CHUNKED;
    let at = 2;
    while (at < b.length && b[at] === T.padding) at++;
    if (b[at] !== T.dense) throw NOT_CHUNKED;
    this.at = at + 1;
    this.length = this.varint();
    if (this.length > b.length - this.at) throw NOT_CHUNKED;
    this.out = this.length <= PREALLOCATE_MAX ? new Array(this.length) : [];
    this.i = 0;
    this.inner = null; // a Reader for one long element
    this.seen = new Array(SHARED_SLOTS).fill(undefined); // short strings already built, see shared()
    this.value = undefined;
    // The skip's stack: end tags and dense counts of the containers open.
    this.ends = new Uint8Array(SKIP_DEPTH);
    this.left = new Float64Array(SKIP_DEPTH);
  }

  varint() {
    const b = this.b;
    let r = 0;
    let shift = 0;
    for (;;) {
      if (this.at >= b.length) throw NOT_CHUNKED;
      const x = b[this.at++];
      if (shift < 28) r |= (x & 0x7f) << shift;
      else r += (x & 0x7f) * 2 ** shift;
      shift += 7;
      if ((x & 0x80) === 0) return r;
      if (shift > 35) throw NOT_CHUNKED;
    }
  }

  /** The end of the element at `this.at` (moved there); throws NOT_CHUNKED for a reference or a tag left to the Reader. */
  skip() {
    const b = this.b;
    const ends = this.ends;
    const left = this.left;
    let depth = 0;
    for (;;) {
      while (this.at < b.length && b[this.at] === T.padding) this.at++;
      if (this.at >= b.length) throw NOT_CHUNKED;
      const t = b[this.at];
      if (depth > 0) {
        const f = depth - 1;
        if (left[f] === 0 && t === ends[f]) {
          this.at++;
          this.varint();
          if (ends[f] !== T.endObject && ends[f] !== T.endMap && ends[f] !== T.endSet) this.varint();
          depth--;
          if (depth === 0) return;
          if (left[depth - 1] > 0) left[depth - 1]--;
          continue;
        }
        if (left[f] > 0 && t === T.hole) {
          this.at++;
          left[f]--;
          continue;
        }
      }
      this.at++;
      let opened = false;
      switch (t) {
        case T.undefined:
        case T.null:
        case T.true:
        case T.false:
        case T.trueObject:
        case T.falseObject:
          break;
        case T.int32:
        case T.uint32:
          this.varint();
          break;
        case T.double:
        case T.date:
        case T.numberObject:
          this.at += 8;
          break;
        case T.oneByte:
        case T.twoByte:
        case T.utf8:
          { const n = this.varint(); this.at += n; }
          break;
        case T.stringObject: {
          while (this.at < b.length && b[this.at] === T.padding) this.at++;
          const st = b[this.at++];
          if (st !== T.oneByte && st !== T.twoByte && st !== T.utf8) throw NOT_CHUNKED;
          { const n = this.varint(); this.at += n; }
          break;
        }
        case T.bigint:
        case T.bigintObject:
          { const bits = this.varint(); this.at += (bits >>> 1) & 0x3fffffff; }
          break;
        case T.regexp: {
          while (this.at < b.length && b[this.at] === T.padding) this.at++;
          const st = b[this.at++];
          if (st !== T.oneByte && st !== T.twoByte && st !== T.utf8) throw NOT_CHUNKED;
          { const n = this.varint(); this.at += n; }
          this.varint();
          break;
        }
        case T.arrayBuffer:
        case T.resizableArrayBuffer: {
          const n = this.varint();
          if (t === T.resizableArrayBuffer) this.varint();
          this.at += n;
          while (this.at < b.length && b[this.at] === T.padding) this.at++;
          if (b[this.at] === T.view) {
            this.at += 2;
            this.varint();
            this.varint();
            if (this.version >= 14) this.varint();
          }
          break;
        }
        case T.object:
        case T.map:
        case T.set:
          ends[depth] = t === T.object ? T.endObject : t === T.map ? T.endMap : T.endSet;
          left[depth] = 0;
          opened = true;
          break;
        case T.sparse:
          this.varint();
          ends[depth] = T.endSparse;
          left[depth] = 0;
          opened = true;
          break;
        case T.dense:
          left[depth] = this.varint();
          ends[depth] = T.endDense;
          opened = true;
          break;
        default:
          // References, Errors, anything else: the Reader's.
          throw NOT_CHUNKED;
      }
      if (this.at > b.length) throw NOT_CHUNKED;
      if (opened) {
        if (++depth >= SKIP_DEPTH) throw NOT_CHUNKED;
        continue;
      }
      if (depth === 0) return;
      if (left[depth - 1] > 0) left[depth - 1]--;
    }
  }

  /** Builds elements until done (true) or `deadline` passes (false); see the class. */
  run(deadline) {
    const b = this.b;
    const head = Buffer.from([0xff, this.version, T.dense]);
    while (this.i < this.length) {
      if (this.inner !== null) {
        if (!this.inner.run(deadline)) return false;
        this.put(this.inner.value);
        this.inner = null;
        continue;
      }
      if (performance.now() > deadline) return false;
      const start = this.at;
      let n = 0;
      while (this.i + n < this.length && this.at - start < CHUNK_BYTES) {
        const from = this.at;
        this.skip();
        if (this.at - from > CHUNK_BYTES) {
          // One long element: on its own, a slice at a time (it shares nothing).
          if (n === 0) {
            this.inner = new Reader(Buffer.concat([head.subarray(0, 2), b.subarray(from, this.at)]));
          } else {
            this.at = from;
          }
          break;
        }
        n++;
      }
      if (this.inner !== null) continue;
      const d = new v8.Deserializer(Buffer.concat([head, varintBytes(n), b.subarray(start, this.at), Buffer.from([T.endDense, 0]), varintBytes(n)]));
      d.readHeader();
      const part = d.readValue();
      for (let k = 0; k < part.length; k++) this.put(this.shared(part[k]));
    }
    while (this.at < b.length && b[this.at] === T.padding) this.at++;
    if (b[this.at++] !== T.endDense || this.varint() !== 0 || this.varint() !== this.length || this.at !== b.length) throw NOT_CHUNKED;
    this.value = this.out;
    return true;
  }

  /**
   * One string object per repeated short string of the array: the copies the deserializer
   * made die young, so a column of repeated values costs the parent's heap a pointer per
   * element, not a string that every collection copies and marks (issue 38). A direct-mapped
   * cache of SHARED_SLOTS strings: a constant cost per element, no Map (whose misses cost
   * ~0.5 µs each on V8 14), nothing kept past the array.
   */
  shared(v) {
    if (typeof v !== 'string' || v.length > SHARED_LENGTH_MAX) return v;
    let h = v.length;
    for (let k = 0; k < v.length; k++) h = Math.imul(h ^ v.charCodeAt(k), 0x01000193);
    const slot = (h ^ (h >>> 15)) & (SHARED_SLOTS - 1);
    const seen = this.seen[slot];
    if (seen === v) return seen;
    this.seen[slot] = v;
    return v;
  }

  put(v) {
    if (this.out.length === this.i) this.out.push(v);
    else this.out[this.i] = v;
    this.i++;
  }
}

const NOT_CHUNKED = Symbol('not chunked');
/** Bytes of elements V8 builds in one step (~1 ms). */
const CHUNK_BYTES = 32 * 1024;
/** Strings up to this many characters are shared between elements; longer ones rarely repeat. */
const SHARED_LENGTH_MAX = 32;
/** Slots of the shared-string cache (a power of two; 32 KB of pointers). */
const SHARED_SLOTS = 4096;
/** Deepest nesting the skip follows (deeper: the Reader's). */
const SKIP_DEPTH = 512;

function varintBytes(v) {
  const out = [];
  while (v >= 0x80) {
    out.push((v & 0x7f) | 0x80);
    v = Math.floor(v / 128);
  }
  out.push(v);
  return Buffer.from(out);
}

module.exports = { Reader, ChunkedArrayReader, NOT_CHUNKED, Writer, FALLBACK, DecodeError, SLICE_MS, T, VERSION, HEADER, LITTLE_ENDIAN };
