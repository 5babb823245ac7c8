// Every public option: the limit set is the limit enforced (a run just under it passes,
// one just over it fails), unknown names are refused with the nearest known one, and a
// bad value is refused naming the option and the value given.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  runSandbox,
  SandboxEngine,
  SandboxError,
  SandboxOOMError,
  SandboxRuntimeError,
  SandboxTimeoutError,
  SandboxValidationError,
  DEFAULT_BRIDGE_LIMITS,
  DEFAULT_ISOLATE_LIMITS,
  RUN_SANDBOX_DEFAULTS,
  type SandboxResult,
} from '..';

function failed(r: SandboxResult) {
  if (r.success) throw new Error(`expected failure, got output ${JSON.stringify(r.output).slice(0, 200)}`);
  return r.error;
}
function ok(r: SandboxResult) {
  if (!r.success) throw new Error(`expected success, got ${r.error.name}: ${r.error.message}`);
  return r;
}

// About 24 MB of live heap: 30 packed arrays of 100,000 numbers (8 bytes each).
const ALLOC_24MB = 'const keep = []; for (let i = 0; i < 30; i++) keep.push(new Array(100000).fill(i + 0.5)); keep.length';
const ALLOC_24MB_BODY = `${ALLOC_24MB}; return keep.length`;
const sleep = (ms: number) => new Promise((r) => setTimeout(() => r(ms), ms));
const echo = (x: unknown) => x;

/** Console entries as kept: without the final "[isolet] N console entries dropped" note
 *  and without the "… [truncated]" suffix, which the byte budget does not count. */
function keptLogs(logs: Array<{ message: string }> | undefined) {
  return (logs ?? []).filter((l) => !l.message.startsWith('[isolet] ')).map((l) => l.message.replace(/… \[truncated\]$/, ''));
}
const bytesOf = (messages: string[]) => messages.reduce((n, m) => n + Buffer.byteLength(m), 0);

