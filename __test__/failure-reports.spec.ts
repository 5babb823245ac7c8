// Failures that say what happened, at every entry point (runSandbox, SandboxEngine, a
// persistent sandbox, isolet run, the MCP tool), in both isolation modes, for JavaScript
// and TypeScript:
// - a thrown value that is not an Error keeps its own enumerable fields (`thrown`);
// - a promise rejected with no handler is reported (a warn log entry with its message and
//   position, `stats.unhandledRejections`), and `unhandledRejections: 'error'` fails the run;
// - a result that cannot be copied names the path of the first bad value;
// - with capabilities, a last line that is a bare expression gets a hint (output undefined);
// - isolet run's stacks name the user's file; a persistent sandbox's top-level-await
//   rewrite keeps the user's columns.
import { describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  createSandbox,
  runSandbox,
  SandboxEngine,
  SandboxRuntimeError,
  SandboxValidationError,
  type Sandbox,
  type SandboxResult,
  type LogEntry,
} from '../index';
import { createRequire } from 'node:module';
import { entryPoints, MODES, type Mode } from './support/entry-points';

const load = createRequire(__filename);

type Language = 'javascript' | 'typescript';
const LANGUAGES: Language[] = ['javascript', 'typescript'];

const HINT = 'the last expression is not returned; add `return`';
const UNCLONEABLE = 'the result cannot be copied out of the sandbox: result.items[3].onClick: function';

/** Each program in both languages: the TypeScript one has types (and, where it matters, a transform). */
const PROGRAMS = {
  throwsObject: {
    javascript: 'const status = 401;\nthrow { code: "E_AUTH", status, retry: { after: 30 }, log() {} };',
    typescript: 'interface Refusal { code: string; status: number; retry: { after: number } }\nconst status: number = 401;\nthrow { code: "E_AUTH", status, retry: { after: 30 } } satisfies Refusal;',
  },
  // A promise nobody awaited, rejected on line 2; the result is still 1.
  unhandled: {
    javascript: 'const lost = async () => { throw new Error("nobody awaited me"); };\n  lost();\nconst kept = Promise.reject(new Error("handled later"));\nkept.catch(() => {});\n1',
    typescript: 'enum Step { One = 1 }\nconst lost = async (): Promise<never> => { throw new Error("nobody awaited me"); };\n  lost();\nconst kept: Promise<void> = Promise.reject(new Error("handled later"));\nkept.catch(() => {});\nStep.One as number',
  },
  uncloneable: {
    javascript: '({ items: [1, 2, 3, { label: "ok", onClick() {} }] })',
    typescript: 'type Item = number | { label: string; onClick(): void };\nconst items: Item[] = [1, 2, 3, { label: "ok", onClick(): void {} }];\n({ items })',
  },
};

/** `:line:column` (1-based) of the first `token` in `text`. */
function at(text: string, token: string): string {
  const before = text.slice(0, text.indexOf(token)).split('\n');
  return `:${before.length}:${before[before.length - 1].length + 1}`;
}

/** Where `lost()` rejects: the Error made inside it, and the call. */
function unhandledFrames(language: Language): string[] {
  const code = PROGRAMS.unhandled[language];
  return [at(code, 'new Error("nobody'), at(code, 'lost();')];
}

const points = entryPoints('failure-reports');
const engines = { get: points.engine };

async function sandboxOf(isolation: Mode, options: Record<string, unknown> = {}): Promise<Sandbox> {
  const sandbox = await createSandbox({ isolation, ...options });
  points.later(() => sandbox.close());
  return sandbox;
}

const mcp = (isolation: Mode, config: Record<string, unknown> = {}): Promise<Client> => points.mcpClient({ isolation, ...config });
const tool = (client: Client, code: string, language: Language) => points.callTool(client, code, language);
const isoletRun = points.isoletRun;

const ext = (language: Language) => (language === 'typescript' ? 'ts' : 'js');

function failed(r: SandboxResult): any {
  expect(r.success, JSON.stringify(r)).toBe(false);
  return (r as any).error;
}

