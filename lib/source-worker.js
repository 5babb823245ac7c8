'use strict';
// Worker thread that prepares large programs for lib/source.js (lib/source-transform.js),
// so that parsing megabytes never blocks the host's event loop. One request at a time,
// answered in order; code it leaves unchanged is not copied back.
const { parentPort } = require('node:worker_threads');
const { transformSource } = require('./source-transform');

parentPort.on('message', ({ id, code, recipe }) => {
  const out = transformSource(code, recipe);
  if (out.failure) parentPort.postMessage({ id, failure: out.failure });
  else parentPort.postMessage({ id, code: out.code === code ? undefined : out.code, map: out.map, bareLastExpression: out.bareLastExpression });
});
