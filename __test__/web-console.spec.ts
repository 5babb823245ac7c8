// `console` in the sandbox prints what Node's console prints: util.format's %s %d %i %f %j
// %o %O %c %%, util.inspect for every other value (Map, Set, Symbol, functions, classes and
// their instances, circular references, depth, long arrays grouped, errors with their
// stack), console.table, time/timeEnd, count, group, assert, dir, trace - with and without
// `web`, in both isolation modes. Each case runs in this Node process too, through
// util.format, and the two texts must be the same (stack frames aside: they name different
// code). And formatting stays within the run's log: bounded by its room and by time for huge
// and circular values, never running code of an argument the log has no room for.
import { describe, expect, it } from 'vitest';
import { format } from 'node:util';
import { Console } from 'node:console';
import { Writable } from 'node:stream';
import { runSandbox, type Isolation } from '..';
import { ok } from './support/results';

/** Arguments lists, as source: each is logged in the sandbox and formatted by Node. */
const CASES: string[] = [
  `'plain'`, `42`, `-0`, `1n`, `true`, `null`, `undefined`, `Symbol('s')`, `Symbol()`, `NaN`,
  `'a', 'b', 3`, `[]`, `{}`, `[1, 'a', null, undefined]`, `{ a: 1, 'b-c': 2, 3: 'x', [Symbol('k')]: 1 }`,
  `'%s', { a: 1 }`, `'%s', [1, [2, [3]]]`, `'%s', new Error('e').message`, `'%s %s', 'only'`, `'%d', '12px'`, `'%i', 12.9`, `'%f', 'x'`, `'%j', { a: [1] }`,
  `'%c styled', 'color: red'`, `'100%', 5`, `'%%s', 1`, `'%x', 1`, `'%s', 1n`, `'%d', 1n`, `'%s', -0`, `'%s', Symbol('x')`, `'%s', null`, `'%s', () => 1`,
  `'%o', { a: 1, f() {} }`, `'%O', { a: { b: { c: { d: 1 } } } }`,
  `new Map()`, `new Set()`, `new Map([[{a:1}, [1,2]]])`, `new WeakMap()`, `new WeakSet()`,
  `function foo() {}`, `() => {}`, `async function af() {}`, `function* g() {}`, `async function* ag() {}`, `class A {}`, `class B extends Array {}`,
  `Object.assign(function f() {}, { x: 1 })`, `Object.create(null)`, `Object.assign(Object.create(null), { a: 1 })`,
  `new (class Foo { constructor() { this.a = 1 } })()`, `new (class extends Map {})()`,
  `{ a: { b: { c: { d: { e: 1 } } } } }`, `[[[[[1]]]]]`, `'x'.repeat(200)`, `['x'.repeat(200)]`, `{ s: 'line1\\nline2\\nline3 and a long tail to go past the break length of eighty characters' }`,
  `['it\\'s', 'say "hi"', 'both \\' and "', 'all \\' " \`', 'tab\\there', '\\u0001\\u007f\\u0085', '\\ud800']`,
  `Array.from({ length: 120 }, (_, i) => i)`, `Array.from({ length: 30 }, (_, i) => 'item' + i)`, `Array.from({ length: 8 }, (_, i) => ({ i }))`,
  `[1, , 3]`, `[ , , 1, , ]`, `Object.assign([1, 2], { extra: true })`, `new Array(5)`,
  `new Uint8Array([1, 2, 3])`, `new Float64Array(2)`, `new BigInt64Array(2)`, `new ArrayBuffer(4)`, `new DataView(new ArrayBuffer(2))`,
  `new Date(0)`, `new Date(NaN)`, `/a+b/gi`, `Object.assign(/x/, { y: 1 })`,
  `new Number(3)`, `new String('ab')`, `new Boolean(false)`, `Object(1n)`, `Object(Symbol('b'))`,
  `{ get a() { return 1 }, set b(v) {}, get c() { return 1 }, set c(v) {} }`,
  `Object.defineProperty({}, 'hidden', { value: 1, enumerable: false })`,
  `{ [Symbol.toStringTag]: 'Tagged', a: 1 }`, `new (class Q { get [Symbol.toStringTag]() { return 'Z' } })()`,
  `(() => { const a = [1]; a.push(a); return a })()`, `(() => { const a = {}; const b = { a }; a.b = b; return [a, b] })()`,
  `{ a: 1, b: 'two', c: [3], d: { e: 4 }, f: null, g: undefined, h: true, i: 1.5, j: -1, k: 'a long string value here' }`,
  `Array.from({ length: 7 }, (_, i) => 'x'.repeat(i * 3))`, `Array.from({ length: 10 }, (_, i) => i * 1000)`, `Array.from({ length: 26 }, (_, i) => String.fromCharCode(97 + i))`,
  `new Map(Array.from({ length: 120 }, (_, i) => [i, i]))`, `{ 'key with space': 1, valid_id: 2, $dollar: 3, 'über': 4 }`,
  `{ __proto__: { inherited: 1 }, own: 2 }`, `{ ['__proto__']: 1 }`, `'a\\nb'`, `['a\\nb']`,
  `new TypeError('bad')`, `(() => { const e = new Error('x'); e.code = 'E_X'; return e })()`, `(() => { const e = new RangeError('r'); e.name = 'Custom'; return e })()`,
  `{ err: new Error('nested') }`, `new Error('with cause', { cause: 'because' })`, `(() => { class MyError extends Error {} return new MyError('m') })()`,
  `(function () { return arguments })(1, 2)`, `[function () {}, class {}, Symbol.iterator]`, `{ f: Math.max }`, `Math`, `JSON`, `globalThis.Reflect`,
  `new Proxy({ a: 1 }, {})`, `[new Map([[1, new Set([2])]])]`, `{ m: new Map([[1, { deep: { deeper: 1 } }]]) }`,
  `'%s', { toString() { return 'custom' } }`, `'%s', new (class P { toString() { return 'P!' } })()`, `'%s', new Date(0)`, `'%s', [1, 2]`, `'%s', new Map([[1,2]])`,
  `{ [Symbol.for('nodejs.util.inspect.custom')]() { return 'CUSTOM' } }`, `{ a: { [Symbol.for('nodejs.util.inspect.custom')](d, o) { return { depth: d } } } }`,
  `'text', { a: 1 }, [2], 'more'`, `{ a: 'x'.repeat(100) }`, `[{ a: 1, b: 2 }, { a: 3, b: 4 }]`, `{ arr: Array.from({ length: 10 }, (_, i) => i) }`,
  `Array.from({ length: 101 }, (_, i) => i % 2 ? 'odd' : i)`, `new Set(Array.from({ length: 20 }, (_, i) => i))`, `[1.5, -2, 300, 4e21, 5e-7, 6, 7]`,
];

