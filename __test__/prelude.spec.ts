// SandboxEngine `prelude`: evaluated into every fresh context before the run's code,
// checked at init(), invisible to later runs whatever a run does to it.
import { afterEach, describe, expect, it } from 'vitest';
import { SandboxEngine, SandboxValidationError, type SandboxEngineConfig, type SandboxSession } from '..';

const engines: SandboxEngine[] = [];
afterEach(async () => {
  while (engines.length) await engines.pop()!.shutdown();
});

function engineWith(config: Partial<SandboxEngineConfig>) {
  const engine = new SandboxEngine({ maxConcurrentIsolates: 2, processes: 1, ...config } as SandboxEngineConfig);
  engines.push(engine);
  return engine;
}

async function outcome(session: SandboxSession) {
  for await (const event of session) {
    if (event.type === 'result') return { ok: true as const, data: event.data };
    if (event.type === 'error') return { ok: false as const, error: event.error };
  }
  throw new Error('session ended without an outcome');
}

const LIBRARY = `
function add(a, b) { return a + b; }
const settings = { rate: 2, list: [1, 2, 3] };
let calls = 0;
function counted() { return ++calls; }
class Money { constructor(n) { this.n = n; } times(k) { return new Money(this.n * k); } }
globalThis.helper = function helper() { return 'h'; };
Object.defineProperty(globalThis, 'VERSION', { value: '1.2.3', writable: false, configurable: false });
`;

