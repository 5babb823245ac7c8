// 10_inspect.js: what the console prints for a value, as Node's util.inspect prints it
// (depth 2, 100 entries of an array, map or set, strings cut at 10000 characters, lines
// broken at 80 columns, circular references as [Circular *1]), and util.format's %s %d %i
// %f %j %o %O %c. Written for the sandbox: no native introspection, so a Proxy is
// inspected through its traps and a Promise's state is not known. Work is bounded by the
// room the run's log has left: past it, nothing more is formatted (`limit`).
// (A function body: `src/web/mod.rs` wraps it as `(function (lib) { ... })` with `op`,
// `clone`, `load`, `OP`, `SCRIPT` and `LIMITS` in scope.)
const call = Function.prototype.call;
const uncurry = (fn) => call.bind(fn);
const { getOwnPropertyDescriptor, getOwnPropertyNames, getOwnPropertySymbols, getPrototypeOf, keys: objectKeys, is } = Object;
const hasOwn = uncurry(Object.prototype.hasOwnProperty);
const isEnumerable = uncurry(Object.prototype.propertyIsEnumerable);
const objectToString = uncurry(Object.prototype.toString);
const functionToString = uncurry(Function.prototype.toString);
const symbolToString = uncurry(Symbol.prototype.toString);
const errorToString = uncurry(Error.prototype.toString);
const regExpToString = uncurry(RegExp.prototype.toString);
const dateGetTime = uncurry(Date.prototype.getTime);
const dateToISOString = uncurry(Date.prototype.toISOString);
const dateToString = uncurry(Date.prototype.toString);
const getter = (proto, key) => uncurry(getOwnPropertyDescriptor(proto, key).get);
const mapSize = getter(Map.prototype, 'size');
const setSize = getter(Set.prototype, 'size');
const mapEntries = uncurry(Map.prototype.entries);
const setValues = uncurry(Set.prototype.values);
const regExpSource = getter(RegExp.prototype, 'source');
const typedArrayTag = getter(getPrototypeOf(Uint8Array.prototype), Symbol.toStringTag);
const typedArrayLength = getter(getPrototypeOf(Uint8Array.prototype), 'length');
const arrayBufferByteLength = getter(ArrayBuffer.prototype, 'byteLength');
const sharedByteLength = getter(SharedArrayBuffer.prototype, 'byteLength');
const dataViewByteLength = getter(DataView.prototype, 'byteLength');
const weakMapHas = uncurry(WeakMap.prototype.has);
const weakSetHas = uncurry(WeakSet.prototype.has);
const boxed = [
  ['Number', uncurry(Number.prototype.valueOf)],
  ['String', uncurry(String.prototype.valueOf)],
  ['Boolean', uncurry(Boolean.prototype.valueOf)],
  ['BigInt', uncurry(BigInt.prototype.valueOf)],
  ['Symbol', uncurry(Symbol.prototype.valueOf)],
];
const AsyncFunctionPrototype = getPrototypeOf(async function () {});
const GeneratorFunctionPrototype = getPrototypeOf(function* () {});
const AsyncGeneratorFunctionPrototype = getPrototypeOf(async function* () {});
const ObjectPrototype = Object.prototype;
const FunctionPrototype = Function.prototype;
const ErrorClass = Error;
const RangeErrorClass = RangeError;
const STACK_OVERFLOW = 'Maximum call stack size exceeded';
const customInspect = Symbol.for('nodejs.util.inspect.custom');
/** Global names of the sandbox's built-in classes (`%s` prints their instances with inspect). */
let builtIns;

const brand = (check) => (value) => {
  try {
    check(value);
    return true;
  } catch {
    return false;
  }
};
const isMap = brand(mapSize);
const isSet = brand(setSize);
const isDate = brand(dateGetTime);
const isArrayBuffer = brand(arrayBufferByteLength);
const isSharedArrayBuffer = brand(sharedByteLength);
const isDataView = brand(dataViewByteLength);
const isWeakMap = brand((v) => weakMapHas(v, ObjectPrototype));
const isWeakSet = brand((v) => weakSetHas(v, ObjectPrototype));
const isRegExp = (v) => v !== RegExp.prototype && brand(regExpSource)(v);
const isError = (v) => v instanceof ErrorClass || objectToString(v) === '[object Error]';
function boxedType(v) {
  for (const [type, valueOf] of boxed) {
    try {
      return { type, value: valueOf(v) };
    } catch {}
  }
  return undefined;
}

