// A described tool's JSON Schema is checked by ajv (issue 36): compiled once, when the tool
// is defined, so a bad schema fails the definition with a SandboxValidationError naming the
// option; a call that does not fit is a catchable TypeError in the sandbox that names the
// path, short whatever the sandbox sends. The schema is the developer's (or an MCP
// server's), the value the sandbox's: remote `$ref`s are never fetched, `__proto__` and
// `constructor` keys are checked as any key, deep values do not take the host down.

import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { runSandbox, SandboxEngine, SandboxValidationError, describeTools, type Capabilities, type SandboxResult } from '../index';

const { inputChecker } = require('../lib/json-schema');

function output(r: SandboxResult): any {
  if (!r.success) throw new Error(`run failed: ${r.error.name}: ${r.error.message}`);
  return r.output;
}

function refusal(r: SandboxResult): any {
  expect(r.success).toBe(false);
  const error = (r as any).error;
  expect(error).toBeInstanceOf(SandboxValidationError);
  return error;
}

/** A tool named `t` with `schema`; `executed` gets each input execute sees. */
function tool(schema: unknown, executed: unknown[] = []): Capabilities {
  return {
    t: {
      description: 'test tool',
      inputSchema: schema as any,
      execute: async (input: unknown) => {
        executed.push(input);
        return 'ran';
      },
    },
  };
}

/** Calls `t` with each argument (sandbox expressions): 'ran', or the error as `Name: message`. */
async function calls(schema: unknown, args: string[], executed: unknown[] = []): Promise<string[]> {
  return output(
    await runSandbox(
      `const out = [];
       for (const make of [${args.map((a) => `() => (${a})`).join(', ')}]) {
         try { out.push(await t(make())); } catch (e) { out.push(e.name + ': ' + e.message); }
       }
       return out;`,
      { capabilities: tool(schema, executed) },
    ),
  );
}

