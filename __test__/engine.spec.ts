// SandboxEngine: warm pool, admission, sessions, data requests, limits, tool policy, WASM.
import { afterEach, describe, expect, it } from 'vitest';
import {
  SandboxEngine,
  SandboxAbortedError,
  SandboxError,
  SandboxOOMError,
  SandboxRuntimeError,
  SandboxTimeoutError,
  SandboxValidationError,
  DEFAULT_MEMORY_MB,
  DEFAULT_ISOLATE_LIMITS,
  DEFAULT_BRIDGE_LIMITS,
  processStats,
  type SandboxEngineConfig,
  type SandboxEvent,
  type SandboxSession,
} from '..';

const engines: SandboxEngine[] = [];
afterEach(async () => {
  while (engines.length) await engines.pop()!.shutdown();
});

async function makeEngine(config: Partial<SandboxEngineConfig> = {}, deps = {}) {
  const engine = new SandboxEngine(
    {
      memoryMb: 128,
      maxConcurrentIsolates: 4,
      warmPoolSize: 0,
      wasmModules: [],
      defaultIsolateLimits: DEFAULT_ISOLATE_LIMITS,
      defaultBridgeLimits: DEFAULT_BRIDGE_LIMITS,
      ...config,
    },
    deps,
  );
  engines.push(engine);
  await engine.init();
  return engine;
}

async function collect(session: SandboxSession, onData?: (e: Extract<SandboxEvent, { type: 'dataRequest' }>) => void) {
  const events: SandboxEvent[] = [];
  for await (const event of session) {
    events.push(event);
    if (event.type === 'dataRequest' && onData) onData(event);
  }
  return events;
}

function last(events: SandboxEvent[]) {
  return events[events.length - 1];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// (i32, i32) -> i32 add, exported as "add".
const ADD_WASM = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x07, 0x01, 0x60, 0x02, 0x7f, 0x7f, 0x01, 0x7f, 0x03, 0x02,
  0x01, 0x00, 0x07, 0x07, 0x01, 0x03, 0x61, 0x64, 0x64, 0x00, 0x00, 0x0a, 0x09, 0x01, 0x07, 0x00, 0x20, 0x00, 0x20,
  0x01, 0x6a, 0x0b,
]);

describe('the seed usage', () => {
  it('runs the README snippet with a consumer answering the data request', async () => {
    expect(DEFAULT_MEMORY_MB).toBe(128);
    const config: SandboxEngineConfig = {
      memoryMb: 128,
      maxConcurrentIsolates: 4,
      warmPoolSize: 2,
      wasmModules: [],
      defaultIsolateLimits: DEFAULT_ISOLATE_LIMITS,
      defaultBridgeLimits: DEFAULT_BRIDGE_LIMITS,
    };
    const engine = new SandboxEngine(config);
    engines.push(engine);
    await engine.init();
    const session = engine.submit({ requestId: 'req_123', code: 'return data.accounts.length;' });
    const seen: string[] = [];
    let result: unknown;
    for await (const event of session) {
      switch (event.type) {
        case 'status':
          seen.push(`status:${event.message}`);
          break;
        case 'dataRequest':
          seen.push(`dataRequest:${event.key}`);
          session.respond(event.id, [{ id: 1 }, { id: 2 }, { id: 3 }]);
          break;
        case 'result':
          result = event.data;
          break;
        case 'error':
          throw event.error;
      }
    }
    expect(result).toBe(3);
    expect(seen).toEqual(['status:queued', 'status:started', 'dataRequest:accounts', 'status:finished']);
    await engine.shutdown();
  });
});

