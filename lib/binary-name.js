'use strict';
// Where the addon binary for this platform and Node ABI lives. One binary per
// (platform, arch, Node ABI), because the addon is compiled against Node's own V8.
const fs = require('node:fs');
const path = require('node:path');

/** The Node lines isolet supports and tests, by ABI (`process.versions.modules`). */
const SUPPORTED_NODE_ABIS = Object.freeze({ 115: 20, 127: 22, 137: 24, 147: 26 });

function tag() {
  return `${process.platform}-${process.arch}`;
}

/** The file a source build (`npm run build:addon`, or the install script) writes. */
function localBinaryPath(root) {
  return path.join(root, 'build', `isolet.${tag()}.abi${process.versions.modules}.node`);
}

/** The directory `npm run prebuild` fills and `npm pack` ships. */
function prebuildDir(root) {
  return path.join(root, 'prebuilds', tag());
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
  const candidates = [localBinaryPath(root), path.join(prebuildDir(root), abi)];
  const pkg = platformPackageDir();
  if (pkg) candidates.push(path.join(pkg, abi));
  return candidates;
}

/** The Node ABIs this installed package has prebuilt binaries for on this platform, ascending. */
function shippedAbis(root) {
  const abis = new Set();
  for (const dir of [prebuildDir(root), platformPackageDir()]) {
    if (!dir) continue;
    let names = [];
    try {
      names = fs.readdirSync(dir);
    } catch {
      continue;
    }
    for (const name of names) {
      const m = /^isolet\.abi(\d+)\.node$/.exec(name);
      if (m) abis.add(Number(m[1]));
    }
  }
  return [...abis].sort((a, b) => a - b);
}

/** "ABIs 115 (Node 20), 127 (Node 22)", for messages. */
function describeAbis(abis) {
  const each = abis.map((abi) => (SUPPORTED_NODE_ABIS[abi] ? `${abi} (Node ${SUPPORTED_NODE_ABIS[abi]})` : `${abi}`));
  return `${abis.length === 1 ? 'ABI' : 'ABIs'} ${each.join(', ')}`;
}

/** The sentence loader and install script both use when no binary matches this Node. */
function noBinaryMessage(root) {
  const shipped = shippedAbis(root);
  const supported = Object.values(SUPPORTED_NODE_ABIS).join(', ');
  return (
    `isolet: no binary for ${tag()}, Node ${process.version} (ABI ${process.versions.modules}). ` +
    (shipped.length
      ? `This package ships prebuilt binaries for ${tag()} Node ${describeAbis(shipped)}`
      : `This package ships no prebuilt binary for ${tag()}`) +
    `; isolet supports Node ${supported}.`
  );
}

module.exports = {
  SUPPORTED_NODE_ABIS,
  binaryCandidates,
  describeAbis,
  localBinaryPath,
  noBinaryMessage,
  prebuildDir,
  shippedAbis,
  tag,
};
