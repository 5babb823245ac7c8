// Programs are prepared off Node's thread when they are large (lib/source.js): the
// TypeScript strip, the last-expression rewrite (isolet run, the MCP tool), the
// top-level-await rewrite (persistent sandboxes) and Code Mode's function source. At every
// entry point a ~4 MB program costs Node's thread no parse and its event loop no stall; the
// worker gives the same bytes as inline preparation, is bounded by the run's wall-clock
// limit, survives what its parsers cannot take, and never keeps the process alive.
// (__test__/typescript-offload.spec.ts: TypeScript in runSandbox and engine sessions.)
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { createRequire } from 'node:module';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { createSandbox, runSandbox, SandboxEngine, SandboxTimeoutError, type Sandbox } from '../index';
import { IsoletExecutor, normalizeCode } from '../lib/codemode';
import { createMcpServer, mcpSettings } from '../lib/mcp';
import { expectOffNodesThread, onNodesThread } from './support/loop-delay';
import { runChild } from './support/spawn';

type Recipe = { language?: string; asyncBody?: boolean; normalizeCode?: boolean; rewrite?: 'lastExpression' | 'topLevelAwait' };
type Prepared = { code: string; map: Int32Array[] };
const load = createRequire(__filename);
// Internal: `inlineMax` forces either path.
const { prepareSource } = load('../lib/source') as {
  prepareSource(code: string, recipe: Recipe, options?: { timeoutMs?: number; inlineMax?: number }): Promise<Prepared>;
};
// The CLI's own module (bin/isolet.js calls it), so its event loop is this one.
const { runCommand } = load('../lib/cli/run') as {
  runCommand(argv: string[], io: { stdout: { write(s: string): void }; stderr: { write(s: string): void } }): Promise<number>;
};

const LINES = 500_000;
// ~4 MB. `var`: a persistent sandbox may run it again.
const BODY = 'var x = 0;\n' + 'x += 1;\n'.repeat(LINES);
const LIMITS = { wallTimeMs: 60_000, memoryMb: 256 };

let dir: string;
let engine: SandboxEngine;
let sandbox: Sandbox;
let mcp: Client;
let statefulMcp: Client;
let codemode: IsoletExecutor;
let statefulCodemode: IsoletExecutor;
const closers: Array<() => Promise<void>> = [];

async function mcpClient(stateful: boolean): Promise<Client> {
  // `stateful` is a key of `isolet mcp --config` that McpConfig does not declare.
  const server = createMcpServer(mcpSettings({ timeoutMs: LIMITS.wallTimeMs, memoryLimitMb: LIMITS.memoryMb, isolation: 'thread', stateful } as any));
  const [serverSide, clientSide] = InMemoryTransport.createLinkedPair();
  await (server.server as { connect(transport: unknown): Promise<void> }).connect(serverSide);
  const client = new Client({ name: 'parse-offload', version: '1.0.0' });
  await client.connect(clientSide);
  closers.push(() => server.close());
  return client;
}

async function callTool(client: Client, code: string): Promise<unknown> {
  const r = (await client.callTool({ name: 'run_code', arguments: { code } })) as { isError?: boolean; content: Array<{ text: string }> };
  return r.isError ? r.content[0].text.slice(0, 300) : JSON.parse(r.content[0].text);
}

function executor(stateful: boolean): IsoletExecutor {
  const e = new IsoletExecutor({ timeoutMs: LIMITS.wallTimeMs, memoryMb: LIMITS.memoryMb, isolation: 'thread', maxConcurrentIsolates: 2, stateful });
  closers.push(() => e.dispose());
  return e;
}

async function isoletRun(source: string): Promise<{ exit: number; stdout: string; stderr: string }> {
  const file = path.join(dir, 'program.js');
  fs.writeFileSync(file, source);
  let stdout = '';
  let stderr = '';
  const io = { stdout: { write: (s: string) => void (stdout += s) }, stderr: { write: (s: string) => void (stderr += s) } };
  const exit = await runCommand([file, '--isolation', 'thread', '--timeout-ms', String(LIMITS.wallTimeMs), '--memory-limit-mb', String(LIMITS.memoryMb)], io);
  return { exit, stdout, stderr };
}

