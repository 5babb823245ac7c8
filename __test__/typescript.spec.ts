// TypeScript input: `language: 'typescript'` on runSandbox, engine requests and autoFix.
// Types are erased with every position kept, so errors and stack frames point into the
// TypeScript the user passed.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';

import {
  runSandbox,
  SandboxEngine,
  SandboxRuntimeError,
  SandboxValidationError,
  autoFix,
  type SandboxResult,
} from '../index';
import { runChild } from './support/spawn';

function failed(r: SandboxResult): any {
  expect(r.success).toBe(false);
  return (r as any).error;
}

describe('runSandbox with language: typescript', () => {
  it('runs TypeScript with annotations, interfaces, generics, casts and satisfies', async () => {
    const code = [
      'interface Point { x: number; y: number }',
      'type Pair<T> = [T, T];',
      'function add<T extends Point>(a: T, b: T): Point { return { x: a.x + b.x, y: a.y + b.y }; }',
      'const p = add({ x: 1, y: 2 } as Point, { x: 3, y: 4 }) satisfies Point;',
      'const pair: Pair<number> = [p.x, p.y];',
      'let n!: number; n = pair[0]!;',
      'abstract class Shape { abstract area(): number; declare tag: string; private k = 2; scale(): number { return this.k; } }',
    ];
    const r = await runSandbox(code.join('\n') + '\n[pair, new (class extends Shape { area() { return 1 } })().scale()]', { language: 'typescript' });
    expect(r).toMatchObject({ success: true, output: [[4, 6], 2] });
  });

  it('runs TypeScript as an async body with capabilities (top-level await and return)', async () => {
    const r = await runSandbox('const n: number = await twice(21);\nreturn { n } as const;', {
      language: 'typescript',
      capabilities: { twice: (x: number) => x * 2 },
    });
    expect(r).toMatchObject({ success: true, output: { n: 42 } });
  });

  it('runs enum, namespace and parameter properties (compiled, not refused)', async () => {
    const code = 'enum Color { Red, Green = 5, Blue }\nnamespace N { export const k = 2 }\nclass C { constructor(private x: number) {} get(): number { return this.x * N.k } }\n[Color.Blue, new C(21).get()]';
    expect(await runSandbox(code, { language: 'typescript' })).toMatchObject({ success: true, output: [6, 42] });
  });

  it('refuses what compiles to nothing that runs (decorators, import = require, export =, module) with line and column', async () => {
    const cases: Array<[string, RegExp, number, number]> = [
      ['const a = 1;\n  @sealed class A {}\nfunction sealed(c: any) { return c }', /decorators are not supported/, 2, 3],
      ['let x = 1;\nimport fs = require("fs");', /import x = require\(\.\.\.\) is not supported/, 2, 1],
      ['export = 1;', /`export =` is not supported/, 1, 1],
      ['let y = 1;\nmodule M { export const y = 1 }', /`module` keyword is not supported/, 2, 1],
    ];
    for (const [code, message, line, column] of cases) {
      const err = failed(await runSandbox(code, { language: 'typescript' }));
      expect(err).toBeInstanceOf(SandboxValidationError);
      expect(err.code).toBe('ERR_ISOLET_VALIDATION');
      expect(err.message).toMatch(message);
      expect(err.message).toContain(`at line ${line}, column ${column}`);
      expect([err.line, err.column]).toEqual([line, column]);
    }
  });

  it('gives invalid TypeScript line and column, in script and async-body mode', async () => {
    const script = failed(await runSandbox('const a: number = 1;\nconst b: = 2;', { language: 'typescript' }));
    expect(script).toBeInstanceOf(SandboxValidationError);
    expect(script.message).toMatch(/^SyntaxError: /);
    expect([script.line, script.column]).toEqual([2, 10]);
    const body = failed(await runSandbox('const a: number = 1;\n\nreturn a +;', { language: 'typescript', capabilities: {} }));
    expect(body).toBeInstanceOf(SandboxValidationError);
    expect([body.line, body.column]).toEqual([3, 11]);
  });

  it('reports runtime stack frames at TypeScript positions', async () => {
    const code = 'type T = { deep: { v: number } };\nconst o: T = JSON.parse("{}") as unknown as T;\nconst value: number = o.deep.v;';
    const err = failed(await runSandbox(code, { language: 'typescript' }));
    expect(err).toBeInstanceOf(SandboxRuntimeError);
    expect(err.thrown.name).toBe('TypeError');
    // `o.deep.v`: the failing property read is at column 30 of line 3 in the TypeScript.
    expect(err.thrown.stack).toMatch(/:3:30\b/);
  });

  it('treats plain JavaScript the same either way, and type syntax as an error in javascript', async () => {
    expect(await runSandbox('1 + 1', { language: 'typescript' })).toMatchObject({ success: true, output: 2 });
    expect(await runSandbox('1 + 1', { language: 'javascript' })).toMatchObject({ success: true, output: 2 });
    const err = failed(await runSandbox('const a: number = 1; a', { language: 'javascript' }));
    expect(err).toBeInstanceOf(SandboxValidationError);
  });

  it('TypeScript too deep for the parser is a SandboxValidationError, and the next run still works', async () => {
    // These break the stripper's WebAssembly instance; isolet must replace it, not keep failing.
    for (const code of ['('.repeat(100_000), 'let a: ' + 'Array<'.repeat(50_000) + 'x' + '>'.repeat(50_000) + ' = 1;']) {
      const err = failed(await runSandbox(code, { language: 'typescript' }));
      expect(err).toBeInstanceOf(SandboxValidationError);
      expect(err.message).toMatch(/^TypeScript could not be parsed/);
      expect(await runSandbox('const ok: number = 1; ok', { language: 'typescript' })).toMatchObject({ success: true, output: 1 });
    }
  });

  it('rejects an unknown language with a SandboxValidationError naming the option', async () => {
    const err = failed(await runSandbox('1', { language: 'python' as any }));
    expect(err).toBeInstanceOf(SandboxValidationError);
    expect(err.message).toBe(`language must be 'javascript' or 'typescript', got 'python'`);
  });

  it('prints no warning on any Node line (a library must not cause an ExperimentalWarning)', async () => {
    const child = await runChild(
      process.execPath,
      ['-e', `require(${JSON.stringify(path.resolve(__dirname, '..'))}).runSandbox('const x: number = 1; x', { language: 'typescript' }).then((r) => { console.log(JSON.stringify(r.output)); process.exit(0); })`],
      { timeout: 20000 },
    );
    expect(child.stdout.trim()).toBe('1');
    expect(child.stderr).toBe('');
  });
});

