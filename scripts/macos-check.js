#!/usr/bin/env node
// `node scripts/macos-check.js <isolet.abiN.node> <node>`: the structural check of a macOS
// binary cross-built here (scripts/prebuild-darwin.js), against the darwin `node` of the
// same line and architecture (which cannot run here). Neither is run; both are read with
// LLVM's tools (Debian's `llvm` package). Passes only if:
//   - the addon is a Mach-O dylib of the node's architecture;
//   - it exports napi_register_module_v1 (what Node's dlopen looks for);
//   - its load commands name /usr/lib/libSystem.B.dylib and /usr/lib/libc++.1.dylib only
//     (no rpath, no other library);
//   - its LC_BUILD_VERSION is macOS with a minimum no newer than that node's;
//   - every symbol it imports from libc++ is one that node itself imports from libc++
//     (so the libc++ of any macOS that runs that node has it) or one of LIBCXX_ALSO, every symbol it imports
//     from libSystem is one that node imports too or one of LIBSYSTEM_ALSO below (each
//     with the macOS version that has it), and every symbol left to dynamic lookup
//     (`-undefined dynamic_lookup`, as Node addons on macOS link) is exported by that node.
// Prints a summary line; exits 1 with the reasons otherwise. Also used as a module.
'use strict';
const { spawnSync } = require('node:child_process');
const { compareVersions } = require('./versions');

/**
 * libSystem functions the addon may import though the node of its line does not (Rust's
 * std, cap-std and rustix, and isolet's macOS code use them), grouped by the macOS
 * release that has them, all at or before 10.15, the oldest any supported Node line runs
 * on. Reviewed by hand (2026-12-03); a new import fails the check until it is added here.
 */
const LIBSYSTEM_GROUPS = {
  'POSIX, BSD and Darwin calls of macOS 10.7 or earlier': [
    '__NSGetArgc', '__NSGetArgv', '_chroot', '_confstr', '_copyfile_state_alloc', '_copyfile_state_free',
    '_copyfile_state_get', '_dirfd', '_dup', '_fchdir', '_fcopyfile', '_fgetxattr', '_flistxattr', '_flock',
    '_fremovexattr', '_fsetattrlist', '_fsetxattr', '_fstatfs', '_fstatvfs', '_getpeereid', '_getxattr',
    '_listxattr', '_mach_error_string', '_mach_wait_until', '_mkfifo', '_pause', '_posix_spawnattr_setpgroup',
    '_posix_spawnp', '_pthread_detach', '_pthread_get_stacksize_np', '_pthread_setschedparam',
    '_pthread_threadid_np', '_readdir_r', '_removexattr', '_setattrlist', '_setpgid', '_setxattr', '_sigaddset',
    '_sigaltstack', '_sigemptyset', '_strerror_r', '_sync', '_tcdrain', '_tcflow', '_tcflush', '_tcgetpgrp',
    '_tcgetsid', '_tcsendbreak', '_tcsetpgrp', '_waitid', '_malloc_zone_pressure_relief', '_pthread_mach_thread_np',
    '_pthread_main_np', '_thread_info', '_proc_pidinfo', '_sched_get_priority_min', '_recv',
    // Lazy binding's entry in dyld: binaries for 13.5+ (Node 24, 26) use chained fixups
    // instead and no longer import it, but dyld still exports it.
    'dyld_stub_binder',
  ],
  "libunwind's _Unwind_* (libSystem since macOS 10.6)": [
    '__Unwind_Backtrace', '__Unwind_DeleteException', '__Unwind_GetCFA', '__Unwind_GetDataRelBase', '__Unwind_GetIP',
    '__Unwind_GetIPInfo', '__Unwind_GetLanguageSpecificData', '__Unwind_GetRegionStart', '__Unwind_GetTextRelBase',
    '__Unwind_RaiseException', '__Unwind_Resume', '__Unwind_SetGR', '__Unwind_SetIP',
  ],
  'the *at() calls and fdopendir (macOS 10.10)': [
    '_fchmodat', '_fchownat', '_fdopendir', '_fstatat', '_linkat', '_mkdirat', '_openat', '_readlinkat', '_symlinkat',
    '_unlinkat',
  ],
  'getentropy (macOS 10.12; the getrandom crate, for crypto.getRandomValues)': ['_getentropy'],
  'fclonefileat (macOS 10.13)': ['_fclonefileat'],
  // x86_64 without SSE4.1 by default: rounding calls LLVM would inline on arm64.
  "C99 rounding in libSystem's libm (every macOS)": [
    '_ceil', '_ceilf', '_floor', '_floorf', '_trunc', '_truncf', '_round', '_roundf', '_rint', '_rintf', '_fma', '_fmaf',
  ],
  // Rust's 128-bit integer arithmetic and conversions: with LTO the linker binds them to
  // libSystem's re-exported /usr/lib/system/libcompiler_rt.dylib (LLVM's builtins) rather
  // than to Rust's own copy. Apple's stub (as zig ships it) lists them there and hides
  // ___fixdfti and kin only for 10.4 and 10.5 targets ($ld$hide$os10.5$), so 10.6 on.
  "compiler-rt's 128-bit builtins (libcompiler_rt, re-exported by libSystem; macOS 10.6)": [
    '___fixdfti', '___fixsfti', '___fixunsdfti', '___fixunssfti', '___floattidf', '___floattisf', '___floatuntidf',
    '___floatuntisf', '___divti3', '___modti3', '___udivti3', '___umodti3', '___udivmodti4', '___clzti2',
  ],
  // zig's compiler-rt calls it for __isPlatformVersionAtLeast only when the minimum is 10.15+.
  '_availability_version_check (macOS 10.15)': ['__availability_version_check'],
};
const LIBSYSTEM_ALSO = Object.fromEntries(Object.entries(LIBSYSTEM_GROUPS).flatMap(([why, names]) => names.map((n) => [n, why])));

