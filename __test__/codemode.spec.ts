// isolet/codemode: the Executor contract of @cloudflare/codemode, and the real package's
// createCodeTool (with the real `ai` and `zod`) driving isolet's executor.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxValidationError } from '..';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { IsoletExecutor, createExecutor, normalizeCode, DEFAULT_CODEMODE_TIMEOUT_MS, type Executor, type ResolvedProvider } from '../lib/codemode';

// The real package imports `cloudflare:workers` at load: the shipped hook
// (isolet/codemode/register, what a user passes to `node --import`) resolves it to a
// stand-in before the package is first imported below.
beforeAll(() => import('../lib/codemode/register.mjs'));

// Loaded by a computed name: the package's own .d.ts files need the Workers type globals.
const load = (name: string): Promise<any> => import(name);

const executor = new IsoletExecutor({ timeoutMs: 2000, memoryMb: 64, maxConcurrentIsolates: 2 });
afterAll(() => executor.dispose());

const issues: ResolvedProvider = {
  name: 'github',
  fns: {
    listIssues: async (input: any) => [{ repo: input.repo, number: 1 }],
    'get-user': async () => 'octocat',
    fail: async () => {
      throw new Error('the GitHub API is down');
    },
    huge: async () => 'x'.repeat(20 * 1024 * 1024),
  },
};