describe('JSON Schema input, checked by ajv', () => {
  it('a call that fits reaches execute unchanged; one that does not is a TypeError naming the path', async () => {
    const schema = {
      type: 'object',
      properties: {
        repo: { type: 'string', pattern: '^[\\w-]+/[\\w-]+$' },
        labels: { type: 'array', items: { type: 'object', properties: { 'label-name': { type: 'string' } }, required: ['label-name'] }, maxItems: 3 },
        limit: { type: 'number', multipleOf: 5 },
        mode: { const: 'fast' },
        owner: { anyOf: [{ type: 'string' }, { type: 'null' }] },
      },
      required: ['repo'],
      additionalProperties: false,
    };
    const executed: unknown[] = [];
    const out = await calls(
      schema,
      [
        `{ repo: 'a/b', labels: [{ 'label-name': 'bug' }], limit: 10, mode: 'fast', owner: null }`,
        `{ repo: 'a b' }`,
        `{ repo: 'a/b', labels: [{ 'label-name': 'x' }, { 'label-name': 7 }] }`,
        `{ repo: 'a/b', labels: [{}] }`,
        `{ repo: 'a/b', labels: [{ 'label-name': 'a' }, { 'label-name': 'b' }, { 'label-name': 'c' }, { 'label-name': 'd' }] }`,
        `{ repo: 'a/b', limit: 7 }`,
        `{ repo: 'a/b', limit: NaN }`,
        `{ repo: 'a/b', mode: 'slow' }`,
        `{ repo: 'a/b', owner: 5 }`,
        `{ repo: 'a/b', 'not-allowed': 1 }`,
        `[]`,
        `undefined`,
      ],
      executed,
    );
    expect(out).toEqual([
      'ran',
      'TypeError: t: input.repo must match /^[\\w-]+/[\\w-]+$/',
      'TypeError: t: input.labels[1]["label-name"] must be a string, got a number',
      'TypeError: t: input.labels[0]["label-name"] is required',
      'TypeError: t: input.labels must have at most 3 items',
      'TypeError: t: input.limit must be a multiple of 5',
      'TypeError: t: input.limit must be a number, got NaN',
      'TypeError: t: input.mode must be "fast"',
      'TypeError: t: input.owner matches none of the allowed shapes (input.owner must be a string, got a number)',
      'TypeError: t: input["not-allowed"] is not an allowed property',
      'TypeError: t: input must be an object, got an array',
      'TypeError: t: input must be an object, got undefined',
    ]);
    expect(executed).toEqual([{ repo: 'a/b', labels: [{ 'label-name': 'bug' }], limit: 10, mode: 'fast', owner: null }]);
  });

  it('draft-2020-12 schemas ($schema names it): prefixItems, $defs, unevaluatedProperties, dependentRequired', async () => {
    const schema = {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      properties: {
        point: { type: 'array', prefixItems: [{ type: 'number' }, { type: 'number' }], items: false },
        tags: { type: 'array', items: { $ref: '#/$defs/tag' } },
        card: { type: 'string' },
        cvc: { type: 'string' },
      },
      dependentRequired: { card: ['cvc'] },
      unevaluatedProperties: false,
      $defs: { tag: { type: 'string', minLength: 1 } },
    };
    expect(
      await calls(schema, [
        `{ point: [1, 2], tags: ['x'], card: '4242', cvc: '123' }`,
        `{ point: [1, 'two'] }`,
        `{ point: [1, 2, 3] }`,
        `{ tags: ['ok', ''] }`,
        `{ card: '4242' }`,
        `{ other: 1 }`,
      ]),
    ).toEqual([
      'ran',
      'TypeError: t: input.point[1] must be a number, got a string',
      'TypeError: t: input.point must NOT have more than 2 items',
      'TypeError: t: input.tags[1] must be at least 1 characters long',
      'TypeError: t: input.cvc is required when input.card is present',
      'TypeError: t: input.other is not an allowed property',
    ]);
  });

  it('draft-07 schemas (with its $schema or none): tuple items, additionalItems, definitions, dependencies', async () => {
    const schema = {
      type: 'object',
      properties: {
        pair: { type: 'array', items: [{ type: 'string' }, { type: 'integer' }], additionalItems: false },
        size: { $ref: '#/definitions/size' },
        card: { type: 'string' },
      },
      dependencies: { card: ['cvc'] },
      definitions: { size: { enum: ['s', 'm', 'l'] } },
    };
    for (const s of [schema, { $schema: 'http://json-schema.org/draft-07/schema#', ...schema }]) {
      expect(await calls(s, [`{ pair: ['a', 1], size: 'm' }`, `{ pair: ['a', 1.5] }`, `{ pair: ['a', 1, 2] }`, `{ size: 'xl' }`, `{ card: 'x' }`])).toEqual([
        'ran',
        'TypeError: t: input.pair[1] must be an integer, got a number',
        'TypeError: t: input.pair must NOT have more than 2 items',
        'TypeError: t: input.size must be one of "s", "m", "l"',
        'TypeError: t: input.cvc is required when input.card is present',
      ]);
    }
  });

  it('accepts what real MCP tool schemas carry: titles, examples, x- keys, formats ajv does not know, nullable', async () => {
    const schema = {
      $schema: 'http://json-schema.org/draft-07/schema#',
      title: 'SearchInput',
      description: 'Search the docs',
      type: 'object',
      'x-vendor-hint': { cache: true },
      $comment: 'generated',
      properties: {
        url: { type: 'string', format: 'uri', examples: ['https://example.com'] },
        when: { type: 'string', format: 'x-custom-date', deprecated: true },
        note: { type: 'string', nullable: true, readOnly: false },
      },
      required: ['url'],
    };
    expect(await calls(schema, [`{ url: 'not checked as a URI', when: 'someday', note: null }`, `{ url: 5 }`])).toEqual([
      'ran',
      'TypeError: t: input.url must be a string, got a number',
    ]);
  });

  it('the same $id in two tools, or a recursive schema, compiles and checks each on its own', async () => {
    const node = { $id: 'https://example.com/node', type: 'object', properties: { name: { type: 'string' }, children: { type: 'array', items: { $ref: '#' } } }, required: ['name'] };
    const other = { $id: 'https://example.com/node', type: 'object', properties: { size: { type: 'number' } }, required: ['size'] };
    const out = output(
      await runSandbox(
        `const r = [];
         for (const f of [() => a({ name: 'x', children: [{ name: 'y', children: [] }] }), () => a({ name: 'x', children: [{}] }), () => b({ size: 1 }), () => b({ name: 'x' })]) {
           try { r.push(await f()); } catch (e) { r.push(e.message); }
         }
         return r;`,
        { capabilities: { a: { inputSchema: node, execute: () => 'a' }, b: { inputSchema: other, execute: () => 'b' } } },
      ),
    );
    expect(out).toEqual(['a', 'a: input.children[0].name is required', 'b', 'b: input.size is required']);
  });
});

