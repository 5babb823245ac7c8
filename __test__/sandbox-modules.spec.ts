// ES modules in persistent sandboxes (`type: 'module'` on createSandbox / sandbox.run),
// engine prelude modules (`prelude: { modules }`), and module sources through the
// compiled-code cache. Both isolation modes; every failure typed, and the sandbox (or the
// engine) still serves after it.
import { afterEach, describe, expect, it } from 'vitest';
import {
  createSandbox,
  runSandbox,
  SandboxEngine,
  SandboxRuntimeError,
  SandboxValidationError,
  type Isolation,
  type PersistentSandboxOptions,
  type Sandbox,
  type SandboxEngineConfig,
  type SandboxSession,
} from '..';
import { ok, failed } from './support/results';

const MODES: Isolation[] = ['thread', 'process'];

const open: Sandbox[] = [];
const engines: SandboxEngine[] = [];
afterEach(async () => {
  while (open.length) open.pop()!.close();
  while (engines.length) await engines.pop()!.shutdown();
});

async function outcome(session: SandboxSession) {
  const end = await session.done;
  if (end.type === 'result') return { ok: true as const, data: end.data };
  return { ok: false as const, error: end.error };
}

/** A module of at least 1 KiB (the code cache keeps nothing shorter). */
function padded(source: string) {
  return `${source}\n${'// padding so the code cache keeps this module\n'.repeat(40)}`;
}

