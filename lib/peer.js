'use strict';
// Optional peer packages (@modelcontextprotocol/server, ...): loaded only by the feature that
// needs them, so a plain runSandbox user installs none. A missing one is an error that
// names the package to install.

/** The package name of a module specifier (`@scope/name/sub/path` -> `@scope/name`). */
function packageOf(specifier) {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

/**
 * require()s `specifier`, or throws an Error (code ERR_ISOLET_MISSING_PEER) saying
 * which package `feature` needs.
 */
function requirePeer(specifier, feature) {
  try {
    return require(specifier);
  } catch (err) {
    const pkg = packageOf(specifier);
    if (err && err.code === 'MODULE_NOT_FOUND' && String(err.message).includes(pkg)) {
      const e = new Error(`${feature} needs the optional package ${pkg}, which is not installed: npm install ${pkg}`);
      e.code = 'ERR_ISOLET_MISSING_PEER';
      throw e;
    }
    throw err;
  }
}

module.exports = { requirePeer };