describe.each(['thread', 'process'] as const)('prelude (%s isolation)', (isolation) => {
  it("a prelude's functions, classes and bindings are there for every run", async () => {
    const engine = engineWith({ isolation, prelude: LIBRARY });
    await engine.init();
    const r = await outcome(engine.submit({ code: 'return [add(2, 3), settings.rate, new Money(4).times(3).n, VERSION, counted()]' }));
    expect(r).toEqual({ ok: true, data: [5, 2, 12, '1.2.3', 1] });
  });

  it('what a run changes of the prelude state is invisible to the next run', async () => {
    const engine = engineWith({ isolation, prelude: LIBRARY });
    await engine.init();
    const vandal = `
      settings.rate = 100; settings.list.push(4); calls = 41;
      delete globalThis.helper; globalThis.Money = null; add.extra = 1;
      Object.prototype.polluted = true; Array.prototype.push = () => 0;
      Math.max = () => -1;
      return [settings.rate, typeof helper, counted()];`;
    expect(await outcome(engine.submit({ code: vandal }))).toEqual({ ok: true, data: [100, 'undefined', 42] });
    const look = `return [settings.rate, settings.list.length, typeof helper, typeof Money, add.extra, ({}).polluted, [].push(1), Math.max(1, 2), counted(), Math.E]`;
    for (let i = 0; i < 3; i++) {
      expect(await outcome(engine.submit({ code: look }))).toEqual({ ok: true, data: [2, 3, 'function', 'function', undefined, undefined, 1, 2, 1, Math.E] });
    }
  });

  it("a persistent sandbox starts from the prelude once and keeps what its runs change; other runs never see it", async () => {
    const engine = engineWith({ isolation, prelude: LIBRARY });
    await engine.init();
    const sb = await engine.openSandbox();
    try {
      const first = await sb.run('settings.rate = 7; [add(1, 2), counted(), VERSION]');
      expect(first.success && first.output).toEqual([3, 1, '1.2.3']);
      // The prelude ran once: its state is the sandbox's and lives on between runs.
      const second = await sb.run('[settings.rate, counted()]');
      expect(second.success && second.output).toEqual([7, 2]);
      expect(await outcome(engine.submit({ code: 'return [settings.rate, counted()]' }))).toEqual({ ok: true, data: [2, 1] });
    } finally {
      sb.close();
    }
  });

  it('the prelude runs before tools and data exist, so it cannot capture them', async () => {
    const engine = engineWith({
      isolation,
      prelude: 'var seenAtPrelude = [typeof add, typeof data, typeof wasm].join(",");',
      tools: { add: (a: number, b: number) => a + b },
    });
    await engine.init();
    const r = await outcome(engine.submit({ code: 'return [seenAtPrelude, await add(1, 2)]', toolPolicy: { allowedTools: ['add'] } }));
    expect(r).toEqual({ ok: true, data: ['undefined,undefined,undefined', 3] });
  });

  it('a syntax error is a SandboxValidationError at init() with its line and column, and the host carries on', async () => {
    const bad = engineWith({ isolation, prelude: 'const a = 1;\nconst b = 2;\nconst c = ;\n' });
    const err = await bad.init().then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(SandboxValidationError);
    expect((err as Error).message).toMatch(/^prelude has a syntax error: SyntaxError: Unexpected token ';' at line 3, column 11$/);
    const good = engineWith({ isolation, prelude: LIBRARY });
    await good.init();
    expect(await outcome(good.submit({ code: 'return add(1, 1)' }))).toEqual({ ok: true, data: 2 });
  });

  it('a prelude that throws is a SandboxValidationError at init() naming what it threw', async () => {
    const bad = engineWith({ isolation, prelude: 'var ok = 1;\nthrow new TypeError("no config");' });
    const err = await bad.init().then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(SandboxValidationError);
    expect((err as Error).message).toBe('prelude threw TypeError: no config at line 2, column 1');
  });

  it('a prelude that never ends is stopped at init() with a SandboxValidationError, and the host carries on', async () => {
    const bad = engineWith({ isolation, prelude: 'for (;;) {}' });
    const err = await bad.init().then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(SandboxValidationError);
    expect((err as Error).message).toBe('prelude did not finish within 2000 ms');
    const good = engineWith({ isolation, prelude: LIBRARY });
    await good.init();
    expect(await outcome(good.submit({ code: 'return add(2, 2)' }))).toEqual({ ok: true, data: 4 });
  });

  it("a prelude may use the web APIs at its top level on an engine with web: true, as its runs do", async () => {
    const prelude = 'const enc = new TextEncoder(); const ID = new URL("https://x.test/a?b=1").searchParams.get("b");';
    const engine = engineWith({ isolation, web: true, prelude });
    await engine.init();
    expect(await outcome(engine.submit({ code: 'return [enc.encode("hé").length, ID]' }))).toEqual({ ok: true, data: [3, '1'] });
    // Without the web APIs (the default), the same prelude names what is missing at init().
    const without = engineWith({ isolation, prelude });
    const err = await without.init().then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(SandboxValidationError);
    expect((err as Error).message).toBe('prelude threw ReferenceError: TextEncoder is not defined at line 1, column 13');
  });

  it('a prelude that exhausts the memory of a run is a SandboxValidationError at init()', async () => {
    // The check has a fixed 2 s (PRELUDE_INIT_TIME_MS), isolate included: a small memory ends
    // the bomb soon, in a host at lower priority on a loaded machine too.
    const bad = engineWith({ isolation, memoryMb: 16, prelude: 'const keep = []; for (;;) keep.push(new Array(100000).fill(1));' });
    const err = await bad.init().then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(SandboxValidationError);
    expect((err as Error).message).toBe("prelude ran out of memory (the engine's memoryMb is 16)");
  });
});

/**
 * Resolves once the engine holds `n` warm isolates (their contexts prepared), within 20 s:
 * after a stopped warm-up (its 2 s bound) a sandbox host may be started again first, which
 * a loaded machine took more than 4 s for, and once more than 10 s (CI, three suites at once).
 */
async function warmed(engine: SandboxEngine, n: number) {
  const until = Date.now() + 20_000;
  while (Date.now() < until && engine.stats().warm < n) await new Promise((r) => setTimeout(r, 10));
  expect(engine.stats().warm).toBeGreaterThanOrEqual(n);
}

/** A prelude whose top level takes `ms` of CPU (within init()'s 2,000 ms check). */
const slowPrelude = (ms: number) => `${LIBRARY}\nconst until = Date.now() + ${ms}; while (Date.now() < until) {}`;

