'use strict';

// Step 5, apply: the approved suggestion replaces the file atomically (temp file, fsync,
// rename), and only if the file is still exactly what was read, still inside root.

const fs = require('node:fs');
const fsp = require('node:fs/promises');
const path = require('node:path');
const crypto = require('node:crypto');
const { StepFailure, errCode } = require('./errors');
const { isInside } = require('./paths');
const { O_NOFOLLOW, readVetted, sha256 } = require('./read');

const O_DIRECTORY = fs.constants.O_DIRECTORY || 0;

/**
 * @param {{ ino: number, dev: number, mode: number, uid: number, gid: number, sha256: string }} expected
 *   the file as it was read
 */
async function applyAtomically(fileReal, rootReal, expected, newBytes) {
  const dir = path.dirname(fileReal);
  const tmp = path.join(
    dir,
    `.${path.basename(fileReal)}.isolet-${process.pid}-${crypto.randomBytes(6).toString('hex')}.tmp`,
  );
  let created = false;
  try {
    const fh = await fsp.open(
      tmp,
      fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | O_NOFOLLOW,
      0o600,
    );
    created = true;
    try {
      await fh.chmod(expected.mode & 0o7777);
      if (
        typeof process.getuid === 'function' &&
        (expected.uid !== process.getuid() || expected.gid !== process.getgid())
      ) {
        await fh.chown(expected.uid, expected.gid).catch(() => {});
      }
      let off = 0;
      while (off < newBytes.length) {
        const { bytesWritten } = await fh.write(newBytes, off, newBytes.length - off, off);
        off += bytesWritten;
      }
      await fh.sync();
    } finally {
      await fh.close();
    }

    // The file must be exactly what we read (same inode, same bytes) and still inside root.
    const dirReal = await fsp.realpath(dir);
    if (!isInside(rootReal, path.join(dirReal, path.basename(fileReal)))) {
      throw new StepFailure('write-failure', "the file's directory moved outside root; not written");
    }
    let current;
    try {
      current = await readVetted(fileReal, expected, Number.MAX_SAFE_INTEGER);
    } catch {
      throw new StepFailure('write-failure', 'the file was replaced or removed since it was read; not written');
    }
    if (sha256(current.bytes) !== expected.sha256) {
      throw new StepFailure('write-failure', 'the file changed since it was read; not written');
    }
    await fsp.rename(tmp, fileReal);
    created = false;
    await fsyncDir(dir);
  } catch (err) {
    if (created) await fsp.unlink(tmp).catch(() => {});
    if (err instanceof StepFailure) throw err;
    throw new StepFailure('write-failure', `the file could not be written: ${errCode(err)}`, {
      error: { name: (err && err.name) || 'Error', message: errCode(err) },
    });
  }
}

async function fsyncDir(dir) {
  let fh;
  try {
    fh = await fsp.open(dir, fs.constants.O_RDONLY | O_DIRECTORY);
    await fh.sync();
  } catch {
    // Not every platform / file system can fsync a directory; the rename is already done.
  } finally {
    if (fh) await fh.close().catch(() => {});
  }
}

module.exports = { applyAtomically };
