// The compiled-code cache: a source run again is compiled from V8's code cache, gives
// the same results, shares no state, and the cache stays within its byte budget whatever
// sources a caller submits.
import { afterEach, describe, expect, it } from 'vitest';
import { SandboxEngine, SandboxValidationError, type SandboxEngineConfig, type SandboxSession } from '..';

const engines: SandboxEngine[] = [];
afterEach(async () => {
  while (engines.length) await engines.pop()!.shutdown();
});

async function engineWith(config: Partial<SandboxEngineConfig>) {
  // One host in process isolation: each host keeps its own cache.
  const engine = new SandboxEngine({ maxConcurrentIsolates: 4, processes: 1, ...config } as SandboxEngineConfig);
  engines.push(engine);
  await engine.init();
  return engine;
}

async function outcome(session: SandboxSession) {
  for await (const event of session) {
    if (event.type === 'result') return { ok: true as const, data: event.data };
    if (event.type === 'error') return { ok: false as const, name: event.error.name, message: event.message, stack: (event.error as { stack?: string }).stack };
  }
  throw new Error('session ended without an outcome');
}

/** A program of about `bytes` bytes (above the cache's 1 KiB minimum) tagged `tag`. */
function program(tag: number, bytes = 4096) {
  const lines = [`const tag = ${tag};`, 'function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }'];
  for (let i = 0; lines.join('\n').length < bytes; i++) lines.push(`function helper${i}(x) { return x * ${i} + tag; }`);
  lines.push('globalThis.runs = (globalThis.runs ?? 0) + 1;');
  lines.push('return { tag, fib: fib(15), h: helper3(2), runs: globalThis.runs };');
  return lines.join('\n');
}

describe.each(['thread', 'process'] as const)('code cache (%s isolation)', (isolation) => {
  it('serves a source run again from the cache, with identical results and no shared state', async () => {
    const engine = await engineWith({ isolation });
    const code = program(7);
    const results = [];
    for (let i = 0; i < 4; i++) results.push(await outcome(engine.submit({ code })));
    // Every run starts fresh: `runs` is 1 each time, though the code came from the cache.
    for (const r of results) expect(r).toEqual({ ok: true, data: { tag: 7, fib: 610, h: 13, runs: 1 } });
    const s = engine.stats().codeCache;
    // First sighting: remembered; second: compiled and kept; third and fourth: served.
    expect(s).toMatchObject({ hits: 2, misses: 2, rejected: 0, entries: 1 });
    expect(s.bytes).toBeGreaterThan(code.length);
    expect(s.bytes).toBeLessThanOrEqual(s.budgetBytes);
  });

  it('a thrown error has the same stack from compiled and from cached code', async () => {
    const engine = await engineWith({ isolation });
    const code = program(1).replace('return {', 'if (tag) throw new RangeError("from line " + tag);\nreturn {');
    const first = await outcome(engine.submit({ code }));
    await outcome(engine.submit({ code }));
    const cached = await outcome(engine.submit({ code }));
    expect(engine.stats().codeCache.hits).toBe(1);
    expect(first.ok).toBe(false);
    expect(cached).toEqual(first);
  });

  it('thousands of distinct sources, each sent twice, never grow the cache past its budget', async () => {
    const engine = await engineWith({ isolation, codeCacheMb: 1 });
    const budget = 1024 * 1024;
    expect(engine.stats().codeCache.budgetBytes).toBe(budget);
    // Thread isolation starts a thread per run, slower here: fewer, still seven budgets' worth.
    const distinct = isolation === 'thread' ? 400 : 1000;
    let maxBytes = 0;
    for (let batch = 0; batch < distinct; batch += 50) {
      const runs = [];
      for (let i = batch; i < batch + 50; i++) {
        const code = program(i, 16 * 1024);
        runs.push(outcome(engine.submit({ code })).then(() => outcome(engine.submit({ code }))));
      }
      for (const r of await Promise.all(runs)) expect(r.ok).toBe(true);
      maxBytes = Math.max(maxBytes, engine.stats().codeCache.bytes);
    }
    const s = engine.stats().codeCache;
    expect(maxBytes).toBeLessThanOrEqual(budget);
    expect(s.bytes).toBeLessThanOrEqual(budget);
    expect(s.evictions).toBeGreaterThan(0);
    expect(s.entries).toBeGreaterThan(0);
    // Each entry holds its 16 KiB source at least: the budget bounds their number too.
    expect(s.entries).toBeLessThanOrEqual(budget / (16 * 1024));
  }, 90_000);

  it('codeCacheMb 0 keeps nothing but the prelude', async () => {
    const engine = await engineWith({ isolation, codeCacheMb: 0, prelude: 'function twice(x) { return 2 * x; }' + ' '.repeat(2000) });
    const code = program(5);
    for (let i = 0; i < 3; i++) expect(await outcome(engine.submit({ code: `return twice(21) + (${JSON.stringify(code)}).length * 0` }))).toEqual({ ok: true, data: 42 });
    const s = engine.stats().codeCache;
    expect(s.entries).toBe(1);
    expect(s.budgetBytes).toBe(0);
    // The prelude is served from the cache on every run.
    expect(s.hits).toBeGreaterThanOrEqual(3);
  });

  it('a source that does not compile is never kept', async () => {
    const engine = await engineWith({ isolation });
    const code = program(9) + '\n)';
    for (let i = 0; i < 3; i++) {
      const r = await outcome(engine.submit({ code }));
      expect(r).toMatchObject({ ok: false, name: 'SandboxValidationError' });
    }
    expect(engine.stats().codeCache).toMatchObject({ entries: 0, hits: 0 });
  });
});

it('codeCacheMb is checked under its name', () => {
  expect(() => new SandboxEngine({ codeCacheMb: 2048 } as SandboxEngineConfig)).toThrow(
    new SandboxValidationError('codeCacheMb must be a whole number from 0 to 1024, got 2048'),
  );
  expect(() => new SandboxEngine({ codeCacheMb: -1 } as SandboxEngineConfig)).toThrow(SandboxValidationError);
});