// Everything is loaded and started before the measured calls: loading the MCP SDK alone
// holds the event loop for a few hundred milliseconds.
beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'isolet-parse-offload-'));
  engine = new SandboxEngine({ isolation: 'thread', memoryMb: LIMITS.memoryMb, maxConcurrentIsolates: 2, warmPoolSize: 0 });
  await engine.init();
  sandbox = await createSandbox({ isolation: 'thread', memoryLimitMb: LIMITS.memoryMb, timeoutMs: LIMITS.wallTimeMs });
  mcp = await mcpClient(false);
  statefulMcp = await mcpClient(true);
  codemode = executor(false);
  statefulCodemode = executor(true);
  for (const client of [mcp, statefulMcp]) expect(await callTool(client, '1')).toBe(1);
  for (const e of [codemode, statefulCodemode]) expect((await e.execute('async () => 1', [])).result).toBe(1);
}, 60_000);

afterAll(async () => {
  sandbox?.close();
  await engine?.shutdown();
  for (const close of closers) await close();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('a ~4 MB program is prepared off Node\'s thread, at every entry point', () => {
  // Each gives the program's value: LINES, as the last expression, `return` or completion value.
  const entryPoints: Array<[string, () => Promise<unknown>]> = [
    ['runSandbox', async () => {
      const r = await runSandbox(BODY + 'x', { isolation: 'thread', timeoutMs: LIMITS.wallTimeMs, memoryLimitMb: LIMITS.memoryMb });
      return r.success ? r.output : r.error.message;
    }],
    ['SandboxEngine.submit', async () => {
      const end = await engine.submit({ code: BODY + 'return x', isolateLimits: { wallTimeMs: LIMITS.wallTimeMs } }).done;
      return end.type === 'result' ? end.data : end.error.message;
    }],
    ['createSandbox().run', async () => {
      const r = await sandbox.run(BODY + 'x');
      return r.success ? r.output : r.error.message;
    }],
    ['createSandbox().run with a top-level await', async () => {
      const r = await sandbox.run(BODY + 'await null;\nx');
      return r.success ? r.output : r.error.message;
    }],
    ['isolet run', async () => {
      const { exit, stdout, stderr } = await isoletRun(BODY + 'x');
      return exit === 0 ? JSON.parse(stdout) : stderr;
    }],
    ['the MCP tool', async () => callTool(mcp, BODY + 'x')],
    ['the MCP tool, stateful', async () => callTool(statefulMcp, BODY + 'await null;\nx')],
    ['the Code Mode executor', async () => {
      const r = await codemode.execute(`async () => {\n${BODY}return x;\n}`, []);
      return r.error ?? r.result;
    }],
    ['the Code Mode executor, stateful', async () => {
      const r = await statefulCodemode.execute(`${BODY}return x;`, []);
      return r.error ?? r.result;
    }],
  ];
  for (const [name, call] of entryPoints) {
    it(`${name}: the program's value, with no parse on Node's thread`, async () => {
      const measured = await onNodesThread(call);
      expect(measured.value).toBe(LINES);
      expectOffNodesThread(measured);
    }, 120_000);
  }

  it('an error at the end of a large program names the user\'s line and column (isolet run)', async () => {
    // `return (` is inserted before `x.a.b`: the column V8 reports is shifted back.
    const { exit, stderr } = await isoletRun(`${BODY}  x.a.b`);
    expect(exit).toBe(1);
    expect(stderr).toContain(`program.js:${LINES + 2}:7`);
  }, 120_000);
});

describe('the source worker', () => {
  // What both paths are given: the last-expression and top-level-await tests' programs,
  // TypeScript, Code Mode's shapes, syntax errors and the positions of several line ends.
  const PROGRAMS = [
    'const x = 20; x + 22',
    'if (a) return 1\n42; // the answer',
    '(a, b)',
    'await p',
    '"just a string"',
    'x + 1; let y = 2',
    '"use strict"; let y = 2',
    'return 5',
    'const = ;',
    'x +',
    'const o = {};\n  o.a.b',
    'var a = await f(); a + 1',
    'let {b, c: [d]} = await g();\nclass C {}\nfunction h() {}\nb',
    'for await (const v of it) {}\nv',
    'var aw\\u0061it = 1; aw\\u0061it',
    'x\r\n+ 2',
    '`t\n${x}`\u2028',
    '/* c */ 42\n// end',
    'label: 1',
    '',
    '  \n',
    'async () => 1',
    '```js\nasync () => 1\n```',
    '```\nconst a = 1;\nreturn a\n```',
    'const a = 1;\nreturn a',
    '(a): number => a',
    'async (a, b) => { await a; return b }',
    'function named() { return 1 }',
    'const x: number = 1; x',
    'let v: string = await id("x");\nv.toUpperCase()',
    'interface I { a: number }\nconst i: I = { a: 1 };\ni.a as number',
    'function f(a: string): string { return a; }\nf("ok")',
    'enum E { A }',
    'let broken: = 1;',
    'return (',
    'return 1;\n}',
    'class P { constructor(private a: number) {} }',
    // Code Mode's shapes, decided from a parse.
    'function score(x) { return x * 2 }\nconst top = score(3);\nreturn top;',
    'async function main() { return 7 }',
    '// first a comment\nasync () => 42;',
    '/* c */ (async function () { return 1 })',
    'export default async () => "d"',
    'export default function () { return 3 }',
    'export default class A {}',
    '```ts\nconst xs: number[] = [1];\nxs.length // n\n```',
    '\n  ```\nreturn 1\n```',
    'function first<T>(xs: T[]): T { return xs[0] }\nfirst([1])',
    // TypeScript that is transformed (with a source map), or refused.
    'namespace N { export const a = 1 }\nimport x = N.a;\nx',
    'const enum F { R = 1, W = 2 }\nlet m = F.R | F.W;\nm',
    'enum E { A = "a", B = A.length }\nawait 1;\nE.B',
    '  @sealed class A {}',
    'let z = 1;\nimport fs = require("fs");',
    'export = 1',
    'result;\nvar Config;\nawait 0',
  ];
  const RECIPES: Recipe[] = [
    { language: 'javascript', asyncBody: true, rewrite: 'lastExpression' },
    { language: 'typescript', asyncBody: true, rewrite: 'lastExpression' },
    { language: 'javascript', rewrite: 'topLevelAwait' },
    { language: 'typescript', rewrite: 'topLevelAwait' },
    { language: 'typescript' },
    { language: 'typescript', asyncBody: true },
    { normalizeCode: true, language: 'javascript' },
    { normalizeCode: true, language: 'typescript' },
  ];
  const outcome = (p: Promise<Prepared>) =>
    p.then(
      (r) => r,
      (e) => ({ error: e.constructor.name, message: e.message, line: e.line, column: e.column }),
    );

  it('prepares small programs byte for byte as inline preparation does', async () => {
    let changed = 0;
    let failed = 0;
    for (const recipe of RECIPES) {
      for (const code of PROGRAMS) {
        const inline = await outcome(prepareSource(code, recipe, { inlineMax: Infinity }));
        const onWorker = await outcome(prepareSource(code, recipe, { inlineMax: 0 }));
        expect(onWorker, `${JSON.stringify(recipe)} ${JSON.stringify(code)}`).toEqual(inline);
        if ('error' in inline) failed++;
        else if (inline.code !== code) changed++;
      }
    }
    // Most of the corpus is rewritten or stripped, and the TypeScript errors are in it.
    expect(changed).toBeGreaterThan(100);
    expect(failed).toBeGreaterThan(10);
  });

  it('a program its parsers cannot take fails alone; inputs queued behind it are prepared', async () => {
    const deep = '('.repeat(100_000);
    const [js, ts, next] = await Promise.all([
      outcome(prepareSource(deep, { language: 'javascript', asyncBody: true, rewrite: 'lastExpression' })),
      outcome(prepareSource(deep, { language: 'typescript', asyncBody: true, rewrite: 'lastExpression' })),
      outcome(prepareSource('x += 1;\n'.repeat(20_000) + 'x', { language: 'javascript', asyncBody: true, rewrite: 'lastExpression' })),
    ]);
    // acorn's stack overflow leaves the code as it is, for V8 to reject; amaro's is an error.
    expect(js).toEqual({ code: deep, map: [] });
    expect(ts).toMatchObject({ error: 'SandboxValidationError', message: expect.stringMatching(/^TypeScript could not be parsed/) });
    expect((next as Prepared).code.endsWith('\nreturn (x)')).toBe(true);
  }, 60_000);

  it('the run\'s wall-clock limit bounds the rewrite: past it the run is a SandboxTimeoutError and the next run works', async () => {
    const limited = await createSandbox({ isolation: 'thread', memoryLimitMb: LIMITS.memoryMb, timeoutMs: 50 });
    try {
      const slow = await limited.run(BODY.repeat(2) + 'await null;\nx');
      expect(slow.success).toBe(false);
      if (!slow.success) {
        expect(slow.error).toBeInstanceOf(SandboxTimeoutError);
        expect(slow.error.message).toMatch(/top-level await rewrite.*50 ms/);
      }
      expect(await limited.run('var y = await 41; y + 1', { timeoutMs: 10_000 })).toMatchObject({ success: true, output: 42 });
    } finally {
      limited.close();
    }
  }, 60_000);

  it('never keeps the process alive: a script that prepared a large program exits', async () => {
    const script = `require(${JSON.stringify(path.join(__dirname, '..', 'lib', 'source.js'))})
      .prepareSource('x += 1;\\n'.repeat(10000) + 'x', { rewrite: 'lastExpression' })
      .then((r) => console.log(r.code.slice(-10)));`;
    const r = await runChild(process.execPath, ['-e', script], { timeout: 20_000 });
    expect(r.error).toBeUndefined();
    expect(r.status).toBe(0);
    expect(r.stdout).toBe('return (x)\n');
  }, 30_000);

  it('TypeScript that breaks the stripper on Node\'s thread is stripped on the worker from then on, not loaded again here', async () => {
    const amaroLoaded = () => Object.keys(load.cache).some((key) => key.includes(`${path.sep}amaro${path.sep}`));
    const strip = (code: string) => outcome(prepareSource(code, { language: 'typescript' }));
    expect(await strip('const a: number = 1; a')).toMatchObject({ code: 'const a         = 1; a' });
    expect(amaroLoaded()).toBe(true);
    // Small enough to strip inline; deep enough to break amaro's WebAssembly instance.
    expect(await strip('('.repeat(2000))).toMatchObject({ error: 'SandboxValidationError', message: expect.stringMatching(/^TypeScript could not be parsed/) });
    // Loading amaro again (about 0.1 s here) would hold the event loop each time.
    expect(await strip('const b: string = "b"; b')).toMatchObject({ code: 'const b         = "b"; b' });
    expect(amaroLoaded()).toBe(false);
  }, 30_000);
});

describe('Code Mode\'s function source', () => {
  it('is linear in the code: inputs a backtracking pattern took hours on end within seconds', async () => {
    for (const code of ['(' + '):'.repeat(2_000_000), '```' + '\n'.repeat(4_000_000) + 'x', 'async (' + ')\t:'.repeat(1_000_000)]) {
      const t0 = performance.now();
      expect(normalizeCode(code).length).toBeGreaterThan(code.length - 1);
      // A bound far from both: the backtracking pattern took hours on these inputs, a linear
      // pass takes milliseconds, and a loaded CI machine once took 2.1 s for one of them.
      expect(performance.now() - t0).toBeLessThan(10_000);
    }
    // The shapes Code Mode passes keep their meaning.
    // TypeScript is JavaScript by the time the shape is decided (normalizeCode itself takes JavaScript).
    expect((await prepareSource('(a): Promise<number> => a', { normalizeCode: true, language: 'typescript' })).code).toBe('(a)                  => a');
    expect(normalizeCode('async x => x')).toBe('async x => x');
    expect(normalizeCode('```ts\n(a) => a\n```')).toBe('(a) => a');
    expect(normalizeCode('(a) + (b)')).toBe('async () => {\nreturn ((a) + (b))\n}');
    expect(normalizeCode('function f() {}\nreturn f')).toBe('async () => {\nfunction f() {}\nreturn f\n}');
  }, 60_000);

  it('such an input is an error result of the executor, prepared off Node\'s thread', async () => {
    const measured = await onNodesThread(() => codemode.execute('(' + '):'.repeat(2_000_000), []));
    expect(measured.value.error).toMatch(/SyntaxError/);
    expectOffNodesThread(measured);
  }, 60_000);
});
