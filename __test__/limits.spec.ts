// Memory, time and stack limits: each hazard is tried for real and must end in the
// matching typed error, with the host (this process) unharmed.
import { beforeAll, describe, expect, it } from 'vitest';
import { runSandbox, SandboxOOMError, SandboxTimeoutError, SandboxRuntimeError, type SandboxResult } from '..';

function failed(r: SandboxResult) {
  if (r.success) throw new Error(`expected failure, got output ${JSON.stringify(r.output)}`);
  return r.error;
}

describe('time limits stop every kind of infinite loop', () => {
  // The default engine and its sandbox host processes are started here, not inside the
  // first timed case: a loaded machine takes seconds for that.
  beforeAll(async () => {
    await runSandbox('1', { timeoutMs: 30_000 });
  });
  const loops: Record<string, string> = {
    'while (true)': 'while (true) {}',
    'for (;;) with work': 'let x = 0; for (;;) { x = (x + 1) % 7 }',
    'await loop in an async function': '(async () => { while (true) await 1; })()',
    'promise chain': 'function loop() { return Promise.resolve().then(loop); } loop()',
    'microtask flood': 'const spin = () => Promise.resolve().then(spin); spin(); spin(); new Promise(() => {})',
    'Atomics.wait': 'Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0)',
    'catastrophic regexp': '/(a+)+$/.test("a".repeat(40) + "b")',
    'never-settling promise': 'new Promise(() => {})',
    'generator spin': 'function* g() { while (true) yield 1; } for (const _ of g()) {}',
  };
  for (const [name, code] of Object.entries(loops)) {
    it(`stops ${name}`, async () => {
      const started = Date.now();
      const err = failed(await runSandbox(code, { timeoutMs: 150 }));
      expect(err).toBeInstanceOf(SandboxTimeoutError);
      expect(err.name).toBe('SandboxTimeoutError');
      expect(Date.now() - started).toBeLessThan(1150);
    });
  }

  it('stops an async-body run that loops on await (capability mode)', async () => {
    const err = failed(await runSandbox('while (true) { await ping(); }', { capabilities: { ping: () => 1 }, timeoutMs: 200, maxHostCalls: 1e9 }));
    expect(err).toBeInstanceOf(SandboxTimeoutError);
  });

  it('enforces a CPU-time limit separately from the wall clock', async () => {
    const err = failed(await runSandbox('for (;;) {}', { cpuTimeMs: 100, timeoutMs: 10_000 })) as SandboxTimeoutError;
    expect(err).toBeInstanceOf(SandboxTimeoutError);
    expect(err.limit).toBe('cpu');
    expect(err.message).toMatch(/CPU-time limit of 100 ms/);
  });

  it('does not count time waiting on the host toward the CPU limit', async () => {
    const r = await runSandbox('await wait(300); return "waited"', {
      capabilities: { wait: (ms: number) => new Promise((res) => setTimeout(res, ms)) },
      cpuTimeMs: 50,
      timeoutMs: 5000,
    });
    expect(r.success).toBe(true);
    expect(r.stats.wallTimeMs).toBeGreaterThanOrEqual(290);
    expect(r.stats.cpuTimeMs).toBeLessThan(50);
  });
});