describe('sessions and data requests', () => {
  it('answers values given up front without a data request, and caches answers', async () => {
    const engine = await makeEngine();
    const session = engine.submit({ requestId: 'r', code: 'return [data.fixed, data.asked.n, data.asked.n, data.asked === data.asked];', data: { fixed: 'given' } });
    const events = await collect(session, (e) => session.respond(e.id, { n: 7 }));
    expect(events.filter((e) => e.type === 'dataRequest').map((e: any) => e.key)).toEqual(['asked']);
    expect(last(events)).toMatchObject({ type: 'result', data: ['given', 7, 7, true], requestId: 'r' });
  });

  it('keeps data read-only inside the sandbox', async () => {
    const engine = await makeEngine();
    const session = engine.submit({
      requestId: 'ro',
      code: 'const r = []; for (const f of [() => { data.x = 1 }, () => { delete data.fixed }, () => { "use strict"; data = 5 }]) { try { f(); r.push("ok") } catch (e) { r.push(e.name) } } data = 6; return [r, typeof data, data.fixed];',
      data: { fixed: 1 },
    });
    const events = await collect(session);
    expect(last(events)).toMatchObject({ type: 'result', data: [['TypeError', 'TypeError', 'TypeError'], 'object', 1] });
  });

  it('lets the consumer reject a data request', async () => {
    const engine = await makeEngine();
    const session = engine.submit({ requestId: 'rej', code: 'try { data.secret } catch (e) { return e.message }' });
    const events = await collect(session, (e) => session.reject(e.id, 'not for you'));
    expect(last(events)).toMatchObject({ type: 'result', data: 'not for you' });
  });

  it('ends a never-answered data request at the wall-clock limit', async () => {
    const engine = await makeEngine();
    const session = engine.submit({ requestId: 'w', code: 'return data.never;', isolateLimits: { wallTimeMs: 200 } });
    const events = await collect(session);
    const end = last(events);
    expect(end.type).toBe('error');
    if (end.type === 'error') {
      expect(end.error).toBeInstanceOf(SandboxTimeoutError);
      expect(end.stats.wallTimeMs).toBeGreaterThanOrEqual(190);
    }
  });

  it('refuses an answer to an unknown id with SandboxValidationError', async () => {
    const engine = await makeEngine();
    const session = engine.submit({ requestId: 'u', code: 'return data.k;' });
    let threw: unknown;
    const events = await collect(session, (e) => {
      try {
        session.respond(e.id + 1000, 1);
      } catch (err) {
        threw = err;
      }
      session.respond(e.id, 'right');
    });
    expect(threw).toBeInstanceOf(SandboxValidationError);
    expect(last(events)).toMatchObject({ type: 'result', data: 'right' });
    expect(() => session.respond(1, 'after the end')).toThrow(SandboxValidationError);
  });

  it('replays every event to a consumer that starts after the session finished', async () => {
    const engine = await makeEngine();
    const session = engine.submit({ requestId: 'late', code: 'console.log("hello"); return 1;' });
    await session.done;
    const events = await collect(session);
    expect(events.map((e) => (e.type === 'status' ? e.status : e.type))).toEqual(['queued', 'started', 'console', 'finished', 'result']);
    expect(events[2]).toMatchObject({ type: 'status', status: 'console', level: 'log', message: 'hello' });
    // And a second consumer sees the same.
    expect((await collect(session)).length).toBe(5);
  });

  it('uses injected deps: clock, id source and logger', async () => {
    const lines: string[] = [];
    const engine = await makeEngine({}, { clock: () => 1234, idGenerator: () => 'gen-1', logger: { info: (m: string) => lines.push(m) } });
    const session = engine.submit({ code: 'return 1' } as any);
    const events = await collect(session);
    expect(session.requestId).toBe('gen-1');
    expect(events.every((e) => e.at === 1234 && e.requestId === 'gen-1')).toBe(true);
    expect(lines.some((l) => l.includes('engine ready'))).toBe(true);
  });

  it('reports invalid requests as a SandboxValidationError event', async () => {
    const engine = await makeEngine();
    for (const bad of [{ requestId: 'x', code: 5 }, { requestId: 'y', code: '1', isolateLimits: { memoryMb: -1 } }, { requestId: 'z', code: '1', toolPolicy: { allowedTools: ['nope'] } }]) {
      const events = await collect(engine.submit(bad as any));
      expect(events.length).toBe(1);
      expect(last(events).type).toBe('error');
      if (last(events).type === 'error') expect((last(events) as any).error).toBeInstanceOf(SandboxValidationError);
    }
  });

  it('delivers thrown errors, OOM and syntax errors as typed error events with stats', async () => {
    const engine = await makeEngine({ memoryMb: 32 });
    const cases: [string, abstract new (...args: any[]) => Error][] = [
      ['throw new Error("x")', SandboxRuntimeError],
      ['const a = []; while (true) a.push([a.length]);', SandboxOOMError],
      ['return ;;; )', SandboxValidationError],
    ];
    for (const [code, cls] of cases) {
      const end = last(await collect(engine.submit({ requestId: 'e', code })));
      expect(end.type).toBe('error');
      if (end.type === 'error') {
        expect(end.error).toBeInstanceOf(cls);
        expect(typeof end.stats.cpuTimeMs).toBe('number');
      }
    }
    // A slot is given back once the isolate is disposed, just after the event.
    for (let i = 0; i < 1000 && Object.keys(engine.stats().failed).length < 3; i++) await sleep(10);
    expect(engine.stats().failed).toMatchObject({ SandboxRuntimeError: 1, SandboxOOMError: 1, SandboxValidationError: 1 });
  });
});

