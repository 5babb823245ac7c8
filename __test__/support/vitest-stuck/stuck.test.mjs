// Thread-mode runs stuck in built-ins that ignore termination (quarantined threads that
// outlive the test file's worker), next to ordinary runs. ISOLET_FIXTURE_FAIL=1 adds a
// failing test: the run must then exit with vitest's failure status, not 0 or a crash.
import { createRequire } from 'node:module';
import { expect, it } from 'vitest';

const { runSandbox, SandboxEngine, processStats } = createRequire(import.meta.url)('../../..');

it('runs ordinary code in thread mode', async () => {
  const r = await runSandbox('6 * 7', { isolation: 'thread' });
  expect(r.output).toBe(42);
});

it('times out a run stuck in Array.prototype.indexOf (its thread is quarantined)', async () => {
  const r = await runSandbox('Array.prototype.indexOf.call({ length: 2 ** 53 - 1 }, 1)', { timeoutMs: 300, isolation: 'thread' });
  expect(r.success).toBe(false);
  expect(r.error.name).toBe('SandboxTimeoutError');
  expect(processStats().quarantinedThreads).toBeGreaterThanOrEqual(1);
});

it('times out a stuck run on a thread-mode engine', async () => {
  const engine = new SandboxEngine({ isolation: 'thread', memoryMb: 64, maxConcurrentIsolates: 2, warmPoolSize: 1 });
  await engine.init();
  const session = engine.submit({
    requestId: 'stuck',
    code: 'return Array.prototype.lastIndexOf.call({ length: 2 ** 53 - 1 }, 1);',
    isolateLimits: { wallTimeMs: 300 },
  });
  const final = await session.done;
  expect(final.type).toBe('error');
  expect(final.error.name).toBe('SandboxTimeoutError');
  await engine.shutdown();
});

it('times out a stuck run in process mode', async () => {
  const r = await runSandbox('Array.prototype.indexOf.call({ length: 2 ** 53 - 1 }, 1)', { timeoutMs: 300, isolation: 'process' });
  expect(r.error.name).toBe('SandboxTimeoutError');
});

if (process.env.ISOLET_FIXTURE_FAIL === '1') {
  it('fails on purpose', () => {
    expect(1).toBe(2);
  });
}