describe('memory limits', () => {
  it('turns a heap bomb into SandboxOOMError, then runs healthy code', async () => {
    // A generous timeout: on a loaded machine the bomb can take more than the default 5 s to fill 64 MB.
    const err = failed(await runSandbox('const a = []; while (true) a.push({ x: Math.random(), y: "s" + a.length })', { timeoutMs: 60_000 }));
    expect(err).toBeInstanceOf(SandboxOOMError);
    expect(err.message).toMatch(/memory limit of 64 MB/);
    const healthy = await runSandbox('[1, 2, 3].map((x) => x * 2)');
    expect(healthy.success && healthy.output).toEqual([2, 4, 6]);
  });

  it('honours memoryLimitMb', async () => {
    const code = 'const a = []; for (let i = 0; i < 40; i++) a.push(new Array(1024 * 1024 / 8).fill(i)); a.length';
    expect(failed(await runSandbox(code, { memoryLimitMb: 16 }))).toBeInstanceOf(SandboxOOMError);
    const big = await runSandbox(code, { memoryLimitMb: 512 });
    expect(big.success && big.output).toBe(40);
  });

  it('counts ArrayBuffer and SharedArrayBuffer memory against the limit', async () => {
    expect(failed(await runSandbox('new ArrayBuffer(200 * 1024 * 1024)'))).toBeInstanceOf(SandboxOOMError);
    expect(failed(await runSandbox('new SharedArrayBuffer(200 * 1024 * 1024)'))).toBeInstanceOf(SandboxOOMError);
    const many = 'const keep = []; for (let i = 0; i < 100; i++) keep.push(new Uint8Array(8 * 1024 * 1024)); keep.length';
    expect(failed(await runSandbox(many))).toBeInstanceOf(SandboxOOMError);
    // A catch in the sandbox cannot swallow it: the run is over.
    const caught = 'try { new ArrayBuffer(500 * 1024 * 1024) } catch (e) { "swallowed" }';
    expect(failed(await runSandbox(caught))).toBeInstanceOf(SandboxOOMError);
  });

  it('offers no WebAssembly.Memory to allocate outside the budget', async () => {
    const r = await runSandbox('typeof WebAssembly');
    expect(r.success && r.output).toBe('undefined');
  });

  it('thread mode: survives 40 OOM runs in a row with host RSS back near its level after the first', async () => {
    // (Bombs that V8 13's optimizing compiler makes uninterruptible are covered by
    // hazard-optimized-loop.spec.ts.) In thread mode the isolates live in this
    // process, so this is where a leak per run would show.
    const bomb = 'const a = []; while (true) a.push({ x: Math.random(), n: a.length })';
    // 60 s: the memory limit decides, not the default 5 s (a loaded machine took longer).
    expect(failed(await runSandbox(bomb, { isolation: 'thread', timeoutMs: 60_000 }))).toBeInstanceOf(SandboxOOMError);
    const baseline = process.memoryUsage().rss;
    for (let i = 0; i < 40; i++) {
      const err = failed(await runSandbox(bomb, { isolation: 'thread', timeoutMs: 60_000 }));
      expect(err).toBeInstanceOf(SandboxOOMError);
    }
    const after = process.memoryUsage().rss;
    // Each run peaked near 96 MB (64 MB + headroom); 40 of them leaking even 4%
    // would add ~150 MB. Allow for allocator noise only.
    expect(after - baseline).toBeLessThan(120 * 1024 * 1024);
    const healthy = await runSandbox('"still fine"', { isolation: 'thread' });
    expect(healthy.success && healthy.output).toBe('still fine');
  }, 300_000);
});

describe('stack limits', () => {
  it('turns deep recursion into a RangeError inside the sandbox, not a crash', async () => {
    const err = failed(await runSandbox('function f(n) { return f(n + 1) + 1; } f(0)')) as SandboxRuntimeError;
    expect(err).toBeInstanceOf(SandboxRuntimeError);
    expect(err.thrown?.name).toBe('RangeError');
    expect(err.message).toMatch(/Maximum call stack size exceeded/);
  });

  it('lets the sandbox catch its own stack overflow', async () => {
    const r = await runSandbox('function f() { return f(); } try { f() } catch (e) { e instanceof RangeError }');
    expect(r.success && r.output).toBe(true);
  });

  it('survives deeply nested data in the output', async () => {
    const r = await runSandbox('let o = {}; for (let i = 0; i < 100000; i++) o = { o }; o');
    expect(r.success).toBe(false);
    if (!r.success) expect(r.error).toBeInstanceOf(SandboxRuntimeError);
  });
});
