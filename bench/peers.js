'use strict';
// The peers isolet is measured against, per Node line. isolated-vm is a native addon
// whose supported major depends on the Node line (7 ships prebuilds for ABI 137/147;
// 6 covers 22; 5 is the last for 20), so it is installed per ABI under
// bench/peers/abi<N>/. Machines here reach the npm registry only: a prebuilt download
// from GitHub fails, so the source build is pointed at the running Node's own headers
// (`<prefix>/include/node`) instead of a download.
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const major = Number(process.versions.node.split('.')[0]);
const ISOLATED_VM = major >= 24 ? '7.0.1' : major === 22 ? '6.2.0' : '5.0.4';
const PEERS_DIR = path.join(__dirname, 'peers', `abi${process.versions.modules}`);

function nodePrefix() {
  // <prefix>/bin/node -> <prefix>, which has include/node/common.gypi for node-gyp.
  const prefix = path.dirname(path.dirname(process.execPath));
  return fs.existsSync(path.join(prefix, 'include', 'node', 'common.gypi')) ? prefix : null;
}

function npmCli() {
  const candidates = [
    process.env.npm_execpath,
    path.join(path.dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'bin', 'npm-cli.js'),
    '/usr/lib/node_modules/npm/bin/npm-cli.js',
    '/usr/local/lib/node_modules/npm/bin/npm-cli.js',
  ];
  return candidates.find((p) => p && p.endsWith('.js') && fs.existsSync(p)) ?? null;
}

/** Installs isolated-vm for this Node's ABI unless present. Returns a note on failure. */
function ensureIsolatedVm() {
  const marker = path.join(PEERS_DIR, 'node_modules', 'isolated-vm', 'package.json');
  if (fs.existsSync(marker) && require(marker).version === ISOLATED_VM && loadable(PEERS_DIR)) return null;
  const cli = npmCli();
  if (!cli) return 'npm not found';
  fs.mkdirSync(PEERS_DIR, { recursive: true });
  fs.writeFileSync(path.join(PEERS_DIR, 'package.json'), `${JSON.stringify({ private: true, dependencies: { 'isolated-vm': ISOLATED_VM } }, null, 2)}\n`);
  const env = { ...process.env, PATH: `${path.dirname(process.execPath)}${path.delimiter}${process.env.PATH}` };
  const prefix = nodePrefix();
  if (prefix) env.npm_config_nodedir = prefix;
  process.stderr.write(`bench: installing isolated-vm ${ISOLATED_VM} for Node ${process.version} (ABI ${process.versions.modules}); a source build takes minutes\n`);
  const r = spawnSync(process.execPath, [cli, 'install', '--no-audit', '--no-fund', '--loglevel=error', '--prefix', PEERS_DIR], { env, stdio: ['ignore', 'inherit', 'inherit'] });
  if (r.status !== 0) return `npm install isolated-vm@${ISOLATED_VM} failed (exit ${r.status})`;
  return loadable(PEERS_DIR) ? null : 'isolated-vm installed but does not load';
}

function loadable(dir) {
  // isolated-vm needs --no-node-snapshot on Node >= 20 to be loaded at all in some
  // builds; run.js re-executes itself with it, so try loading the same way.
  const r = spawnSync(process.execPath, ['--no-node-snapshot', '-e', `require(${JSON.stringify(path.join(dir, 'node_modules', 'isolated-vm'))})`], { stdio: 'ignore' });
  return r.status === 0;
}

function load(name) {
  for (const dir of [path.join(PEERS_DIR, 'node_modules'), path.join(__dirname, 'node_modules')]) {
    try {
      return require(path.join(dir, name));
    } catch {
      // try the next place
    }
  }
  return null;
}

function installedVersion(name) {
  for (const dir of [path.join(PEERS_DIR, 'node_modules'), path.join(__dirname, 'node_modules')]) {
    try {
      return JSON.parse(fs.readFileSync(path.join(dir, name, 'package.json'), 'utf8')).version;
    } catch {
      // try the next place
    }
  }
  return '?';
}

module.exports = { ensureIsolatedVm, load, installedVersion, ISOLATED_VM, PEERS_DIR };