describe('runSandbox: each numeric option is the limit enforced (thread mode)', () => {
  const thread = { isolation: 'thread' as const };

  it('memoryLimitMb: a measured 24 MB allocation fails under 16 MB and fits under 64 MB', async () => {
    const big = ok(await runSandbox(ALLOC_24MB, { ...thread, memoryLimitMb: 64 }));
    expect(big.output).toBe(30);
    expect(big.stats.heapUsedBytes).toBeGreaterThan(24e6);
    const err = failed(await runSandbox(ALLOC_24MB, { ...thread, memoryLimitMb: 16 }));
    expect(err).toBeInstanceOf(SandboxOOMError);
    expect(err.message).toMatch(/memory limit of 16 MB/);
  });

  it('timeoutMs: waiting 300 ms on the host fails at 150 ms and passes at 3000 ms', async () => {
    const code = 'return await sleep(300)';
    const err = failed(await runSandbox(code, { ...thread, capabilities: { sleep }, timeoutMs: 150 }));
    expect(err).toBeInstanceOf(SandboxTimeoutError);
    expect((err as SandboxTimeoutError).limit).toBe('wall');
    expect(err.message).toMatch(/wall-clock limit of 150 ms/);
    expect(ok(await runSandbox(code, { ...thread, capabilities: { sleep }, timeoutMs: 3000 })).output).toBe(300);
  });

  it('cpuTimeMs: a busy loop ends at the CPU limit; a long wait that uses no CPU passes it', async () => {
    const r = await runSandbox('while (true) {}', { ...thread, cpuTimeMs: 100, timeoutMs: 10000 });
    const err = failed(r);
    expect(err).toBeInstanceOf(SandboxTimeoutError);
    expect((err as SandboxTimeoutError).limit).toBe('cpu');
    expect(r.stats.cpuTimeMs).toBeGreaterThanOrEqual(100);
    const waited = ok(await runSandbox('return await sleep(250)', { ...thread, capabilities: { sleep }, cpuTimeMs: 100, timeoutMs: 5000 }));
    expect(waited.output).toBe(250);
  });

  it('maxOutputBytes: 1000 refuses a 2000-byte result and passes a 500-byte one', async () => {
    const err = failed(await runSandbox("'x'.repeat(2000)", { ...thread, maxOutputBytes: 1000 }));
    expect(err).toBeInstanceOf(SandboxRuntimeError);
    expect(err.message).toMatch(/output limit of 1000 bytes \(maxOutputBytes\)/);
    expect(ok(await runSandbox("'x'.repeat(500)", { ...thread, maxOutputBytes: 1000 })).output).toHaveLength(500);
  });

  it('maxMessageBytes: 1000 refuses a 2000-byte host-call argument and passes a 500-byte one', async () => {
    const code = "const r = []; for (const n of [500, 2000]) { try { r.push((await echo('x'.repeat(n))).length) } catch (e) { r.push(e.name) } } return r";
    const out = ok(await runSandbox(code, { ...thread, capabilities: { echo }, maxMessageBytes: 1000 })).output;
    expect(out).toEqual([500, 'RangeError']);
  });

  it('maxHostCalls: 2 lets two calls through and refuses the third', async () => {
    let served = 0;
    const count = () => ++served;
    const code = 'const r = []; for (let i = 0; i < 3; i++) { try { r.push(await count()) } catch (e) { r.push(e.name + ": " + e.message) } } return r';
    const out = ok(await runSandbox(code, { ...thread, capabilities: { count }, maxHostCalls: 2 })).output as unknown[];
    expect(out.slice(0, 2)).toEqual([1, 2]);
    expect(out[2]).toMatch(/^RangeError: .*limit of 2/);
    expect(served).toBe(2);
  });

  it('maxLogEntries: 3 keeps three of five entries', async () => {
    const r = ok(await runSandbox('for (let i = 0; i < 5; i++) console.log("line " + i); 1', { ...thread, maxLogEntries: 3 }));
    expect(keptLogs(r.logs)).toEqual(['line 0', 'line 1', 'line 2']);
    expect(r.logs.at(-1)?.message).toBe('[isolet] 2 console entries dropped (log limit reached)');
  });

  it('maxLogBytes: 100 keeps at most 100 bytes of console output; 10000 keeps all of it', async () => {
    const code = 'for (let i = 0; i < 10; i++) console.log("y".repeat(40)); 1';
    const small = ok(await runSandbox(code, { ...thread, maxLogBytes: 100 }));
    expect(bytesOf(keptLogs(small.logs))).toBe(100);
    const all = ok(await runSandbox(code, { ...thread, maxLogBytes: 10000 }));
    expect(all.logs.map((l) => l.message)).toEqual(Array(10).fill('y'.repeat(40)));
  });

  it('maxPendingHostCallBytes: 1000 holds two 400-byte calls in flight, not three', async () => {
    const slow = (s: string) => sleep(50).then(() => s.length);
    const code = `const ps = [0, 1, 2].map(() => slow('z'.repeat(400)).then((n) => n, (e) => e.name + ': ' + e.message));
      return await Promise.all(ps)`;
    const out = ok(await runSandbox(code, { ...thread, capabilities: { slow }, maxMessageBytes: 500, maxPendingHostCallBytes: 1000 })).output as unknown[];
    expect(out.filter((v) => typeof v === 'number').length).toBe(2);
    expect(out.find((v) => typeof v === 'string')).toMatch(/maxPendingHostCallBytes/);
  });

  it('maxPendingHostCalls: 2 holds two calls in flight, not three', async () => {
    const code = `const ps = [0, 1, 2].map(() => sleep(50).then((n) => n, (e) => e.name + ': ' + e.message));
      return await Promise.all(ps)`;
    const out = ok(await runSandbox(code, { ...thread, capabilities: { sleep }, maxPendingHostCalls: 2 })).output as unknown[];
    expect(out.filter((v) => v === 50).length).toBe(2);
    expect(out.find((v) => typeof v === 'string')).toMatch(/maxPendingHostCalls/);
  });
});

describe('runSandbox: memory in process mode', () => {
  it('memoryLimitMb: the same 24 MB allocation fails under 16 MB and fits under 64 MB in a sandbox host process', async () => {
    const big = ok(await runSandbox(ALLOC_24MB, { isolation: 'process', memoryLimitMb: 64 }));
    expect(big.stats.heapUsedBytes).toBeGreaterThan(24e6);
    expect(failed(await runSandbox(ALLOC_24MB, { isolation: 'process', memoryLimitMb: 16 }))).toBeInstanceOf(SandboxOOMError);
  });
});

