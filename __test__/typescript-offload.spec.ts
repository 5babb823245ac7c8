// Large TypeScript is erased on a worker thread: the host's event loop keeps running
// while megabytes of input are stripped, and the run's wall-clock limit bounds the work.
// (__test__/parse-offload.spec.ts: the same for every entry point and rewrite.)
import { describe, expect, it } from 'vitest';
import { runSandbox, SandboxEngine, SandboxTimeoutError, SandboxValidationError } from '../index';
import { expectOffNodesThread, onNodesThread } from './support/loop-delay';

// Declares nothing, so it can repeat; `big()` then declares `x` and `f` once.
const LINE = '(function (a: string, b?: number): string { return a as string; });\n';
const big = (mb: number) =>
  'const x: number = 1; function f(a: string): string { return a; }\n' + LINE.repeat(Math.ceil((mb * 1024 * 1024) / LINE.length));

describe('TypeScript erased off the event loop', () => {
  it('runSandbox strips 4 MB of TypeScript while the event loop keeps ticking, positions kept', async () => {
    const code = big(4) + 'f("ok") + ":" + x';
    const measured = await onNodesThread(() => runSandbox(code, { language: 'typescript', isolation: 'thread', timeoutMs: 60_000, memoryLimitMb: 256 }));
    const r = measured.value;
    expect(r.success, JSON.stringify(!r.success && r.error.message)).toBe(true);
    if (r.success) expect(r.output).toBe('ok:1');
    // Stripping 4 MB is most of the run (about a second); it never held this thread.
    expectOffNodesThread(measured);
  });

  it('a syntax error deep in large TypeScript names its line, as inline stripping does', async () => {
    const lines = big(1).split('\n').length - 1;
    const r = await runSandbox(big(1) + 'let broken: = 1;\n', { language: 'typescript', isolation: 'thread' });
    expect(r.success).toBe(false);
    if (!r.success) {
      expect(r.error).toBeInstanceOf(SandboxValidationError);
      expect((r.error as SandboxValidationError & { line?: number }).line).toBe(lines + 1);
    }
  });

  it('the wall-clock limit bounds stripping: past timeoutMs the run is a SandboxTimeoutError and the next works', async () => {
    const r = await runSandbox(big(16), { language: 'typescript', isolation: 'thread', timeoutMs: 50 });
    expect(r.success).toBe(false);
    if (!r.success) {
      expect(r.error).toBeInstanceOf(SandboxTimeoutError);
      expect(r.error.message).toMatch(/TypeScript.*50 ms/);
    }
    const next = await runSandbox(big(0.05) + 'x + 1', { language: 'typescript', isolation: 'thread', timeoutMs: 30_000 });
    expect(next.success && next.output).toBe(2);
  }, 60_000);

  it('an input that overruns its limit fails alone: input queued behind it still succeeds', async () => {
    const [slow, next] = await Promise.all([
      runSandbox(big(16), { language: 'typescript', isolation: 'thread', timeoutMs: 50 }),
      runSandbox(big(0.1) + 'x + 41', { language: 'typescript', isolation: 'thread', timeoutMs: 60_000 }),
    ]);
    expect(slow.success).toBe(false);
    if (!slow.success) expect(slow.error).toBeInstanceOf(SandboxTimeoutError);
    expect(next.success, JSON.stringify(!next.success && next.error.message)).toBe(true);
    if (next.success) expect(next.output).toBe(42);
  }, 60_000);

  it('engine sessions strip large TypeScript off the event loop too, and abort before start is honoured', async () => {
    const engine = new SandboxEngine({ isolation: 'thread', memoryMb: 256, maxConcurrentIsolates: 2, warmPoolSize: 0, maxQueueSize: 10 });
    await engine.init();
    try {
      const measured = await onNodesThread(
        () => engine.submit<string>({ code: big(4) + 'return f("done")', language: 'typescript', isolateLimits: { wallTimeMs: 60_000 } }).done,
      );
      const end = measured.value;
      expect(end.type).toBe('result');
      if (end.type === 'result') expect(end.data).toBe('done');
      expectOffNodesThread(measured);

      const aborted = engine.submit({ code: big(2) + 'return 1', language: 'typescript' });
      aborted.abort();
      const end2 = await aborted.done;
      expect(end2.type).toBe('error');
      if (end2.type === 'error') expect(end2.error.name).toBe('SandboxAbortedError');
    } finally {
      await engine.shutdown();
    }
  }, 60_000);
});
