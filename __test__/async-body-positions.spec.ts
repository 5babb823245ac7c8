// Async-body mode (runSandbox with capabilities, engine requests, `isolet run`, the MCP
// tool) wraps the user's code in a function. Every position, message and stack frame it
// reports must still be about the user's code alone: unfinished code fails at the end of
// the user's input, and no frame of the wrapper shows.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as path from 'node:path';
import { spawn } from 'node:child_process';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { runSandbox, SandboxEngine, type Isolation } from '..';

const BIN = path.resolve(__dirname, '..', 'bin', 'isolet.js');

// Two lines each; the unfinished ones end at line 2, column 9 (just past `return (`).
const JS = {
  unfinished: 'const a = 1;\nreturn (',
  strayBrace: 'const a = 1;\n}',
  throws: 'const a = 1;\nthrow new Error("boom")',
};
const TS = {
  unfinished: 'const a: number = 1;\nreturn (',
  strayBrace: 'const a: number = 1;\n}',
  throws: 'const a: number = 1;\nthrow new Error("boom")',
};
// The stack of `throws`: the user's frame only (the wrapper's call site would be line 3).
const STACK = 'Error: boom\n    at sandbox.js:2:7';

interface Failure {
  message: string;
  line?: number;
  column?: number;
  thrown?: { stack?: string };
}

function expectEndOfInput(err: Failure, language: 'javascript' | 'typescript') {
  // V8's own words for JavaScript (as the script form says); amaro's for TypeScript.
  expect(err.message).toContain(language === 'javascript' ? 'SyntaxError: Unexpected end of input' : 'SyntaxError: Expression expected');
  expect([err.line, err.column]).toEqual([2, 9]);
}

describe.each(['thread', 'process'] as Isolation[])('runSandbox with capabilities (%s)', (isolation) => {
  const options = { isolation, capabilities: { f: async () => 1 } };
  for (const [language, code] of [['javascript', JS], ['typescript', TS]] as const) {
    it(`${language}: unfinished code fails at the end of the user's input`, async () => {
      const r = await runSandbox(code.unfinished, { ...options, language });
      expect(r.success).toBe(false);
      expectEndOfInput((r as any).error, language);
    });

    it(`${language}: a stray } is named where it stands`, async () => {
      const r = await runSandbox(code.strayBrace, { ...options, language });
      const err = (r as any).error;
      expect(err.message).toBe("SyntaxError: Unexpected token '}' (line 2, column 1)");
      expect([err.line, err.column]).toEqual([2, 1]);
    });

    it(`${language}: a stack has the user's frames only, before and after an await`, async () => {
      const before = (await runSandbox(code.throws, { ...options, language })) as any;
      expect(before.error.thrown.stack).toBe(STACK);
      const after = (await runSandbox(`await f();\n${code.throws}`, { ...options, language })) as any;
      expect(after.error.thrown.stack).toBe('Error: boom\n    at sandbox.js:3:7');
    });
  }

  it('typescript over 8 KiB (stripped on a worker thread) and a transform-only construct keep their own errors', async () => {
    const pad = `// ${'x'.repeat(9000)}\n`;
    const big = (await runSandbox(pad + TS.unfinished, { ...options, language: 'typescript' })) as any;
    expect([big.error.line, big.error.column]).toEqual([3, 9]);
    const stray = (await runSandbox(pad + TS.strayBrace, { ...options, language: 'typescript' })) as any;
    expect([stray.error.line, stray.error.column]).toEqual([3, 1]);
    // A fault inside the user's code is not taken for one in the wrapper.
    const decorator = (await runSandbox('@d class A {}', { ...options, language: 'typescript' })) as any;
    expect(decorator.error.message).toMatch(/^UnsupportedSyntax: decorators .* at line 1, column 1$/);
  });

  it('keeps the body semantics: await, return, and this as the global object', async () => {
    const r = await runSandbox('const x = await f();\nreturn [x + 1, this === globalThis];', options);
    expect(r).toMatchObject({ success: true, output: [2, true] });
  });
});

describe.each(['thread', 'process'] as Isolation[])('SandboxEngine requests (%s)', (isolation) => {
  let engine: SandboxEngine;
  beforeAll(async () => {
    engine = new SandboxEngine({ isolation, processes: 1, warmPoolSize: 0, maxConcurrentIsolates: 2 });
    await engine.init();
  });
  afterAll(() => engine.shutdown());

  for (const [language, code] of [['javascript', JS], ['typescript', TS]] as const) {
    it(`${language}: positions and stacks are the user's`, async () => {
      const unfinished: any = await engine.submit({ code: code.unfinished, language }).done;
      expect(unfinished.type).toBe('error');
      expectEndOfInput(unfinished.error, language);
      const stray: any = await engine.submit({ code: code.strayBrace, language }).done;
      expect([stray.error.line, stray.error.column]).toEqual([2, 1]);
      const threw: any = await engine.submit({ code: code.throws, language }).done;
      expect(threw.error.thrown.stack).toBe(STACK);
    });
  }
});

function isolet(args: string[], stdin: string): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { stdio: ['pipe', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stderr }));
    child.stdin.end(stdin);
  });
}

describe('isolet run', () => {
  for (const [language, code] of [['javascript', JS], ['typescript', TS]] as const) {
    it(`${language}: the error's position and stack are the user's`, async () => {
      const unfinished = await isolet(['run', '-', '--language', language, '--isolation', 'thread'], code.unfinished);
      expect(unfinished.code).toBe(3);
      expect(unfinished.stderr).toContain('SandboxValidationError [ERR_ISOLET_VALIDATION] (line 2, column 9)');
      expect(unfinished.stderr).toContain(language === 'javascript' ? 'Unexpected end of input' : 'Expression expected');
      const threw = await isolet(['run', '-', '--language', language, '--isolation', 'thread'], code.throws);
      expect(threw.code).toBe(1);
      // Its frames name the input (standard input here), not the sandbox's script.
      expect(threw.stderr).toBe(`isolet run: SandboxRuntimeError [ERR_ISOLET_RUNTIME]\n${STACK.replaceAll('sandbox.js', '<stdin>')}\n`);
    });
  }
});

describe('isolet mcp', () => {
  let client: Client;
  beforeAll(async () => {
    client = new Client({ name: 'isolet-positions', version: '1.0.0' });
    await client.connect(new StdioClientTransport({ command: process.execPath, args: [BIN, 'mcp', '--isolation', 'thread'], stderr: 'ignore' }));
  });
  afterAll(() => client?.close());

  for (const [language, code] of [['javascript', JS], ['typescript', TS]] as const) {
    it(`${language}: the tool's error names the user's position and frames`, async () => {
      const text = async (c: string) => ((await client.callTool({ name: 'run_code', arguments: { code: c, language } })) as any).content[0].text as string;
      const unfinished = await text(code.unfinished);
      expect(unfinished).toMatch(/^SandboxValidationError \[ERR_ISOLET_VALIDATION\]: SyntaxError: /);
      expect(unfinished).toMatch(/line 2, column 9/);
      expect(unfinished).not.toMatch(/line 3/);
      const threw = await text(code.throws);
      expect(threw).toBe(`SandboxRuntimeError [ERR_ISOLET_RUNTIME]: Error: boom\n${STACK}`);
    });
  }
});
