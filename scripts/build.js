#!/usr/bin/env node
// Builds the addon from source for the Node running this script, and puts it where
// lib/native.js looks: build/isolet.<platform>-<arch>.abi<N>.node.
// `--if-missing` (used by `npm install` and before `npm test`) does nothing when a
// matching prebuilt exists, or an earlier build made from the same sources.
'use strict';
const { spawnSync } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { binaryCandidates, localBinaryPath } = require('../lib/binary-name');

const root = path.resolve(__dirname, '..');
const ifMissing = process.argv.includes('--if-missing');

/** Hash of every source file the binary is built from. */
function sourceHash() {
  const hash = crypto.createHash('sha256');
  const walk = (rel) => {
    const full = path.join(root, rel);
    if (!fs.existsSync(full)) return;
    const stat = fs.statSync(full);
    if (stat.isDirectory()) {
      for (const name of fs.readdirSync(full).sort()) walk(path.join(rel, name));
    } else if (/\.(rs|cc|h|toml|lock)$/.test(rel) || rel === 'build.rs') {
      hash.update(rel).update('\0').update(fs.readFileSync(full));
    }
  };
  for (const rel of ['build.rs', 'Cargo.toml', 'Cargo.lock', 'src', 'native', 'crates']) walk(rel);
  return hash.digest('hex');
}

const stampPath = `${localBinaryPath(root)}.source-sha256`;

if (ifMissing) {
  const [local, ...prebuilt] = binaryCandidates(root);
  // A local build is reused only if it was built from the current sources.
  const localFresh =
    fs.existsSync(local) && fs.existsSync(stampPath) && fs.readFileSync(stampPath, 'utf8') === sourceHash();
  const use = localFresh ? local : fs.existsSync(local) ? null : prebuilt.find((p) => fs.existsSync(p));
  if (use) {
    console.log(`isolet: using ${use}`);
    process.exit(0);
  }
}

const cargo = process.env.CARGO || 'cargo';
const probe = spawnSync(cargo, ['--version'], { encoding: 'utf8' });
if (probe.status !== 0) {
  console.error(
    `isolet: no prebuilt binary for ${process.platform}-${process.arch} and Node ABI ` +
      `${process.versions.modules} (Node ${process.version}), and Rust's cargo was not found ` +
      'to build one. Install Rust (https://rustup.rs) and run `npm install` again.',
  );
  process.exit(1);
}

console.log(`isolet: building the addon for Node ${process.version} (ABI ${process.versions.modules})…`);
const build = spawnSync(cargo, ['build', '--release', '-p', 'isolet'], {
  cwd: root,
  stdio: 'inherit',
  env: { ...process.env, ISOLET_NODE: process.execPath },
});
if (build.status !== 0) {
  console.error('isolet: cargo build failed (see above).');
  process.exit(build.status || 1);
}

const libName = { linux: 'libisolet.so', darwin: 'libisolet.dylib', win32: 'isolet.dll' }[process.platform];
const targetDir = process.env.CARGO_TARGET_DIR || path.join(root, 'target');
const built = path.join(targetDir, 'release', libName);
const dest = localBinaryPath(root);
fs.mkdirSync(path.dirname(dest), { recursive: true });
// Copy to a temp name and rename, so a running process never maps a half-written file.
const tmp = `${dest}.${process.pid}.tmp`;
fs.copyFileSync(built, tmp);
fs.renameSync(tmp, dest);
fs.writeFileSync(stampPath, sourceHash());
console.log(`isolet: built ${path.relative(root, dest)}`);
