'use strict';
// Worker thread that erases TypeScript types for lib/typescript.js, so that large input
// never blocks the host's event loop. One request at a time, answered in order.
const { parentPort } = require('node:worker_threads');
const amaro = require('amaro');

parentPort.on('message', ({ id, source }) => {
  try {
    parentPort.postMessage({ id, code: amaro.transformSync(source, { mode: 'strip-only' }).code });
  } catch (err) {
    const e = err || {};
    parentPort.postMessage({
      id,
      error: { message: String(e.message ?? e), startLine: e.startLine, startColumn: e.startColumn, code: e.code },
    });
  }
});
