'use strict';

// The unified diff shown for review, computed by jsdiff (`diff`, Myers' O(ND) algorithm)
// and rendered like `diff -u`. The suggestion is the model's untrusted output, so the work
// is bounded: past MAX_EDIT_LINES changed lines (or MAX_DIFF_MS), the diff is one hunk
// that replaces the differing block, which is still a valid patch of the same change.

const { AutoFixOptionsError } = require('./errors');

// Loaded on first use, as lib/source-transform.js loads amaro: index.js re-exports autoFix, and
// `require('isolet')` for runSandbox alone need not load (or find) jsdiff.
let jsdiff = null;
function structuredPatch(...args) {
  if (jsdiff === null) jsdiff = require('diff');
  return jsdiff.structuredPatch(...args);
}

/**
 * Largest edit (lines removed + lines added) for which a minimal diff is searched. Myers'
 * cost grows with its square: this bound keeps the worst case (two unrelated 1 MiB files)
 * well under a second; a fix of a few thousand lines is a rewrite anyway.
 */
const MAX_EDIT_LINES = 1000;
/** A second bound, in wall time, for slow machines; the outcome is the same block replace. */
const MAX_DIFF_MS = 2000;

/** Unified diff of two texts, `--- a/<name>` / `+++ b/<name>`; '' when they are equal. */
function unifiedDiff(before, after, name, context = 3) {
  if (typeof before !== 'string' || typeof after !== 'string' || typeof name !== 'string') {
    throw new AutoFixOptionsError('unifiedDiff(before, after, name): before, after and name must be strings');
  }
  if (!(Number.isSafeInteger(context) && context >= 0)) {
    throw new AutoFixOptionsError('unifiedDiff(before, after, name, context): context must be a whole number >= 0');
  }
  if (before === after) return '';
  const a = splitLines(before);
  const b = splitLines(after);
  const patch =
    surplusLines(a, b) > MAX_EDIT_LINES
      ? undefined
      : structuredPatch(name, name, before, after, undefined, undefined, {
          context,
          maxEditLength: MAX_EDIT_LINES,
          timeout: MAX_DIFF_MS,
        });
  const hunks = patch === undefined ? blockReplaceHunks(a, b, context) : patch.hunks;
  let out = `--- a/${name}\n+++ b/${name}\n`;
  for (const h of hunks) {
    out += `@@ -${range(h.oldStart, h.oldLines)} +${range(h.newStart, h.newLines)} @@\n`;
    for (const line of h.lines) out += line + '\n';
  }
  return out;
}

/** A hunk range as `diff -u` writes it: the count is left out when it is 1; an empty range names the line before. */
function range(start, count) {
  if (count === 0) return `${start - 1},0`;
  return count === 1 ? `${start}` : `${start},${count}`;
}

/**
 * The bounded fallback: common leading and trailing lines are context, everything between
 * is removed and added back as one block. Linear in the number of lines. Returns hunks in
 * jsdiff's shape (1-based starts, lines without their newline).
 */
function blockReplaceHunks(a, b, context) {
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const from = Math.max(0, start - context);
  const suffix = Math.min(context, a.length - endA);
  const lines = [
    ...hunkLines(' ', a.slice(from, start)),
    ...hunkLines('-', a.slice(start, endA)),
    ...hunkLines('+', b.slice(start, endB)),
    ...hunkLines(' ', a.slice(endA, endA + suffix)),
  ];
  return [
    {
      oldStart: from + 1,
      oldLines: endA + suffix - from,
      newStart: from + 1,
      newLines: endB + suffix - from,
      lines,
    },
  ];
}

/**
 * A lower bound on the edit, in linear time: every surplus copy of a line (more in one text
 * than in the other) must be removed or added. When it is over the bound, the search would
 * give up anyway (two unrelated files, a whole-file rewrite), so it is not started.
 */
function surplusLines(a, b) {
  const balance = new Map();
  for (const line of a) balance.set(line, (balance.get(line) || 0) + 1);
  for (const line of b) balance.set(line, (balance.get(line) || 0) - 1);
  let surplus = 0;
  for (const n of balance.values()) surplus += Math.abs(n);
  return surplus;
}

/** Lines with their `\n` (the last may have none). */
function splitLines(text) {
  return text === '' ? [] : text.split(/(?<=\n)/);
}

/** Hunk lines for `op`; a line without a final newline is followed by the marker that says so. */
function hunkLines(op, lines) {
  const out = [];
  for (const line of lines) {
    if (line.endsWith('\n')) out.push(op + line.slice(0, -1));
    else out.push(op + line, '\\ No newline at end of file');
  }
  return out;
}

module.exports = { unifiedDiff, MAX_EDIT_LINES };