describe('runSandbox: option names and values', () => {
  const cases: Array<[Record<string, unknown>, string]> = [
    [{ timeout: 100 }, 'timeout is not a known option of runSandbox options; did you mean timeoutMs?'],
    [{ memoryMb: 32 }, 'memoryMb is not a known option of runSandbox options; did you mean memoryLimitMb?'],
    [{ maxMessages: 3 }, 'maxMessages is not a known option of runSandbox options; did you mean maxHostCalls?'],
    [{ timeoutMS: 3 }, 'timeoutMS is not a known option of runSandbox options; did you mean timeoutMs?'],
    [{ timeoutMs: -5 }, 'timeoutMs must be a whole number from 1 to 2147483647, got -5'],
    [{ timeoutMs: '100' }, "timeoutMs must be a whole number from 1 to 2147483647, got '100'"],
    [{ memoryLimitMb: 1.5 }, 'memoryLimitMb must be a whole number from 8 to 8192, got 1.5'],
    [{ memoryLimitMb: 4 }, 'memoryLimitMb must be a whole number from 8 to 8192, got 4'],
    [{ cpuTimeMs: Number.NaN }, 'cpuTimeMs must be a whole number from 1 to 2147483647, got NaN'],
    [{ maxOutputBytes: 0 }, 'maxOutputBytes must be a whole number from 1 to 1073741824, got 0'],
    [{ maxHostCalls: -1 }, 'maxHostCalls must be a whole number from 0 to 4294967295, got -1'],
    [{ maxLogEntries: null }, 'maxLogEntries must be a whole number from 0 to 1000000, got null'],
    [{ maxLogBytes: {} }, 'maxLogBytes must be a whole number from 1 to 1073741824, got an object'],
    [{ maxPendingHostCalls: 0 }, 'maxPendingHostCalls must be a whole number from 1 to 1000000, got 0'],
    [{ isolation: 'vm' }, "isolation must be 'process' or 'thread', got 'vm'"],
    [{ signal: 5 }, 'signal must be an AbortSignal, got number'],
  ];
  for (const [options, message] of cases) {
    it(`refuses ${JSON.stringify(options)}`, async () => {
      const err = failed(await runSandbox('1', options as never));
      expect(err).toBeInstanceOf(SandboxValidationError);
      expect(err.code).toBe('ERR_ISOLET_VALIDATION');
      expect(err.message).toBe(message);
    });
  }

  it('refuses non-object options and non-string code', async () => {
    expect(failed(await runSandbox('1', null as never)).message).toBe('runSandbox options must be an object, got null');
    expect(failed(await runSandbox(5 as never)).message).toBe('code must be a string, got 5');
  });

  it('exports its defaults, the ones a run gets', async () => {
    expect(RUN_SANDBOX_DEFAULTS).toEqual({ memoryLimitMb: 64, timeoutMs: 5000 });
    // 24 MB fits under the default 64 MB; 80 MB does not.
    // (The default memory is what is tested; time enough for it under qemu-user.)
    expect(ok(await runSandbox(ALLOC_24MB, { isolation: 'thread', timeoutMs: 60_000 })).output).toBe(30);
    const huge = 'const keep = []; for (let i = 0; i < 100; i++) keep.push(new Array(100000).fill(i + 0.5)); keep.length';
    expect(failed(await runSandbox(huge, { isolation: 'thread', timeoutMs: 60_000 }))).toBeInstanceOf(SandboxOOMError);
  });
});

