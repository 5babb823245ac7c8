// On V8 >= 13 (Node 24, 26) Turboshaft unrolls loops whose body inlines a builtin with a
// short internal loop and drops their interrupt check, so TerminateExecution never lands.
// isolet sets --no-turboshaft-loop-unrolling at load (V8 >= 12.4): such loops must end at
// their limit through normal termination, never through the give-up path (no thread is
// quarantined). ISOLET_V8_LOOP_UNROLLING=1 keeps V8's default, checked in a child node.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runSandbox, processStats, runtime, SandboxOOMError, SandboxTimeoutError } from '..';
import { runChild } from './support/spawn';

const root = path.resolve(__dirname, '..');
const v8Major = Number(runtime.v8Version.split('.')[0]);

const SHAPES = [
  'let x; while (true) x = new Array(1000).fill(1)',
  'let s = 0; for (;;) s += [1, 2, 3].indexOf(3)',
  'let x; while (true) x = "abc".repeat(100).split("b")',
  'let a; while (true) a = [3, 1, 2].sort()',
  'let x; for (;;) x = Array.from({ length: 100 }, (_, i) => i)',
  'let x; while (true) x = JSON.stringify([1, 2, 3])',
  'let x; do { x = new Array(1000).fill(1).map((v) => v + 1) } while (true)',
];

describe('thread mode: loops that optimized code runs without interrupt checks', () => {
  it('end at their time limit by normal termination, quarantining no thread', async () => {
    // The engine starts first: each elapsed time below is its loop's alone.
    await runSandbox('1', { isolation: 'thread' });
    const quarantined0 = processStats().quarantinedThreads;
    for (const code of SHAPES) {
      const started = Date.now();
      const r = await runSandbox(code, { timeoutMs: 300, isolation: 'thread' });
      expect(r.success === false && r.error).toBeInstanceOf(SandboxTimeoutError);
      expect(Date.now() - started).toBeLessThan(1300);
      expect({ code, quarantined: processStats().quarantinedThreads }).toEqual({ code, quarantined: quarantined0 });
    }
    const after = await runSandbox('"still serving"', { isolation: 'thread' });
    expect(after.success && after.output).toBe('still serving');
  });

  it('turns an uninterruptible heap bomb into SandboxOOMError with bounded memory', async () => {
    const rss0 = process.memoryUsage().rss;
    const quarantined0 = processStats().quarantinedThreads;
    for (let i = 0; i < 3; i++) {
      // 60 s: the memory limit decides, not the default 5 s (a loaded machine took longer).
      const r = await runSandbox('const a = []; while (true) a.push(new Array(1000).fill(a.length))', { isolation: 'thread', timeoutMs: 60_000 });
      expect(r.success === false && r.error).toBeInstanceOf(SandboxOOMError);
    }
    // Each run may keep at most its heap limit plus 64 MB of headroom (parked thread).
    const grown = process.memoryUsage().rss - rss0;
    expect(grown).toBeLessThan(3 * 140 * 1024 * 1024);
    expect(processStats().quarantinedThreads - quarantined0).toBeLessThanOrEqual(3);
    const after = await runSandbox('[1, 2].length', { isolation: 'thread' });
    expect(after.success && after.output).toBe(2);
  });

  it('ISOLET_V8_LOOP_UNROLLING=1 keeps V8 default loop unrolling (the flag is what stops the loop)', async () => {
    const script = `const isolet = require(${JSON.stringify(root)});
      isolet.runSandbox(${JSON.stringify(SHAPES[0])}, { timeoutMs: 300, isolation: 'thread' }).then((r) => {
        console.log(JSON.stringify([r.error.name, isolet.processStats().quarantinedThreads]));
        process.exitCode = 3;
      });`;
    const run = async (env: Record<string, string>) => {
      const r = await runChild(process.execPath, ['-e', script], { timeout: 60_000, env: { ...process.env, ...env } });
      expect(r.stderr).toBe('');
      expect(r.signal).toBeNull();
      expect(r.status).toBe(3);
      return JSON.parse(r.stdout) as [string, number];
    };
    expect(await run({})).toEqual(['SandboxTimeoutError', 0]);
    // With unrolling left on, V8 >= 13 compiles the loop without an interrupt check: the
    // run still ends in time, through the give-up path, and its thread is quarantined.
    expect(await run({ ISOLET_V8_LOOP_UNROLLING: '1' })).toEqual(['SandboxTimeoutError', v8Major >= 13 ? 1 : 0]);
  });
});