describe('Executor contract', () => {
  it('is an Executor and runs an async arrow function with tools under their namespace', async () => {
    const asExecutor: Executor = executor;
    const r = await asExecutor.execute(
      'async () => { const list = await github.listIssues({ repo: "isolet" }); console.log("found", list.length); console.warn("careful"); console.error("bad"); return { list, user: await github.get_user() }; }',
      [issues],
    );
    expect(r).toEqual({
      result: { list: [{ repo: 'isolet', number: 1 }], user: 'octocat' },
      logs: ['found 1', '[warn] careful', '[error] bad'],
    });
  });

  it('accepts raw fns as the default "codemode" namespace', async () => {
    const r = await executor.execute('async () => codemode.add(2, 3)', { add: async (a: any, b: any) => a + b });
    expect(r.result).toBe(5);
    expect(r.error).toBeUndefined();
  });

  it('runs a provider prelude; its own members take precedence', async () => {
    const r = await executor.execute('async () => [await util.twice(4), await util.host()]', [
      { name: 'util', fns: { host: async () => 'from host', twice: async () => 'host twice' }, prelude: 'util.twice = (x) => x * 2;' },
    ]);
    expect(r.result).toEqual([8, 'from host']);
  });

  it('gives a thrown error, a tool that throws, and an unknown namespace as error strings', async () => {
    expect(await executor.execute('async () => { throw new Error("nope") }', [issues])).toMatchObject({ result: undefined, error: 'nope' });
    expect((await executor.execute('async () => github.fail()', [issues])).error).toBe('the GitHub API is down');
    expect((await executor.execute('async () => jira.list()', [issues])).error).toBe('jira is not defined');
    expect((await executor.execute('async () => github.nothing()', [issues])).error).toMatch(/github\.nothing is not a function/);
  });

  it('stops an endless loop at the timeout and a heap bomb at the memory limit, and keeps serving', async () => {
    const slow = await executor.execute('async () => { while (true) {} }', [issues]);
    expect(slow).toMatchObject({ result: undefined, error: 'Execution timed out' });
    // A generous time limit, so that only the memory limit can end this one on a busy machine.
    const roomy = new IsoletExecutor({ timeoutMs: 30000, memoryMb: 64 });
    try {
      const bomb = await roomy.execute('async () => { const a = []; while (true) a.push(new Array(2 ** 16).fill(a.length + 0.5)); }', [issues]);
      expect(bomb.error).toMatch(/SandboxOOMError: .*memory limit of 64 MB/);
    } finally {
      await roomy.dispose();
    }
    expect((await executor.execute('async () => 1 + 1', [])).result).toBe(2);
  });

  it('refuses an oversize tool result with a catchable error', async () => {
    const r = await executor.execute(
      'async () => { try { await github.huge(); return "no error" } catch (e) { return e.name + ": " + e.message } }',
      [issues],
    );
    expect(r.result).toMatch(/^RangeError: github\.huge's reply: \d+ bytes, over the bridge limit/);
  });

  it('rejects bad provider names and never throws', async () => {
    expect((await executor.execute('async () => 1', [{ name: 'not valid', fns: {} }])).error).toMatch(/not a valid JavaScript identifier/);
    expect((await executor.execute('async () => 1', [{ name: 'a', fns: {} }, { name: 'a', fns: {} }])).error).toMatch(/Duplicate provider name "a"/);
    expect((await executor.execute('async () => 1', [{ name: 'console', fns: {} }])).error).toMatch(/reserved/);
    expect((await executor.execute(42 as any, [])).error).toBe('code must be a string');
    expect((await executor.execute('async () => {', [])).error).toMatch(/SandboxValidationError: SyntaxError/);
  });

  it('runs TypeScript when asked, with positions in the TypeScript', async () => {
    const ts = createExecutor({ timeoutMs: 2000, language: 'typescript' });
    try {
      const r = await ts.execute('async (): Promise<number> => { const n: number = await codemode.n(); return n * 2 }', { n: async () => 21 });
      expect(r.result).toBe(42);
      const enums = await ts.execute('async () => {\n  enum E { A, B }\n  return E.B;\n}', {});
      expect(enums).toMatchObject({ result: 1 });
      const bad = await ts.execute('async () => {\n  @d class A {}\n}', {});
      expect(bad.error).toMatch(/UnsupportedSyntax: decorators are not supported.* at line 2, column 3/);
    } finally {
      await ts.dispose();
    }
  });

  it('normalizes code the way Code Mode passes it', () => {
    expect(normalizeCode('async () => 1')).toBe('async () => 1');
    expect(normalizeCode('```js\nasync () => 1\n```')).toBe('async () => 1');
    expect(normalizeCode('const a = 1;\nreturn a')).toBe('async () => {\nconst a = 1;\nreturn a\n}');
  });

  it('validates its options', () => {
    expect(() => new IsoletExecutor({ timeoutMs: -1 })).toThrow('timeoutMs must be a whole number from 1 to 2147483647, got -1');
    expect(() => new IsoletExecutor({ language: 'python' as any })).toThrow("language must be 'javascript' or 'typescript', got 'python'");
    expect(() => new IsoletExecutor({ memoryMb: 1 })).toThrow('memoryMb must be a whole number from 8 to 8192, got 1');
    // Its own options and the engine's are one list, for suggestions and for the known names.
    expect(() => new IsoletExecutor({ timeot: 5 } as any)).toThrow('timeot is not a known option of IsoletExecutor options; did you mean timeoutMs?');
    expect(() => new IsoletExecutor({ warmPool: 1 } as any)).toThrow(/did you mean warmPoolSize\?$/);
    expect(() => new IsoletExecutor({ zzz: 1 } as any)).toThrow(/known options: timeoutMs, language, stateful, idleTimeoutMs, fetch, memoryLimitMb, /);
    expect(() => new IsoletExecutor(null as any)).toThrow(SandboxValidationError);
  });

  it("defaults to isolet-core's Code Mode timeout, which is also the CPU limit unless the engine config sets one", async () => {
    const executor = new IsoletExecutor();
    expect([executor.timeoutMs, DEFAULT_CODEMODE_TIMEOUT_MS]).toEqual([60000, 60000]);
    await executor.dispose();
    const cpu = new IsoletExecutor({ timeoutMs: 5000, defaultIsolateLimits: { cpuTimeMs: 100 } });
    try {
      // Its engine and host start first: the time below is the run's alone.
      await cpu.execute('async () => 1', {});
      const t0 = Date.now();
      const r = await cpu.execute('async () => { while (true) {} }', {});
      expect(r.error).toBe('Execution timed out');
      expect(Date.now() - t0).toBeLessThan(4000); // the 100 ms CPU limit, not the 5 s timeout
    } finally {
      await cpu.dispose();
    }
  });
});

describe('stateful executor', () => {
  it('keeps one sandbox for every execution: what one puts on globalThis the next sees', async () => {
    const session = new IsoletExecutor({ stateful: true, timeoutMs: 2000, memoryMb: 64, maxConcurrentIsolates: 2 });
    try {
      expect(session.stateful).toBe(true);
      const first = await session.execute('async () => { const list = await github.listIssues({ repo: "a" }); globalThis.seen = list; return list.length }', [issues]);
      expect(first).toEqual({ result: 1, logs: [] });
      // Its own declarations were its own: a new `const list` is fine; the global stays.
      const second = await session.execute('async () => { const list = [1, 2]; return { list, seen: globalThis.seen, user: await github.get_user() } }', [issues]);
      expect(second.error).toBeUndefined();
      expect(second.result).toEqual({ list: [1, 2], seen: [{ repo: 'a', number: 1 }], user: 'octocat' });
      // Tools are the execution's own: another provider set is what the next one calls.
      const third = await session.execute('async () => [await codemode.add(2, 3), typeof github, globalThis.seen.length]', { add: async (a: unknown, b: unknown) => (a as number) + (b as number) });
      expect(third.result).toEqual([5, 'undefined', 1]);
      // A stateless executor shares nothing with it.
      const other = await executor.execute('async () => typeof globalThis.seen', [issues]);
      expect(other.result).toBe('undefined');
      // A timeout ends that execution; the session's state stays.
      const stuck = await session.execute('async () => { while (true) {} }', []);
      expect(stuck.error).toBe('Execution timed out');
      expect((await session.execute('async () => globalThis.seen.length', [])).result).toBe(1);
    } finally {
      await session.dispose();
    }
  });

  it('idleTimeout closes the sandbox; the next execution starts empty', async () => {
    // 1 s idle, 3 s asleep: on a loaded machine a gap between two executions can pass 200 ms.
    const session = new IsoletExecutor({ stateful: true, idleTimeoutMs: 1000, timeoutMs: 2000, memoryMb: 64, maxConcurrentIsolates: 1 });
    try {
      await session.execute('async () => { globalThis.kept = 1 }', []);
      expect((await session.execute('async () => globalThis.kept', [])).result).toBe(1);
      await new Promise((r) => setTimeout(r, 3000));
      expect((await session.execute('async () => typeof globalThis.kept', [])).result).toBe('undefined');
    } finally {
      await session.dispose();
    }
  });

  it('validates its options', () => {
    expect(() => new IsoletExecutor({ idleTimeoutMs: 1000 })).toThrow(/idleTimeoutMs applies to a stateful executor only/);
    expect(() => new IsoletExecutor({ stateful: 'yes' as never })).toThrow(SandboxValidationError);
    expect(() => new IsoletExecutor({ stateful: true, idleTimeoutMS: 5 } as never)).toThrow(/did you mean idleTimeoutMs\?/);
  });
});

describe('types', () => {
  it("IsoletExecutor's declared type is assignable to @cloudflare/codemode's own Executor type", async () => {
    const ts = (await load('typescript')).default;
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'isolet-cm-types-'));
    try {
      const file = path.join(dir, 'check.ts');
      const codemodeTypes = path.resolve(__dirname, '..', 'lib', 'codemode');
      fs.writeFileSync(
        file,
        [
          `import type { Executor } from '@cloudflare/codemode';`,
          `import { IsoletExecutor } from ${JSON.stringify(codemodeTypes)};`,
          `const executor: Executor = new IsoletExecutor({ timeoutMs: 1000 });`,
          `const run: Promise<{ result: unknown; error?: string; logs?: string[] }> = executor.execute('async () => 1', [{ name: 'x', fns: {} }]);`,
          `export { run };`,
        ].join('\n'),
      );
      const program = ts.createProgram([file], {
        strict: true,
        noEmit: true,
        module: ts.ModuleKind.NodeNext,
        moduleResolution: ts.ModuleResolutionKind.NodeNext,
        target: ts.ScriptTarget.ES2022,
        // The package's own .d.ts files need Cloudflare's Workers type globals; only our file is checked.
        skipLibCheck: true,
        types: ['node'],
        typeRoots: [path.resolve(__dirname, '..', 'node_modules', '@types')],
        baseUrl: path.resolve(__dirname, '..'),
        paths: { '@cloudflare/codemode': [path.resolve(__dirname, '..', 'node_modules', '@cloudflare', 'codemode', 'dist', 'index.d.ts')] },
      });
      const problems = ts.getPreEmitDiagnostics(program).filter((d: any) => d.file && d.file.fileName === file);
      expect(problems.map((d: any) => ts.flattenDiagnosticMessageText(d.messageText, '\n'))).toEqual([]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('with @cloudflare/codemode createCodeTool, ai and zod', () => {
  it('runs the model-written program through the real code tool', async () => {
    const { createCodeTool } = await load('@cloudflare/codemode/ai');
    const { tool } = await load('ai');
    const { z } = await load('zod');
    const calls: unknown[] = [];
    const tools = {
      getWeather: tool({
        description: 'Current weather of a city',
        inputSchema: z.object({ city: z.string() }),
        execute: async (input: { city: string }) => {
          calls.push(input);
          return { city: input.city, tempC: 21 };
        },
      }),
    };
    const codeTool = createCodeTool({ tools, executor });
    expect(codeTool.description).toContain('getWeather');
    const ctx = { toolCallId: 't1', messages: [] };
    const out = await codeTool.execute(
      { code: 'async () => { const w = await codemode.getWeather({ city: "Oslo" }); console.log("it is", w.tempC); return w.city + " " + w.tempC; }' },
      ctx,
    );
    expect(out).toEqual({ result: 'Oslo 21', logs: ['it is 21'] });
    expect(calls).toEqual([{ city: 'Oslo' }]);

    // Schema violations are caught by the package before the tool runs; the failure is
    // reported as the code tool's error.
    await expect(codeTool.execute({ code: 'async () => codemode.getWeather({ city: 5 })' }, ctx)).rejects.toThrow(/Code execution failed: .*expected string/s);
    expect(calls).toHaveLength(1);
    await expect(codeTool.execute({ code: 'async () => { while (true) {} }' }, ctx)).rejects.toThrow('Code execution failed: Execution timed out');
  });
});
