// Namespaced and described tools: `{ github: { listIssues } }` -> `github.listIssues(...)`,
// AI SDK-shaped tools whose input schema is checked on the host before `execute` runs,
// and describeTools for a model's prompt.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { jsonSchema, tool } from 'ai';

import { runSandbox, SandboxEngine, SandboxValidationError, describeTools, type Capabilities, type SandboxResult } from '../index';

function output(r: SandboxResult): any {
  if (!r.success) throw new Error(`run failed: ${r.error.name}: ${r.error.message}`);
  return r.output;
}

function failed(r: SandboxResult): any {
  expect(r.success).toBe(false);
  return (r as any).error;
}

const listIssuesSchema = {
  type: 'object',
  properties: {
    repo: { type: 'string', description: 'owner/name', minLength: 3 },
    state: { enum: ['open', 'closed'] },
    labels: { type: 'array', items: { type: 'string' } },
    limit: { type: 'integer', minimum: 1, maximum: 100 },
  },
  required: ['repo'],
  additionalProperties: false,
};

function github(executed: unknown[]) {
  return {
    listIssues: {
      description: 'List the issues of a repository.',
      inputSchema: listIssuesSchema,
      execute: async (input: any) => {
        executed.push(input);
        return [{ number: 1, repo: input.repo }];
      },
    },
    createIssue: tool({
      description: 'Create an issue.',
      inputSchema: z.object({ repo: z.string(), title: z.string().min(1) }),
      execute: async (input: { repo: string; title: string }) => {
        executed.push(input);
        return { number: 2, ...input };
      },
    }),
    whoami: () => 'octocat',
  };
}