const DEFAULTS = {
  depth: 2,
  maxArrayLength: 100,
  maxStringLength: 10000,
  breakLength: 80,
  compact: 3,
  showHidden: false,
  customInspect: true,
  sorted: false,
  getters: false,
};
const OBJECT = 0, ARRAY = 1, ARRAY_EXTRAS = 2;
const KEY_IDENTIFIER = /^[a-zA-Z_][a-zA-Z_0-9]*$/;
const INDEX = /^(0|[1-9][0-9]*)$/;
const LONE_SURROGATE = '[\\ud800-\\udbff](?![\\udc00-\\udfff])|(?<![\\ud800-\\udbff])[\\udc00-\\udfff]';
const ESCAPE = new RegExp(`[\\x00-\\x1f\\x27\\x5c\\x7f-\\x9f]|${LONE_SURROGATE}`);
const ESCAPE_ALL = new RegExp(ESCAPE.source, 'g');
const ESCAPE_NO_QUOTE = new RegExp(`[\\x00-\\x1f\\x5c\\x7f-\\x9f]|${LONE_SURROGATE}`);
const ESCAPE_NO_QUOTE_ALL = new RegExp(ESCAPE_NO_QUOTE.source, 'g');
const NAMED_ESCAPES = { 8: '\\b', 9: '\\t', 10: '\\n', 12: '\\f', 13: '\\r', 39: "\\'", 92: '\\\\' };

function escapeChar(c) {
  const code = c.charCodeAt(0);
  if (NAMED_ESCAPES[code] !== undefined) return NAMED_ESCAPES[code];
  if (code <= 0x9f) return `\\x${code.toString(16).toUpperCase().padStart(2, '0')}`;
  return `\\u${code.toString(16)}`;
}

/** A string as a quoted literal: single quotes, else double, else backticks (as Node picks). */
function quote(s) {
  let q = "'";
  let test = ESCAPE;
  let all = ESCAPE_ALL;
  if (s.includes("'")) {
    if (!s.includes('"')) q = '"';
    else if (!s.includes('`') && !s.includes('${')) q = '`';
    if (q !== "'") {
      test = ESCAPE_NO_QUOTE;
      all = ESCAPE_NO_QUOTE_ALL;
    }
  }
  if (test.test(s)) s = s.replace(all, escapeChar);
  return `${q}${s}${q}`;
}

function formatNumber(n) {
  return is(n, -0) ? '-0' : `${n}`;
}

/** Columns a string takes in a terminal: wide East Asian characters 2, combining marks 0. */
function width(s) {
  let w = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.codePointAt(i);
    if (c > 0xffff) i++;
    if (c <= 0x1f || (c >= 0x7f && c <= 0x9f)) {
      // control characters take no column
    } else if (c < 0x300) w++;
    else if ((c >= 0x300 && c <= 0x36f) || (c >= 0x200b && c <= 0x200f) || (c >= 0x20d0 && c <= 0x20ff) || (c >= 0xfe00 && c <= 0xfe0f) || (c >= 0xfe20 && c <= 0xfe2f) || (c >= 0xe0100 && c <= 0xe01ef)) {
      // zero width
    } else if (
      c >= 0x1100 &&
      (c <= 0x115f || c === 0x2329 || c === 0x232a || (c >= 0x2e80 && c <= 0x3247 && c !== 0x303f) || (c >= 0x3250 && c <= 0x4dbf) ||
        (c >= 0x4e00 && c <= 0xa4c6) || (c >= 0xa960 && c <= 0xa97c) || (c >= 0xac00 && c <= 0xd7a3) || (c >= 0xf900 && c <= 0xfaff) ||
        (c >= 0xfe10 && c <= 0xfe19) || (c >= 0xfe30 && c <= 0xfe6b) || (c >= 0xff01 && c <= 0xff60) || (c >= 0xffe0 && c <= 0xffe6) ||
        (c >= 0x1b000 && c <= 0x1b001) || (c >= 0x1f200 && c <= 0x1f251) || (c >= 0x1f300 && c <= 0x1f64f) || (c >= 0x20000 && c <= 0x3fffd))
    ) {
      w += 2;
    } else {
      w++;
    }
  }
  return w;
}

function formatPrimitive(ctx, value) {
  switch (typeof value) {
    case 'string': {
      let trailer = '';
      if (value.length > ctx.maxStringLength) {
        const remaining = value.length - ctx.maxStringLength;
        value = value.slice(0, ctx.maxStringLength);
        trailer = `... ${remaining} more character${remaining > 1 ? 's' : ''}`;
      }
      // Long strings are shown one line (of the string's own) per line.
      if (value.length > 16 && value.length > ctx.breakLength - ctx.indentation - 4) {
        return value.split(/(?<=\n)/).map(quote).join(` +\n${' '.repeat(ctx.indentation + 2)}`) + trailer;
      }
      return quote(value) + trailer;
    }
    case 'number':
      return formatNumber(value);
    case 'bigint':
      return `${value}n`;
    case 'boolean':
      return `${value}`;
    case 'undefined':
      return 'undefined';
    default:
      return symbolToString(value);
  }
}