describe('SandboxEngine: each limit is the limit enforced (thread mode)', () => {
  const engine = new SandboxEngine({
    isolation: 'thread',
    memoryMb: 16,
    maxConcurrentIsolates: 2,
    defaultIsolateLimits: DEFAULT_ISOLATE_LIMITS,
    defaultBridgeLimits: { ...DEFAULT_BRIDGE_LIMITS, maxOutputBytes: 1000 },
    tools: { sleep, echo, count: () => 1, size: (x: string) => sleep(50).then(() => x.length) },
  });
  beforeAll(() => engine.init());
  afterAll(() => engine.shutdown());
  const run = (request: Record<string, unknown>) => engine.submit({ requestId: 'r', code: 'return 1', ...request } as never).done;
  const all = { allowedTools: ['sleep', 'echo', 'count', 'size'] };

  it('memoryMb (16, with DEFAULT_ISOLATE_LIMITS beside it) refuses 24 MB; isolateLimits.memoryMb 64 lets it fit', async () => {
    const under = await run({ code: ALLOC_24MB_BODY });
    expect(under.type).toBe('error');
    expect(under.type === 'error' && under.error).toBeInstanceOf(SandboxOOMError);
    expect(under.type === 'error' && under.message).toMatch(/memory limit of 16 MB/);
    const over = await run({ code: ALLOC_24MB_BODY, isolateLimits: { memoryMb: 64 } });
    expect(over).toMatchObject({ type: 'result', data: 30 });
    expect(over.stats.heapUsedBytes).toBeGreaterThan(24e6);
  });

  it('isolateLimits.wallTimeMs: a 300 ms wait fails at 150 and passes at 3000', async () => {
    const slow = await run({ code: 'return await sleep(300)', toolPolicy: all, isolateLimits: { wallTimeMs: 150 } });
    expect(slow.type === 'error' && slow.error).toBeInstanceOf(SandboxTimeoutError);
    expect(slow.type === 'error' && slow.message).toMatch(/wall-clock limit of 150 ms/);
    expect(await run({ code: 'return await sleep(300)', toolPolicy: all, isolateLimits: { wallTimeMs: 3000 } })).toMatchObject({ type: 'result', data: 300 });
  });

  it('isolateLimits.cpuTimeMs: a busy loop ends at 100 ms of CPU', async () => {
    const end = await run({ code: 'while (true) {}', isolateLimits: { cpuTimeMs: 100, wallTimeMs: 10000 } });
    expect(end.type === 'error' && end.error).toBeInstanceOf(SandboxTimeoutError);
    expect(end.type === 'error' && (end.error as SandboxTimeoutError).limit).toBe('cpu');
    expect(end.stats.cpuTimeMs).toBeGreaterThanOrEqual(100);
  });

  it('defaultBridgeLimits.maxOutputBytes (1000) applies; a request’s bridgeLimits override it', async () => {
    const big = await run({ code: "return 'x'.repeat(2000)" });
    expect(big.type === 'error' && big.message).toMatch(/output limit of 1000 bytes/);
    expect(await run({ code: "return 'x'.repeat(500)" })).toMatchObject({ type: 'result' });
    expect(await run({ code: "return 'x'.repeat(2000)", bridgeLimits: { maxOutputBytes: 3000 } })).toMatchObject({ type: 'result' });
  });

  it('bridgeLimits.maxMessages: 2 lets two tool calls or data reads through, not a third', async () => {
    const code = 'const r = []; for (let i = 0; i < 3; i++) { try { r.push(await count()) } catch (e) { r.push(e.name) } } return r';
    expect(await run({ code, toolPolicy: all, bridgeLimits: { maxMessages: 2 } })).toMatchObject({ type: 'result', data: [1, 1, 'RangeError'] });
  });

  it('bridgeLimits.maxMessageBytes: 1000 refuses a 2000-byte argument, passes 500', async () => {
    const code = "const r = []; for (const n of [500, 2000]) { try { r.push((await echo('x'.repeat(n))).length) } catch (e) { r.push(e.name) } } return r";
    expect(await run({ code, toolPolicy: all, bridgeLimits: { maxMessageBytes: 1000 } })).toMatchObject({ type: 'result', data: [500, 'RangeError'] });
  });

  it('bridgeLimits.maxLogEntries and maxLogBytes keep what they say', async () => {
    const entries = await run({ code: 'for (let i = 0; i < 5; i++) console.log("e" + i); return 1', bridgeLimits: { maxLogEntries: 3 } });
    expect(keptLogs(entries.logs)).toEqual(['e0', 'e1', 'e2']);
    const bytes = await run({ code: 'for (let i = 0; i < 10; i++) console.log("y".repeat(40)); return 1', bridgeLimits: { maxLogBytes: 100 } });
    expect(bytesOf(keptLogs(bytes.logs))).toBe(100);
  });

  it('bridgeLimits.maxPendingHostCalls and maxPendingHostCallBytes bound the calls in flight', async () => {
    const three = `const ps = [0, 1, 2].map(() => sleep(50).then((n) => n, (e) => e.message)); return await Promise.all(ps)`;
    const calls = await run({ code: three, toolPolicy: all, bridgeLimits: { maxPendingHostCalls: 2 } });
    expect(calls.type === 'result' && (calls.data as unknown[]).filter((v) => v === 50).length).toBe(2);
    // Three 400-byte calls fired at once under a 1000-byte budget: two fit, the third is refused.
    const bytes = `const ps = [0, 1, 2].map(() => size('z'.repeat(400)).then((n) => n, (e) => e.message)); return await Promise.all(ps)`;
    const held = await run({ code: bytes, toolPolicy: all, bridgeLimits: { maxMessageBytes: 500, maxPendingHostCallBytes: 1000 } });
    expect(held.type).toBe('result');
    const out = held.type === 'result' ? (held.data as unknown[]) : [];
    expect(out.filter((v) => v === 400).length).toBe(2);
    expect(out.filter((v) => typeof v === 'string' && /maxPendingHostCallBytes/.test(v)).length).toBe(1);
  });

  it('toolPolicy.maxCallsPerTool: 2 is counted once: the third call fails, the handler ran twice', async () => {
    let served = 0;
    const e2 = new SandboxEngine({ isolation: 'thread', tools: { hit: () => ++served } });
    await e2.init();
    try {
      const code = 'const r = []; for (let i = 0; i < 3; i++) { try { r.push(await hit()) } catch (e) { r.push(e.name + ": " + e.message) } } return r';
      const end = await e2.submit({ requestId: 'r', code, toolPolicy: { allowedTools: ['hit'], maxCallsPerTool: { hit: 2 } } }).done;
      expect(end).toMatchObject({ type: 'result', data: [1, 2, 'PermissionError: tool "hit" exceeded its limit of 2 calls'] });
      expect(served).toBe(2);
    } finally {
      await e2.shutdown();
    }
  });
});