/**
 * libc++ functions the addon may import though not every Node line's binary does, with
 * the evidence that the oldest macOS of every line has them.
 */
const NODE20_IMPORTS = "Node 20's darwin binaries import it (x64: minimum macOS 10.15; arm64: 11.0)";
const LIBCXX_ALSO = {
  __ZNSt3__112basic_stringIcNS_11char_traitsIcEENS_9allocatorIcEEE6appendEPKc: NODE20_IMPORTS,
  __ZNSt3__112basic_stringIcNS_11char_traitsIcEENS_9allocatorIcEEE6resizeEmc: NODE20_IMPORTS,
  // No Node binary imports it (by reasoning, not by a binary): libc++'s stable ABI list of
  // basic_string's members compiled into the dylib (<__string/extern_template_lists.h>,
  // the common list, "entries must never be removed") has it next to append and resize.
  __ZNSt3__112basic_stringIcNS_11char_traitsIcEENS_9allocatorIcEEE21__grow_by_and_replaceEmmmmmmPKc:
    "libc++'s stable extern-template list of basic_string<char>, beside append and resize",
  // ada-url (URL, `web: true`) is C++ built with exceptions, which Node is not: the C++ ABI
  // runtime and the standard exception classes it throws, all libc++abi's (stdexcept.cpp,
  // cxa_exception.cpp), re-exported by libc++.1.dylib on every macOS with libc++ (10.7 on;
  // bad_optional_access, C++17's, since 10.13). The seam's growing vectors and strings
  // instantiate length_error too. Node 20's oldest macOS is 10.15.
  ...Object.fromEntries(
    [
      '__ZNSt11logic_errorC2EPKc', '__ZNSt12length_errorD1Ev', '__ZTISt12length_error', '__ZTVSt12length_error',
      '__ZNSt12out_of_rangeD1Ev', '__ZTISt12out_of_range', '__ZTVSt12out_of_range',
      '__ZNSt20bad_array_new_lengthC1Ev', '__ZNSt20bad_array_new_lengthD1Ev', '__ZTISt20bad_array_new_length',
      '___cxa_allocate_exception', '___cxa_begin_catch', '___cxa_end_catch', '___cxa_free_exception', '___cxa_throw',
      '___cxa_rethrow', '___gxx_personality_v0', '__ZSt9terminatev', '__ZSt7nothrow',
      '__ZTVN10__cxxabiv117__class_type_infoE', '__ZTVN10__cxxabiv120__si_class_type_infoE', '__ZTVN10__cxxabiv121__vmi_class_type_infoE',
    ].map((s) => [s, "libc++abi's C++ runtime and exception classes, every macOS libc++ (10.7 on)"]),
  ),
  __ZNSt19bad_optional_accessD1Ev: "libc++'s std::bad_optional_access (macOS 10.13 on)",
  __ZTISt19bad_optional_access: "libc++'s std::bad_optional_access (macOS 10.13 on)",
  __ZTVSt19bad_optional_access: "libc++'s std::bad_optional_access (macOS 10.13 on)",
  __ZNSt3__112basic_stringIcNS_11char_traitsIcEENS_9allocatorIcEEE6appendEmc:
    "libc++'s stable extern-template list of basic_string<char>, beside append(const char*)",
  __ZNSt3__16chrono12steady_clock3nowEv:
    "Node 22's darwin binaries (minimum macOS 11.0) import it; libc++'s chrono.cpp has defined it since libc++'s first macOS release (10.7), so Node 20's 10.15 has it too",
};

