// ES modules (`type: 'module'`): results, static and dynamic imports from the `modules`
// map and from `resolve`, relative keys, TypeScript modules, cycles, every failure typed
// and named, and the limits on what a run can make the host fetch or hold. Both
// isolation modes; after each failure the engine still serves.
import { afterAll, describe, expect, it } from 'vitest';
import {
  runSandbox,
  SandboxEngine,
  SandboxRuntimeError,
  SandboxTimeoutError,
  SandboxValidationError,
  DEFAULT_ISOLATE_LIMITS,
  DEFAULT_BRIDGE_LIMITS,
  type Isolation,
  type SandboxOptions,
} from '..';
import { ok, failed } from './support/results';

const MODES: Isolation[] = ['thread', 'process'];

describe.each(MODES)('ES modules (%s isolation)', (isolation) => {
  const run = <T = unknown>(code: string, options: SandboxOptions = {}) =>
    runSandbox<T>(code, { type: 'module', isolation, timeoutMs: 10_000, ...options });
  /** The engine behind runSandbox still serves a plain run. */
  const stillServes = async () => expect(ok(await runSandbox('1 + 1', { isolation }))).toBe(2);

  it('the default export is the result; without one, the namespace as a plain object', async () => {
    expect(ok(await run('export default [1, 2].map((x) => x * 2)'))).toEqual([2, 4]);
    const ns = ok(await run<Record<string, unknown>>("export const a = 1; export let b = 'x'; const c = [true]; export { c as renamed };"));
    expect(ns).toEqual({ a: 1, b: 'x', renamed: [true] });
    expect(Object.getPrototypeOf(ns)).toBe(Object.prototype);
    expect(ok(await run('const x = 1;'))).toEqual({});
  });

  it('top-level await works, capabilities included', async () => {
    expect(ok(await run('const v = await Promise.resolve(41); export default v + 1'))).toBe(42);
    expect(ok(await run('export default await add(2, 3)', { capabilities: { add: (a: number, b: number) => a + b } }))).toBe(5);
  });

  it('static and dynamic imports come from the map; relative keys join like URL paths', async () => {
    const modules = {
      './lib/math.js': "import { one } from './one.js'; import { base } from '../base.js'; export const add = (a, b) => a + b + one + base;",
      'lib/one.js': 'export const one = 100;',
      'base.js': 'export const base = 1000;',
      zod: "export const z = { string: () => 'string' }; export default 40;",
      dyn: 'await null; export const x = 7;',
    };
    const code = `
      import { add } from './lib/math.js';
      import forty, { z } from 'zod';
      const { x } = await import('dyn');
      export default [add(forty, 2), z.string(), x];`;
    expect(ok(await run(code, { modules }))).toEqual([1142, 'string', 7]);
    // import() works from a script (an async body here) too.
    expect(ok(await runSandbox("return (await import('zod')).default", { isolation, capabilities: {}, modules }))).toBe(40);
  });

  it('TypeScript modules are stripped: .ts keys, and every module of a TypeScript run', async () => {
    const modules = { './util.ts': 'export const twice = (n: number): number => n * 2;' };
    expect(ok(await run("import { twice } from './util.ts'; export default twice(21)", { modules }))).toBe(42);
    const ts = await run("import { v } from 'plain'; const n: number = v; export default n", {
      language: 'typescript',
      modules: { plain: 'export const v: number = 5;' },
    });
    expect(ok(ts)).toBe(5);
    const resolved = await run("import { twice } from './far.ts'; export default twice(4)", {
      resolve: () => 'export const twice = (n: number): number => n * 2;',
    });
    expect(ok(resolved)).toBe(8);
  });

  it('an import cycle works as ES modules define', async () => {
    const modules = {
      'a.js': "import { b } from './b.js'; export function a() { return 'a' + b(); }",
      'b.js': "import { a } from './a.js'; export function b() { return 'b:' + typeof a; }",
    };
    expect(ok(await run("import { a } from './a.js'; export default a()", { modules }))).toBe('ab:function');
  });

  it('resolve answers imports the map does not hold, with a canonical key if it names one', async () => {
    const asked: string[][] = [];
    const resolve = async (specifier: string, referrer: string) => {
      asked.push([specifier, referrer]);
      if (specifier === 'pkg') return { source: "export { v as default } from './lib/v.js';", specifier: 'pkg/index.js' };
      if (specifier === 'pkg/lib/v.js') return 'export const v = 9;';
      return undefined;
    };
    expect(ok(await run("import v from 'pkg'; export default v", { resolve }))).toBe(9);
    expect(asked).toEqual([
      ['pkg', 'sandbox.mjs'],
      ['pkg/lib/v.js', 'pkg/index.js'],
    ]);
  });

  it('a missing module is a SandboxRuntimeError naming it and its importer', async () => {
    const e = failed(await run("import x from './lib/nope.js'; export default x"));
    expect(e).toBeInstanceOf(SandboxRuntimeError);
    expect(e.message).toContain("Cannot find module 'lib/nope.js' imported from 'sandbox.mjs'");
    const nested = failed(await run("import 'a'", { modules: { a: "import './gone.js'" }, resolve: () => null }));
    expect(nested.message).toContain("Cannot find module 'gone.js' imported from 'a'");
    // import() of a missing module rejects inside the sandbox, where it can be caught.
    const caught = await run("let m; try { await import('nope') } catch (e) { m = String(e) } export default m");
    expect(ok(caught)).toBe("Error: Cannot find module 'nope' imported from 'sandbox.mjs'");
    // From a script too, where no module was compiled before.
    const script = await runSandbox("import('./nope.js').catch(String)", { isolation, timeoutMs: 10_000 });
    expect(ok(script)).toBe("Error: Cannot find module 'nope.js' imported from 'sandbox.js'");
    // An import() that failed leaves the next, unrelated one alone; reaching the failed
    // module again fails the same way.
    const after = await run(
      "const why = (e) => e.message; const a = await import('a.js').then(() => 'a', why); const b = await import('b.js').then((m) => m.default, why); const again = await import('a.js').then(() => 'a', why); export default [a, b, again];",
      { modules: { 'a.js': "import 'missing.js'; export default 1", 'b.js': 'export default 2' } },
    );
    const missing = "Cannot find module 'missing.js' imported from 'a.js'";
    expect(ok(after)).toEqual([missing, 2, missing]);
    await stillServes();
  });

  it('a syntax error in an imported module names the module, its line and column', async () => {
    const e = failed(await run("import x from './bad.js'; export default x", { modules: { 'bad.js': '\nexport default = 1' } }));
    expect(e).toBeInstanceOf(SandboxValidationError);
    expect(e.message).toContain("in module 'bad.js'");
    expect(e.message).toContain('(line 2, column 16)');
    await stillServes();
  });

  it('a module that throws at evaluation fails the run with what it threw', async () => {
    const e = failed(await run("import './boom.js'; export default 1", { modules: { 'boom.js': "throw new TypeError('boom')" } }));
    expect(e).toBeInstanceOf(SandboxRuntimeError);
    expect(e.message).toContain('TypeError: boom');
    await stillServes();
  });

  it("a resolve that rejects: its message reaches the run's error", async () => {
    const e = failed(await run("import x from 'remote'; export default x", { resolve: async () => Promise.reject(new Error('registry down')) }));
    expect(e).toBeInstanceOf(SandboxRuntimeError);
    expect(e.message).toContain("resolve('remote', 'sandbox.mjs') failed: registry down");
    const bad = failed(await run("import x from 'remote'; export default x", { resolve: (() => 42) as never }));
    expect(bad.message).toContain('not a source string');
    await stillServes();
  });

  it('a resolve that answers past the wall limit: SandboxTimeoutError, the host is fine', async () => {
    for (const code of ["import x from 'slow'; export default x", "export default await import('slow')"]) {
      let late: (() => void) | undefined;
      const r = await run(code, {
        timeoutMs: 300,
        resolve: () => new Promise((resolve) => (late = () => resolve('export default 1'))),
      });
      const e = failed(r);
      expect(e).toBeInstanceOf(SandboxTimeoutError);
      expect(e.message).toContain('wall-clock limit of 300 ms');
      late?.(); // the late answer is dropped
      await stillServes();
    }
  });

  it('a run cannot make resolve fetch thousands of modules (maxModules)', async () => {
    let calls = 0;
    const resolve = (s: string) => {
      calls++;
      return `export default ${JSON.stringify(s)}`;
    };
    const code = `
      let n = 0, error = '';
      try { for (let i = 0; i < 5000; i++) { await import('m' + i); n++; } } catch (e) { error = String(e) }
      export default { n, error };`;
    const out = ok(await run<{ n: number; error: string }>(code, { resolve, maxModules: 50 }));
    // The run's own code is one module of the graph.
    expect(out.n).toBe(49);
    expect(out.error).toContain('RangeError');
    expect(out.error).toContain('maxModules');
    expect(calls).toBe(49);
    // Missing modules count too: each resolve call is one of maxModules.
    let misses = 0;
    const missing = ok(
      await run<number>("let n = 0; for (let i = 0; i < 5000; i++) { try { await import('x' + i) } catch (e) { if (String(e).includes('maxModules')) break; n++ } } export default n", {
        resolve: () => {
          misses++;
          return null;
        },
        maxModules: 30,
      }),
    );
    expect([missing, misses]).toEqual([30, 30]);
    await stillServes();
  });

  it('a run cannot make the host hold huge sources (maxModuleBytes)', async () => {
    const big = `export default '${'x'.repeat(4000)}';`;
    const e = failed(await run("import x from 'big'; export default x.length", { resolve: () => big, maxModuleBytes: 2000 }));
    expect(e).toBeInstanceOf(SandboxRuntimeError);
    expect(e.message).toContain('maxModuleBytes');
    expect(ok(await run<number>("import x from 'big'; export default x.length", { resolve: () => big, maxModuleBytes: 10_000 }))).toBe(4000);
    await stillServes();
  });

  it('resolve calls count as host messages (maxHostCalls)', async () => {
    const e = failed(await run("import 'a'; import 'b'; import 'c'", { resolve: () => 'export {}', maxHostCalls: 2 }));
    expect(e.message).toContain('Bridge message limit of 2');
    await stillServes();
  });
});

