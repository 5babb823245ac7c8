// Code Mode parity: a program that works in @cloudflare/codemode's executor works in
// isolet's. Each row of the table is run by isolet's executor (both isolation modes) and,
// as the reference, by @cloudflare/codemode's own normalizeCode: its function source is
// called the way its DynamicWorkerExecutor calls it (`(\n<source>\n)()`, awaited), in a
// node:vm context with the same tools. Rows where Cloudflare's executor fails say so, and
// the test holds them to that too, so the table stays true.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as vm from 'node:vm';

import { IsoletExecutor, normalizeCode, type ResolvedProvider } from '../lib/codemode';

// The package imports `cloudflare:workers` at load: the shipped hook resolves it first.
beforeAll(() => import('../lib/codemode/register.mjs'));
const load = (name: string): Promise<any> => import(name);

const tools: ResolvedProvider = { name: 'codemode', fns: { price: async (input: any) => input.id * 10 } };

type Row = {
  name: string;
  code: string;
  /** What the author meant: isolet's result. */
  result: unknown;
  /** What Cloudflare's executor does with it, when it is not `result`. */
  cloudflare?: { error: RegExp } | { result: unknown };
  language?: 'typescript';
};

const TYPESCRIPT_UNSUPPORTED = { error: /Unexpected|Missing initializer|expected/i };

const TABLE: Row[] = [
  // Declarations first: a regular expression took these for one function expression.
  { name: 'a function declaration first, then statements', code: 'function score(x) { return x * 2 }\nconst top = [3, 1, 2].map(score).sort((a, b) => b - a)[0];\nreturn top;', result: 6 },
  { name: 'an async function declaration first, then an awaited call', code: 'async function total(ids) {\n  let s = 0;\n  for (const id of ids) s += await codemode.price({ id });\n  return s;\n}\nreturn await total([1, 2]);', result: 30 },
  { name: 'a class declaration first', code: 'class Counter { n = 0; add() { return ++this.n } }\nconst c = new Counter(); c.add();\nreturn c.add();', result: 2 },
  { name: 'one function declaration: it is called', code: 'function main() { return "main" }', result: 'main' },
  { name: 'one async function declaration: it is called', code: 'async function main() {\n  return await codemode.price({ id: 7 });\n}', result: 70 },
  // Comments first.
  { name: 'a line comment, then an arrow', code: '// Find the price\nasync () => { const p = await codemode.price({ id: 4 }); return p }', result: 40 },
  { name: 'a block comment, then an arrow', code: '/* plan:\n   1. ask */\nasync () => codemode.price({ id: 1 })', result: 10 },
  { name: 'a comment, then a body', code: '// sum\nconst a = 1, b = 2;\nreturn a + b;', result: 3 },
  // Fenced code.
  { name: 'fenced js arrow', code: '```js\nasync () => 1 + 1\n```', result: 2 },
  { name: 'fenced typescript-tagged body', code: '```typescript\nconst a = 2;\nreturn a * 21\n```', result: 42 },
  { name: 'fenced, no language', code: "```\nreturn 'plain'\n```", result: 'plain' },
  { name: 'fenced with blank space around', code: '\n  ```javascript\nasync () => "fenced"\n```  \n', result: 'fenced' },
  // export default.
  { name: 'export default of an arrow', code: 'export default async () => "default"', result: 'default' },
  { name: 'export default of a named async function', code: 'export default async function main() { return 7 }', result: 7 },
  { name: 'export default of an anonymous function', code: 'export default function () { return 8 }', result: 8 },
  // Arrows.
  { name: 'an arrow returning an object literal', code: 'async () => ({ ok: true, n: 1 })', result: { ok: true, n: 1 } },
  { name: 'a plain (not async) arrow', code: '() => [1, 2, 3].length', result: 3 },
  { name: 'an async arrow with awaited tool calls', code: 'async () => {\n  const r = await codemode.price({ id: 2 });\n  return { r };\n}', result: { r: 20 } },
  { name: 'an arrow in parentheses', code: '(async () => "wrapped")', result: 'wrapped' },
  // Bodies ending in a bare expression.
  { name: 'a body ending in a bare expression', code: 'const items = [1, 2, 3];\nitems.map((x) => x * 2)', result: [2, 4, 6] },
  { name: 'a body ending in an awaited tool call', code: 'const id = 3;\nawait codemode.price({ id })', result: 30 },
  { name: 'a body ending in an object literal', code: 'const n = 5;\n({ n })', result: { n: 5 } },
  { name: 'a body ending in a call of an async arrow', code: '(async () => { return 9 })()', result: 9 },
  { name: 'a body ending in an expression and a comment', code: 'const x = 4;\nx * x // the square', result: 16 },
  { name: 'a return that runs comes first', code: 'if (Math.max(1, 2) === 2) return "early";\n"late"', result: 'early' },
  { name: 'only declarations: undefined', code: 'const a = 1;', result: undefined },
  { name: 'empty code: undefined', code: '', result: undefined },
  // Where Cloudflare's executor fails and isolet does what the author meant.
  { name: 'an arrow with a trailing semicolon', code: 'async () => 42;', result: 42, cloudflare: { error: /Unexpected token ';'/ } },
  {
    name: 'a function expression in parentheses (called, not returned)',
    code: '(async function () { return "fn" })',
    result: 'fn',
    cloudflare: { result: 'a function, which the Workers RPC cannot return' },
  },
  // TypeScript (isolet's `language: 'typescript'`; Cloudflare's executor runs JavaScript only).
  { name: 'TypeScript body ending in an expression', language: 'typescript', code: 'interface Item { id: number }\nconst items: Item[] = [{ id: 1 }, { id: 2 }];\nitems.length', result: 2, cloudflare: TYPESCRIPT_UNSUPPORTED },
  { name: 'TypeScript arrow', language: 'typescript', code: 'async (): Promise<number> => {\n  const n: number = await codemode.price({ id: 1 });\n  return n;\n}', result: 10, cloudflare: TYPESCRIPT_UNSUPPORTED },
  { name: 'TypeScript declaration first', language: 'typescript', code: 'function score(x: number): number { return x + 1 }\nconst best: number = score(41);\nreturn best;', result: 42, cloudflare: TYPESCRIPT_UNSUPPORTED },
  { name: 'fenced TypeScript', language: 'typescript', code: '```ts\nconst xs: number[] = [1, 2];\nxs.reduce((a: number, b: number) => a + b, 0)\n```', result: 3, cloudflare: TYPESCRIPT_UNSUPPORTED },
  { name: 'TypeScript export default', language: 'typescript', code: 'export default async (): Promise<string> => "ts default"', result: 'ts default', cloudflare: TYPESCRIPT_UNSUPPORTED },
  { name: 'TypeScript with a generic helper first', language: 'typescript', code: 'function first<T>(xs: T[]): T | undefined { return xs[0] }\nfirst<string>(["a", "b"])', result: 'a', cloudflare: TYPESCRIPT_UNSUPPORTED },
];