for (const isolation of MODES) {
  for (const language of LANGUAGES) {
    describe(`${language}, ${isolation} isolation`, () => {
      it('a thrown object keeps its own enumerable fields (those that copy), at every entry point', async () => {
        const code = PROGRAMS.throwsObject[language];
        const expectThrown = (error: any) => {
          expect(error).toBeInstanceOf(SandboxRuntimeError);
          expect(error.thrown).toMatchObject({ name: 'Object', code: 'E_AUTH', status: 401, retry: { after: 30 } });
          expect(error.thrown).not.toHaveProperty('log');
          expect(error.message).toBe('Object: {"code":"E_AUTH","status":401,"retry":{"after":30}}');
        };
        expectThrown(failed(await runSandbox(code, { isolation, language })));
        expectThrown(failed(await runSandbox(code, { isolation, language, capabilities: {} })));
        const end = await engines.get(isolation)!.submit({ code, language }).done;
        expect(end.type).toBe('error');
        if (end.type === 'error') expectThrown(end.error);
        expectThrown(failed(await (await sandboxOf(isolation)).run(code, { language })));
        const cli = await isoletRun(`throws.${ext(language)}`, code, ['--isolation', isolation]);
        expect(cli.exit).toBe(1);
        expect(cli.stderr).toContain('SandboxRuntimeError: Object: {"code":"E_AUTH","status":401,"retry":{"after":30}}');
        expect(cli.stderr).toContain('thrown fields: {"code":"E_AUTH","status":401,"retry":{"after":30}}');
        const result = await tool(await mcp(isolation), code, language);
        expect(result.isError).toBe(true);
        expect(result.text).toContain('Object: {"code":"E_AUTH","status":401,"retry":{"after":30}}');
      });

      it('a promise rejected with no handler is reported in logs and stats; unhandledRejections: error fails the run', async () => {
        const code = PROGRAMS.unhandled[language];
        const [inside, call] = unhandledFrames(language);
        const expectReported = (logs: LogEntry[], stats: { unhandledRejections?: number }, file = 'sandbox.js') => {
          const warnings = logs.filter((l) => l.message.startsWith('Unhandled promise rejection'));
          expect(warnings, JSON.stringify(logs)).toHaveLength(1);
          expect(warnings[0].level).toBe('warn');
          expect(warnings[0].message).toContain('Unhandled promise rejection: Error: nobody awaited me');
          expect(warnings[0].message).toContain(`${file}${inside}`);
          expect(warnings[0].message).toContain(`${file}${call}`);
          expect(stats.unhandledRejections).toBe(1);
        };
        const expectFailed = (error: any) => {
          expect(error).toBeInstanceOf(SandboxRuntimeError);
          expect(error.message).toBe('Unhandled promise rejection: Error: nobody awaited me');
          expect(error.thrown.message).toBe('nobody awaited me');
          expect(error.thrown.stack).toContain(`sandbox.js${inside}`);
        };
        // runSandbox: a script, and an async body.
        const script = await runSandbox(code, { isolation, language });
        expect(script).toMatchObject({ success: true, output: 1 });
        expectReported(script.logs, script.stats);
        expectFailed(failed(await runSandbox(code, { isolation, language, unhandledRejections: 'error' })));
        const body = await runSandbox(`${code.replace(/\n([^\n]*)$/, '\nreturn $1')}`, { isolation, language, capabilities: {} });
        expect(body).toMatchObject({ success: true, output: 1 });
        expectReported(body.logs, body.stats);
        // SandboxEngine: the engine's default, and a request's own.
        const asBody = code.replace(/\n([^\n]*)$/, '\nreturn $1');
        const engine = engines.get(isolation)!;
        const ok = await engine.submit({ code: asBody, language }).done;
        expect(ok.type).toBe('result');
        if (ok.type === 'result') expectReported(ok.logs ?? [], ok.stats);
        const strict = await engine.submit({ code: asBody, language, unhandledRejections: 'error' }).done;
        expect(strict.type).toBe('error');
        if (strict.type === 'error') expectFailed(strict.error);
        const strictEngine = new SandboxEngine({ isolation, maxConcurrentIsolates: 1, unhandledRejections: 'error' });
        await strictEngine.init();
        points.later(() => strictEngine.shutdown());
        const byDefault = await strictEngine.submit({ code: asBody, language }).done;
        expect(byDefault.type).toBe('error');
        const optedOut = await strictEngine.submit({ code: asBody, language, unhandledRejections: 'warn' }).done;
        expect(optedOut.type).toBe('result');
        // A sandbox the strict engine opens inherits its choice.
        const inherited = await strictEngine.openSandbox({});
        points.later(() => inherited.close());
        expectFailed(failed(await inherited.run(code, { language })));
        // A persistent sandbox: its own default, and a run's.
        const sandbox = await sandboxOf(isolation);
        const run = await sandbox.run(code, { language });
        expect(run).toMatchObject({ success: true, output: 1 });
        expectReported(run.logs, run.stats);
        const strictSandbox = await sandboxOf(isolation, { unhandledRejections: 'error' });
        expectFailed(failed(await strictSandbox.run(code, { language })));
        expect(await strictSandbox.run('Promise.reject(new Error("x")); 2', { unhandledRejections: 'warn' })).toMatchObject({ success: true, output: 2 });
        // isolet run: a warning on stderr naming the file; --unhandled-rejections error fails.
        const cli = await isoletRun(`unhandled.${ext(language)}`, code, ['--isolation', isolation]);
        expect(cli.exit).toBe(0);
        expect(cli.stdout).toBe('1\n');
        expect(cli.stderr).toContain('[warn] Unhandled promise rejection: Error: nobody awaited me');
        expect(cli.stderr).toContain(`${cli.file}${inside}`);
        const cliStrict = await isoletRun(`unhandled-strict.${ext(language)}`, code, ['--isolation', isolation, '--unhandled-rejections', 'error']);
        expect(cliStrict.exit).toBe(1);
        expect(cliStrict.stderr).toContain('Unhandled promise rejection: Error: nobody awaited me');
        // The MCP tool: the warning with the console output; the config's choice fails it.
        const reported = await tool(await mcp(isolation), code, language);
        expect(reported.isError).toBeFalsy();
        expect(reported.text).toContain('[warn] Unhandled promise rejection: Error: nobody awaited me');
        const refused = await tool(await mcp(isolation, { unhandledRejections: 'error' }), code, language);
        expect(refused.isError).toBe(true);
        expect(refused.text).toContain('Unhandled promise rejection: Error: nobody awaited me');
      });

      it('a result that cannot be copied names the path of the first bad value', async () => {
        const code = PROGRAMS.uncloneable[language];
        const expectPath = (error: any) => {
          expect(error).toBeInstanceOf(SandboxRuntimeError);
          expect(error.message).toContain(UNCLONEABLE);
          expect(error.thrown.name).toBe('DataCloneError');
        };
        expectPath(failed(await runSandbox(code, { isolation, language })));
        const asBody = code.replace(/\n?(\([^\n]*\))$/, '\nreturn $1');
        expectPath(failed(await runSandbox(asBody, { isolation, language, capabilities: {} })));
        const end = await engines.get(isolation)!.submit({ code: asBody, language }).done;
        expect(end.type).toBe('error');
        if (end.type === 'error') expectPath(end.error);
        expectPath(failed(await (await sandboxOf(isolation)).run(code, { language })));
        const cli = await isoletRun(`uncloneable.${ext(language)}`, code, ['--isolation', isolation]);
        expect(cli.exit).toBe(1);
        expect(cli.stderr).toContain(UNCLONEABLE);
        const result = await tool(await mcp(isolation), code, language);
        expect(result.isError).toBe(true);
        expect(result.text).toContain(UNCLONEABLE);
      });

      it('with capabilities, a bare last expression and no return: the output stays undefined, with a hint', async () => {
        const code = language === 'javascript' ? 'const n = await twice(21);\nn' : 'const n: number = await twice(21);\nn as number';
        const capabilities = { twice: (x: number) => x * 2 };
        const r = await runSandbox(code, { isolation, language, capabilities });
        expect(r).toMatchObject({ success: true, output: undefined });
        expect(r.logs).toEqual([{ level: 'warn', message: expect.stringContaining(HINT) }]);
        // A return gives the output and no hint; without capabilities the completion value is the output.
        const returned = await runSandbox(code.replace(/\n([^\n]*)$/, '\nreturn $1'), { isolation, language, capabilities });
        expect(returned).toMatchObject({ success: true, output: 42, logs: [] });
        expect(await runSandbox('const n = 21;\nn * 2', { isolation, language })).toMatchObject({ success: true, output: 42, logs: [] });
        // Statements that are not meant as a value get no hint.
        expect((await runSandbox('let x = 0;\nx = await twice(1)', { isolation, language, capabilities })).logs).toEqual([]);
        expect((await runSandbox('console.log(await twice(1))', { isolation, language, capabilities })).logs).toEqual([{ level: 'log', message: '2' }]);
        const end = await engines.get(isolation)!.submit({ code: 'const n = 2;\nn * 21', language }).done;
        expect(end).toMatchObject({ type: 'result', data: undefined });
        if (end.type === 'result') expect(end.logs).toEqual([{ level: 'warn', message: expect.stringContaining(HINT) }]);
      });
    });
  }

  describe(`positions (${isolation} isolation)`, () => {
    it("isolet run's stack frames name the user's file, not an internal name", async () => {
      const r = await isoletRun('report.js', 'function check(x) {\n  if (!x) throw new RangeError("empty");\n}\ncheck(0);', ['--isolation', isolation]);
      expect(r.exit).toBe(1);
      expect(r.stderr).toContain(`RangeError: empty\n    at check (${r.file}:2:17)\n    at ${r.file}:4:1`);
      expect(r.stderr).not.toContain('sandbox.js');
    });

    it("a persistent sandbox's top-level-await errors name the user's columns", async () => {
      const cases: Array<[string, string]> = [
        // In a declaration the rewrite turns into an assignment, on line 1 after its header.
        ['const v = await Promise.resolve(null), w = v.field;', 'field'],
        ['let a = 1; const b = await Promise.resolve(a); a.b.c.d;', 'c.d'],
        ['class K { m() { const found = missing; return found; } }\nconst k = await Promise.resolve(new K());\nk.m();', 'missing'],
        ['var t = await Promise.resolve({});\n   t.q.deep', 'deep'],
      ];
      for (const [code, token] of cases) {
        const sandbox = await sandboxOf(isolation);
        const r = await sandbox.run(code);
        const error = failed(r);
        const before = code.slice(0, code.indexOf(token)).split('\n');
        const at = `sandbox.js:${before.length}:${before[before.length - 1].length + 1}`;
        expect(error.thrown.stack.split('\n')[1], code).toContain(at);
      }
    });

    it('an unhandled rejection in TypeScript that was transformed is reported at its TypeScript position', async () => {
      const code = 'enum E { A = 1 }\nnamespace N { export const late = (): Promise<void> => Promise.reject(new Error("late " + E.A)); }\nN.late();\nE.A';
      const r = await runSandbox(code, { isolation, language: 'typescript' });
      expect(r).toMatchObject({ success: true, output: 1 });
      // `Promise.reject(new Error(...))` on line 2; the call on line 3.
      expect(r.logs).toHaveLength(1);
      expect(r.logs[0].message).toMatch(/^Unhandled promise rejection: Error: late 1\n/);
      expect(r.logs[0].message).toContain(`(sandbox.js${at(code, 'new Error')})`);
      expect(r.logs[0].message).toContain(`sandbox.js${at(code, 'late();')}`);
    });
  });
}

