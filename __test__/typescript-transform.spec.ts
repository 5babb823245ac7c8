// TypeScript that needs more than erasing types: enum, const enum, parameter properties,
// namespaces and `import x = N.y` are compiled by amaro's transform mode; decorators and
// `import x = require()` are refused with the user's line and column. One file per
// construct (__test__/fixtures/typescript): a run that uses it (its `result`), and a run
// that fails inside it, whose error and call-site positions must be the TypeScript's, at
// every entry point, in both isolation modes.
import { describe, expect, it } from 'vitest';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { createSandbox, runSandbox, SandboxRuntimeError, SandboxValidationError } from '../index';
import { createRequire } from 'node:module';
import { entryPoints, MODES, type Mode } from './support/entry-points';

const load = createRequire(__filename);


const FIXTURES = path.join(__dirname, 'fixtures', 'typescript');
const MARKER = '// -- fails below --';

/** A fixture: the run that uses the construct, and the run that fails inside it. */
const COMPILED: Array<[string, unknown]> = [
  ['enum.ts', ['low', 'mid', 6, 'Mid']],
  ['const-enum.ts', ['r', '-', 3]],
  ['parameter-properties.ts', ['ada', 15]],
  ['namespace.ts', [12, 20]],
  ['import-alias.ts', [3, 200]],
];
const REFUSED: Array<[string, RegExp, string]> = [
  ['decorators.ts', /decorators are not supported/, '@logged'],
  ['import-require.ts', /import x = require\(\.\.\.\) is not supported/, 'import path'],
];

const read = (name: string) => fs.readFileSync(path.join(FIXTURES, name), 'utf8');

/** 1-based line and column of the first `token` in `text`. */
function positionOf(text: string, token: string): [number, number] {
  const at = text.indexOf(token);
  expect(at, token).toBeGreaterThanOrEqual(0);
  const before = text.slice(0, at).split('\n');
  return [before.length, before[before.length - 1].length + 1];
}

