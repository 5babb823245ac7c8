// Some V8 built-ins loop without checking for termination. The caller must still get
// SandboxTimeoutError within timeout + 1 s, and the stuck thread must neither burn a
// core nor block later runs. (Runs in its own worker process: the thread stays parked.)
import { describe, expect, it } from 'vitest';
import { runSandbox, processStats, SandboxError, SandboxTimeoutError } from '..';

describe('thread mode: a built-in that ignores TerminateExecution', () => {
  it('times out, quarantines the thread and keeps serving runs', async () => {
    const before = processStats().quarantinedThreads;
    const started = Date.now();
    const r = await runSandbox('Array.prototype.indexOf.call({ length: 2 ** 53 - 1 }, 1)', { timeoutMs: 300, isolation: 'thread' });
    const elapsed = Date.now() - started;
    expect(r.success).toBe(false);
    if (!r.success) expect(r.error).toBeInstanceOf(SandboxTimeoutError);
    expect(elapsed).toBeLessThan(1300);
    expect(processStats().quarantinedThreads).toBe(before + 1);

    // The parked thread uses no CPU.
    const cpu0 = process.cpuUsage();
    await new Promise((res) => setTimeout(res, 500));
    const cpu = process.cpuUsage(cpu0);
    expect((cpu.user + cpu.system) / 1000).toBeLessThan(250);

    // Later runs are not blocked.
    const runs = await Promise.all(Array.from({ length: 8 }, (_, i) => runSandbox(`${i} * 2`, { isolation: 'thread' })));
    expect(runs.map((x) => x.success && x.output)).toEqual([0, 2, 4, 6, 8, 10, 12, 14]);
  });

  it('refuses new runs once ISOLET_MAX_QUARANTINED threads are parked', async () => {
    const parked = processStats().quarantinedThreads;
    expect(parked).toBeGreaterThanOrEqual(1);
    process.env.ISOLET_MAX_QUARANTINED = String(parked);
    try {
      const refused = await runSandbox('1', { isolation: 'thread' });
      expect(refused.success).toBe(false);
      if (!refused.success) {
        expect(refused.error).toBeInstanceOf(SandboxError);
        expect(refused.error.message).toMatch(/restart the process/);
      }
    } finally {
      delete process.env.ISOLET_MAX_QUARANTINED;
    }
    const again = await runSandbox('1 + 1', { isolation: 'thread' });
    expect(again.success && again.output).toBe(2);
  });
});