describe('SandboxEngine requests with language: typescript', () => {
  const engine = new SandboxEngine({ maxConcurrentIsolates: 2, tools: { id: (x: unknown) => x } });
  beforeAll(() => engine.init());
  afterAll(() => engine.shutdown());

  it('runs a TypeScript request and reports a bad one as a validation error event', async () => {
    const ok = await engine.submit({ requestId: 'ts1', code: 'const v: string = await id("x");\nreturn v.toUpperCase();', language: 'typescript', toolPolicy: { allowedTools: ['id'] } }).done;
    expect(ok).toMatchObject({ type: 'result', data: 'X' });
    const bad = await engine.submit({ requestId: 'ts2', code: 'import x = require("x");', language: 'typescript' }).done;
    expect(bad.type).toBe('error');
    expect((bad as any).error).toBeInstanceOf(SandboxValidationError);
    expect((bad as any).error.line).toBe(1);
    const wrong = await engine.submit({ requestId: 'ts3', code: 'return 1', language: 'ts' as any }).done;
    expect((wrong as any).error.message).toMatch(/request.language must be 'javascript' or 'typescript'/);
  });
});

describe('autoFix with TypeScript', () => {
  let root: string;
  beforeAll(async () => {
    root = await fsp.mkdtemp(path.join(os.tmpdir(), 'isolet-ts-autofix-'));
  });
  afterAll(async () => {
    await fsp.rm(root, { recursive: true, force: true });
  });

  it('runs a TypeScript suggestion for a .ts file and applies it', async () => {
    const file = path.join(root, 'add.ts');
    fs.writeFileSync(file, 'export {};\nfunction add(a: number, b: number): number {\n  return a - b;\n}\n');
    const fixed = 'function add(a: number, b: number): number {\n  return a + b;\n}\nmodule.exports = { add };\n';
    let seen: { system: string; prompt: string } | undefined;
    const r = await autoFix({
      root,
      filePath: 'add.ts',
      instruction: 'add must add',
      test: 'if (module.exports.add(2, 3) !== 5) throw new Error("wrong");',
      autoApprove: true,
      provider: {
        complete: async (req: { system: string; prompt: string }) => {
          seen = req;
          return '```ts\n' + fixed + '```';
        },
      },
    });
    expect(r.status).toBe('applied');
    expect(fs.readFileSync(file, 'utf8')).toBe(fixed);
    expect(seen!.system).toContain('TypeScript source files');
    expect(seen!.prompt).toContain('```ts');
  });

  it('refuses a TypeScript suggestion that cannot run in a sandbox, naming the line', async () => {
    const file = path.join(root, 'color.ts');
    const original = 'const c: number = 1;\n';
    fs.writeFileSync(file, original);
    const r = await autoFix({
      root,
      filePath: 'color.ts',
      instruction: 'read a file',
      autoApprove: true,
      provider: { complete: async () => '```ts\nconst c: number = 1;\nimport fs = require("fs");\n```' },
    });
    expect(r.status).toBe('failed');
    expect(JSON.stringify(r)).toMatch(/import x = require\(\.\.\.\) is not supported/);
    expect(fs.readFileSync(file, 'utf8')).toBe(original);
  });

  it('checks the language option', async () => {
    await expect(
      autoFix({ root, filePath: 'x.ts', instruction: 'x', language: 'coffee' as any, provider: { complete: async () => '' } }),
    ).rejects.toThrow(/options.language must be 'javascript' or 'typescript'/);
  });
});