describe('a schema that cannot be checked fails the definition', () => {
  it('with a SandboxValidationError naming the tool and its option, in runSandbox, SandboxEngine and describeTools', async () => {
    const cases: Array<[unknown, RegExp]> = [
      [{ type: 'strin' }, /\.t\.inputSchema is not a JSON Schema isolet can check: schema is invalid: data\/type must be equal to one of the allowed values/],
      [{ type: 'object', properties: { p: { type: 'string', pattern: '(' } } }, /\.t\.inputSchema is not a JSON Schema isolet can check: Invalid regular expression: \/\(\/u/],
      [{ type: 'object', properties: { p: { $ref: '#/$defs/missing' } } }, /\.t\.inputSchema is not a JSON Schema isolet can check: can't resolve reference #\/\$defs\/missing/],
      [{ $schema: 'http://json-schema.org/draft-04/schema#', type: 'object' }, /\.t\.inputSchema\.\$schema names "http:\/\/json-schema\.org\/draft-04\/schema#", a dialect isolet does not check \(it checks draft-06, draft-07, 2019-09 and 2020-12\)$/],
      [{ $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'array', items: [{ type: 'string' }] }, /\.t\.inputSchema is not a JSON Schema isolet can check: schema is invalid: data\/items must be object,boolean/],
    ];
    for (const [schema, message] of cases) {
      const executed: unknown[] = [];
      const err = refusal(await runSandbox('return 1', { capabilities: tool(schema, executed) }));
      expect(err.message).toMatch(message);
      expect(err.message.startsWith('capabilities.t.')).toBe(true);
      expect(() => new SandboxEngine({ tools: tool(schema) })).toThrow(message);
      expect(() => describeTools(tool(schema))).toThrow(message);
    }
    // The AI SDK's older field name is the one named.
    const legacy = { t: { description: 'd', parameters: { type: 7 } as any, execute: () => 1 } };
    expect(refusal(await runSandbox('return 1', { capabilities: legacy })).message).toMatch(/^capabilities\.t\.parameters is not a JSON Schema isolet can check/);
    const engine = new SandboxEngine({ tools: {} });
    try {
      await engine.init();
      const end = await engine.submit({ requestId: 'r', code: 'return 1', tools: { ns: { t: { inputSchema: { minimum: 'x' }, execute: () => 1 } } } }).done;
      expect((end as any).error.message).toMatch(/^request\.tools\.ns\.t\.inputSchema is not a JSON Schema isolet can check: schema is invalid: data\/minimum must be number/);
    } finally {
      await engine.shutdown();
    }
  });

  describe('a $ref or $schema naming a remote URL', () => {
    let server: http.Server;
    let base = '';
    const requests: string[] = [];
    beforeAll(async () => {
      server = http.createServer((req, res) => {
        requests.push(String(req.url));
        res.setHeader('content-type', 'application/schema+json');
        res.end(JSON.stringify({ type: 'string' }));
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

    it('is refused at definition, and nothing is fetched', async () => {
      const remote = { type: 'object', properties: { q: { $ref: `${base}/q.json` } } };
      const err = refusal(await runSandbox('return 1', { capabilities: tool(remote) }));
      expect(err.message).toBe(
        `capabilities.t.inputSchema is not a JSON Schema isolet can check: can't resolve reference ${base}/q.json from id # (isolet fetches no $ref: put the definition under $defs)`,
      );
      const relative = { $id: `${base}/root.json`, type: 'object', properties: { q: { $ref: 'q.json' } } };
      expect(refusal(await runSandbox('return 1', { capabilities: tool(relative) })).message).toMatch(/can't resolve reference q\.json from id http:\/\/127\.0\.0\.1:\d+\/root\.json/);
      const meta = { $schema: `${base}/meta.json`, type: 'object' };
      expect(refusal(await runSandbox('return 1', { capabilities: tool(meta) })).message).toMatch(/\$schema names "http:\/\/127\.0\.0\.1:\d+\/meta\.json", a dialect isolet does not check/);
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(requests).toEqual([]);
    });
  });
});

describe('hostile values', () => {
  it('own __proto__ and constructor keys are checked as any key and pollute nothing', async () => {
    // ajv never reads `properties.__proto__` of a schema: a schema cannot declare that key,
    // so `additionalProperties: false` refuses it and any other schema for extra keys checks it.
    const closed = { type: 'object', properties: { constructor: { type: 'string' }, name: { type: 'string' } }, additionalProperties: false };
    const executed: any[] = [];
    expect(
      await calls(
        closed,
        [
          `JSON.parse('{"constructor": "c", "name": "n"}')`,
          `{}`,
          `JSON.parse('{"__proto__": {"polluted": 1}}')`,
          `JSON.parse('{"constructor": {"prototype": {"polluted": 1}}}')`,
        ],
        executed,
      ),
    ).toEqual(['ran', 'ran', 'TypeError: t: input.__proto__ is not an allowed property', 'TypeError: t: input.constructor must be a string, got an object']);
    const numbers = { type: 'object', additionalProperties: { type: 'number' } };
    expect(await calls(numbers, [`JSON.parse('{"__proto__": {"polluted": 1}}')`, `JSON.parse('{"__proto__": 1, "constructor": 2}')`], executed)).toEqual([
      'TypeError: t: input.__proto__ must be a number, got an object',
      'ran',
    ]);
    const open = { type: 'object', properties: { name: { type: 'string' } } };
    expect(await calls(open, [`JSON.parse('{"__proto__": {"polluted": 1}, "name": "n"}')`], executed)).toEqual(['ran']);

    expect(executed).toHaveLength(4);
    expect(Object.getPrototypeOf(executed[2])).toBe(Object.prototype);
    expect(Object.getOwnPropertyNames(executed[2]).sort()).toEqual(['__proto__', 'constructor']);
    expect(Object.getOwnPropertyDescriptor(executed[3], '__proto__')!.value).toEqual({ polluted: 1 });
    expect(Object.getPrototypeOf(executed[3])).toBe(Object.prototype);
    expect(({} as any).polluted).toBeUndefined();

    // Inherited keys are not there: `required` wants them as own properties.
    const required = { type: 'object', required: ['constructor', '__proto__'] };
    expect(await calls(required, [`{}`, `JSON.parse('{"constructor": 1}')`, `JSON.parse('{"constructor": 1, "__proto__": null}')`])).toEqual([
      'TypeError: t: input.constructor is required',
      'TypeError: t: input.__proto__ is required',
      'ran',
    ]);
    expect(Object.prototype).not.toHaveProperty('polluted');
  });

  it('messages stay short whatever the value: a huge key, a deep path', async () => {
    const schema = { type: 'object', properties: { a: { $ref: '#/$defs/list' } }, additionalProperties: false, $defs: { list: { type: 'array', items: { $ref: '#/$defs/list' } } } };
    const out = await calls(schema, [`{ ['k'.repeat(1e6)]: 1 }`, `(() => { let v = 1; for (let i = 0; i < 1000; i++) v = [v]; return { a: v }; })()`]);
    expect(out[0]).toBe(`TypeError: t: input["${'k'.repeat(63)}…"] is not an allowed property`);
    expect(out[1]).toMatch(/^TypeError: t: input\.a(\[0\])+…(\[0\])+ must be an array, got a number$/);
    expect(out[1].length).toBeLessThanOrEqual('TypeError: '.length + 500);
  });

  it('deep nesting does not take the host down: the bridge or the check refuses it, the run goes on', async () => {
    const schema = { $ref: '#/$defs/list', $defs: { list: { type: 'array', items: { $ref: '#/$defs/list' } } } };
    const executed: unknown[] = [];
    const deep = (n: number) => `(() => { let v = []; for (let i = 0; i < ${n}; i++) v = [v]; return v; })()`;
    const out = await calls(schema, [deep(1e5), deep(1e4), deep(2000), `[[[1]]]`], executed);
    // Past what the bridge carries (about 3,000 levels here), the call is refused in the
    // sandbox, before the host; a value it does carry is checked on the host.
    for (const o of out.slice(0, 2)) expect(o).toMatch(/^RangeError: |^ran$|^TypeError: t: input is nested too deeply to check$/);
    expect(out.slice(2)).toEqual(['ran', 'TypeError: t: input[0][0][0] must be an array, got a number']);
    expect(executed.length).toBe(out.filter((o) => o === 'ran').length);

    // Deeper than the host's stack (a value the bridge would not carry): a TypeError too.
    const check = inputChecker(schema, 't', 'tools.t.inputSchema');
    let value: unknown[] = [];
    for (let i = 0; i < 1e5; i++) value = [value];
    await expect(check(value)).rejects.toThrow(new TypeError('t: input is nested too deeply to check'));
    await expect(check([[[]]])).resolves.toEqual([[[]]]);
  });

  it('uniqueItems is not enforced: ajv compares items pairwise, a large array would hold the host', async () => {
    const schema = { type: 'array', uniqueItems: true, items: { type: 'object' } };
    const started = Date.now();
    expect(await calls(schema, [`Array.from({ length: 50000 }, () => ({ same: 1 }))`])).toEqual(['ran']);
    expect(Date.now() - started).toBeLessThan(10_000);
  });
});