/** The name of the first constructor on `value`'s prototype chain; null for a null-prototype chain. */
function constructorName(ctx, value, depth) {
  let obj = value;
  let firstProto;
  while (obj) {
    const d = getOwnPropertyDescriptor(obj, 'constructor');
    if (d !== undefined && typeof d.value === 'function' && d.value.name !== '' && isInstance(value, d.value)) {
      return `${d.value.name}`;
    }
    obj = getPrototypeOf(obj);
    if (firstProto === undefined) firstProto = obj;
  }
  if (firstProto === null) return null;
  const fallback = typeof value === 'function' ? 'Function' : 'Object';
  if (depth > ctx.depth) return `${fallback} <Complex prototype>`;
  const inner = constructorName(ctx, firstProto, depth + 1);
  if (inner === null) return `${fallback} <${inspect(firstProto, { ...ctx.options, customInspect: false, depth: -1 })}>`;
  return `${fallback} <${inner}>`;
}

function isInstance(value, cls) {
  try {
    return value instanceof cls;
  } catch {
    return false;
  }
}

function prefix(constructor, tag, fallback, size = '') {
  if (constructor === null) {
    if (tag !== '' && fallback !== tag) return `[${fallback}${size}: null prototype] [${tag}] `;
    return `[${fallback}${size}: null prototype] `;
  }
  if (tag !== '' && constructor !== tag) return `${constructor}${size} [${tag}] `;
  return `${constructor}${size} `;
}

function ownKeys(value, showHidden) {
  const symbols = getOwnPropertySymbols(value);
  if (showHidden) return [...getOwnPropertyNames(value), ...symbols];
  let keys;
  try {
    keys = objectKeys(value);
  } catch {
    keys = getOwnPropertyNames(value);
  }
  for (const s of symbols) if (isEnumerable(value, s)) keys.push(s);
  return keys;
}

function nonIndexKeys(value, showHidden) {
  return ownKeys(value, showHidden).filter((k) => typeof k === 'symbol' || !INDEX.test(k) || +k > 2 ** 32 - 2);
}