/** Stack frames name different code in Node and in the sandbox: compared without them. */
// Node lines differ in details the sandbox prints as Node 20 does: Node 24 dropped the
// brackets around symbol keys (`Symbol(k): 1`), Node 22 added them around the accessors it
// shows of buffers and views (`[byteLength]: 4`), Node 26 wraps a Proxy (`Proxy({ a: 1 })`).
// Both texts are compared in Node 20's form.
const withoutFrames = (s: string) =>
  s
    .replace(/\n +at [^\n]*/g, '')
    .replace(/(^|[{,] )Symbol\(([^)]*)\):/g, '$1[Symbol($2)]:')
    .replace(/\[(?!Uint8Contents\])([A-Za-z_$][\w$]*)\]:/g, '$1:')
    .replace(/^Proxy\(([\s\S]*)\)$/, '$1');

function nodeFormat(args: string): string {
  return format(...(new Function(`return [${args}]`)() as unknown[]));
}

/** What Node's own console prints for `calls` (console.table and friends). */
function nodeConsole(calls: (c: Console) => void): string[] {
  let out = '';
  const stream = new Writable({ write: (chunk, _, done) => ((out += chunk), done()) });
  calls(new Console({ stdout: stream, stderr: stream }));
  return out.split('\n').slice(0, -1);
}