/** Cloudflare's executor, as far as node:vm can stand in for its Worker. */
async function cloudflare(cfNormalize: (code: string) => string, code: string): Promise<{ result?: unknown; error?: string }> {
  const source = cfNormalize(code);
  const context = vm.createContext({ codemode: { price: tools.fns.price } });
  try {
    const value = await vm.runInContext(`(\n${source}\n)()`, context);
    if (typeof value === 'function') return { result: 'a function, which the Workers RPC cannot return' };
    // A copy in this realm, as the Workers RPC would give it.
    return { result: value === undefined ? undefined : JSON.parse(JSON.stringify(value)) };
  } catch (err) {
    return { error: String((err as Error).message) };
  }
}

const executors = {
  thread: { javascript: new IsoletExecutor({ timeoutMs: 5000, isolation: 'thread', maxConcurrentIsolates: 2 } as any), typescript: new IsoletExecutor({ timeoutMs: 5000, isolation: 'thread', language: 'typescript', maxConcurrentIsolates: 2 } as any) },
  process: { javascript: new IsoletExecutor({ timeoutMs: 5000, isolation: 'process', maxConcurrentIsolates: 2 } as any), typescript: new IsoletExecutor({ timeoutMs: 5000, isolation: 'process', language: 'typescript', maxConcurrentIsolates: 2 } as any) },
};
afterAll(async () => {
  for (const mode of Object.values(executors)) for (const e of Object.values(mode)) await e.dispose();
});

describe('Code Mode parity with @cloudflare/codemode', () => {
  let cfNormalize: (code: string) => string;
  beforeAll(async () => {
    cfNormalize = (await load('@cloudflare/codemode')).normalizeCode;
  });

  for (const row of TABLE) {
    it(`${row.name}: ${JSON.stringify(row.result)}`, async () => {
      const reference = await cloudflare(cfNormalize, row.code);
      const expected = row.cloudflare ?? { result: row.result };
      if ('error' in expected) expect(reference.error, 'Cloudflare').toMatch(expected.error);
      else expect(reference, 'Cloudflare').toEqual({ result: expected.result });
      for (const [mode, byLanguage] of Object.entries(executors)) {
        const r = await byLanguage[row.language ?? 'javascript'].execute(row.code, [tools]);
        expect(r.error, `${mode}: ${JSON.stringify(r)}`).toBeUndefined();
        expect(r.result, mode).toEqual(row.result);
      }
    });
  }

  it('isolet\'s normalizeCode keeps an arrow as it is and makes anything else a body, like Cloudflare\'s', () => {
    for (const code of ['async () => 1', '// c\nasync (a, b) => a', 'const a = 1;\nreturn a', 'let x = 1', '']) {
      expect(normalizeCode(code)).toBe(cfNormalize(code));
    }
    expect(normalizeCode('const a = 1;\na + 1')).toBe('async () => {\nconst a = 1;\nreturn (a + 1)\n}');
    expect(normalizeCode('function score(x) { return x }\nreturn score(1);')).toBe('async () => {\nfunction score(x) { return x }\nreturn score(1);\n}');
  });

  it('code that does not parse is a body, and its syntax error is the run\'s error, in both modes', async () => {
    for (const byLanguage of Object.values(executors)) {
      const r = await byLanguage.javascript.execute('const a = ;\nreturn a', [tools]);
      expect(r.result).toBeUndefined();
      expect(r.error).toMatch(/SyntaxError/);
    }
  });
});
