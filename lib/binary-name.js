'use strict';
// Where the addon binary for this platform and Node ABI lives. One binary per
// (platform, arch, Node ABI), because the addon is compiled against Node's own V8.
const path = require('node:path');

function tag() {
  return `${process.platform}-${process.arch}`;
}

/** The file `npm run build` writes. */
function localBinaryPath(root) {
  return path.join(root, 'build', `isolet.${tag()}.abi${process.versions.modules}.node`);
}

/** Every place a matching binary may be, best first. */
function binaryCandidates(root) {
  return [
    localBinaryPath(root),
    path.join(root, 'prebuilds', tag(), `isolet.abi${process.versions.modules}.node`),
  ];
}

module.exports = { binaryCandidates, localBinaryPath, tag };