describe('the Code Mode executor', () => {
  it('takes unhandledRejections as an engine option, stateless and stateful, and keeps a thrown object\'s fields in its error', async () => {
    const { IsoletExecutor } = load('../lib/codemode') as typeof import('../lib/codemode');
    for (const stateful of [false, true]) {
      const strict = new IsoletExecutor({ isolation: 'thread', unhandledRejections: 'error', stateful } as any);
      const lenient = new IsoletExecutor({ isolation: 'thread', stateful } as any);
      points.later(() => strict.dispose(), () => lenient.dispose());
      const code = 'async () => { Promise.reject(new Error("dropped")); return 1 }';
      expect(await strict.execute(code, [])).toMatchObject({ result: undefined, error: 'dropped' });
      const warned = await lenient.execute(code, []);
      expect(warned.result).toBe(1);
      expect(warned.logs).toEqual([expect.stringMatching(/^\[warn\] Unhandled promise rejection: Error: dropped\n/)]);
      expect((await lenient.execute('async () => { throw { code: "E_AUTH" } }', [])).error).toBe('{"code":"E_AUTH"}');
    }
  });
});

describe('the option is checked once, under its name, at every entry point', () => {
  it('a bad value is a SandboxValidationError naming unhandledRejections', async () => {
    const bad = (error: any) => {
      expect(error).toBeInstanceOf(SandboxValidationError);
      expect(error.message).toMatch(/unhandledRejections must be 'warn' or 'error', got 'strict'/);
    };
    bad(failed(await runSandbox('1', { unhandledRejections: 'strict' as any })));
    expect(() => new SandboxEngine({ unhandledRejections: 'strict' as any })).toThrow(/unhandledRejections must be 'warn' or 'error', got 'strict'/);
    const end = await engines.get('thread')!.submit({ code: 'return 1', unhandledRejections: 'strict' as any }).done;
    expect(end.type).toBe('error');
    if (end.type === 'error') expect(end.error.message).toBe("request.unhandledRejections must be 'warn' or 'error', got 'strict'");
    await expect(createSandbox({ unhandledRejections: 'strict' as any })).rejects.toThrow(/unhandledRejections must be 'warn' or 'error', got 'strict'/);
    const sandbox = await createSandbox({ isolation: 'thread' });
    points.later(() => sandbox.close());
    bad(failed(await sandbox.run('1', { unhandledRejections: 'strict' as any })));
    const cli = await isoletRun('bad-option.js', '1', ['--unhandled-rejections', 'strict']);
    expect(cli.exit).toBe(2);
    expect(cli.stderr).toContain("--unhandled-rejections must be 'warn' or 'error', got 'strict'");
  });
});
