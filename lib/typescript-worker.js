'use strict';
// Worker thread that erases TypeScript types for lib/typescript.js, so that large input
// never blocks the host's event loop. One request at a time, answered in order.
const { parentPort } = require('node:worker_threads');
const amaro = require('amaro');
const { stripBody } = require('./typescript-body');

const transform = (source) => amaro.transformSync(source, { mode: 'strip-only' }).code;

parentPort.on('message', ({ id, code, asyncBody }) => {
  try {
    parentPort.postMessage({ id, code: asyncBody ? stripBody(transform, code) : transform(code) });
  } catch (err) {
    const e = err || {};
    parentPort.postMessage({
      id,
      error: { message: String(e.message ?? e), startLine: e.startLine, startColumn: e.startColumn, code: e.code },
    });
  }
});