describe('namespaced tools in runSandbox', () => {
  it('calls github.listIssues(args) through a frozen, null-prototype namespace', async () => {
    const executed: unknown[] = [];
    const out = output(
      await runSandbox(
        `const list = await github.listIssues({ repo: 'a/b', state: 'open', labels: ['bug'] });
         const created = await github.createIssue({ repo: 'a/b', title: 'New' });
         const assigned = Reflect.set(github, 'whoami', () => 'evil');
         let redefined = 'kept';
         try { Object.defineProperty(github, 'whoami', { value: () => 'evil' }); } catch (e) { redefined = e.name; }
         return {
           list, created, who: await github.whoami(),
           frozen: Object.isFrozen(github), proto: Object.getPrototypeOf(github), keys: Object.keys(github).sort(),
           assigned, redefined, deleted: delete globalThis.github, still: typeof github,
         };`,
        { capabilities: { github: github(executed) } },
      ),
    );
    expect(out).toEqual({
      list: [{ number: 1, repo: 'a/b' }],
      created: { number: 2, repo: 'a/b', title: 'New' },
      who: 'octocat',
      frozen: true,
      proto: null,
      keys: ['createIssue', 'listIssues', 'whoami'],
      assigned: false,
      redefined: 'TypeError',
      deleted: false,
      still: 'object',
    });
    expect(executed).toEqual([{ repo: 'a/b', state: 'open', labels: ['bug'] }, { repo: 'a/b', title: 'New' }]);
  });

  it('a namespace function is a plain sandbox function: no way back to the host', async () => {
    const out = output(
      await runSandbox(
        `const f = github.whoami;
         let ctor = 'none';
         try { ctor = f.constructor('return typeof process')(); } catch (e) { ctor = e.name; }
         return { ctor, proto: Object.getPrototypeOf(f) === Function.prototype, isNew: (() => { try { new f(); return 'constructed' } catch (e) { return e.name } })() };`,
        { capabilities: { github: { whoami: () => 'x' } } },
      ),
    );
    expect(out).toEqual({ ctor: 'undefined', proto: true, isNew: 'TypeError' });
  });

  it('checks JSON Schema input on the host: a catchable TypeError naming the field, execute never runs', async () => {
    const executed: unknown[] = [];
    const out = output(
      await runSandbox(
        `const tries = [
           { repo: 5 }, {}, { repo: 'a/b', state: 'merged' }, { repo: 'a/b', labels: ['x', 2] },
           { repo: 'a/b', limit: 1.5 }, { repo: 'a/b', limit: 500 }, { repo: 'a/b', extra: 1 }, { repo: 'ab' }, 'a/b',
         ];
         const out = [];
         for (const t of tries) {
           try { await github.listIssues(t); out.push('accepted'); }
           catch (e) { out.push((e instanceof TypeError) + ' ' + e.message); }
         }
         return out;`,
        { capabilities: { github: github(executed) } },
      ),
    );
    expect(out).toEqual([
      'true github.listIssues: input.repo must be a string, got a number',
      'true github.listIssues: input.repo is required',
      'true github.listIssues: input.state must be one of "open", "closed"',
      'true github.listIssues: input.labels[1] must be a string, got a number',
      'true github.listIssues: input.limit must be an integer, got a number',
      'true github.listIssues: input.limit must be <= 100',
      'true github.listIssues: input.extra is not an allowed property',
      'true github.listIssues: input.repo must be at least 3 characters long',
      'true github.listIssues: input must be an object, got a string',
    ]);
    expect(executed).toEqual([]);
  });

  it('checks zod and AI SDK jsonSchema() input the same way', async () => {
    const executed: unknown[] = [];
    const caps: Capabilities = {
      github: github(executed),
      search: tool({
        description: 'Search',
        inputSchema: jsonSchema<{ q: string }>({ type: 'object', properties: { q: { type: 'string' } }, required: ['q'] }),
        execute: async ({ q }: { q: string }) => `results for ${q}`,
      }),
    };
    const out = output(
      await runSandbox(
        `const r = [];
         for (const f of [() => github.createIssue({ repo: 'a/b', title: '' }), () => github.createIssue({ repo: 'a/b' }), () => search({ q: 1 }), () => search({ q: 'x' })]) {
           try { r.push(await f()); } catch (e) { r.push(e.name + ': ' + e.message); }
         }
         return r;`,
        { capabilities: caps },
      ),
    );
    expect(out[0]).toMatch(/^TypeError: github\.createIssue: input\.title: Too small/);
    expect(out[1]).toMatch(/^TypeError: github\.createIssue: input\.title: Invalid input: expected string/);
    expect(out[2]).toBe('TypeError: search: input.q must be a string, got a number');
    expect(out[3]).toBe('results for x');
    expect(executed).toEqual([]);
  });

  it('a tool that throws or rejects is a catchable error in the sandbox; the run goes on', async () => {
    const out = output(
      await runSandbox(
        `const r = [];
         try { await svc.boom(); } catch (e) { r.push(e.name + ': ' + e.message); }
         try { await svc.reject({}); } catch (e) { r.push(e.name + ': ' + e.message); }
         r.push(await svc.ok());
         return r;`,
        {
          capabilities: {
            svc: {
              boom: () => {
                throw new RangeError('out of range on the host');
              },
              reject: { description: 'rejects', inputSchema: { type: 'object' }, execute: async () => Promise.reject(new Error('backend down')) },
              ok: () => 'fine',
            },
          },
        },
      ),
    );
    expect(out).toEqual(['RangeError: out of range on the host', 'Error: backend down', 'fine']);
  });

  it('an oversize tool result is refused with a RangeError, not copied', async () => {
    const out = output(
      await runSandbox(`try { await blob.get(); return 'copied' } catch (e) { return e.name + ': ' + e.message }`, {
        capabilities: { blob: { get: () => 'x'.repeat(2 * 1024 * 1024) } },
        maxMessageBytes: 1024 * 1024,
      }),
    );
    expect(out).toMatch(/^RangeError: blob\.get's reply: \d+ bytes, over the bridge limit of 1048576 bytes \(maxMessageBytes\)$/);
  });

  it('unknown namespaces and members are ordinary sandbox errors', async () => {
    const out = output(
      await runSandbox(
        `const r = [];
         try { await jira.list(); } catch (e) { r.push(e.name + ': ' + e.message); }
         try { await github.deleteRepo(); } catch (e) { r.push(e.name + ': ' + e.message); }
         return r;`,
        { capabilities: { github: { whoami: () => 'x' } } },
      ),
    );
    expect(out).toEqual(['ReferenceError: jira is not defined', 'TypeError: github.deleteRepo is not a function']);
  });

  it('refuses bad capability shapes and names with a SandboxValidationError naming them', async () => {
    const cases: Array<[unknown, RegExp]> = [
      [{ github: { deep: { deeper: () => 1 } } }, /capabilities\.github\.deep must be a function or a described tool .*namespaces nest one level/],
      [{ github: {} }, /capabilities\.github is an empty namespace/],
      [{ n: 5 }, /capabilities\.n must be a function, a described tool .* got number/],
      [{ Object: { keys: () => 1 } }, /capability name: `Object` would shadow a built-in/],
      [{ gh: { 'a-b': () => 1 } }, /capability name: `gh\.a-b` is not a valid JavaScript identifier/],
      [{ gh: JSON.parse('{"__proto__": 1}') }, /capabilities\.gh\.__proto__ must be a function/],
      [{ t: { description: 'no execute', inputSchema: { type: 'object' } } }, /capabilities\.t looks like a described tool but has no execute function/],
      [{ t: { description: 7, execute: () => 1 } }, /capabilities\.t\.execute must be a function or a described tool|capabilities\.t\.description/],
      [{ t: { description: 'd', inputSchema: 'nope', execute: () => 1 } }, /capabilities\.t\.inputSchema must be a JSON Schema object or a zod schema/],
    ];
    for (const [caps, message] of cases) {
      const err = failed(await runSandbox('return 1', { capabilities: caps as any }));
      expect(err).toBeInstanceOf(SandboxValidationError);
      expect(err.message).toMatch(message);
    }
  });
});

describe('namespaced and described tools in SandboxEngine', () => {
  const executed: unknown[] = [];
  const engine = new SandboxEngine({ maxConcurrentIsolates: 2, tools: { github: github(executed), now: () => 7 } });
  beforeAll(() => engine.init());
  afterAll(() => engine.shutdown());

  it('the tool policy and call limits use dotted names', async () => {
    const code = `const r = [];
      r.push(await github.listIssues({ repo: 'a/b' }));
      r.push(Object.keys(github).join(), typeof github.createIssue, typeof now);
      try { await github.listIssues({ repo: 'a/b' }); } catch (e) { r.push(e.name + ': ' + e.message); }
      return r;`;
    const end = await engine.submit({ requestId: 'p1', code, toolPolicy: { allowedTools: ['github.listIssues'], maxCallsPerTool: { 'github.listIssues': 1 } } }).done;
    expect(end).toMatchObject({
      type: 'result',
      data: [
        [{ number: 1, repo: 'a/b' }],
        'listIssues',
        'undefined',
        'undefined',
        'PermissionError: tool "github.listIssues" exceeded its limit of 1 calls',
      ],
    });
    const unknown = await engine.submit({ requestId: 'p2', code: 'return 1', toolPolicy: { allowedTools: ['github.nope'] } }).done;
    expect((unknown as any).error.message).toBe('request.toolPolicy.allowedTools names unknown tool "github.nope" (registered: github.listIssues, github.createIssue, github.whoami, now)');
  });

  it('a request may bring its own tools, allowed without a policy entry', async () => {
    const end = await engine.submit({ requestId: 'p3', code: 'return await mine.add(2, 3)', tools: { mine: { add: (a: number, b: number) => a + b } } }).done;
    expect(end).toMatchObject({ type: 'result', data: 5 });
    const clash = await engine.submit({ requestId: 'p4', code: 'return 1', tools: { now: () => 1 } }).done;
    expect((clash as any).error.message).toMatch(/request\.tools\.now clashes with the engine tool/);
  });

  it('refuses bad tools at construction', () => {
    expect(() => new SandboxEngine({ tools: { x: 1 } as any })).toThrow(/tools\.x must be a function, a described tool/);
  });
});

describe('describeTools', () => {
  it('gives TypeScript declarations with JSDoc, for namespaces, JSON Schema and zod', () => {
    const d = describeTools({ github: github([]), ping: () => 'pong', fetchPage: { description: 'Fetch a page.\nReturns its text.', inputSchema: { type: 'object', properties: { url: { type: 'string' } }, required: ['url'] }, outputSchema: { type: 'string' }, execute: async () => '' } });
    expect(d).toBe(
      [
        'declare function ping(...args: unknown[]): Promise<unknown>;',
        '',
        '/**',
        ' * Fetch a page.',
        ' * Returns its text.',
        ' */',
        'declare function fetchPage(input: {',
        '  url: string;',
        '}): Promise<string>;',
        '',
        'declare const github: {',
        '  /** List the issues of a repository. */',
        '  listIssues(input: {',
        '    /** owner/name */',
        '    repo: string;',
        '    state?: "open" | "closed";',
        '    labels?: string[];',
        '    limit?: number;',
        '  }): Promise<unknown>;',
        '  /** Create an issue. */',
        '  createIssue(input: {',
        '    repo: string;',
        '    title: string;',
        '  }): Promise<unknown>;',
        '  whoami(...args: unknown[]): Promise<unknown>;',
        '};',
        '',
      ].join('\n'),
    );
  });

  it('refuses what runSandbox refuses', () => {
    expect(() => describeTools({ a: { b: { c: () => 1 } } } as any)).toThrow(SandboxValidationError);
  });
});
