'use strict';

// Step 2, read: the original bytes, through a descriptor that is the file assertSafePath
// vetted, bounded, and only if they are UTF-8 text.

const fs = require('node:fs');
const fsp = require('node:fs/promises');
const crypto = require('node:crypto');
const { StepFailure, errCode } = require('./errors');

const O_NOFOLLOW = fs.constants.O_NOFOLLOW || 0;

/** Reads through a descriptor opened without following a final symlink; checks it is the file we vetted. */
async function readVetted(fileReal, expected, maxBytes) {
  let fh;
  try {
    fh = await fsp.open(fileReal, fs.constants.O_RDONLY | O_NOFOLLOW);
  } catch (err) {
    throw new StepFailure('read-failure', `file cannot be opened: ${errCode(err)}`);
  }
  try {
    const st = await fh.stat();
    if (!st.isFile() || (expected && (st.ino !== expected.ino || st.dev !== expected.dev))) {
      throw new StepFailure('read-failure', 'file was replaced while it was being checked');
    }
    if (st.size > maxBytes) {
      throw new StepFailure('read-failure', `file is ${st.size} bytes, over maxFileBytes (${maxBytes})`);
    }
    const bytes = await fh.readFile();
    if (bytes.length > maxBytes) {
      throw new StepFailure('read-failure', `file is over maxFileBytes (${maxBytes})`);
    }
    return { bytes, stat: st };
  } catch (err) {
    if (err instanceof StepFailure) throw err;
    throw new StepFailure('read-failure', `file cannot be read: ${errCode(err)}`);
  } finally {
    await fh.close().catch(() => {});
  }
}

function decodeText(bytes) {
  if (bytes.includes(0)) throw new StepFailure('read-failure', 'file contains NUL bytes: not a text file');
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    throw new StepFailure('read-failure', 'file is not valid UTF-8 text');
  }
}

/** sha256 (hex) of what the file holds now, or null when it cannot be read. */
async function currentSha256(fileReal) {
  try {
    return sha256(await fsp.readFile(fileReal, { flag: fs.constants.O_RDONLY | O_NOFOLLOW }));
  } catch {
    return null;
  }
}

function sha256(bytes) {
  return crypto.createHash('sha256').update(bytes).digest('hex');
}

module.exports = { O_NOFOLLOW, readVetted, decodeText, currentSha256, sha256 };
