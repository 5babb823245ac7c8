'use strict';
// Which sources a binary was built from: a hash of every file the build reads, written
// next to a build and compared before reusing it, so a stale binary is never picked up
// in a dev checkout. The stamps live in build/ (not shipped), so an installed package
// has none and trusts its prebuilt binaries.
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');

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

/** Where the stamp for `binary` (a path inside the package) is kept. */
function stampPath(binary) {
  const rel = path.relative(root, binary);
  const flat = rel.startsWith(`build${path.sep}`) ? rel : path.join('build', 'stamps', rel.split(path.sep).join('-'));
  return path.join(root, `${flat}.source-sha256`);
}

/** 'fresh', 'stale', or 'unknown' (no stamp: a binary that came with the package). */
function stampState(binary, hash = sourceHash()) {
  const stamp = stampPath(binary);
  if (!fs.existsSync(stamp)) return 'unknown';
  return fs.readFileSync(stamp, 'utf8') === hash ? 'fresh' : 'stale';
}

function writeStamp(binary, hash = sourceHash()) {
  const stamp = stampPath(binary);
  fs.mkdirSync(path.dirname(stamp), { recursive: true });
  fs.writeFileSync(stamp, hash);
}

module.exports = { sourceHash, stampPath, stampState, writeStamp };