describe('admission: concurrency cap, queue, abort, shutdown', () => {
  it('runs at most maxConcurrentIsolates at once', async () => {
    const engine = await makeEngine({ maxConcurrentIsolates: 2 });
    const started: string[] = [];
    const sessions = Array.from({ length: 6 }, (_, i) => engine.submit({ requestId: `s${i}`, code: 'const end = Date.now() + 60; while (Date.now() < end) {} return 1;' }));
    let maxBusy = 0;
    const poll = setInterval(() => (maxBusy = Math.max(maxBusy, engine.stats().busy)), 5);
    await Promise.all(
      sessions.map(async (s) => {
        for await (const e of s) if (e.type === 'status' && e.status === 'started') started.push(s.requestId);
      }),
    );
    clearInterval(poll);
    expect(maxBusy).toBeLessThanOrEqual(2);
    expect(maxBusy).toBeGreaterThanOrEqual(1);
    expect(started.sort()).toEqual(['s0', 's1', 's2', 's3', 's4', 's5']);
    for (let i = 0; i < 1000 && engine.stats().completed < 6; i++) await sleep(10);
    expect(engine.stats().completed).toBe(6);
  });

  it('starts queued sessions in FIFO order', async () => {
    const engine = await makeEngine({ maxConcurrentIsolates: 1 });
    const order: string[] = [];
    const sessions = Array.from({ length: 5 }, (_, i) => engine.submit({ requestId: `f${i}`, code: 'const end = Date.now() + 20; while (Date.now() < end) {} return 1;' }));
    await Promise.all(
      sessions.map(async (s) => {
        for await (const e of s) if (e.type === 'status' && e.status === 'started') order.push(s.requestId);
      }),
    );
    expect(order).toEqual(['f0', 'f1', 'f2', 'f3', 'f4']);
  });

  it('refuses work beyond the queue bound with a clear error', async () => {
    const engine = await makeEngine({ maxConcurrentIsolates: 1, maxQueueSize: 1 });
    const busy = 'const end = Date.now() + 200; while (Date.now() < end) {} return 1;';
    const a = engine.submit({ requestId: 'a', code: busy });
    const b = engine.submit({ requestId: 'b', code: busy });
    const c = engine.submit({ requestId: 'c', code: busy });
    const endC = await c.done;
    expect(endC.type).toBe('error');
    if (endC.type === 'error') {
      expect(endC.error).toBeInstanceOf(SandboxError);
      expect(endC.error.code).toBe('ERR_ISOLET_OVERLOADED');
      expect(endC.message).toMatch(/queue is full/);
    }
    expect((await a.done).type).toBe('result');
    expect((await b.done).type).toBe('result');
  });

  it('aborts a running session and a queued one', async () => {
    const engine = await makeEngine({ maxConcurrentIsolates: 1 });
    const running = engine.submit({ requestId: 'run', code: 'while (true) {}' });
    const queued = engine.submit({ requestId: 'q', code: 'return "never"' });
    await sleep(50);
    queued.abort();
    running.abort();
    const [endRun, endQ] = await Promise.all([running.done, queued.done]);
    expect(endRun.type === 'error' && endRun.error).toBeInstanceOf(SandboxAbortedError);
    expect(endQ.type === 'error' && endQ.error).toBeInstanceOf(SandboxAbortedError);
    const events = await collect(queued);
    expect(events.some((e) => e.type === 'status' && e.status === 'started')).toBe(false);
    const after = await engine.submit({ requestId: 'next', code: 'return 2' }).done;
    expect(after).toMatchObject({ type: 'result', data: 2 });
  });

  it('shuts down with work in flight: every session ends once, threads are gone, later submits fail', async () => {
    const before = processStats().liveThreads;
    const engine = await makeEngine({ maxConcurrentIsolates: 2, warmPoolSize: 2 });
    const sessions = Array.from({ length: 5 }, (_, i) => engine.submit({ requestId: `x${i}`, code: 'while (true) {}' }));
    await sleep(50);
    await engine.shutdown();
    for (const s of sessions) {
      const events = await collect(s);
      expect(events.filter((e) => e.type === 'result' || e.type === 'error').length).toBe(1);
      const end = last(events);
      expect(end.type === 'error' && end.error).toBeInstanceOf(SandboxAbortedError);
    }
    expect(engine.stats().threads).toBe(0);
    expect(processStats().liveThreads).toBeLessThanOrEqual(before);
    const afterShutdown = await engine.submit({ requestId: 'late', code: 'return 1' }).done;
    expect(afterShutdown.type === 'error' && afterShutdown.error).toBeInstanceOf(SandboxAbortedError);
  });

  it('keeps a warm pool and serves from it', async () => {
    const engine = await makeEngine({ warmPoolSize: 2 });
    for (let i = 0; i < 1000 && engine.stats().warm < 2; i++) await sleep(10);
    expect(engine.stats().warm).toBe(2);
    await engine.submit({ requestId: 'w1', code: 'return 1' }).done;
    expect(engine.stats().warmStarts).toBe(1);
    for (let i = 0; i < 1000 && engine.stats().warm < 2; i++) await sleep(10);
    expect(engine.stats().warm).toBe(2);
    // A request for another memory size cannot use a warm isolate.
    await engine.submit({ requestId: 'c1', code: 'return 1', isolateLimits: { memoryMb: 64 } }).done;
    expect(engine.stats().coldStarts).toBe(1);
  });

  it('runs 200 sessions in a row with no thread or memory growth', async () => {
    const engine = await makeEngine({ warmPoolSize: 2 });
    const threads0 = processStats().liveThreads;
    await engine.submit({ requestId: 'warm', code: 'return 0' }).done;
    const rss0 = process.memoryUsage().rss;
    for (let i = 0; i < 200; i++) {
      const s = engine.submit({ requestId: `n${i}`, code: 'return data.v * 2', data: { v: i } });
      const end = await s.done;
      expect(end).toMatchObject({ type: 'result', data: i * 2 });
    }
    for (let i = 0; i < 500 && (processStats().liveThreads > threads0 + 2 || engine.stats().threads > 3); i++) await sleep(20);
    expect(processStats().liveThreads).toBeLessThanOrEqual(threads0 + 2);
    expect(engine.stats().threads).toBeLessThanOrEqual(3);
    expect(process.memoryUsage().rss - rss0).toBeLessThan(60 * 1024 * 1024);
  });
});