function functionBase(value, constructor, tag) {
  const source = functionToString(value);
  if (source.startsWith('class') && source.endsWith('}')) {
    const body = source.slice(5, -1);
    const brace = body.indexOf('{');
    if (brace !== -1 && (!body.slice(0, brace).includes('(') || /^(\s+[^(]*?)\s*{/.test(body.replace(/(\/\/.*?\n)|(\/\*(.|\n)*?\*\/)/g, '')))) {
      const name = (hasOwn(value, 'name') && value.name) || '(anonymous)';
      let base = `class ${name}`;
      if (constructor !== 'Function' && constructor !== null) base += ` [${constructor}]`;
      if (tag !== '' && constructor !== tag) base += ` [${tag}]`;
      if (constructor !== null) {
        const superName = getPrototypeOf(value).name;
        if (superName) base += ` extends ${superName}`;
      } else {
        base += ' extends [null prototype]';
      }
      return `[${base}]`;
    }
  }
  const proto = getPrototypeOf(value);
  let type = 'Function';
  if (proto === GeneratorFunctionPrototype || proto === AsyncGeneratorFunctionPrototype) type = `Generator${type}`;
  if (proto === AsyncFunctionPrototype || proto === AsyncGeneratorFunctionPrototype) type = `Async${type}`;
  let base = `[${type}`;
  if (constructor === null) base += ' (null prototype)';
  base += value.name === '' ? ' (anonymous)' : `: ${value.name}`;
  base += ']';
  if (constructor !== type && constructor !== null) base += ` ${constructor}`;
  if (tag !== '' && constructor !== tag) base += ` [${tag}]`;
  return base;
}

function errorBase(ctx, err, constructor, tag, keys) {
  const name = err.name != null ? `${err.name}` : 'Error';
  let stack;
  try {
    stack = err.stack ? `${err.stack}` : errorToString(err);
  } catch {
    stack = errorToString(err);
  }
  if (!ctx.showHidden && keys.length !== 0) {
    for (const key of ['name', 'message', 'stack']) {
      const at = keys.indexOf(key);
      if (at !== -1 && stack.includes(err[key])) keys.splice(at, 1);
    }
  }
  if ('cause' in err && !keys.includes('cause')) keys.push('cause');
  if (Array.isArray(err.errors) && !keys.includes('errors')) keys.push('errors');
  // Name the class in the first line when the error's own name does not.
  let length = name.length;
  if (constructor === null || (name.endsWith('Error') && stack.startsWith(name) && (stack.length === length || stack[length] === ':' || stack[length] === '\n'))) {
    let fallback = 'Error';
    if (constructor === null) {
      const start = /^([A-Z][a-z_ A-Z0-9[\]()-]+)(?::|\n {4}at)/.exec(stack) || /^([a-z_A-Z0-9-]*Error)$/.exec(stack);
      fallback = (start && start[1]) || '';
      length = fallback.length;
      fallback = fallback || 'Error';
    }
    const named = prefix(constructor, tag, fallback).slice(0, -1);
    if (name !== named) {
      if (named.includes(name)) stack = length === 0 ? `${named}: ${stack}` : `${named}${stack.slice(length)}`;
      else stack = `${named} [${name}]${stack.slice(length)}`;
    }
  }
  let at = (err.message && stack.indexOf(err.message)) || -1;
  if (at !== -1) at += err.message.length;
  if (stack.indexOf('\n    at', at) === -1) stack = `[${stack}]`;
  if (ctx.indentation !== 0) stack = stack.replaceAll('\n', `\n${' '.repeat(ctx.indentation)}`);
  return stack;
}

function remaining(n) {
  return `... ${n} more item${n > 1 ? 's' : ''}`;
}

function formatArray(ctx, value, depth) {
  const length = value.length;
  const max = Math.min(Math.max(0, ctx.maxArrayLength), length);
  const output = [];
  for (let i = 0; i < max; i++) {
    if (!hasOwn(value, i)) return formatSparseArray(ctx, value, depth, max, output, i);
    output.push(formatProperty(ctx, value, depth, i, ARRAY));
    if (ctx.spent()) return output;
  }
  if (length > max) output.push(remaining(length - max));
  return output;
}

function formatSparseArray(ctx, value, depth, max, output, i) {
  const keys = objectKeys(value);
  let index = i;
  for (; i < keys.length && output.length < max; i++) {
    const key = keys[i];
    const n = +key;
    if (n > 2 ** 32 - 2) break;
    if (`${index}` !== key) {
      if (!INDEX.test(key)) break;
      const empty = n - index;
      output.push(`<${empty} empty item${empty > 1 ? 's' : ''}>`);
      index = n;
      if (output.length === max) break;
    }
    output.push(formatProperty(ctx, value, depth, key, ARRAY));
    index++;
  }
  const rest = value.length - index;
  if (output.length !== max) {
    if (rest > 0) output.push(`<${rest} empty item${rest > 1 ? 's' : ''}>`);
  } else if (rest > 0) {
    output.push(remaining(rest));
  }
  return output;
}

function formatTypedArray(ctx, value) {
  const length = typedArrayLength(value);
  const max = Math.min(Math.max(0, ctx.maxArrayLength), length);
  const output = [];
  for (let i = 0; i < max; i++) output.push(typeof value[i] === 'bigint' ? `${value[i]}n` : formatNumber(value[i]));
  if (length > max) output.push(remaining(length - max));
  if (ctx.showHidden) {
    ctx.indentation += 2;
    for (const key of ['BYTES_PER_ELEMENT', 'length', 'byteLength', 'byteOffset', 'buffer']) {
      output.push(`[${key}]: ${formatValue(ctx, value[key], 0, true)}`);
    }
    ctx.indentation -= 2;
  }
  return output;
}

function formatArrayBuffer(ctx, value) {
  let bytes;
  try {
    bytes = new Uint8Array(value);
  } catch {
    return ['(detached)'];
  }
  const shown = Math.min(ctx.maxArrayLength, bytes.length);
  let hex = '';
  for (let i = 0; i < shown; i++) hex += `${i === 0 ? '' : ' '}${bytes[i].toString(16).padStart(2, '0')}`;
  if (bytes.length > ctx.maxArrayLength) {
    const rest = bytes.length - ctx.maxArrayLength;
    hex += ` ... ${rest} more byte${rest > 1 ? 's' : ''}`;
  }
  return [`[Uint8Contents]: <${hex}>`];
}

function formatSet(ctx, value, depth) {
  const size = setSize(value);
  const max = Math.min(Math.max(0, ctx.maxArrayLength), size);
  const output = [];
  ctx.indentation += 2;
  let i = 0;
  for (const v of { [Symbol.iterator]: () => setValues(value) }) {
    if (i++ >= max || ctx.spent()) break;
    output.push(formatValue(ctx, v, depth));
  }
  if (size > max) output.push(remaining(size - max));
  ctx.indentation -= 2;
  return output;
}

function formatMap(ctx, value, depth) {
  const size = mapSize(value);
  const max = Math.min(Math.max(0, ctx.maxArrayLength), size);
  const output = [];
  ctx.indentation += 2;
  let i = 0;
  for (const [k, v] of { [Symbol.iterator]: () => mapEntries(value) }) {
    if (i++ >= max || ctx.spent()) break;
    output.push(`${formatValue(ctx, k, depth)} => ${formatValue(ctx, v, depth)}`);
  }
  if (size > max) output.push(remaining(size - max));
  ctx.indentation -= 2;
  return output;
}

function formatProperty(ctx, value, depth, key, type, desc) {
  let str;
  let extra = ' ';
  desc = desc || getOwnPropertyDescriptor(value, key) || { value: value[key], enumerable: true };
  if (desc.value !== undefined) {
    ctx.indentation += 2;
    str = formatValue(ctx, desc.value, depth);
    ctx.indentation -= 2;
  } else if (desc.get !== undefined) {
    const label = desc.set !== undefined ? 'Getter/Setter' : 'Getter';
    if (ctx.getters && (ctx.getters === true || (ctx.getters === 'get' && desc.set === undefined) || (ctx.getters === 'set' && desc.set !== undefined))) {
      try {
        const v = call.call(desc.get, value);
        ctx.indentation += 2;
        if (v === null) str = `[${label}: null]`;
        else if (typeof v === 'object') str = `[${label}] ${formatValue(ctx, v, depth)}`;
        else str = `[${label}: ${formatPrimitive(ctx, v)}]`;
        ctx.indentation -= 2;
      } catch (err) {
        str = `[${label}: <Inspection threw (${err && err.message})>]`;
      }
    } else {
      str = `[${label}]`;
    }
  } else if (desc.set !== undefined) {
    str = '[Setter]';
  } else {
    str = 'undefined';
  }
  if (type === ARRAY) return str;
  let name;
  if (typeof key === 'symbol') name = `[${symbolToString(key).replace(ESCAPE_ALL, escapeChar)}]`;
  else if (key === '__proto__') name = "['__proto__']";
  else if (desc.enumerable === false) name = `[${key.replace(ESCAPE_ALL, escapeChar)}]`;
  else if (KEY_IDENTIFIER.test(key)) name = key;
  else name = quote(key);
  return `${name}:${extra}${str}`;
}

function formatValue(ctx, value, depth, typedArray) {
  if (typeof value !== 'object' && typeof value !== 'function') return formatPrimitive(ctx, value);
  if (value === null) return 'null';
  if (ctx.spent()) return '...';
  if (ctx.customInspect) {
    let custom;
    try {
      custom = value[customInspect];
    } catch {}
    if (typeof custom === 'function' && custom !== inspect && !(value.constructor && value.constructor.prototype === value)) {
      const ret = call.call(custom, value, ctx.depth - depth, { ...ctx.options, depth: ctx.depth - depth }, inspect);
      if (ret !== value) {
        if (typeof ret !== 'string') return formatValue(ctx, ret, depth);
        return ret.replaceAll('\n', `\n${' '.repeat(ctx.indentation)}`);
      }
    }
  }
  if (ctx.seen.includes(value)) {
    let index = ctx.circular.get(value);
    if (index === undefined) {
      index = ctx.circular.size + 1;
      ctx.circular.set(value, index);
    }
    return `[Circular *${index}]`;
  }
  return formatRaw(ctx, value, depth, typedArray);
}

function formatRaw(ctx, value, depth, typedArray) {
  const constructor = constructorName(ctx, value, depth);
  let tag = value[Symbol.toStringTag];
  if (typeof tag !== 'string' || (tag !== '' && (ctx.showHidden ? hasOwn : isEnumerable)(value, Symbol.toStringTag))) tag = '';
  let base = '';
  let formatter = () => [];
  let braces;
  let keys;
  let extras = OBJECT;
  let iterable = false;
  if (Symbol.iterator in value || constructor === null) {
    iterable = true;
    const typedTag = typedArrayTag(value);
    if (Array.isArray(value)) {
      const p = constructor !== 'Array' || tag !== '' ? prefix(constructor, tag, 'Array', `(${value.length})`) : '';
      keys = nonIndexKeys(value, ctx.showHidden);
      braces = [`${p}[`, ']'];
      if (value.length === 0 && keys.length === 0) return `${braces[0]}]`;
      extras = ARRAY_EXTRAS;
      formatter = formatArray;
    } else if (isSet(value)) {
      const size = setSize(value);
      const p = prefix(constructor, tag, 'Set', `(${size})`);
      keys = ownKeys(value, ctx.showHidden);
      formatter = formatSet;
      if (size === 0 && keys.length === 0) return `${p}{}`;
      braces = [`${p}{`, '}'];
    } else if (isMap(value)) {
      const size = mapSize(value);
      const p = prefix(constructor, tag, 'Map', `(${size})`);
      keys = ownKeys(value, ctx.showHidden);
      formatter = formatMap;
      if (size === 0 && keys.length === 0) return `${p}{}`;
      braces = [`${p}{`, '}'];
    } else if (typedTag !== undefined) {
      keys = nonIndexKeys(value, ctx.showHidden);
      const size = typedArrayLength(value);
      const p = prefix(constructor, tag, constructor === null ? typedTag : '', `(${size})`);
      braces = [`${p}[`, ']'];
      if (size === 0 && keys.length === 0 && !ctx.showHidden) return `${braces[0]}]`;
      formatter = formatTypedArray;
      extras = ARRAY_EXTRAS;
    } else {
      const t = objectToString(value);
      if (t === '[object Map Iterator]' || t === '[object Set Iterator]') {
        // Its entries cannot be seen without consuming it.
        keys = ownKeys(value, ctx.showHidden);
        const type = t === '[object Map Iterator]' ? 'Map' : 'Set';
        braces = [`[${tag !== `${type} Iterator` && tag !== '' ? `${tag}] [` : ''}${type} Iterator] {`, '}'];
        formatter = () => ['<items unknown>'];
      } else {
        iterable = false;
      }
    }
  }
  if (!iterable) {
    keys = ownKeys(value, ctx.showHidden);
    braces = ['{', '}'];
    let other;
    if (typeof value === 'function') {
      base = functionBase(value, constructor, tag);
      if (keys.length === 0) return base;
    } else if (constructor === 'Object') {
      if (objectToString(value) === '[object Arguments]') braces[0] = '[Arguments] {';
      else if (tag !== '') braces[0] = `${prefix(constructor, tag, 'Object')}{`;
      if (keys.length === 0) return `${braces[0]}}`;
    } else if (isRegExp(value)) {
      base = regExpToString(constructor !== null ? value : new RegExp(value));
      const p = prefix(constructor, tag, 'RegExp');
      if (p !== 'RegExp ') base = `${p}${base}`;
      if (keys.length === 0 || depth > ctx.depth) return base;
    } else if (isDate(value)) {
      base = Number.isNaN(dateGetTime(value)) ? dateToString(value) : dateToISOString(value);
      const p = prefix(constructor, tag, 'Date');
      if (p !== 'Date ') base = `${p}${base}`;
      if (keys.length === 0) return base;
    } else if (isError(value)) {
      base = errorBase(ctx, value, constructor, tag, keys);
      if (keys.length === 0) return base;
    } else if (isArrayBuffer(value) || isSharedArrayBuffer(value)) {
      const p = prefix(constructor, tag, isArrayBuffer(value) ? 'ArrayBuffer' : 'SharedArrayBuffer');
      if (typedArray === undefined) formatter = formatArrayBuffer;
      else if (keys.length === 0) return `${p}{ byteLength: ${formatNumber(value.byteLength)} }`;
      braces[0] = `${p}{`;
      keys.unshift('byteLength');
    } else if (isDataView(value)) {
      braces[0] = `${prefix(constructor, tag, 'DataView')}{`;
      keys.unshift('byteLength', 'byteOffset', 'buffer');
    } else if (objectToString(value) === '[object Promise]' && value instanceof Promise) {
      // A Promise's state cannot be read from JavaScript.
      braces[0] = `${prefix(constructor, tag, 'Promise')}{`;
      formatter = () => ['<state unknown>'];
    } else if (isWeakSet(value)) {
      braces[0] = `${prefix(constructor, tag, 'WeakSet')}{`;
      formatter = () => ['<items unknown>'];
    } else if (isWeakMap(value)) {
      braces[0] = `${prefix(constructor, tag, 'WeakMap')}{`;
      formatter = () => ['<items unknown>'];
    } else if (constructor === null && tag === 'Module') {
      braces[0] = `${prefix(constructor, tag, 'Module')}{`;
    } else if ((other = boxedType(value)) !== undefined) {
      const { type } = other;
      if (type === 'String') keys.splice(0, other.value.length);
      base = `[${type}`;
      if (type !== constructor) base += constructor === null ? ' (null prototype)' : ` (${constructor})`;
      base += `: ${formatPrimitive({ ...ctx, indentation: 0, breakLength: Infinity }, other.value)}]`;
      if (tag !== '' && tag !== constructor) base += ` [${tag}]`;
      if (keys.length === 0) return base;
    } else {
      const style = prefix(constructor, tag, constructor === null ? (tag === '' ? 'Object' : 'Object') : '');
      if (keys.length === 0) return `${style}{}`;
      braces[0] = `${style}{`;
    }
  }
  if (depth > ctx.depth) {
    let name = prefix(constructor, tag, 'Object').slice(0, -1);
    if (constructor !== null) name = `[${name}]`;
    return name;
  }
  depth += 1;
  ctx.seen.push(value);
  ctx.currentDepth = depth;
  let output;
  const indentation = ctx.indentation;
  try {
    output = formatter(ctx, value, depth);
    for (let i = 0; i < keys.length && !ctx.spent(); i++) output.push(formatProperty(ctx, value, depth, keys[i], extras));
  } catch (err) {
    // Close to the stack's end this may overflow again: a frame further out catches that.
    if (!(err instanceof RangeErrorClass) || err.message !== STACK_OVERFLOW) throw err;
    ctx.seen.pop();
    ctx.indentation = indentation;
    return `[${prefix(constructor, tag, 'Object').slice(0, -1)}: Inspection interrupted prematurely. Maximum call stack size exceeded.]`;
  }
  const index = ctx.circular.get(value);
  if (index !== undefined) base = base === '' ? `<ref *${index}>` : `<ref *${index}> ${base}`;
  ctx.seen.pop();
  if (ctx.sorted) {
    const compare = ctx.sorted === true ? undefined : ctx.sorted;
    if (extras === OBJECT) output.sort(compare);
    else if (keys.length > 1) output.splice(output.length - keys.length, keys.length, ...output.slice(output.length - keys.length).sort(compare));
  }
  const res = reduceToSingleString(ctx, output, base, braces, extras, depth, value);
  ctx.produced += res.length;
  return res;
}

function groupArrayElements(ctx, output, value) {
  let total = 0;
  let maxLength = 0;
  let count = output.length;
  if (ctx.maxArrayLength < output.length) count--; // the "... more items" entry
  const separator = 2;
  const lengths = new Array(count);
  for (let i = 0; i < count; i++) {
    const len = width(output[i]);
    lengths[i] = len;
    total += len + separator;
    if (maxLength < len) maxLength = len;
  }
  const actualMax = maxLength + separator;
  if (actualMax * 3 + ctx.indentation < ctx.breakLength && (total / actualMax > 5 || maxLength <= 6)) {
    const averageBias = Math.sqrt(actualMax - total / output.length);
    const biasedMax = Math.max(actualMax - 3 - averageBias, 1);
    const columns = Math.min(
      Math.round(Math.sqrt(2.5 * biasedMax * count) / biasedMax),
      Math.floor((ctx.breakLength - ctx.indentation) / actualMax),
      ctx.compact * 4,
      15,
    );
    if (columns <= 1) return output;
    const maxLineLength = [];
    for (let i = 0; i < columns; i++) {
      let line = 0;
      for (let j = i; j < output.length; j += columns) if (lengths[j] > line) line = lengths[j];
      maxLineLength.push(line + separator);
    }
    let padStart = true;
    if (value !== undefined) {
      for (let i = 0; i < output.length; i++) {
        if (typeof value[i] !== 'number' && typeof value[i] !== 'bigint') {
          padStart = false;
          break;
        }
      }
    }
    const grouped = [];
    for (let i = 0; i < count; i += columns) {
      const max = Math.min(i + columns, count);
      let line = '';
      let j = i;
      for (; j < max - 1; j++) {
        const padding = maxLineLength[j - i] + output[j].length - lengths[j];
        line += padStart ? `${output[j]}, `.padStart(padding, ' ') : `${output[j]}, `.padEnd(padding, ' ');
      }
      if (padStart) line += output[j].padStart(maxLineLength[j - i] + output[j].length - lengths[j] - separator, ' ');
      else line += output[j];
      grouped.push(line);
    }
    if (ctx.maxArrayLength < output.length) grouped.push(output[count]);
    output = grouped;
  }
  return output;
}

function isBelowBreakLength(ctx, output, start, base) {
  let total = output.length + start;
  if (total + output.length > ctx.breakLength) return false;
  for (let i = 0; i < output.length; i++) {
    total += output[i].length;
    if (total > ctx.breakLength) return false;
  }
  return base === '' || !base.includes('\n');
}

function reduceToSingleString(ctx, output, base, braces, extras, depth, value) {
  const entries = output.length;
  if (extras === ARRAY_EXTRAS && entries > 6) output = groupArrayElements(ctx, output, value);
  if (ctx.currentDepth - depth < ctx.compact && entries === output.length) {
    const start = output.length + ctx.indentation + braces[0].length + base.length + 10;
    if (isBelowBreakLength(ctx, output, start, base)) {
      const joined = output.join(', ');
      if (!joined.includes('\n')) return `${base ? `${base} ` : ''}${braces[0]} ${joined} ${braces[1]}`;
    }
  }
  const indentation = `\n${' '.repeat(ctx.indentation)}`;
  return `${base ? `${base} ` : ''}${braces[0]}${indentation}  ${output.join(`,${indentation}  `)}${indentation}${braces[1]}`;
}

/**
 * util.inspect: `options` as Node's (depth, maxArrayLength, maxStringLength, breakLength,
 * compact (a number), showHidden, customInspect, sorted, getters); `limit`: characters
 * after which nothing more is formatted (the output is then cut short).
 */
function inspect(value, options = undefined, limit = Infinity) {
  const ctx = { ...DEFAULTS, seen: [], circular: new Map(), indentation: 0, currentDepth: 0, produced: 0 };
  if (options !== null && typeof options === 'object') {
    for (const key of objectKeys(DEFAULTS)) if (options[key] !== undefined) ctx[key] = options[key];
    if (options.depth === null) ctx.depth = Infinity;
    if (options.maxArrayLength === null) ctx.maxArrayLength = Infinity;
    if (options.maxStringLength === null) ctx.maxStringLength = Infinity;
  }
  if (typeof ctx.compact !== 'number' || ctx.compact < 1) ctx.compact = 3;
  ctx.options = { ...ctx };
  ctx.spent = () => ctx.produced > limit;
  return formatValue(ctx, value, 0);
}

/** Whether `%s` prints `value` with inspect: its toString is a built-in class's (or it has none). */
function hasBuiltInToString(value) {
  let toString;
  try {
    toString = value.toString;
  } catch {
    return true;
  }
  if (typeof toString !== 'function') return true;
  if (hasOwn(value, 'toString')) return false;
  let pointer = value;
  do {
    pointer = getPrototypeOf(pointer);
  } while (pointer !== null && !hasOwn(pointer, 'toString'));
  if (pointer === null) return true;
  const d = getOwnPropertyDescriptor(pointer, 'constructor');
  builtIns ??= new Set(getOwnPropertyNames(globalThis).filter((n) => /^[A-Z][a-zA-Z0-9]+$/.test(n)));
  return d !== undefined && typeof d.value === 'function' && builtIns.has(d.value.name);
}

function tryStringify(value) {
  try {
    return JSON.stringify(value);
  } catch (err) {
    if (err instanceof TypeError && /circular/i.test(err.message)) return '[Circular]';
    throw err;
  }
}

/**
 * util.format(...args): a first string argument's %s %d %i %f %j %o %O %c %% take the
 * arguments after it; the rest are joined with spaces, strings as they are, other values
 * inspected. Stops formatting once `limit` characters are made.
 */
function format(args, limit = Infinity) {
  const first = args[0];
  let a = 0;
  let out = '';
  let join = '';
  const budget = () => Math.max(0, limit - out.length);
  if (typeof first === 'string') {
    if (args.length === 1) return first;
    let last = 0;
    for (let i = 0; i < first.length - 1 && out.length <= limit; i++) {
      if (first.charCodeAt(i) !== 37) continue; // '%'
      const next = first.charCodeAt(++i);
      if (a + 1 !== args.length) {
        let text;
        switch (next) {
          case 115: { // 's'
            const arg = args[++a];
            if (typeof arg === 'number') text = formatNumber(arg);
            else if (typeof arg === 'bigint') text = `${arg}n`;
            else if (typeof arg !== 'object' || arg === null || !hasBuiltInToString(arg)) text = String(arg);
            else text = inspect(arg, { depth: 0 }, budget());
            break;
          }
          case 106: // 'j'
            text = tryStringify(args[++a]);
            break;
          case 100: { // 'd'
            const arg = args[++a];
            if (typeof arg === 'bigint') text = `${arg}n`;
            else if (typeof arg === 'symbol') text = 'NaN';
            else text = formatNumber(Number(arg));
            break;
          }
          case 79: // 'O'
            text = inspect(args[++a], undefined, budget());
            break;
          case 111: // 'o'
            text = inspect(args[++a], { showHidden: true, depth: 4 }, budget());
            break;
          case 105: { // 'i'
            const arg = args[++a];
            if (typeof arg === 'bigint') text = `${arg}n`;
            else if (typeof arg === 'symbol') text = 'NaN';
            else text = formatNumber(Number.parseInt(arg));
            break;
          }
          case 102: { // 'f'
            const arg = args[++a];
            text = typeof arg === 'symbol' ? 'NaN' : formatNumber(Number.parseFloat(arg));
            break;
          }
          case 99: // 'c': CSS, which a log does not show
            a++;
            text = '';
            break;
          case 37: // '%'
            out += first.slice(last, i);
            last = i + 1;
            continue;
          default:
            continue;
        }
        if (last !== i - 1) out += first.slice(last, i - 1);
        out += text;
        last = i + 1;
      } else if (next === 37) {
        out += first.slice(last, i);
        last = i + 1;
      }
    }
    if (last !== 0) {
      a++;
      join = ' ';
      if (last < first.length) out += first.slice(last);
    }
  }
  while (a < args.length && out.length <= limit) {
    const value = args[a];
    out += join;
    out += typeof value !== 'string' ? inspect(value, undefined, budget()) : value;
    join = ' ';
    a++;
  }
  return out;
}

return { inspect, format, width };