describe.each(['thread', 'process'] as const)('console (%s isolation)', (isolation: Isolation) => {
  for (const web of [false, true]) {
    it(`prints what Node prints, ${CASES.length} cases (web: ${web})`, async () => {
      const code = CASES.map((c) => `console.log(${c});`).join('\n');
      const r = await runSandbox(`${code}\n1`, { isolation, web, maxLogEntries: 1000 });
      ok(r);
      expect(r.logs.length).toBe(CASES.length);
      CASES.forEach((c, i) => expect(withoutFrames(r.logs[i].message), c).toBe(withoutFrames(nodeFormat(c))));
    });
  }

  it('console.table, count, group, assert, dir and the levels as Node prints them', async () => {
    const calls = `
      console.table([{ a: 1, b: 'x' }, { a: 22, c: true }]);
      console.table([1, 'two']);
      console.table({ r: { x: 1 }, s: { x: [1, 2, 3, 4], y: { deep: { er: 1 } } } });
      console.table(new Map([['k', 1]]));
      console.table(new Set(['v']));
      console.table([{ a: 1 }], ['a', 'z']);
      console.table('not tabular');
      console.count(); console.count(); console.count('x'); console.countReset(); console.count();
      console.group('outer'); console.log('in\\ntwo lines'); console.group(); console.info({ a: 1 }); console.groupEnd(); console.groupEnd(); console.log('out');
      console.assert(true, 'never'); console.assert(false, 'failed %s', 'here'); console.assert(0);
      console.dir({ a: { b: { c: { d: 1 } } } }, { depth: 0 }); console.dir('str');
      console.debug('d'); console.info('i'); console.warn('w'); console.error('e');`;
    const r = ok(await runSandbox(`${calls}\n1`, { isolation }).then((x) => ({ ...x, output: x })));
    // eslint-disable-next-line no-new-func
    const expected = nodeConsole((console) => new Function('console', calls)(console));
    expect(r.logs.flatMap((l) => l.message.split('\n'))).toEqual(expected);
    expect(r.logs.slice(-4).map((l) => l.level)).toEqual(['debug', 'info', 'warn', 'error']);
    expect(r.logs.find((l) => l.message.startsWith('Assertion failed: failed here'))?.level).toBe('warn');
  });

  it('time, timeLog, timeEnd and trace', async () => {
    const r = ok(
      await runSandbox(
        `console.time(); console.time('t'); console.timeLog('t', 'so far', { n: 1 }); console.timeEnd('t'); console.timeEnd('t'); console.timeEnd(); console.time('t'); console.time('t');
         function where() { console.trace('here %d', 1) } where(); 1`,
        { isolation },
      ).then((x) => ({ ...x, output: x })),
    );
    const lines = r.logs.map((l) => [l.level, l.message]);
    expect(lines[0]).toEqual(['log', expect.stringMatching(/^t: \d+(\.\d+)?ms so far { n: 1 }$/)]);
    expect(lines[1]).toEqual(['log', expect.stringMatching(/^t: \d+(\.\d+)?ms$/)]);
    expect(lines[2]).toEqual(['warn', "Warning: No such label 't' for console.timeEnd()"]);
    expect(lines[3]).toEqual(['log', expect.stringMatching(/^default: \d+(\.\d+)?ms$/)]);
    expect(lines[4]).toEqual(['warn', "Warning: Label 't' already exists for console.time()"]);
    expect(lines[5][0]).toBe('error');
    expect(lines[5][1]).toMatch(/^Trace: here 1\n {4}at where \(sandbox\.js:2:/);
  });

  it('formats within the log: a line past maxLogBytes is cut, one argument at 16 KiB, 60,000 arguments in no time', async () => {
    const small = await runSandbox('console.log({ list: Array.from({ length: 50 }, (_, i) => "item" + i) }); console.log("next"); 1', { isolation, maxLogBytes: 100 });
    ok(small);
    expect(small.logs[0].message).toMatch(/^\{\n {2}list: \[\n[\s\S]*… \[truncated\]$/);
    expect(Buffer.byteLength(small.logs[0].message.replace('… [truncated]', ''))).toBe(100);
    expect(small.logs[1].message).toBe('[isolet] 1 console entries dropped (log limit reached)');
    const value = ok(await runSandbox('console.log("é".repeat(30000)); console.log({ s: "é".repeat(30000) }); 1', { isolation }).then((x) => ({ ...x, output: x })));
    expect(value.logs.map((l) => Buffer.byteLength(l.message))).toEqual([16384, 16384]);
    const many = await runSandbox('const a = Array(60000).fill("x".repeat(1000)); console.log(...a); console.log(...a.map((s) => ({ s }))); 1', { isolation, timeoutMs: 30_000 });
    ok(many);
    expect(many.logs.map((l) => l.message.length)).toEqual([1024 * 1024 + '… [truncated]'.length, '[isolet] 1 console entries dropped (log limit reached)'.length]);
    expect(many.stats.cpuTimeMs).toBeLessThan(2000);
  });

  it('huge, deep and circular values are formatted to what the log keeps, in bounded time', async () => {
    const r = await runSandbox(
      `const big = new Array(1e6).fill(0).map((_, i) => ({ i }));
       const ring = { name: 'ring' }; ring.self = ring; ring.list = [ring, { ring }];
       let deep = {}; const top = deep; for (let i = 0; i < 100000; i++) { deep.next = {}; deep = deep.next; }
       const t = Date.now();
       console.log(big); console.log(ring); console.dir(top, { depth: null }); console.log('%o', top);
       Date.now() - t`,
      { isolation, memoryLimitMb: 512, timeoutMs: 20_000 },
    );
    expect(ok(r)).toBeLessThan(3000);
    const [big, ring, deep, hidden] = r.logs.map((l) => l.message);
    expect(big).toMatch(/^\[\n {2}\{ i: 0 \},[\s\S]*\.\.\. 999900 more items\n\]$/);
    expect(ring).toBe("<ref *1> {\n  name: 'ring',\n  self: [Circular *1],\n  list: [ [Circular *1], { ring: [Circular *1] } ]\n}");
    expect(Buffer.byteLength(deep)).toBeLessThanOrEqual(16384);
    expect(deep).toMatch(/^\{\n {2}next: \{\n {4}next: \{/);
    expect(Buffer.byteLength(hidden)).toBeLessThanOrEqual(16384);
  });

  it('runs no code of an argument the log has no room for, and never a getter', async () => {
    const r = await runSandbox(
      `let inspected = 0, stringified = 0;
       const counted = { [Symbol.for('nodejs.util.inspect.custom')]() { inspected++; return 'x' }, toString() { stringified++; return 'x' } };
       console.log({ get secret() { throw new Error('a getter ran') } });
       console.log('y'.repeat(200)); // fills the log
       console.log(counted, counted); console.log('%s %o', counted, counted); console.table([counted]); console.dir(counted);
       [inspected, stringified]`,
      { isolation, maxLogBytes: 150 },
    );
    expect(ok(r)).toEqual([0, 0]);
    expect(r.logs[0].message).toBe('{ secret: [Getter] }');
  });
});

describe('differences from Node', () => {
  it('a Proxy is inspected through its traps and a Promise state is not known', async () => {
    const r = ok(await runSandbox("console.log(new Proxy({ a: 1 }, {})); console.log(Promise.resolve(1)); 1", { isolation: 'thread' }).then((x) => ({ ...x, output: x })));
    expect(r.logs.map((l) => l.message)).toEqual(['{ a: 1 }', 'Promise { <state unknown> }']);
  });
});