describe('memoryMb is the limit enforced', () => {
  // ~48 MB of live arrays: over a 32 MB limit, well under 128 MB.
  const grow = 'const a = []; for (let i = 0; i < 48; i++) a.push(new Array(131072).fill(i)); return a.length';

  it('enforces config.memoryMb with the seed pattern defaultIsolateLimits: DEFAULT_ISOLATE_LIMITS, from the warm pool', async () => {
    // One warm isolate in each of the (default two) sandbox host processes, so the run
    // starts warm whichever host it goes to.
    const engine = await makeEngine({ memoryMb: 32, warmPoolSize: 2, defaultIsolateLimits: DEFAULT_ISOLATE_LIMITS });
    for (let i = 0; i < 1000 && engine.stats().warm < 2; i++) await sleep(10);
    const end = await engine.submit({ requestId: 'm32', code: grow }).done;
    expect(end.type).toBe('error');
    if (end.type === 'error') expect(end.error).toBeInstanceOf(SandboxOOMError);
    // Default requests fit the warm isolates: no cold start.
    expect(engine.stats().warmStarts).toBe(1);
    expect(engine.stats().coldStarts).toBe(0);
  });

  it('lets a request raise its own memoryMb above the engine default', async () => {
    const engine = await makeEngine({ memoryMb: 32 });
    const end = await engine.submit({ requestId: 'm128', code: grow, isolateLimits: { memoryMb: 128 } }).done;
    expect(end).toMatchObject({ type: 'result', data: 48 });
  });

  it('takes defaultIsolateLimits.memoryMb when config.memoryMb is absent', async () => {
    const engine = new SandboxEngine({ maxConcurrentIsolates: 1, defaultIsolateLimits: { memoryMb: 32 } });
    engines.push(engine);
    await engine.init();
    const end = await engine.submit({ requestId: 'd32', code: grow }).done;
    expect(end.type === 'error' && end.error).toBeInstanceOf(SandboxOOMError);
  });
});