describe('SandboxEngine: pool sizes are the limits enforced (stats)', () => {
  const busy = 'const end = Date.now() + 300; while (Date.now() < end) {} return 1';
  async function until(check: () => boolean) {
    for (let i = 0; i < 1000 && !check(); i++) await sleep(10);
    return check();
  }

  it('maxConcurrentIsolates: 2 runs two at once and queues the rest', async () => {
    const engine = new SandboxEngine({ isolation: 'thread', maxConcurrentIsolates: 2 });
    await engine.init();
    try {
      const sessions = Array.from({ length: 4 }, () => engine.submit({ requestId: 'r', code: busy }));
      let maxBusy = 0;
      const seen = await until(() => {
        const s = engine.stats();
        maxBusy = Math.max(maxBusy, s.busy);
        return s.busy === 2 && s.queued === 2;
      });
      expect(seen).toBe(true);
      await Promise.all(sessions.map((s) => s.done));
      expect(maxBusy).toBe(2);
      expect(await until(() => engine.stats().completed === 4)).toBe(true);
    } finally {
      await engine.shutdown();
    }
  });

  it('maxQueueSize: 1 queues one run beyond the running one and refuses the next', async () => {
    const engine = new SandboxEngine({ isolation: 'thread', maxConcurrentIsolates: 1, maxQueueSize: 1 });
    await engine.init();
    try {
      const a = engine.submit({ requestId: 'r', code: busy });
      const b = engine.submit({ requestId: 'r', code: busy });
      const c = await engine.submit({ requestId: 'r', code: busy }).done;
      expect(c.type).toBe('error');
      expect(c.type === 'error' && c.error).toBeInstanceOf(SandboxError);
      expect(c.type === 'error' && c.message).toMatch(/queue is full \(1 waiting\)/);
      expect(engine.stats().queued).toBeLessThanOrEqual(1);
      expect((await a.done).type).toBe('result');
      expect((await b.done).type).toBe('result');
    } finally {
      await engine.shutdown();
    }
  });

  it('maxQueueSize in process mode: the refusal is ERR_ISOLET_OVERLOADED', async () => {
    const engine = new SandboxEngine({ isolation: 'process', processes: 1, maxConcurrentIsolates: 1, maxQueueSize: 1 });
    await engine.init();
    try {
      const a = engine.submit({ requestId: 'r', code: busy });
      const b = engine.submit({ requestId: 'r', code: busy });
      const c = await engine.submit({ requestId: 'r', code: busy }).done;
      expect(c.type === 'error' && c.error.code).toBe('ERR_ISOLET_OVERLOADED');
      expect(c.type === 'error' && c.error.name).toBe('SandboxError');
      await Promise.all([a.done, b.done]);
    } finally {
      await engine.shutdown();
    }
  });

  it('warmPoolSize: 2 keeps two isolates warm, with the engine memory, and serves from them', async () => {
    const engine = new SandboxEngine({ isolation: 'thread', warmPoolSize: 2, memoryMb: 32, defaultIsolateLimits: DEFAULT_ISOLATE_LIMITS });
    await engine.init();
    try {
      expect(await until(() => engine.stats().warm === 2)).toBe(true);
      const end = await engine.submit({ requestId: 'r', code: 'return 1' }).done;
      expect(end).toMatchObject({ type: 'result', data: 1 });
      const s = engine.stats();
      expect(s.warmStarts).toBe(1);
      expect(s.coldStarts).toBe(0);
      expect(await until(() => engine.stats().warm === 2)).toBe(true);
    } finally {
      await engine.shutdown();
    }
  });
});

