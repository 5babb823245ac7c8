// Per-architecture smoke test (scripts/arm64-check.sh runs it with the arm64 `node` under
// qemu-user, from a project that installed the packed tarball with --ignore-scripts):
// the binary for this arch loads from prebuilds/, both isolation modes run code, a
// timeout and a heap bomb end as their error classes, and process isolation reports
// its lock-down. ISOLET_SMOKE_ARCH names the arch the binary must be for (and
// ISOLET_SMOKE_LIBC=musl its C library).
// ISOLET_SMOKE_SECCOMP=required fails unless hosts installed their seccomp filter;
// =unavailable requires that they did not and that they say why (qemu-user refuses
// seccomp filters: they would apply to qemu's own host-architecture calls).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { runSandbox, SandboxEngine, processStats, runtime } from 'isolet';

const started = Date.now();
const require = createRequire(path.join(process.cwd(), 'smoke.cjs'));
const pkgDir = path.dirname(require.resolve('isolet/package.json'));
const arch = process.env.ISOLET_SMOKE_ARCH || process.arch;
assert.equal(process.arch, arch, `this node is ${process.arch}, expected ${arch}`);
assert.equal(fs.existsSync(path.join(pkgDir, 'build')), false, 'installed package has a build/ directory');
// ISOLET_SMOKE_LIBC=musl: the musl binary (prebuilds/linux-x64-musl), and this Node must be musl's.
const musl = process.env.ISOLET_SMOKE_LIBC === 'musl';
assert.equal(!process.report.getReport().header.glibcVersionRuntime, musl, `this node's C library is not ${musl ? 'musl' : 'glibc'}`);
const binary = path.join(pkgDir, 'prebuilds', `linux-${arch}${musl ? '-musl' : ''}`, `isolet.abi${process.versions.modules}.node`);
assert.ok(fs.existsSync(binary), `no ${binary}`);
// The ELF machine of the binary that loaded (e_machine at offset 18: 62 x86-64, 183 AArch64).
const machine = fs.readFileSync(binary).readUInt16LE(18);
assert.equal(machine, { x64: 62, arm64: 183 }[arch], `${binary} has ELF machine ${machine}`);

for (const isolation of ['thread', 'process']) {
  const ok = await runSandbox('[1, 2, 3, 4, 5].reduce((a, b) => a + b, 0)', { isolation });
  assert.deepEqual([ok.success, ok.output], [true, 15], JSON.stringify(ok));

  const loop = await runSandbox('for (;;) {}', { isolation, timeoutMs: 300 });
  assert.equal(loop.success, false, 'an endless loop succeeded');
  assert.equal(loop.error.name, 'SandboxTimeoutError', JSON.stringify(loop.error));

  const bomb = await runSandbox('const a = []; for (;;) a.push(new Array(1e5).fill(1.5));', {
    isolation,
    memoryLimitMb: 16,
    timeoutMs: 30_000,
  });
  assert.equal(bomb.success, false, 'a heap bomb succeeded');
  assert.equal(bomb.error.name, 'SandboxOOMError', JSON.stringify(bomb.error));

  // The isolate still works after both.
  const after = await runSandbox('"still " + "here"', { isolation });
  assert.equal(after.output, 'still here', JSON.stringify(after));
  console.log(`  ${isolation}: run, timeout, heap bomb ok`);
}

const engine = new SandboxEngine({ isolation: 'process', maxConcurrentIsolates: 1, warmPoolSize: 1 });
await engine.init();
const session = engine.submit({ requestId: 'arch', code: 'return 6 * 7;' });
let result;
for await (const event of session) {
  if (event.type === 'result') result = event.data;
  if (event.type === 'error') throw new Error(`session error: ${event.message}`);
}
assert.equal(result, 42);
const { lockdown, live } = engine.stats().processes;
assert.ok(live >= 1, 'no live sandbox host');
assert.ok(processStats().sandboxProcesses >= 1, JSON.stringify(processStats()));
await engine.shutdown();
assert.ok(lockdown, 'no lock-down status');
assert.equal(lockdown.noNewPrivs, true, JSON.stringify(lockdown));
assert.equal(lockdown.parentDeathSignal, true, JSON.stringify(lockdown));
const want = process.env.ISOLET_SMOKE_SECCOMP || 'required';
if (want === 'required') assert.equal(lockdown.seccomp, true, JSON.stringify(lockdown));
else {
  assert.equal(want, 'unavailable', `ISOLET_SMOKE_SECCOMP=${want}`);
  assert.equal(lockdown.seccomp, false, JSON.stringify(lockdown));
  assert.ok(lockdown.reason, 'seccomp off without a reason');
}
console.log(`  process lock-down: ${JSON.stringify(lockdown)}`);
console.log(
  `smoke-arch ok: ${process.platform}-${process.arch} Node ${process.version}, V8 ${runtime.v8Version}, ` +
    `${((Date.now() - started) / 1000).toFixed(1)} s`,
);