describe('limits and tool policy', () => {
  const tools = {
    add: (a: number, b: number) => a + b,
    slow: () => new Promise((r) => setTimeout(() => r('slow done'), 300)),
  };

  it('calls an allowed tool', async () => {
    const engine = await makeEngine({ tools });
    const end = await engine.submit({ requestId: 't', code: 'return await add(2, 3)', toolPolicy: { allowedTools: ['add'] } }).done;
    expect(end).toMatchObject({ type: 'result', data: 5 });
  });

  it('does not even install a tool the policy does not allow (default: none); its handler never runs', async () => {
    let invoked = 0;
    const engine = await makeEngine({ tools: { spy: () => ++invoked, ok: () => 1 } });
    const code = 'const seen = [typeof spy, typeof globalThis.spy, "spy" in globalThis, typeof ok]; try { await spy() } catch (e) { seen.push(e.name + ": " + e.message) } return seen';
    const end = await engine.submit({ requestId: 'd', code, toolPolicy: { allowedTools: ['ok'] } }).done;
    expect(end.type === 'result' && end.data).toEqual(['undefined', 'undefined', false, 'function', 'ReferenceError: spy is not defined']);
    const none = await engine.submit({ requestId: 'd2', code: 'return [typeof spy, typeof ok]' }).done;
    expect(none.type === 'result' && none.data).toEqual(['undefined', 'undefined']);
    expect(invoked).toBe(0);
  });

  it('limits calls per tool', async () => {
    let invoked = 0;
    const engine = await makeEngine({ tools: { spy: () => ++invoked } });
    const end = await engine.submit({
      requestId: 'c',
      code: 'let ok = 0; try { for (;;) { await spy(); ok++ } } catch (e) { return [ok, e.message] }',
      toolPolicy: { allowedTools: ['spy'], maxCallsPerTool: { spy: 3 } },
    }).done;
    expect(end.type === 'result' && end.data).toEqual([3, 'tool "spy" exceeded its limit of 3 calls']);
    expect(invoked).toBe(3);
  });

  it('enforces CPU and wall limits separately: waiting on a tool beyond the CPU limit still succeeds', async () => {
    const engine = await makeEngine({ tools });
    const waited = await engine.submit({ requestId: 'cpu-ok', code: 'return await slow()', toolPolicy: { allowedTools: ['slow'] }, isolateLimits: { cpuTimeMs: 50, wallTimeMs: 5000 } }).done;
    expect(waited).toMatchObject({ type: 'result', data: 'slow done' });
    const spun = await engine.submit({ requestId: 'cpu-bad', code: 'for (;;) {}', isolateLimits: { cpuTimeMs: 100, wallTimeMs: 5000 } }).done;
    expect(spun.type === 'error' && (spun.error as SandboxTimeoutError).limit).toBe('cpu');
    const walled = await engine.submit({ requestId: 'wall', code: 'return await slow()', toolPolicy: { allowedTools: ['slow'] }, isolateLimits: { wallTimeMs: 100 } }).done;
    expect(walled.type === 'error' && (walled.error as SandboxTimeoutError).limit).toBe('wall');
  });

  it('enforces bridge limits in both directions', async () => {
    const engine = await makeEngine({ tools: { echo: (x: unknown) => x, big: () => 'z'.repeat(10_000) } });
    const policy = { allowedTools: ['echo', 'big'] };
    const out = await engine.submit({ requestId: 'o', code: 'try { await echo("x".repeat(5000)) } catch (e) { return e.name }', toolPolicy: policy, bridgeLimits: { maxMessageBytes: 1000 } }).done;
    expect(out.type === 'result' && out.data).toBe('RangeError');
    const back = await engine.submit({ requestId: 'i', code: 'try { await big() } catch (e) { return e.name }', toolPolicy: policy, bridgeLimits: { maxMessageBytes: 1000 } }).done;
    expect(back.type === 'result' && back.data).toBe('RangeError');
    const count = await engine.submit({ requestId: 'n', code: 'let n = 0; try { for (;;) { await echo(1); n++ } } catch (e) { return n }', toolPolicy: policy, bridgeLimits: { maxMessages: 4 } }).done;
    expect(count.type === 'result' && count.data).toBe(4);
    const session = engine.submit({ requestId: 'd', code: 'return data.huge', bridgeLimits: { maxMessageBytes: 1000 } });
    let refused: unknown;
    const events = await collect(session, (e) => {
      try {
        session.respond(e.id, 'h'.repeat(5000));
      } catch (err) {
        refused = err;
        session.respond(e.id, 'small');
      }
    });
    expect(refused).toBeInstanceOf(SandboxValidationError);
    expect(last(events)).toMatchObject({ type: 'result', data: 'small' });
    const output = await engine.submit({ requestId: 'out', code: 'return "q".repeat(5000)', bridgeLimits: { maxOutputBytes: 1000 } }).done;
    expect(output.type === 'error' && output.error).toBeInstanceOf(SandboxRuntimeError);
  });
});

