// On V8 13 (Node 24) TurboFan can compile a loop whose body only calls built-ins so
// that it never checks for interrupts: TerminateExecution does not stop it. The caller
// must still get its typed error in time, memory must stay bounded, and the host must
// keep serving runs and exit cleanly. (Own worker process: threads may stay parked.)
import { describe, expect, it } from 'vitest';
import { runSandbox, processStats, SandboxOOMError, SandboxTimeoutError } from '..';

describe('thread mode: loops that optimized code runs without interrupt checks', () => {
  it('times out within the limit plus one second', async () => {
    for (let i = 0; i < 3; i++) {
      const started = Date.now();
      const r = await runSandbox('let x; while (true) x = new Array(1000).fill(1)', { timeoutMs: 300, isolation: 'thread' });
      expect(r.success === false && r.error).toBeInstanceOf(SandboxTimeoutError);
      expect(Date.now() - started).toBeLessThan(1300);
    }
    const after = await runSandbox('"still serving"', { isolation: 'thread' });
    expect(after.success && after.output).toBe('still serving');
  });

  it('turns an uninterruptible heap bomb into SandboxOOMError with bounded memory', async () => {
    const rss0 = process.memoryUsage().rss;
    const quarantined0 = processStats().quarantinedThreads;
    for (let i = 0; i < 3; i++) {
      const r = await runSandbox('const a = []; while (true) a.push(new Array(1000).fill(a.length))', { isolation: 'thread' });
      expect(r.success === false && r.error).toBeInstanceOf(SandboxOOMError);
    }
    // Each run may keep at most its heap limit plus 64 MB of headroom (parked thread).
    const grown = process.memoryUsage().rss - rss0;
    expect(grown).toBeLessThan(3 * 140 * 1024 * 1024);
    expect(processStats().quarantinedThreads - quarantined0).toBeLessThanOrEqual(3);
    const after = await runSandbox('[1, 2].length', { isolation: 'thread' });
    expect(after.success && after.output).toBe(2);
  });
});
