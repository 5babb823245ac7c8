// 09_console.js: `console` as Node's (the WHATWG Console standard's methods, formatted as
// util.format and util.inspect format: 10_inspect.js, loaded the first time a value is not
// a plain string or number). Installed in every sandbox, with or without `web`. Entries go
// to the run's log (`OP.consoleWrite`, by level: log, info, warn, error, debug); a line is
// formatted only up to the room the log has left (`OP.consoleRoom`), each argument to at
// most LIMITS.maxConsoleValueBytes, so a run cannot make the host hold more than its log.
// (A function body: `src/web/mod.rs` wraps it as `(function (lib) { ... })` with `op`,
// `clone`, `load`, `OP`, `SCRIPT`, `LIMITS` and `LEVEL` in scope.)
const { log: LOG, info: INFO, warn: WARN, error: ERROR, debug: DEBUG } = LEVEL;
const MAX_VALUE = LIMITS.maxConsoleValueBytes;
const captureStackTrace = Error.captureStackTrace;
const MapClass = Map;
const SetClass = Set;
let inspector;
const inspection = () => (inspector ??= load(SCRIPT.inspect));

/** `s` cut to at most `max` bytes of UTF-8, on a character boundary. */
function cut(s, max) {
  if (s.length * 3 <= max) return s;
  let bytes = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    let n = c < 0x80 ? 1 : c < 0x800 ? 2 : 3;
    let units = 1;
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n = 4;
        units = 2;
      }
    }
    if (bytes + n > max) return s.slice(0, i);
    bytes += n;
    i += units - 1;
  }
  return s;
}

const plain = (v) => {
  const t = typeof v;
  return t === 'number' || t === 'boolean' || t === 'undefined' || t === 'bigint' || v === null;
};

/** util.format of `args`, at most `room` characters of it (the log keeps no more). */
function format(args, room) {
  const first = args[0];
  // Strings and numbers need no inspection (most lines).
  if (!(typeof first === 'string' && first.includes('%') && args.length > 1)) {
    let out = '';
    let i = 0;
    for (; i < args.length && out.length <= room; i++) {
      const v = args[i];
      let text;
      if (typeof v === 'string') text = v;
      else if (plain(v)) text = typeof v === 'bigint' ? `${v}n` : Object.is(v, -0) ? '-0' : `${v}`;
      else break;
      out += (i === 0 ? '' : ' ') + cut(text, MAX_VALUE);
    }
    if (i === args.length || out.length > room) return out;
    const rest = args.slice(i).map((v) => (typeof v === 'string' ? cut(v, MAX_VALUE) : cut(inspection().inspect(v, undefined, Math.min(room, MAX_VALUE)), MAX_VALUE)));
    return `${out}${i === 0 ? '' : ' '}${rest.join(' ')}`;
  }
  return inspection().format(args.map((v) => (typeof v === 'string' ? cut(v, MAX_VALUE) : v)), room);
}

let groupIndent = '';
const counts = new Map();
const times = new Map();

/** Writes one entry at `level`, formatted as util.format formats `args`. */
function write(level, args) {
  const room = op(OP.consoleRoom);
  // The log is full: the entry is counted as dropped, never formatted.
  if (room === 0) return void op(OP.consoleWrite, level, '');
  let line = format(args, room + 1);
  if (groupIndent !== '') line = groupIndent + (line.includes('\n') ? line.replaceAll('\n', `\n${groupIndent}`) : line);
  op(OP.consoleWrite, level, line);
}

function warning(message) {
  write(WARN, [`Warning: ${message}`]);
}

function formatTime(ms) {
  const pad = (v) => `${v}`.padStart(2, '0');
  let hours = 0, minutes = 0, seconds = 0;
  if (ms >= 1000) {
    if (ms >= 60000) {
      if (ms >= 3600000) {
        hours = Math.floor(ms / 3600000);
        ms %= 3600000;
      }
      minutes = Math.floor(ms / 60000);
      ms %= 60000;
    }
    seconds = ms / 1000;
  }
  if (hours !== 0 || minutes !== 0) {
    const [s, frac] = seconds.toFixed(3).split('.');
    const head = hours !== 0 ? `${hours}:${pad(minutes)}` : minutes;
    return `${head}:${pad(s)}.${frac} (${hours !== 0 ? 'h:m' : ''}m:ss.mmm)`;
  }
  if (seconds !== 0) return `${seconds.toFixed(3)}s`;
  return `${Number(ms.toFixed(3))}ms`;
}

function timeLog(name, label, data) {
  const started = times.get(label);
  if (started === undefined) {
    warning(`No such label '${label}' for console.${name}()`);
    return false;
  }
  write(LOG, ['%s: %s', label, formatTime(op(OP.now) - started), ...data]);
  return true;
}

