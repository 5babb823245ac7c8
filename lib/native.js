'use strict';
// Loads the addon built for this Node, and captures Node's V8 platform once.
const fs = require('node:fs');
const path = require('node:path');
const { binaryCandidates, tag } = require('./binary-name');

const root = path.resolve(__dirname, '..');

function load() {
  const candidates = binaryCandidates(root);
  const file = candidates.find((p) => fs.existsSync(p));
  if (!file) {
    throw new Error(
      `isolet: no binary for ${tag()} and Node ABI ${process.versions.modules} ` +
        `(Node ${process.version}); looked in: ${candidates.join(', ')}. ` +
        'Run `npm run build` (needs Rust) to build one for this Node.',
    );
  }
  const binding = require(file);
  const info = binding.init();
  if (info.nodeAbi !== process.versions.modules) {
    throw new Error(
      `isolet: ${path.basename(file)} was built for Node ABI ${info.nodeAbi}, ` +
        `but this is Node ${process.version} (ABI ${process.versions.modules}). Rebuild with \`npm run build\`.`,
    );
  }
  binding.info = info;
  // If a thread had to be quarantined, isolet ends the process right after Node's exit
  // hooks (V8 cannot be torn down with a parked isolate); it then needs the exit code.
  process.on('exit', (code) => binding.noteExitCode(typeof code === 'number' ? code : 0));
  return binding;
}

module.exports = load();
