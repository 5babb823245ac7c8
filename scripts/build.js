#!/usr/bin/env node
// Builds the addon from source for the Node running this script, and puts it where
// lib/native.js looks: build/isolet.<platform>-<arch>.abi<N>.node.
// `--if-missing` (the install script, and before `npm test`) does nothing when a matching
// prebuilt binary exists, or an earlier build made from the same sources.
// Inside an installed package (node_modules/isolet) cargo builds in a temporary
// directory that is removed afterwards, so no `target/` is left in the user's project.
'use strict';
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { binaryCandidates, localBinaryPath, noBinaryMessage } = require('../lib/binary-name');
const { sourceHash, stampState, writeStamp } = require('./source-stamp');

const root = path.resolve(__dirname, '..');
// ISOLET_BUILD_FROM_SOURCE=1: ignore prebuilt binaries (for a system they do not load on).
const ifMissing = process.argv.includes('--if-missing') && !process.env.ISOLET_BUILD_FROM_SOURCE;
const installed = root.split(path.sep).includes('node_modules');

if (ifMissing) {
  const hash = sourceHash();
  const [local, ...prebuilt] = binaryCandidates(root);
  // A local build is reused only if it was built from the current sources; a prebuilt
  // one unless a stamp shows it was made from other sources (a dev checkout).
  const use = fs.existsSync(local)
    ? stampState(local, hash) === 'fresh'
      ? local
      : null
    : prebuilt.find((p) => fs.existsSync(p) && stampState(p, hash) !== 'stale');
  if (use) {
    console.log(`isolet: using ${path.relative(root, use)}`);
    process.exit(0);
  }
  if (!fs.existsSync(local)) {
    console.log(`${noBinaryMessage(root)} Building it from source (needs Rust and a C++ compiler)…`);
  }
}

const cargo = process.env.CARGO || 'cargo';
const probe = spawnSync(cargo, ['--version'], { encoding: 'utf8' });
if (probe.status !== 0) {
  console.error(
    `isolet: cannot build the addon for Node ${process.version} (ABI ${process.versions.modules}): ` +
      "Rust's cargo was not found. Install Rust (https://rustup.rs) and a C++ compiler, then run " +
      '`npm rebuild isolet`, or use a Node line with a prebuilt binary (see the README, Troubleshooting).',
  );
  process.exit(1);
}

const ownTarget = installed && !process.env.CARGO_TARGET_DIR;
const targetDir = ownTarget
  ? fs.mkdtempSync(path.join(os.tmpdir(), 'isolet-build-'))
  : process.env.CARGO_TARGET_DIR || path.join(root, 'target');
try {
  console.log(`isolet: building the addon for Node ${process.version} (ABI ${process.versions.modules})…`);
  const build = spawnSync(cargo, ['build', '--release', '-p', 'isolet'], {
    cwd: root,
    stdio: 'inherit',
    env: { ...process.env, ISOLET_NODE: process.execPath, CARGO_TARGET_DIR: targetDir },
  });
  if (build.status !== 0) {
    console.error('isolet: cargo build failed (see above).');
    process.exitCode = build.status || 1;
  } else {
    const libName = { linux: 'libisolet.so', darwin: 'libisolet.dylib', win32: 'isolet.dll' }[process.platform];
    const dest = localBinaryPath(root);
    fs.mkdirSync(path.dirname(dest), { recursive: true });
    // Copy to a temp name and rename, so a running process never maps a half-written file.
    const tmp = `${dest}.${process.pid}.tmp`;
    fs.copyFileSync(path.join(targetDir, 'release', libName), tmp);
    fs.renameSync(tmp, dest);
    writeStamp(dest);
    console.log(`isolet: built ${path.relative(root, dest)}`);
  }
} finally {
  if (ownTarget) fs.rmSync(targetDir, { recursive: true, force: true });
}