describe('WASM modules', () => {
  it('compiles modules once at init and exposes their exports as wasm.<name>', async () => {
    const engine = await makeEngine({ wasmModules: [{ name: 'math', source: ADD_WASM }] });
    const end = await engine.submit({ requestId: 'w', code: 'return [wasm.math.add(2, 40), typeof WebAssembly];' }).done;
    expect(end).toMatchObject({ type: 'result', data: [42, 'undefined'] });
    const again = await engine.submit({ requestId: 'w2', code: 'return wasm.math.add(1, 1);' }).done;
    expect(again).toMatchObject({ type: 'result', data: 2 });
  });

  it('an exported memory grows only to its declared maximum and leads back to no WebAssembly constructor', async () => {
    // Module: one memory (min 1, max 2 pages) exported as "mem".
    const MEM_WASM = new Uint8Array([0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x05, 0x04, 0x01, 0x01, 0x01, 0x02, 0x07, 0x07, 0x01, 0x03, 0x6d, 0x65, 0x6d, 0x02, 0x00]);
    const engine = await makeEngine({ wasmModules: [{ name: 'm', source: MEM_WASM }] });
    const end = await engine.submit({
      requestId: 'mem',
      code: `const mem = wasm.m.mem;
        const out = [mem.buffer.byteLength, mem.grow(1), mem.buffer.byteLength];
        try { mem.grow(1); out.push('grew past max'); } catch (e) { out.push(e.name); }
        const proto = Object.getPrototypeOf(mem);
        // The only constructor reachable is Object's: constructing through it makes no memory.
        out.push(Object.prototype.hasOwnProperty.call(proto, 'constructor'), mem.constructor === Object, typeof WebAssembly);
        out.push(new mem.constructor({ initial: 60000 }).buffer === undefined);
        return out;`,
    }).done;
    expect(end).toMatchObject({ type: 'result', data: [65536, 1, 131072, 'RangeError', false, true, 'undefined', true] });
  });

  it('rejects invalid WASM bytes at init with SandboxValidationError', async () => {
    const engine = new SandboxEngine({ memoryMb: 64, maxConcurrentIsolates: 1, warmPoolSize: 0, wasmModules: [{ name: 'bad', source: new Uint8Array([0, 1, 2, 3]) }], defaultIsolateLimits: {}, defaultBridgeLimits: {} });
    engines.push(engine);
    await expect(engine.init()).rejects.toBeInstanceOf(SandboxValidationError);
    const session = engine.submit({ requestId: 'x', code: 'return 1' });
    expect((await session.done).type).toBe('error');
  });
});