describe('module options are validated natively, by name', () => {
  it('type, modules, maxModules and maxModuleBytes', async () => {
    const bad = async (options: SandboxOptions, text: string) => {
      const e = failed(await runSandbox('export default 1', { isolation: 'thread', ...options }));
      expect(e).toBeInstanceOf(SandboxValidationError);
      expect(e.message).toContain(text);
    };
    await bad({ type: 'commonjs' as never }, "type must be 'script' or 'module', got 'commonjs'");
    await bad({ typ: 'module' } as never, 'did you mean type?');
    await bad({ type: 'module', modules: { a: 1 as never } }, "modules['a'] must be a module's source (a string), got 1");
    await bad({ type: 'module', modules: { './a.js': '', 'a.js': '' } }, "names module 'a.js'");
    await bad({ type: 'module', modules: { a: '', b: '', c: '' }, maxModules: 3 }, 'modules holds 3 modules');
    await bad({ type: 'module', modules: { a: 'x'.repeat(100) }, maxModuleBytes: 99 }, 'modules holds 100 bytes of source, over maxModuleBytes (99)');
    await bad({ type: 'module', maxModules: 0 }, 'maxModules must be a whole number from 1 to 100000');
    await bad({ type: 'module', resolve: 'x' as never }, 'resolve must be a function');
  });
});

