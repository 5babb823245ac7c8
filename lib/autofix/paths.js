'use strict';

// Step 1, assertSafePath: the file autoFix may read and replace is a regular file whose
// real path lies inside root's real path.

const fsp = require('node:fs/promises');
const path = require('node:path');
const { StepFailure, errCode } = require('./errors');

/** `child` lies strictly below `parent` (path.relative, not a string prefix: /repo-evil is not in /repo). */
function isInside(parent, child) {
  const rel = path.relative(parent, child);
  return rel !== '' && rel !== '..' && !rel.startsWith('..' + path.sep) && !path.isAbsolute(rel);
}

/**
 * Resolves `filePath` (relative paths are taken relative to `root`) and checks that the
 * file it names is a regular file whose real path lies inside root's real path.
 * Throws StepFailure('unsafe-path') otherwise.
 */
async function assertSafePath(filePath, root, auditRealPath) {
  if (root.includes('\0')) throw new StepFailure('unsafe-path', 'root contains a NUL byte');
  if (filePath.includes('\0')) throw new StepFailure('unsafe-path', 'file path contains a NUL byte');

  let rootReal;
  try {
    rootReal = await fsp.realpath(path.resolve(root));
  } catch (err) {
    throw new StepFailure('unsafe-path', `root cannot be resolved: ${errCode(err)}`);
  }
  const rootStat = await fsp.stat(rootReal).catch(() => null);
  if (!rootStat || !rootStat.isDirectory()) throw new StepFailure('unsafe-path', 'root is not a directory');

  const requested = path.resolve(rootReal, filePath);
  let link;
  try {
    link = await fsp.lstat(requested);
  } catch (err) {
    throw new StepFailure('unsafe-path', `file cannot be examined: ${errCode(err)}`);
  }
  let fileReal;
  try {
    fileReal = await fsp.realpath(requested);
  } catch (err) {
    throw new StepFailure('unsafe-path', `file cannot be resolved: ${errCode(err)}`);
  }
  if (fileReal === rootReal) throw new StepFailure('unsafe-path', 'file is root itself, not a regular file');
  if (!isInside(rootReal, fileReal)) {
    throw new StepFailure(
      'unsafe-path',
      link.isSymbolicLink() ? 'file is a symbolic link that leads outside root' : 'file is outside root',
    );
  }
  let st;
  try {
    st = await fsp.lstat(fileReal);
  } catch (err) {
    throw new StepFailure('unsafe-path', `file cannot be examined: ${errCode(err)}`);
  }
  if (!st.isFile()) {
    throw new StepFailure('unsafe-path', `file is not a regular file (${describeType(st)})`);
  }
  if (st.nlink > 1) {
    // Another name for the same bytes may live outside root; reading it would leak that file.
    throw new StepFailure(
      'unsafe-path',
      `file has ${st.nlink} hard links; refusing a file that may be shared outside root`,
    );
  }
  if (auditRealPath !== undefined && auditRealPath === fileReal) {
    throw new StepFailure('unsafe-path', 'file is the audit log');
  }
  return { rootReal, fileReal, rel: toPosix(path.relative(rootReal, fileReal)), stat: st };
}

function describeType(st) {
  if (st.isDirectory()) return 'directory';
  if (st.isSymbolicLink()) return 'symbolic link';
  if (st.isFIFO()) return 'FIFO';
  if (st.isSocket()) return 'socket';
  if (st.isCharacterDevice() || st.isBlockDevice()) return 'device';
  return 'not a file';
}

function toPosix(p) {
  return path.sep === '/' ? p : p.split(path.sep).join('/');
}

module.exports = { assertSafePath, isInside };
