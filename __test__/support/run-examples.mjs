// Runs documentation examples, each an ES module (or CommonJS file) written by
// readme-examples.spec.ts, one after another in this one Node process, as the modules of
// one program would run: `node run-examples.mjs <report.json> <example>...`.
//
// For each example it records what went wrong (a throw, a rejection nobody handled, a
// `// result:` check that did not hold, not finishing within 30 s) and what it wrote to
// stderr, and which of its `// result:` checks ran. The report is written when the process
// exits; after the last example the process is left to exit on its own, so an example that
// leaves something open (an engine not shut down, a server) shows as `leftOpen`.
import * as fs from 'node:fs';
import { pathToFileURL } from 'node:url';
import { inspect } from 'node:util';

const [reportFile, ...files] = process.argv.slice(2);
const report = { blocks: {}, done: false, leftOpen: false };
let current;

const describe = (e) => (e instanceof Error ? (e.stack ?? `${e.name}: ${e.message}`) : inspect(e));
const show = (v) => inspect(v, { depth: 6, breakLength: Infinity });

// `// result: { a: 1, ... }` and `// result: [1, 2, ...]`: the test rewrites a trailing `...`
// into this marker, meaning "and possibly more properties / elements".
const PARTIAL = Symbol('partial');
globalThis.__isoletPartial = PARTIAL;

/** Why `actual` does not match `expected`, or null when it does. */
function mismatch(actual, expected, at) {
  if (expected === null || typeof expected !== 'object') {
    return Object.is(actual, expected) ? null : `${at}: expected ${show(expected)}, got ${show(actual)}`;
  }
  if (actual === null || typeof actual !== 'object') return `${at}: expected ${show(expected)}, got ${show(actual)}`;
  const tag = Object.prototype.toString.call(expected);
  if (tag !== '[object Object]' && tag !== Object.prototype.toString.call(actual)) return `${at}: expected ${show(expected)}, got ${show(actual)}`;
  if (expected instanceof Date || expected instanceof RegExp) {
    return String(actual) === String(expected) ? null : `${at}: expected ${show(expected)}, got ${show(actual)}`;
  }
  if (expected instanceof Map || expected instanceof Set || ArrayBuffer.isView(expected)) {
    return mismatch([...actual.entries()], [...expected.entries()], `${at} (entries)`);
  }
  if (Array.isArray(expected)) {
    const partial = expected.length > 0 && expected[expected.length - 1] === PARTIAL;
    const items = partial ? expected.slice(0, -1) : expected;
    if (!Array.isArray(actual)) return `${at}: expected an array, got ${show(actual)}`;
    if (partial ? actual.length < items.length : actual.length !== items.length) {
      return `${at}: expected ${partial ? 'at least ' : ''}${items.length} elements, got ${actual.length}: ${show(actual)}`;
    }
    for (let i = 0; i < items.length; i++) {
      const m = mismatch(actual[i], items[i], `${at}[${i}]`);
      if (m) return m;
    }
    return null;
  }
  const keys = Object.keys(expected);
  if (expected[PARTIAL] !== true) {
    const got = Object.keys(actual);
    if (got.length !== keys.length || !keys.every((k) => Object.prototype.hasOwnProperty.call(actual, k))) {
      return `${at}: expected the keys ${show(keys)}, got ${show(got)}: ${show(actual)}`;
    }
  }
  for (const k of keys) {
    const m = mismatch(actual[k], expected[k], `${at}.${k}`);
    if (m) return m;
  }
  return null;
}

/** A `// result:` check: `actual` is what the expression evaluated to. */
globalThis.__isoletResult = (file, where, actual, expected, text) => {
  const entry = report.blocks[file];
  const check = (entry.checks[where] ??= { ran: 0 });
  check.ran++;
  const m = mismatch(actual, expected(), 'the value');
  if (m) {
    const message = `${where}: // result: ${text}\n  ${m}`;
    entry.errors.push(message);
    throw new Error(message);
  }
  return actual;
};

const write = process.stderr.write.bind(process.stderr);
process.stderr.write = (chunk, ...rest) => {
  if (current) current.stderr += String(chunk);
  return write(chunk, ...rest);
};
process.on('unhandledRejection', (e) => current?.errors.push(`a rejection nobody handled: ${describe(e)}`));
process.on('uncaughtException', (e) => current?.errors.push(`an uncaught exception: ${describe(e)}`));
process.on('exit', () => fs.writeFileSync(reportFile, JSON.stringify(report)));

for (const file of files) {
  current = report.blocks[file] = { finished: false, errors: [], stderr: '', checks: {} };
  let timer;
  try {
    await Promise.race([
      import(pathToFileURL(file).href),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error('the example did not finish within 30 s')), 30_000);
      }),
    ]);
    current.finished = true;
  } catch (e) {
    // A failed `// result:` check is recorded already.
    if (!current.errors.some((m) => describe(e).includes(m))) current.errors.push(describe(e));
  } finally {
    clearTimeout(timer);
  }
}
report.done = true;
// Left to exit on its own; if something keeps it alive, say so and end it.
setTimeout(() => {
  report.leftOpen = true;
  process.exit(3);
}, 10_000).unref();
