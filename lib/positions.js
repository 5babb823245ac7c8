'use strict';
// Position maps: from a place in the code a run compiled back to the place in the user's
// source it came from, for the steps of lib/source-transform.js that move code (the
// TypeScript transform, through its source map; the last-expression and top-level-await
// rewrites, which insert text). Plain data, so the source worker can send it back:
//
//   map    = [stage, ...]   applied last to first; [] is the identity
//   stage  = Int32Array of segments, 5 numbers each, in generated order:
//            generated line, generated column, original line, original column, exact
//
// Lines and columns are 1-based and count as V8 counts them (lines end at LF, CR, CRLF,
// U+2028 and U+2029; columns are UTF-16 units). A position maps through the last segment
// that starts at or before it: an exact segment (text copied as it was) moves it by the
// same distance; an inserted one (text the step wrote) maps to the user's character that
// follows it. Nothing here loads the addon: the worker runs it.

const FIELDS = 5;
/** The script name V8 gives a run's code in stacks (isolet-core's `seam_policy::SCRIPT_NAME`). */
const SCRIPT_NAME = 'sandbox.js';
const LINE_END = /\r\n|[\n\r\u2028\u2029]/g;

/** `{ line, column }` after `text` when it starts at `at` (mutated and returned). */
function advance(text, from, to, at) {
  LINE_END.lastIndex = from;
  let lineStart = -1;
  for (;;) {
    const m = LINE_END.exec(text);
    if (m === null || m.index >= to) break;
    at.line++;
    lineStart = m.index + m[0].length;
    if (lineStart > to) {
      // `to` falls inside a CRLF: count it on the line it ends.
      lineStart = to;
      break;
    }
  }
  if (lineStart < 0) at.column += to - from;
  else at.column = 1 + to - lineStart;
  return at;
}

/**
 * Builds new code from pieces of `original` (copied, in increasing order) and inserted
 * text, and the stage that maps the new code's positions back to `original`'s.
 */
class Rewrite {
  constructor(original) {
    this.original = original;
    this.parts = [];
    this.segments = [];
    this.gen = { line: 1, column: 1 };
    this.orig = { line: 1, column: 1 };
    this.origOffset = 0;
    /** Indices of inserted segments waiting for the original position that follows them. */
    this.pending = [];
  }

  /** Copies `original[start, end)`; `start` is at or after the end of the last copy. */
  copy(start, end) {
    if (end <= start) return this;
    advance(this.original, this.origOffset, start, this.orig);
    this.origOffset = start;
    for (const i of this.pending) {
      this.segments[i + 2] = this.orig.line;
      this.segments[i + 3] = this.orig.column;
    }
    this.pending.length = 0;
    this.segments.push(this.gen.line, this.gen.column, this.orig.line, this.orig.column, 1);
    const text = this.original.slice(start, end);
    this.parts.push(text);
    advance(text, 0, text.length, this.gen);
    advance(this.original, start, end, this.orig);
    this.origOffset = end;
    return this;
  }

  /** Inserts `text`: its positions map to the user's character after it. */
  insert(text) {
    if (text === '') return this;
    this.pending.push(this.segments.length);
    this.segments.push(this.gen.line, this.gen.column, this.orig.line, this.orig.column, 0);
    this.parts.push(text);
    advance(text, 0, text.length, this.gen);
    return this;
  }

  /** `{ code, stage }`. */
  finish() {
    return { code: this.parts.join(''), stage: Int32Array.from(this.segments) };
  }
}

/** The rewrite of `original` that replaces each `[start, end)` of `edits` (sorted, apart) by its `text`. */
function replaceRanges(original, edits) {
  const r = new Rewrite(original);
  let at = 0;
  for (const e of edits) {
    r.copy(at, e.start).insert(e.text);
    at = e.end;
  }
  return r.copy(at, original.length).finish();
}

const BASE64 = new Int8Array(128).fill(-1);
for (let i = 0; i < 64; i++) BASE64['ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'.charCodeAt(i)] = i;

/**
 * The stage of a source map (version 3, one source) whose generated and original lines
 * are both `lineShift` past the ones to map (a wrapper line cut off again); segments on
 * lines that shift to 0 or less are dropped.
 */
function fromSourceMap(json, lineShift = 0) {
  const mappings = typeof json === 'string' ? JSON.parse(json).mappings : json.mappings;
  const out = [];
  let genLine = 0;
  let genColumn = 0;
  let origLine = 0;
  let origColumn = 0;
  const fields = [0, 0, 0, 0, 0];
  let i = 0;
  const n = mappings.length;
  while (i < n) {
    const c = mappings.charCodeAt(i);
    if (c === 59 /* ; */) {
      genLine++;
      genColumn = 0;
      i++;
      continue;
    }
    if (c === 44 /* , */) {
      i++;
      continue;
    }
    let count = 0;
    while (i < n) {
      const ch = mappings.charCodeAt(i);
      if (ch === 44 || ch === 59) break;
      let value = 0;
      let shift = 0;
      let digit;
      do {
        digit = BASE64[mappings.charCodeAt(i++)];
        if (digit === undefined || digit < 0) throw new Error('a source map with invalid mappings');
        value += (digit & 31) * 2 ** shift;
        shift += 5;
      } while (digit & 32);
      fields[count++] = value % 2 === 1 ? -(value - 1) / 2 : value / 2;
    }
    genColumn += fields[0];
    if (count < 4) continue;
    origLine += fields[2];
    origColumn += fields[3];
    const line = genLine + 1 - lineShift;
    const original = origLine + 1 - lineShift;
    if (line >= 1 && original >= 1) out.push(line, genColumn + 1, original, origColumn + 1, 1);
  }
  return Int32Array.from(out);
}

