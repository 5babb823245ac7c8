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

/** The platform package (npm/<triple>) that may hold prebuilt binaries, if installed. */
function platformPackageDir() {
  const triple = { 'linux-x64': 'linux-x64-gnu' }[tag()];
  if (!triple) return null;
  try {
    return path.dirname(require.resolve(`isolet-${triple}/package.json`));
  } catch {
    return null;
  }
}

/** Every place a matching binary may be, best first. */
function binaryCandidates(root) {
  const abi = `isolet.abi${process.versions.modules}.node`;
  const candidates = [localBinaryPath(root), path.join(root, 'prebuilds', tag(), abi)];
  const pkg = platformPackageDir();
  if (pkg) candidates.push(path.join(pkg, abi));
  return candidates;
}

module.exports = { binaryCandidates, localBinaryPath, tag };