/** console.table's rendering: box-drawing characters, cells left-aligned. */
function renderTable(head, columns) {
  const { width } = inspection();
  const rows = Math.max(0, ...columns.map((c) => c.length));
  const widths = head.map((h, i) => {
    let w = width(h);
    for (let r = 0; r < rows; r++) w = Math.max(w, width(columns[i][r] ?? ''));
    return w + 2;
  });
  const line = (l, m, r) => `${l}${widths.map((w) => '\u2500'.repeat(w)).join(m)}${r}`;
  const row = (cells) => `\u2502${cells.map((c, i) => ` ${c}${' '.repeat(widths[i] - 2 - width(c))} `).join('\u2502')}\u2502`;
  const out = [line('\u250c', '\u252c', '\u2510'), row(head), line('\u251c', '\u253c', '\u2524')];
  for (let r = 0; r < rows; r++) out.push(row(columns.map((c) => c[r] ?? '')));
  out.push(line('\u2514', '\u2534', '\u2518'));
  return out.join('\n');
}

function table(data, properties) {
  if (properties !== undefined && !Array.isArray(properties)) {
    throw new TypeError('The "properties" argument must be an instance of Array.');
  }
  if (data === null || typeof data !== 'object') return write(LOG, [data]);
  const { inspect } = inspection();
  const cell = (v) => {
    const depth = v !== null && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length > 2 ? -1 : 0;
    return inspect(v, { depth, maxArrayLength: 3, breakLength: Infinity });
  };
  const indices = (n) => Array.from({ length: n }, (_, i) => cell(i));
  if (data instanceof MapClass) {
    const keys = [], values = [];
    for (const [k, v] of data) {
      keys.push(cell(k));
      values.push(cell(v));
    }
    return write(LOG, [renderTable(['(iteration index)', 'Key', 'Values'], [indices(keys.length), keys, values])]);
  }
  if (data instanceof SetClass) {
    const values = [...data].map(cell);
    return write(LOG, [renderTable(['(iteration index)', 'Values'], [indices(values.length), values])]);
  }
  const map = Object.create(null);
  let hasPrimitives = false;
  const primitives = [];
  const index = Object.keys(data);
  for (let i = 0; i < index.length; i++) {
    const item = data[index[i]];
    const primitive = item === null || (typeof item !== 'function' && typeof item !== 'object');
    if (properties === undefined && primitive) {
      hasPrimitives = true;
      primitives[i] = cell(item);
    } else {
      for (const key of properties || Object.keys(item)) {
        map[key] ??= [];
        map[key][i] = (primitive && properties) || !Object.prototype.hasOwnProperty.call(item, key) ? '' : cell(item[key]);
      }
    }
  }
  const head = Object.keys(map);
  const columns = Object.values(map);
  if (hasPrimitives) {
    head.push('Values');
    columns.push(primitives);
  }
  return write(LOG, [renderTable(['(index)', ...head], [index, ...columns])]);
}

const methods = {
  log(...args) {
    write(LOG, args);
  },
  info(...args) {
    write(INFO, args);
  },
  debug(...args) {
    write(DEBUG, args);
  },
  warn(...args) {
    write(WARN, args);
  },
  error(...args) {
    write(ERROR, args);
  },
  dir(...args) {
    const [object, options] = args;
    const room = op(OP.consoleRoom);
    write(LOG, room === 0 ? [] : [inspection().inspect(object, { customInspect: false, ...options }, room + 1)]);
  },
  dirxml(...args) {
    write(LOG, args);
  },
  table(...args) {
    table(args[0], args[1]);
  },
  trace(...args) {
    const err = { name: 'Trace', message: format(args, Math.max(op(OP.consoleRoom), 1)) };
    captureStackTrace(err, methods.trace);
    write(ERROR, [err.stack]);
  },
  assert(...args) {
    if (!args.shift()) {
      args[0] = `Assertion failed${args.length === 0 ? '' : `: ${args[0]}`}`;
      write(WARN, args);
    }
  },
  clear() {},
  count(label = 'default') {
    label = `${label}`;
    const n = (counts.get(label) ?? 0) + 1;
    counts.set(label, n);
    write(LOG, [`${label}: ${n}`]);
  },
  countReset(label = 'default') {
    label = `${label}`;
    if (!counts.has(label)) return warning(`Count for '${label}' does not exist`);
    counts.delete(label);
  },
  group(...data) {
    if (data.length > 0) write(LOG, data);
    groupIndent += '  ';
  },
  groupCollapsed(...data) {
    if (data.length > 0) write(LOG, data);
    groupIndent += '  ';
  },
  groupEnd() {
    groupIndent = groupIndent.slice(0, -2);
  },
  time(label = 'default') {
    label = `${label}`;
    if (times.has(label)) return warning(`Label '${label}' already exists for console.time()`);
    times.set(label, op(OP.now));
  },
  timeEnd(label = 'default') {
    label = `${label}`;
    if (timeLog('timeEnd', label, [])) times.delete(label);
  },
  timeLog(label = 'default', ...data) {
    timeLog('timeLog', `${label}`, data);
  },
};

// As V8's and Node's console: a plain object whose methods need no `this`. Every method
// is one (no prototype) of length 0, as V8's console's are.
const console = {};
for (const [name, fn] of Object.entries(methods)) console[name] = fn;
Object.defineProperty(console, Symbol.toStringTag, { value: 'console', configurable: true });
return { console };
