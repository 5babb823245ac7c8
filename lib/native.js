'use strict';
// Loads the addon built for this Node, and captures Node's V8 platform once.
const fs = require('node:fs');
const path = require('node:path');
const { binaryCandidates, describeTarget, noBinaryMessage } = require('./binary-name');

const root = path.resolve(__dirname, '..');

function load() {
  const candidates = binaryCandidates(root);
  const file = candidates.find((p) => fs.existsSync(p));
  if (!file) {
    const err = new Error(
      `${noBinaryMessage(root)} Looked in: ${candidates.join(', ')}. ` +
        'Run `npm rebuild isolet` in your project to build one from source (needs Rust and a C++ ' +
        'compiler), or switch to a Node line listed above.',
    );
    err.code = 'ERR_ISOLET_NO_BINARY';
    throw err;
  }
  let binding;
  try {
    binding = require(file);
  } catch (cause) {
    const err = new Error(
      `isolet: could not load ${file} in Node ${process.version} (ABI ${process.versions.modules}) on ${describeTarget()}: ` +
        `${cause && cause.message}. The prebuilt binaries need glibc 2.28 and GCC 9's libstdc++ or newer; ` +
        'on an older system build from source with `ISOLET_BUILD_FROM_SOURCE=1 npm rebuild isolet` in your project.',
      { cause },
    );
    err.code = 'ERR_ISOLET_BINARY_LOAD';
    throw err;
  }
  const info = binding.init();
  if (info.nodeAbi !== process.versions.modules) {
    const err = new Error(
      `isolet: ${file} was built for Node ABI ${info.nodeAbi}, but this is Node ${process.version} ` +
        `(ABI ${process.versions.modules}) on ${describeTarget()}. Run \`npm rebuild isolet\` in your project to rebuild it.`,
    );
    err.code = 'ERR_ISOLET_BINARY_ABI';
    throw err;
  }
  binding.info = info;
  // How sandbox host processes (isolation: 'process') are started: this Node, this entry.
  // ISOLET_SANDBOX_HOST_EXEC replaces the Node binary with a launcher taking the same
  // arguments: under qemu-user, whose execve runs the new program natively, a script
  // that runs this Node under qemu again (scripts/arm64-check.sh).
  const hostExec = process.env.ISOLET_SANDBOX_HOST_EXEC || process.execPath;
  binding.setSandboxHost(hostExec, path.join(__dirname, 'supervisor', 'sandbox-host.js'));
  // `process.exit()` disposes Node's platform without environment cleanup hooks: stop
  // this environment's isolate threads first. If a thread had to be quarantined, isolet
  // ends the process right after Node's exit hooks (V8 cannot be torn down with a parked
  // isolate); it then needs the exit code.
  process.on('exit', (code) => binding.noteExit(typeof code === 'number' ? code : 0));
  if (!binding.mainThreadGuarded()) guardMainThread();
  return binding;
}

// Loaded first in a `worker_threads` Worker: the process exits from its main thread,
// where Node's V8 teardown (V8::Dispose) would free V8's process-wide state under a
// thread quarantined in any Worker (a crash at exit: SIGSEGV in the stuck thread on Node
// 20-24, an abort in V8 on 26). Loading this file on the main thread too gives that
// thread isolet's exit hook (above), which ends the process first with its own exit
// code. A Worker can run code on the main thread only through the inspector's
// main-thread session; Node runs it there between tasks, or at the next interrupt check.
function guardMainThread() {
  const failed = (why) =>
    process.emitWarning(
      `isolet could not load itself on the main thread (${why}); a thread-mode run stuck in this ` +
        'Worker would crash the process at exit. Load isolet on the main thread too (in the entry script, ' +
        "or vitest's globalSetup), or use isolation: 'process' in Workers.",
      { code: 'ISOLET_MAIN_THREAD' },
    );
  // Only this package's own file: never a bundle that inlined it (all of it would run).
  if (__filename !== path.join(root, 'lib', 'native.js')) {
    failed('lib/native.js is not in its package');
    return;
  }
  let session;
  try {
    const inspector = require('node:inspector');
    session = new inspector.Session();
    session.connectToMainThread();
  } catch (e) {
    failed(e && e.code ? e.code : String(e));
    return;
  }
  // The command-line API's `require` exists in every main-thread context, ESM or CJS.
  const expression = `void require(${JSON.stringify(__filename)})`;
  session.post('Runtime.evaluate', { expression, includeCommandLineAPI: true, silent: true }, (err, res) => {
    session.disconnect();
    if (err || (res && res.exceptionDetails)) {
      const thrown = res && res.exceptionDetails && res.exceptionDetails.exception;
      failed(err ? err.message : (thrown && thrown.description) || 'an exception');
    }
  });
}

module.exports = load();