function tool(name) {
  for (const candidate of [name, `${name}-14`, `${name}-15`, `${name}-16`]) {
    if (spawnSync(candidate, ['--version']).status === 0) return candidate;
  }
  throw new Error(`${name} not found (install Debian's llvm package)`);
}

function out(cmd, args) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 256 << 20 });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed: ${r.stderr || r.error}`);
  return r.stdout;
}

/** Arch, dylibs named by load commands, minimum macOS, file type of a Mach-O file. */
function header(file) {
  const readobj = tool('llvm-readobj');
  const text = out(readobj, ['--file-headers', '--macho-version-min', file]);
  const arch = /^Arch: (\S+)/m.exec(text)?.[1];
  const build = /Cmd: LC_BUILD_VERSION[\s\S]*?Platform: (\S+)\s+Version: (\S+)/.exec(text);
  const fileType = /FileType: (\S+)/.exec(text)?.[1];
  // The libraries its load commands load (not LC_ID_DYLIB, the file's own name).
  const lcs = out(tool('llvm-objdump'), ['--macho', '--private-headers', file]);
  const needed = [...lcs.matchAll(/cmd (LC_LOAD_DYLIB|LC_LOAD_WEAK_DYLIB|LC_REEXPORT_DYLIB|LC_LOAD_UPWARD_DYLIB|LC_LAZY_LOAD_DYLIB)\n\s+cmdsize \d+\n\s+name (\S+)/g)].map((m) => m[2]);
  return { arch, needed, platform: build?.[1], minos: build?.[2], fileType, rpath: /cmd LC_RPATH/.test(lcs) };
}

/** Undefined symbols by where they come from: library name, or 'lookup' (flat, dynamic). */
function imports(file) {
  const text = out(tool('llvm-nm'), ['-m', '-u', file]);
  const by = new Map();
  for (const line of text.split('\n')) {
    const m = /external (\S+)(?: \(from (\S+)\))?/.exec(line);
    if (!m) continue;
    // No library named: flat lookup at load time (-undefined dynamic_lookup).
    const from = m[2] || 'lookup';
    if (!by.has(from)) by.set(from, new Set());
    by.get(from).add(m[1]);
  }
  return by;
}

function exported(file) {
  return new Set(out(tool('llvm-nm'), ['--defined-only', '--extern-only', '--just-symbol-name', file]).split('\n').filter(Boolean));
}

/** Checks `addon` against `node`; returns { ok, problems, summary }. */
function check(addon, node) {
  const problems = [];
  const a = header(addon);
  const n = header(node);
  if (!a.arch || a.arch !== n.arch) problems.push(`architecture ${a.arch}, the node's is ${n.arch}`);
  if (!/DYLIB|DynamicLibrary/i.test(a.fileType || '')) problems.push(`file type ${a.fileType}, not a dylib`);
  const allowedLibs = ['/usr/lib/libSystem.B.dylib', '/usr/lib/libc++.1.dylib'];
  for (const lib of a.needed) if (!allowedLibs.includes(lib)) problems.push(`loads ${lib}`);
  if (a.rpath) problems.push('has an LC_RPATH');
  if (a.platform !== 'macos' || !a.minos) problems.push(`LC_BUILD_VERSION: platform ${a.platform}, minos ${a.minos}`);
  else if (compareVersions(a.minos, n.minos) > 0) problems.push(`needs macOS ${a.minos}, the node runs on ${n.minos}`);

  const ours = exported(addon);
  if (!ours.has('_napi_register_module_v1')) problems.push('does not export _napi_register_module_v1');

  const mine = imports(addon);
  const nodes = imports(node);
  const nodeExports = exported(node);
  // zig's Mach-O linker does not apply rustc's -exported_symbols_list, so the addon also
  // exports its Rust symbols (hashed, mangled names) and a few runtime ones. Harmless
  // under two-level namespaces, and flat lookups find the node's own exports first (the
  // executable comes first in load order), but none may be of Node's addon interface
  // (N-API, libuv, V8, node::), which addons look up flat.
  const addonInterface = /^(_napi_|_node_api_|_uv_|__ZN2v8|__ZNK2v8|__ZN4node|__ZNK4node)/;
  const trie = out(tool('llvm-objdump'), ['--macho', '--exports-trie', addon])
    .split('\n')
    .map((line) => /^0x[0-9A-Fa-f]+\s+(\S+)/.exec(line)?.[1])
    .filter(Boolean);
  for (const s of trie) {
    if (addonInterface.test(s) && s !== '_napi_register_module_v1') problems.push(`exports ${s}, a name of Node's addon interface`);
  }
  const counts = {};
  for (const [from, symbols] of mine) {
    counts[from] = symbols.size;
    for (const s of symbols) {
      if (from === 'lookup') {
        if (!nodeExports.has(s)) problems.push(`${s} is looked up at load but the node does not export it`);
      } else if (from === 'libc++') {
        if (!nodes.get('libc++')?.has(s) && !LIBCXX_ALSO[s]) problems.push(`${s} from libc++: the node does not import it (may be missing on old macOS)`);
      } else if (from === 'libSystem') {
        // x86_64's 64-bit-inode variants (fstatat$INODE64): the same call, since macOS 10.5.
        if (!nodes.get('libSystem')?.has(s) && !LIBSYSTEM_ALSO[s.replace(/\$INODE64$/, '')]) problems.push(`${s} from libSystem: neither the node nor LIBSYSTEM_ALSO has it`);
      } else {
        problems.push(`${s} from ${from}`);
      }
    }
  }
  const summary =
    `${a.arch} dylib, minos ${a.minos} (node ${n.minos}), loads ${a.needed.join(', ')}; exports ${trie.length} symbols, none of Node's addon interface; imports ` +
    Object.entries(counts).map(([k, v]) => `${v} from ${k === 'lookup' ? 'the node (dynamic lookup)' : k}`).join(', ');
  return { ok: problems.length === 0, problems, summary };
}

module.exports = { check };

if (require.main === module) {
  const [addon, node] = process.argv.slice(2);
  if (!addon || !node) {
    console.error('usage: node scripts/macos-check.js <isolet.abiN.node> <darwin node binary>');
    process.exit(2);
  }
  const r = check(addon, node);
  if (!r.ok) {
    console.error(`macos-check: ${addon} FAILS:\n  ${r.problems.join('\n  ')}`);
    process.exit(1);
  }
  console.log(`macos-check: ${addon}: ${r.summary}`);
}