describe.each(MODES)('SandboxEngine requests with type: module (%s isolation)', (isolation) => {
  let engine: SandboxEngine;
  afterAll(async () => engine?.shutdown());

  const result = async (request: Parameters<SandboxEngine['submit']>[0]) => {
    const done = await engine.submit(request).done;
    return done;
  };

  it('runs modules, resolves imports, refuses an oversized map, and keeps serving', async () => {
    engine = new SandboxEngine({
      memoryMb: 64,
      maxConcurrentIsolates: 2,
      warmPoolSize: 1,
      isolation,
      wasmModules: [],
      defaultIsolateLimits: DEFAULT_ISOLATE_LIMITS,
      defaultBridgeLimits: DEFAULT_BRIDGE_LIMITS,
    });
    await engine.init();
    const r = await result({
      code: "import { twice } from './util.ts'; import v from 'remote'; export default twice(v)",
      type: 'module',
      modules: { './util.ts': 'export const twice = (n: number) => n * 2;' },
      resolve: async (s) => (s === 'remote' ? 'export default 21' : undefined),
    });
    expect(r.type === 'result' && r.data).toBe(42);
    const tooBig = await result({ code: 'export default 1', type: 'module', modules: { a: '', b: '' }, maxModules: 2 });
    expect(tooBig.type === 'error' && tooBig.error).toBeInstanceOf(SandboxValidationError);
    expect(tooBig.type === 'error' && tooBig.error.message).toContain('request.modules holds 2 modules');
    const missing = await result({ code: "import 'gone'", type: 'module' });
    expect(missing.type === 'error' && missing.error.message).toContain("Cannot find module 'gone'");
    const body = await result({ code: "return (await import('m')).default", modules: { m: 'export default 3' } });
    expect(body.type === 'result' && body.data).toBe(3);
  });
});