describe.each(MODES)('ES modules in a persistent sandbox (%s isolation)', (isolation) => {
  async function sandbox(options: PersistentSandboxOptions = {}) {
    const sb = await createSandbox({ isolation, timeoutMs: 10_000, ...options });
    open.push(sb);
    return sb;
  }
  const mod = { type: 'module' as const };

  it('a module imported in one run is the same instance in the next: its state persists, it is not evaluated again', async () => {
    const sb = await sandbox({
      modules: { 'counter.js': 'globalThis.evaluations = (globalThis.evaluations ?? 0) + 1; export let n = 0; export function inc() { return ++n; }' },
    });
    expect(ok(await sb.run("import { inc } from 'counter.js'; export default inc();", mod))).toBe(1);
    expect(ok(await sb.run("import { inc, n } from 'counter.js'; inc(); export default n;", mod))).toBe(2);
    // A script run reaches the same instance through import().
    expect(ok(await sb.run("import('counter.js').then((m) => [m.inc(), globalThis.evaluations])"))).toEqual([3, 1]);
  });

  it("a module run's result is its default export, else its namespace; its declarations stay in it, globalThis persists", async () => {
    const sb = await sandbox();
    expect(ok(await sb.run('const local = 1; globalThis.shared = 2; export default [local, shared];', mod))).toEqual([1, 2]);
    expect(ok(await sb.run('[typeof local, shared]'))).toEqual(['undefined', 2]);
    expect(ok(await sb.run('export const a = await Promise.resolve(1); export let b = shared + 1;', mod))).toEqual({ a: 1, b: 3 });
    // A later call or script has its own result, not the last module's.
    await sb.run('function twice(x) { return x * 2 }');
    expect(ok(await sb.call('twice', 21))).toBe(42);
    expect(ok(await sb.run('7'))).toBe(7);
  });

  it('type at creation is each run\'s default; a run may say otherwise', async () => {
    const sb = await sandbox({ type: 'module', modules: { 'a.js': 'export const a = 5;' } });
    expect(ok(await sb.run("import { a } from 'a.js'; export default a * 2"))).toBe(10);
    expect(ok(await sb.run('var s = 1; s + 1', { type: 'script' }))).toBe(2);
  });

  it('import cycles work, within a run and across runs', async () => {
    const sb = await sandbox({
      modules: {
        'even.js': "import { odd } from './odd.js'; export const even = (n) => n === 0 || odd(n - 1);",
        'odd.js': "import { even } from './even.js'; export const odd = (n) => n !== 0 && even(n - 1);",
      },
    });
    expect(ok(await sb.run("import { even } from 'even.js'; export default even(10)", mod))).toBe(true);
    // A later run enters the loaded cycle from its other side.
    expect(ok(await sb.run("import { odd } from './odd.js'; export default odd(7)", mod))).toBe(true);
  });

  it('a missing module fails the run naming it; a later run that gives it loads it', async () => {
    const sb = await sandbox();
    const e = failed(await sb.run("import x from 'later.js'; export default x", mod));
    expect(e).toBeInstanceOf(SandboxRuntimeError);
    expect(e.message).toContain("Cannot find module 'later.js' imported from 'sandbox.mjs'");
    // import() of a missing module rejects inside, where it can be caught.
    expect(ok(await sb.run("import('later.js').then(() => 'found', (e) => e.message)"))).toContain("Cannot find module 'later.js'");
    expect(ok(await sb.run("import x from 'later.js'; export default x", { ...mod, modules: { 'later.js': 'export default 42' } }))).toBe(42);
    // Loaded now: later runs import it without giving it again.
    expect(ok(await sb.run("import x from 'later.js'; export default x + 1", mod))).toBe(43);
    expect(sb.closed).toBe(false);
  });

  it('a module that throws at evaluation fails the run; importing it again throws the same (ES semantics); the sandbox stays open', async () => {
    const sb = await sandbox({ modules: { 'bad.js': "export const x = 1;\nthrow new TypeError('bad module');" } });
    for (let i = 0; i < 2; i++) {
      const e = failed(await sb.run("import { x } from 'bad.js'; export default x", mod));
      expect(e).toBeInstanceOf(SandboxRuntimeError);
      expect(e.message).toContain('bad module');
    }
    expect(ok(await sb.run('1 + 1'))).toBe(2);
  });

  it("a resolve that rejects fails the run naming the module; the sandbox's resolve is asked once per module for the sandbox's life", async () => {
    const asked: string[] = [];
    const sb = await sandbox({
      resolve: async (specifier) => {
        asked.push(specifier);
        if (specifier === 'down') throw new Error('registry down');
        return specifier === 'lib' ? 'export const v = 7;' : undefined;
      },
    });
    const e = failed(await sb.run("import 'down'; export default 1", mod));
    expect(e).toBeInstanceOf(SandboxRuntimeError);
    expect(e.message).toContain("resolve('down', 'sandbox.mjs') failed: registry down");
    expect(ok(await sb.run("import { v } from 'lib'; export default v", mod))).toBe(7);
    expect(ok(await sb.run("import { v } from 'lib'; export default v * 2", mod))).toBe(14);
    expect(asked.filter((s) => s === 'lib')).toHaveLength(1);
    // A run's own resolve serves that run.
    expect(ok(await sb.run("import w from 'own'; export default w", { ...mod, resolve: () => 'export default "own"' }))).toBe('own');
  });

  it('a loaded module cannot be replaced by a later run; the same source again is fine', async () => {
    const sb = await sandbox();
    const modules = { 'lib.js': 'export default 1' };
    expect(ok(await sb.run("import x from 'lib.js'; export default x", { ...mod, modules }))).toBe(1);
    expect(ok(await sb.run("import x from 'lib.js'; export default x", { ...mod, modules }))).toBe(1);
    const e = failed(await sb.run("import x from 'lib.js'; export default x", { ...mod, modules: { 'lib.js': 'export default 2' } }));
    expect(e).toBeInstanceOf(SandboxValidationError);
    expect(e.message).toContain("modules['lib.js']: module 'lib.js' was loaded by an earlier run of this sandbox");
  });

  it("maxModules and maxModuleBytes bound the sandbox's module graph for its life; each run's own code is released after it", async () => {
    const sb = await sandbox({ maxModules: 3, modules: { 'a.js': 'export default 1', 'b.js': 'export default 2' } });
    expect(ok(await sb.run("import a from 'a.js'; export default a", mod))).toBe(1);
    expect(ok(await sb.run("import b from 'b.js'; export default b", mod))).toBe(2);
    // a.js, b.js and this run's code: c.js would be a fourth.
    const e = failed(await sb.run("import c from 'c.js'; export default c", { ...mod, modules: { 'c.js': 'export default 3' } }));
    expect(e.message).toMatch(/over its limit of 3 modules.*maxModules/);
    // Runs of code alone keep working, however many: their code is not kept.
    for (let i = 0; i < 20; i++) expect(ok(await sb.run(`import a from 'a.js'; import b from 'b.js'; export default a + b + ${i}`, mod))).toBe(3 + i);
    const small = await sandbox({ maxModuleBytes: 64 });
    expect(ok(await small.run('export default 1', { ...mod, modules: { 'x.js': 'export default 40;' } }))).toBe(1);
    const over = failed(await small.run("import x from 'y.js'; export default x", { ...mod, modules: { 'y.js': `export default ${'1'.repeat(60)};` } }));
    expect(over.message).toMatch(/maxModuleBytes/);
  });

  it("2,500 module runs fit in a 16 MB sandbox: each run's own module (and what it holds) is let go after it", async () => {
    const sb = await sandbox({ memoryLimitMb: 16, modules: { 'c.js': 'export let n = 0; export const inc = () => ++n;' } });
    // Each run's module holds 16 KB for as long as the module lives: kept, 2,500 of them
    // would be 40 MB.
    let last = 0;
    for (let i = 0; i < 2500; i++) {
      const r = await sb.run(`import { inc } from 'c.js'; const held = new Float64Array(2048).fill(${i}); export default inc() + held[0] * 0;`, mod);
      last = ok(r) as number;
    }
    expect(last).toBe(2500);
    expect(sb.closed).toBe(false);
  }, 60_000);

  it('TypeScript modules of the sandbox and of a run are stripped', async () => {
    const sb = await sandbox({ modules: { 'util.ts': 'export const twice = (n: number): number => n * 2;' } });
    expect(ok(await sb.run("import { twice } from './util.ts'; const n: number = twice(4); export default n", { ...mod, language: 'typescript' }))).toBe(8);
    expect(ok(await sb.run("import { half } from './half.ts'; export default half(8)", { ...mod, modules: { 'half.ts': 'export const half = (n: number): number => n / 2;' } }))).toBe(4);
  });

  it("one sandbox's modules are visible to no other sandbox and to no one-shot run", async () => {
    const a = await sandbox();
    const b = await sandbox();
    expect(ok(await a.run("import { secret } from 'secret.js'; export default secret", { ...mod, modules: { 'secret.js': "export const secret = 'a';" } }))).toBe('a');
    expect(failed(await b.run("import { secret } from 'secret.js'; export default secret", mod)).message).toContain("Cannot find module 'secret.js'");
    const r = await runSandbox("import { secret } from 'secret.js'; export default secret", { isolation, type: 'module' });
    expect(failed(r).message).toContain("Cannot find module 'secret.js'");
    expect(ok(await a.run("import { secret } from 'secret.js'; export default secret", mod))).toBe('a');
  });

  it('options are checked under their names', async () => {
    await expect(createSandbox({ isolation, type: 'modules' } as never)).rejects.toThrow(/type must be 'script' or 'module'/);
    await expect(createSandbox({ isolation, maxModules: 0 })).rejects.toThrow(/maxModules must be a whole number/);
    await expect(createSandbox({ isolation, modules: { a: 1 } } as never)).rejects.toThrow(/modules\['a'\] must be a module's source/);
    await expect(createSandbox({ isolation, resolve: 'x' } as never)).rejects.toBeInstanceOf(SandboxValidationError);
    const sb = await sandbox();
    const e = failed(await sb.run('1', { maxModules: 3 } as never));
    expect(e.message).toMatch(/maxModules is not a known option of sandbox.run options/);
  });
});

describe.each(MODES)('prelude modules (%s isolation)', (isolation) => {
  async function engineWith(config: Partial<SandboxEngineConfig>) {
    const engine = new SandboxEngine({ isolation, maxConcurrentIsolates: 3, processes: 1, ...config } as SandboxEngineConfig);
    engines.push(engine);
    await engine.init();
    return engine;
  }
  const PRELUDE = {
    source: 'var cents = 100;',
    modules: {
      'lib/money.js': "import { rate } from './rate.js'; export const money = (c) => (c * rate / cents).toFixed(2) + ' EUR'; let uses = 0; export const use = () => ++uses;",
      'lib/rate.js': 'export const rate = 2;',
    },
  };

  it('every run can import them without giving them: one-shot runs (fresh each run) and sandbox runs (kept)', async () => {
    const engine = await engineWith({ prelude: PRELUDE });
    expect(await outcome(engine.submit({ code: "const { money, use } = await import('lib/money.js'); return [money(150), use()];" }))).toEqual({ ok: true, data: ['3.00 EUR', 1] });
    // A fresh isolate each one-shot run: the module's state starts again.
    expect(await outcome(engine.submit({ code: "import { use } from 'lib/money.js'; export default use();", type: 'module' }))).toEqual({ ok: true, data: 1 });
    const sb = await engine.openSandbox({});
    open.push(sb);
    expect(ok(await sb.run("import { use } from 'lib/money.js'; export default use()", { type: 'module' }))).toBe(1);
    expect(ok(await sb.run("import { use } from 'lib/money.js'; export default use()", { type: 'module' }))).toBe(2);
  });

  it("a run's or a sandbox's own modules may not replace one", async () => {
    const engine = await engineWith({ prelude: PRELUDE });
    const r = await outcome(engine.submit({ code: 'return 1', modules: { './lib/rate.js': 'export const rate = 3;' } }));
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.error).toBeInstanceOf(SandboxValidationError);
      expect(r.error.message).toContain("request.modules['lib/rate.js'] names a module of the engine's prelude");
    }
    await expect(engine.openSandbox({ modules: { 'lib/rate.js': '' } })).rejects.toThrow(/modules\['lib\/rate.js'\] names a module of the engine's prelude/);
    const sb = await engine.openSandbox({});
    open.push(sb);
    const e = failed(await sb.run('1', { modules: { 'lib/money.js': '' } }));
    expect(e).toBeInstanceOf(SandboxValidationError);
    expect(e.message).toContain("names a module of the engine's prelude");
  });

  it('init() rejects a prelude module that does not compile, throws, or imports what the prelude lacks, naming it', async () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{ 'a.js': 'export const = 1;' }, /prelude module 'a.js' has a syntax error: SyntaxError: .*Unexpected token '='/],
      [{ 'a.js': "throw new RangeError('nope');" }, /prelude module 'a.js' threw RangeError: nope/],
      [{ 'a.js': "import 'b.js'; export default 1;" }, /prelude module 'a.js' threw Error: Cannot find module 'b.js' imported from 'a.js'/],
    ];
    for (const [modules, message] of cases) {
      const engine = new SandboxEngine({ isolation, processes: 1, prelude: { modules } });
      engines.push(engine);
      const err = await engine.init().then(() => null, (e: unknown) => e);
      expect(err).toBeInstanceOf(SandboxValidationError);
      expect((err as Error).message).toMatch(message);
    }
    expect(() => new SandboxEngine({ isolation, prelude: { modules: { 'a.ts': '' } } })).toThrow(/prelude modules are JavaScript/);
    expect(() => new SandboxEngine({ isolation, prelude: { modul: {} } as never })).toThrow(/did you mean prelude.modules\?/);
  });
});