describe.each(['thread', 'process'] as const)('a prelude in warm isolates (%s isolation)', (isolation) => {
  it("a warm isolate evaluates the prelude before its run: the run pays none of its time, and sees it fresh", async () => {
    // The prelude takes 700 ms; the runs may take 400 (room for a loaded machine; a warm-up
    // may take 2,000): evaluated in the run, it could not finish.
    const engine = engineWith({ isolation, warmPoolSize: 2, prelude: slowPrelude(700), defaultIsolateLimits: { wallTimeMs: 400 } });
    await engine.init();
    for (let i = 0; i < 3; i++) {
      await warmed(engine, 1);
      const session = engine.submit({ code: 'settings.rate = 99; return [add(2, 3), counted(), counted(), settings.rate]' });
      expect(await outcome(session)).toEqual({ ok: true, data: [5, 1, 2, 99] });
    }
    // A run given no warm isolate (another memory limit) evaluates the prelude itself, under its own limits.
    const cold = await outcome(engine.submit({ code: 'return add(1, 1)', isolateLimits: { memoryMb: 96, wallTimeMs: 400 } }));
    expect(cold.ok).toBe(false);
    expect(cold.ok === false && cold.error.code).toBe('ERR_ISOLET_TIMEOUT');
  });

  it('what a run changes of a prepared context is invisible to the next run', async () => {
    const engine = engineWith({ isolation, warmPoolSize: 2, prelude: LIBRARY });
    await engine.init();
    await warmed(engine, 2);
    const vandal = `
      settings.rate = 100; settings.list.push(4); calls = 41;
      delete globalThis.helper; globalThis.Money = null; add.extra = 1;
      Object.prototype.polluted = true; Array.prototype.push = () => 0;
      console.log = () => { throw new Error('kept'); };
      return [settings.rate, typeof helper, counted()];`;
    expect(await outcome(engine.submit({ code: vandal }))).toEqual({ ok: true, data: [100, 'undefined', 42] });
    const look = `console.log('hi'); return [settings.rate, settings.list.length, typeof helper, typeof Money, add.extra, ({}).polluted, [].push(1), counted()]`;
    for (let i = 0; i < 4; i++) {
      await warmed(engine, 1);
      expect(await outcome(engine.submit({ code: look }))).toEqual({ ok: true, data: [2, 3, 'function', 'function', undefined, undefined, 1, 1] });
    }
    expect(engine.stats().warmStarts).toBeGreaterThanOrEqual(5);
  });

  it('a run with the web APIs, or without, is served as a fresh context of its own shape', async () => {
    const engine = engineWith({ isolation, warmPoolSize: 1, prelude: 'var seen = [typeof URL, typeof console.log];' });
    await engine.init();
    const code = "return [seen, typeof URL, typeof setTimeout, typeof performance === 'object' ? performance.now() < 500 : null]";
    for (const web of [false, true, true, false, true]) {
      await warmed(engine, 1);
      // performance.now() counts from the run's start, however long its isolate waited.
      await new Promise((r) => setTimeout(r, 600));
      const r = await outcome(engine.submit({ code, web }));
      const t = web ? 'function' : 'undefined';
      expect(r).toEqual({ ok: true, data: [[t, 'function'], t, t, web ? true : null] });
    }
  });

  it("a prelude that reads the web clock is evaluated in its run: the clock starts with the run, as in a fresh context", async () => {
    const engine = engineWith({ isolation, warmPoolSize: 1, web: true, prelude: 'var started = performance.now(); var origin = performance.timeOrigin;' });
    await engine.init();
    for (let i = 0; i < 2; i++) {
      await warmed(engine, 1);
      await new Promise((r) => setTimeout(r, 600));
      // Kept from a warm-up, timeOrigin would be the warm-up's: 600 ms behind the clock (400:
      // room for a loaded machine between the run's start and its first statement).
      const r = await outcome(engine.submit({ code: 'return [Math.abs(performance.timeOrigin + performance.now() - Date.now()) < 400, origin === performance.timeOrigin, started < 400]' }));
      expect(r).toEqual({ ok: true, data: [true, true, true] });
    }
  });

  it("a prelude that logs still logs in each run: its warm-up is not used, and warm isolates stop preparing it", async () => {
    const engine = engineWith({ isolation, warmPoolSize: 2, prelude: 'console.log("prelude says hi"); var n = 1;' });
    await engine.init();
    for (let i = 0; i < 3; i++) {
      await warmed(engine, 1);
      const events = [];
      for await (const event of engine.submit({ code: 'console.log("run"); return n' })) events.push(event);
      const result = events.find((e) => e.type === 'result') as { logs: { message: string }[] } | undefined;
      expect(result?.logs.map((l) => l.message)).toEqual(['prelude says hi', 'run']);
    }
  });

  it('a prelude that turns slow or greedy only after init() stops its warm-ups, and runs are held to their own limits', async () => {
    // Deterministic for init()'s check, then each warm-up would loop forever (or grow
    // without end): the warm-up is stopped and the run evaluates the prelude itself.
    for (const [body, failures] of [
      ['for (;;) {}', ['ERR_ISOLET_TIMEOUT']],
      ['const keep = []; for (;;) keep.push(new Array(100000).fill(1));', ['ERR_ISOLET_OOM', 'ERR_ISOLET_TIMEOUT']],
    ] as const) {
      // Time enough for init() (a host's start and the check) on a loaded machine.
      const after = Date.now() + 5000;
      const engine = engineWith({
        isolation,
        warmPoolSize: 1,
        memoryLimitMb: 32,
        prelude: `var n = 1; if (Date.now() > ${after}) { ${body} }`,
        defaultIsolateLimits: { wallTimeMs: 1000, memoryMb: 32 },
      });
      await engine.init();
      await new Promise((r) => setTimeout(r, Math.max(0, after - Date.now()) + 50));
      const codes: string[] = [];
      for (let i = 0; i < 3; i++) {
        const r = await outcome(engine.submit({ code: 'return n' }));
        codes.push(r.ok ? 'ok' : r.error.code);
      }
      // A warm isolate prepared before the deadline may serve the first; the rest meet the
      // prelude's loop in their own evaluation, under their own limits.
      for (const code of codes.slice(1)) expect(failures).toContain(code);
      // The stopped warm-up leaves nothing stuck: a warm isolate is ready again, no thread is quarantined.
      await warmed(engine, 1);
      expect(engine.stats().quarantined).toBe(0);
      expect((await outcome(engine.submit({ code: 'return 1 + 1' }))).ok).toBe(false);
    }
  }, 120_000);
});

describe('prelude option checks', () => {
  it('must be a string (or { source, modules }) of at most 8 MiB, checked when the engine is made', async () => {
    expect(() => new SandboxEngine({ prelude: 42 } as unknown as SandboxEngineConfig)).toThrow(
      new SandboxValidationError('prelude must be a string or an object { source?, modules? }, got 42'),
    );
    const limit = 8 * 1024 * 1024;
    const over = '//' + 'x'.repeat(limit - 1);
    expect(() => new SandboxEngine({ prelude: over } as SandboxEngineConfig)).toThrow(
      new SandboxValidationError(`prelude must be at most ${limit} bytes, got ${limit + 1} bytes`),
    );
    // At the limit: accepted, checked and run.
    const atLimit = 'var big = 7;//' + 'x'.repeat(limit - 14);
    expect(atLimit.length).toBe(limit);
    const engine = engineWith({ isolation: 'thread', prelude: atLimit });
    await engine.init();
    expect(await outcome(engine.submit({ code: 'return big' }))).toEqual({ ok: true, data: 7 });
    expect(() => new SandboxEngine({ preludes: '1' } as unknown as SandboxEngineConfig)).toThrow(/did you mean prelude\?/);
  });
});