/** What each fixture's failing run must report: the error inside the construct, and the call on the last line. */
function expectedFrames(text: string): { error: [number, number]; call: [number, number] } {
  const lines = text.trimEnd().split('\n');
  const last = lines[lines.length - 1];
  // The callee: the identifier right before the first `(` of the failing line.
  const callee = /([A-Za-z_$][\w$]*)\(/.exec(last)!;
  return { error: positionOf(text, 'notDefinedAnywhere'), call: [lines.length, callee.index + 1] };
}

/** The positions `file:L:C` a stack names, in order. */
function frames(stack: string, file = 'sandbox.js'): Array<[number, number]> {
  const escaped = file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return [...stack.matchAll(new RegExp(`${escaped}:(\\d+):(\\d+)`, 'g'))].map((m) => [Number(m[1]), Number(m[2])]);
}

function expectStack(stack: string | undefined, text: string, file?: string) {
  const { error, call } = expectedFrames(text);
  const seen = frames(stack ?? '', file);
  expect(seen[0], stack).toEqual(error);
  expect(seen[seen.length - 1], stack).toEqual(call);
}

const uses = (text: string, tail: string) => `${text.slice(0, text.indexOf(MARKER))}${tail}`;

const points = entryPoints('ts-transform');
const engines = { get: points.engine };
const mcpClient = (isolation: Mode, stateful: boolean): Promise<Client> => points.mcpClient({ isolation, stateful });
const callTool = (client: Client, code: string) => points.callTool(client, code, 'typescript');
const isoletRun = (name: string, source: string, isolation: Mode) => points.isoletRun(`${isolation}-${name}`, source, ['--isolation', isolation]);

for (const isolation of MODES) {
  describe(`compiled constructs (${isolation} isolation)`, () => {
    for (const [name, result] of COMPILED) {
      const text = read(name);

      it(`${name}: runSandbox, as a script and as an async body`, async () => {
        expect(await runSandbox(uses(text, 'result'), { language: 'typescript', isolation })).toMatchObject({ success: true, output: result });
        expect(await runSandbox(uses(text, 'return result;'), { language: 'typescript', isolation, capabilities: {} })).toMatchObject({ success: true, output: result });
        for (const options of [{}, { capabilities: {} }]) {
          const r = await runSandbox(text, { language: 'typescript', isolation, ...options });
          expect(r.success).toBe(false);
          if (r.success) return;
          expect(r.error).toBeInstanceOf(SandboxRuntimeError);
          expect(r.error.message).toBe('ReferenceError: notDefinedAnywhere is not defined');
          expectStack((r.error as SandboxRuntimeError).thrown?.stack, text);
          expectStack(r.error.stack, text);
        }
      });

      it(`${name}: SandboxEngine.submit`, async () => {
        const engine = engines.get(isolation)!;
        const ok = await engine.submit({ code: uses(text, 'return result;'), language: 'typescript' }).done;
        expect(ok).toMatchObject({ type: 'result', data: result });
        const bad = await engine.submit({ code: text, language: 'typescript' }).done;
        expect(bad.type).toBe('error');
        if (bad.type !== 'error') return;
        expectStack((bad.error as SandboxRuntimeError).thrown?.stack, text);
      });

      it(`${name}: a persistent sandbox, with and without a top-level await`, async () => {
        for (const prefix of ['', 'const ready: number = await Promise.resolve(1);\n']) {
          const source = prefix + text;
          const good = await createSandbox({ isolation });
          points.later(() => good.close());
          expect(await good.run(uses(source, 'result'), { language: 'typescript' })).toMatchObject({ success: true, output: result });
          const failing = await createSandbox({ isolation });
          points.later(() => failing.close());
          const r = await failing.run(source, { language: 'typescript' });
          expect(r.success).toBe(false);
          if (r.success) return;
          expectStack((r.error as SandboxRuntimeError).thrown?.stack, source);
        }
      });

      it(`${name}: isolet run names the file, at its positions`, async () => {
        const ok = await isoletRun(name, uses(text, 'result'), isolation);
        expect([ok.exit, JSON.parse(ok.stdout)]).toEqual([0, result]);
        const bad = await isoletRun(name, text, isolation);
        expect(bad.exit).toBe(1);
        expect(bad.stderr).not.toContain('sandbox.js');
        expectStack(bad.stderr, text, bad.file);
      });

      it(`${name}: the MCP tool, stateless and stateful`, async () => {
        for (const stateful of [false, true]) {
          // Stateful: one sandbox per client, and both runs declare the same names.
          const ok = await callTool(await mcpClient(isolation, stateful), uses(text, 'result'));
          expect(ok.isError).toBeFalsy();
          expect(JSON.parse(ok.text)).toEqual(result);
          const bad = await callTool(await mcpClient(isolation, stateful), text);
          expect(bad.isError).toBe(true);
          expectStack(bad.text, text);
        }
      });
    }
  });

  describe(`refused constructs (${isolation} isolation)`, () => {
    for (const [name, message, token] of REFUSED) {
      const text = read(name);
      const [line, column] = positionOf(text, token);

      it(`${name}: a SandboxValidationError at the construct, at every entry point`, async () => {
        const check = (error: any) => {
          expect(error).toBeInstanceOf(SandboxValidationError);
          expect(error.message).toMatch(message);
          expect([error.line, error.column]).toEqual([line, column]);
        };
        for (const options of [{}, { capabilities: {} }]) {
          const r = await runSandbox(text, { language: 'typescript', isolation, ...options });
          expect(r.success).toBe(false);
          if (!r.success) check(r.error);
        }
        const end = await engines.get(isolation)!.submit({ code: text, language: 'typescript' }).done;
        expect(end.type).toBe('error');
        if (end.type === 'error') check(end.error);
        const sandbox = await createSandbox({ isolation });
        points.later(() => sandbox.close());
        const r = await sandbox.run(text, { language: 'typescript' });
        if (!r.success) check(r.error);
        expect(r.success).toBe(false);
        const cli = await isoletRun(name, text, isolation);
        expect(cli.exit).toBe(3);
        expect(cli.stderr).toContain(`(line ${line}, column ${column})`);
        expect(cli.stderr).toMatch(message);
        const tool = await callTool(await mcpClient(isolation, false), text);
        expect(tool.isError).toBe(true);
        expect(tool.text).toContain(`at line ${line}, column ${column}`);
      });
    }
  });
}

describe('the fast path', () => {
  it('TypeScript that only needs its types erased is not transformed: its text keeps every column', async () => {
    const { prepareSource } = load('../lib/source') as { prepareSource(code: string, recipe: object): Promise<{ code: string; map: unknown[] }> };
    const out = await prepareSource('const n: number = 1;\nn', { language: 'typescript' });
    expect(out).toEqual({ code: 'const n         = 1;\nn', map: [] });
    const transformed = await prepareSource('enum E { A }\nE.A', { language: 'typescript' });
    expect(transformed.code).toContain('E[E["A"] = 0] = "A"');
    expect(transformed.map).toHaveLength(1);
  });
});