describe('SandboxEngine: memory in process mode', () => {
  const engine = new SandboxEngine({ isolation: 'process', processes: 1, memoryMb: 16, maxConcurrentIsolates: 1 });
  beforeAll(() => engine.init());
  afterAll(() => engine.shutdown());

  it('memoryMb 16 refuses 24 MB; isolateLimits.memoryMb 64 lets it fit', async () => {
    const under = await engine.submit({ requestId: 'r', code: ALLOC_24MB_BODY }).done;
    expect(under.type === 'error' && under.error).toBeInstanceOf(SandboxOOMError);
    const over = await engine.submit({ requestId: 'r', code: ALLOC_24MB_BODY, isolateLimits: { memoryMb: 64 } }).done;
    expect(over).toMatchObject({ type: 'result', data: 30 });
  });

  it('processes: 1 is the number of sandbox host processes', () => {
    expect(engine.stats().processes?.live).toBe(1);
  });
});

describe('SandboxEngine: option names and values', () => {
  const construct: Array<[Record<string, unknown>, string]> = [
    [{ maxConcurrency: 2 }, 'maxConcurrency is not a known option of SandboxEngine config; did you mean maxConcurrentIsolates?'],
    [{ memoryLimit: 2 }, 'memoryLimit is not a known option of SandboxEngine config; did you mean memoryLimitMb?'],
    [{ memoryLimitMb: 2 }, 'memoryLimitMb must be a whole number from 8 to 8192, got 2'],
    [{ defaultIsolateLimits: { wallTimeMS: 5 } }, 'defaultIsolateLimits.wallTimeMS is not a known option of defaultIsolateLimits; did you mean defaultIsolateLimits.wallTimeMs?'],
    [{ defaultBridgeLimits: { maxHostCalls: 5 } }, 'defaultBridgeLimits.maxHostCalls is not a known option of defaultBridgeLimits; did you mean defaultBridgeLimits.maxMessages?'],
    [{ memoryMb: 0 }, 'memoryMb must be a whole number from 8 to 8192, got 0'],
    [{ maxConcurrentIsolates: 0 }, 'maxConcurrentIsolates must be a whole number from 1 to 1024, got 0'],
    [{ warmPoolSize: -1 }, 'warmPoolSize must be a whole number from 0 to 256, got -1'],
    [{ maxQueueSize: 1.5 }, 'maxQueueSize must be a whole number from 0 to 1000000, got 1.5'],
    [{ processes: 0 }, 'processes must be a whole number from 1 to 64, got 0'],
    [{ sandboxesPerHost: 0 }, 'sandboxesPerHost must be a whole number from 1 to 256, got 0'],
    [{ sandboxesPerHost: 257 }, 'sandboxesPerHost must be a whole number from 1 to 256, got 257'],
    [{ sandboxPerHost: 4 }, 'sandboxPerHost is not a known option of SandboxEngine config; did you mean sandboxesPerHost?'],
    [{ isolation: 'vm' }, "isolation must be 'process' or 'thread', got 'vm'"],
    [{ defaultIsolateLimits: { cpuTimeMs: 0 } }, 'defaultIsolateLimits.cpuTimeMs must be a whole number from 1 to 2147483647, got 0'],
    [{ defaultIsolateLimits: 5 }, 'defaultIsolateLimits must be an object, got 5'],
    [{ wasmModules: {} }, 'wasmModules must be an array, got an object'],
    [{ wasmModules: [{ name: '1x', source: new Uint8Array() }] }, 'wasmModules[0].name: `1x` is not a valid JavaScript identifier'],
    [{ wasmModules: [{ name: 'm', source: 'bytes' }] }, "wasmModules[0].source must be a Uint8Array or ArrayBuffer, got 'bytes'"],
    [
      { wasmModules: [{ name: 'm', source: new Uint8Array() }, { name: 'm', source: new ArrayBuffer(1) }] },
      "wasmModules[1].name: wasm module name 'm' is given more than once",
    ],
    [{ wasmModules: [{ name: 'm', bytes: new Uint8Array() }] }, 'wasmModules[0].bytes is not a known option of wasmModules[0]; did you mean wasmModules[0].source?'],
  ];
  for (const [config, message] of construct) {
    it(`new SandboxEngine(${JSON.stringify(config)}) throws naming the option`, () => {
      let thrown: unknown;
      try {
        new SandboxEngine(config as never);
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(SandboxValidationError);
      expect((thrown as Error).message).toBe(message);
    });
  }

  it('refuses a config that is not an object', () => {
    expect(() => new SandboxEngine(null as never)).toThrow('SandboxEngine config must be an object, got null');
  });

  describe('submit', () => {
    const engine = new SandboxEngine({ isolation: 'thread', tools: { now: () => 1, gh: { list: () => [] } } });
    beforeAll(() => engine.init());
    afterAll(() => engine.shutdown());
    const requests: Array<[Record<string, unknown>, string]> = [
      [{ code: '1', timeoutMs: 5 }, 'request.timeoutMs is not a known option of request; known options: requestId, code, language, isolateLimits, bridgeLimits, toolPolicy, tools, data, tenant, type, modules, resolve, maxModules, maxModuleBytes, web, unhandledRejections'],
      [{ code: '1', isolateLimits: { wallTimeMS: 5 } }, 'request.isolateLimits.wallTimeMS is not a known option of request.isolateLimits; did you mean request.isolateLimits.wallTimeMs?'],
      [{ code: '1', isolateLimits: { timeoutMs: 5 } }, 'request.isolateLimits.timeoutMs is not a known option of request.isolateLimits; did you mean request.isolateLimits.wallTimeMs?'],
      [{ code: '1', bridgeLimits: { maxMessages: -1 } }, 'request.bridgeLimits.maxMessages must be a whole number from 0 to 4294967295, got -1'],
      [{ code: '1', toolPolicy: { allowedTool: ['now'] } }, 'request.toolPolicy.allowedTool is not a known option of request.toolPolicy; did you mean request.toolPolicy.allowedTools?'],
      [{ code: '1', toolPolicy: { allowedTools: ['later'] } }, 'request.toolPolicy.allowedTools names unknown tool "later" (registered: now, gh.list)'],
      [{ code: '1', toolPolicy: { maxCallsPerTool: { gh: 1 } } }, 'request.toolPolicy.maxCallsPerTool names unknown tool "gh" (registered: now, gh.list)'],
      [{ code: '1', toolPolicy: { maxCallsPerTool: { now: 1.5 } } }, 'request.toolPolicy.maxCallsPerTool.now must be a whole number from 0 to 4294967295, got 1.5'],
      [{ code: '1', language: 'python' }, "request.language must be 'javascript' or 'typescript', got 'python'"],
      [{ code: 5 }, 'request.code must be a string, got 5'],
      [{ code: '1', data: [1] }, 'request.data must be an object, got an array'],
      [{ code: '1', toolPolicy: 5 }, 'request.toolPolicy must be an object, got 5'],
    ];
    for (const [request, message] of requests) {
      it(`refuses ${JSON.stringify(request)} with an error event naming the option`, async () => {
        const end = await engine.submit(request as never).done;
        expect(end.type).toBe('error');
        expect(end.type === 'error' && end.error).toBeInstanceOf(SandboxValidationError);
        expect(end.type === 'error' && end.message).toBe(message);
      });
    }
  });
});
