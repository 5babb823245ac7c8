'use strict';
// Where the addon binary for this platform and Node ABI lives. One binary per
// (platform, arch, libc, Node ABI), because the addon is compiled against Node's own V8
// and, on Linux, links one C library (glibc binaries do not load on musl, and back).
const fs = require('node:fs');
const path = require('node:path');

/** The Node lines isolet supports and tests, by ABI (`process.versions.modules`). */
const SUPPORTED_NODE_ABIS = Object.freeze({ 115: 20, 127: 22, 137: 24, 147: 26 });

let libcCache;
/** 'glibc' or 'musl' on Linux, null elsewhere (Node's report names glibc's version only on glibc). */
function libc() {
  if (process.platform !== 'linux') return null;
  if (libcCache === undefined) {
    const report = process.report;
    // The report would otherwise resolve host names of open sockets (slow, and needless here).
    const excluded = report.excludeNetwork;
    report.excludeNetwork = true;
    try {
      libcCache = report.getReport().header.glibcVersionRuntime ? 'glibc' : 'musl';
    } finally {
      report.excludeNetwork = excluded;
    }
  }
  return libcCache;
}

/** `linux-x64`, `linux-arm64`, `linux-x64-musl`, `darwin-arm64`: the directory and file tag. */
function tag() {
  return `${process.platform}-${process.arch}${libc() === 'musl' ? '-musl' : ''}`;
}

/** `linux-arm64 (glibc)`, for messages: platform, architecture and C library. */
function describeTarget() {
  const c = libc();
  return `${process.platform}-${process.arch}${c ? ` (${c})` : ''}`;
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
  const triple = { 'linux-x64': 'linux-x64-gnu', 'linux-arm64': 'linux-arm64-gnu', 'linux-x64-musl': 'linux-x64-musl' }[tag()];
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
    `isolet: no binary for ${describeTarget()}, Node ${process.version} (ABI ${process.versions.modules}). ` +
    (shipped.length
      ? `This package ships prebuilt binaries for ${describeTarget()} Node ${describeAbis(shipped)}`
      : `This package ships no prebuilt binary for ${describeTarget()}`) +
    `; isolet supports Node ${supported}.`
  );
}

module.exports = {
  SUPPORTED_NODE_ABIS,
  binaryCandidates,
  describeAbis,
  describeTarget,
  libc,
  localBinaryPath,
  noBinaryMessage,
  prebuildDir,
  shippedAbis,
  tag,
};
