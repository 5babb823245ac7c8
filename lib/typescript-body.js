'use strict';
// Type stripping of an async body (code that may `return` and `await` at top level, which
// a parser rejects outside a function), for lib/source-transform.js.
// The body is parsed inside a one-line wrapper that is cut off again afterwards.

const BODY_PREFIX = 'async function isolet_body() {\n';
const BODY_SUFFIX = '\n}';

/** The 1-based line of the wrapper's closing brace (the prefix is line 1), as amaro counts lines. */
function suffixLine(code) {
  return 3 + (code.match(/\r\n|\r|\n/g) || []).length;
}

/**
 * `transform(source)` (amaro's, returning JavaScript) applied to the body `code`; throws
 * what amaro throws, with lines of the wrapped source (the user's line + 1).
 *
 * A fault on the wrapper's closing line means amaro read all of the user's code and then
 * met the wrapper's `}`: the code is unfinished (`return (`), or a stray `}` closed the
 * body early. Either way that `}` is not the user's, so the code is stripped again with
 * no closing brace: unfinished code then fails where the user's input ends, and a stray
 * `}` strips, for V8 to name it where it stands.
 */
function stripBody(transform, code) {
  let out;
  try {
    out = transform(BODY_PREFIX + code + BODY_SUFFIX);
  } catch (err) {
    if (!err || typeof err.startLine !== 'number' || err.startLine < suffixLine(code)) throw err;
    out = transform(BODY_PREFIX + code);
    return out.slice(out.indexOf('\n') + 1);
  }
  return out.slice(out.indexOf('\n') + 1, out.length - BODY_SUFFIX.length);
}

module.exports = { stripBody, suffixLine, BODY_PREFIX, BODY_LINE_OFFSET: 1 };