/** `{ line, column }` in the stage's original of generated `line`, `column`. */
function throughStage(stage, line, column) {
  // The last segment at or before (line, column).
  let lo = 0;
  let hi = stage.length / FIELDS - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const l = stage[mid * FIELDS];
    const c = stage[mid * FIELDS + 1];
    if (l < line || (l === line && c <= column)) {
      found = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  if (found < 0) return { line, column };
  const at = found * FIELDS;
  const [gl, gc, ol, oc, exact] = [stage[at], stage[at + 1], stage[at + 2], stage[at + 3], stage[at + 4]];
  if (exact === 0) return { line: ol, column: oc };
  if (gl === line) return { line: ol, column: oc + column - gc };
  return { line: ol + line - gl, column };
}

/** Generated `line`, `column` (1-based) as the user's. */
function mapPosition(map, line, column) {
  let at = { line, column };
  if (!map) return at;
  for (let i = map.length - 1; i >= 0; i--) at = throughStage(map[i], at.line, at.column);
  return at;
}

function isIdentity(map) {
  return !Array.isArray(map) || map.length === 0;
}

/**
 * `text` with the positions it names (`sandbox.js:L:C` in stack frames, `sandbox.mjs:L:C`
 * for a module run, `at line L, column C` and `(line L, column C)` in messages) mapped to
 * the user's; with `file`, stack frames name it instead.
 */
function remapText(text, map, file = undefined) {
  if (typeof text !== 'string') return text;
  const identity = isIdentity(map);
  if (identity && file === undefined) return text;
  return text
    .replace(/sandbox\.(m?js):(\d+):(\d+)/g, (_, ext, l, c) => {
      const p = identity ? { line: l, column: c } : mapPosition(map, +l, +c);
      return `${file ?? `sandbox.${ext}`}:${p.line}:${p.column}`;
    })
    .replace(/(at line |\(line )(\d+), column (\d+)/g, (_, lead, l, c) => {
      if (identity) return `${lead}${l}, column ${c}`;
      const p = mapPosition(map, +l, +c);
      return `${lead}${p.line}, column ${p.column}`;
    });
}

/**
 * A copy of `error` (same class) whose positions are the user's (see `remapText`): its
 * message, stack, line and column, and those of what the code threw. `error` is left alone.
 */
function remapError(error, map, file = undefined) {
  if (!error || typeof error !== 'object' || (isIdentity(map) && file === undefined)) return error;
  // Read from the original: on V8 14 an Error's `stack` is an accessor that reads its
  // receiver's own slot, so through the copy it would be undefined.
  const stack = error.stack;
  const copy = Object.create(Object.getPrototypeOf(error));
  Object.defineProperties(copy, Object.getOwnPropertyDescriptors(error));
  if (typeof copy.line === 'number' && typeof copy.column === 'number' && !isIdentity(map)) {
    const p = mapPosition(map, copy.line, copy.column);
    copy.line = p.line;
    copy.column = p.column;
  }
  if (copy.thrown && typeof copy.thrown === 'object') {
    copy.thrown = { ...copy.thrown, stack: remapText(copy.thrown.stack, map, file), message: remapText(copy.thrown.message, map, file) };
  }
  copy.message = remapText(copy.message, map, file);
  Object.defineProperty(copy, 'stack', { value: remapText(stack, map, file), writable: true, configurable: true, enumerable: false });
  return copy;
}

/** `logs` (`{ level, message }` entries) with the positions their messages name mapped (a logged stack). */
function remapLogs(logs, map, file = undefined) {
  if (!Array.isArray(logs) || (isIdentity(map) && file === undefined)) return logs;
  return logs.map((entry) => (typeof entry.message === 'string' && entry.message.includes('sandbox.') ? { ...entry, message: remapText(entry.message, map, file) } : entry));
}

/** An execute() result (`{ ok, value | error, stats, logs }`) with its error and logs at the user's positions. */
function remapResult(r, map) {
  if (isIdentity(map)) return r;
  return r.ok ? { ...r, logs: remapLogs(r.logs, map) } : { ...r, error: remapError(r.error, map), logs: remapLogs(r.logs, map) };
}

module.exports = { Rewrite, remapResult, replaceRanges, fromSourceMap, mapPosition, remapText, remapError, remapLogs, isIdentity, SCRIPT_NAME };