describe.each(MODES)('module sources through the code cache (%s isolation)', (isolation) => {
  it('a module run served from the cache equals one compiled from source: result and thrown stack', async () => {
    const modules = {
      'lib/calc.js': padded("export function total(xs) { return xs.reduce((a, b) => a + b, 0); }\nexport function fail(why) {\n  throw new Error('failed: ' + why);\n}"),
    };
    const good = "import { total } from './lib/calc.js';\nexport default total([1, 2, 3]);";
    const bad = "import { fail } from './lib/calc.js';\nfail('stack');";
    const uncached = new SandboxEngine({ isolation, processes: 1, codeCacheMb: 0 });
    const cached = new SandboxEngine({ isolation, processes: 1 });
    engines.push(uncached, cached);
    await Promise.all([uncached.init(), cached.init()]);
    const run = async (engine: SandboxEngine, code: string) => outcome(engine.submit({ code, type: 'module', modules }));
    const reference = [await run(uncached, good), await run(uncached, bad)];
    expect(reference[0]).toEqual({ ok: true, data: 6 });
    expect(reference[1].ok).toBe(false);
    const stackOf = (r: Awaited<ReturnType<typeof outcome>>) => (r.ok ? null : (r.error as SandboxRuntimeError).thrown?.stack);
    expect(stackOf(reference[1])).toContain('at fail (lib/calc.js:3:9)');
    const before = cached.stats().codeCache.hits;
    // First sighting, second (cached then), third and fourth served from the cache.
    for (let i = 0; i < 4; i++) {
      expect(await run(cached, good)).toEqual(reference[0]);
      const threw = await run(cached, bad);
      expect(threw.ok).toBe(false);
      expect(stackOf(threw)).toBe(stackOf(reference[1]));
      if (!threw.ok && !reference[1].ok) expect(threw.error.message).toBe(reference[1].error.message);
    }
    const stats = cached.stats().codeCache;
    expect(stats.hits - before).toBeGreaterThanOrEqual(4);
    expect(stats.rejected).toBe(0);
    expect(uncached.stats().codeCache.hits).toBe(0);
  });
});
