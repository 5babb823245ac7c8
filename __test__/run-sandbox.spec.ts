// runSandbox: the drop-in contract of @azmr/ai (see shared/DESIGN.md, "Contract").
import { describe, expect, it } from 'vitest';
import {
  runSandbox,
  SandboxError,
  SandboxRuntimeError,
  SandboxValidationError,
  SandboxAbortedError,
  SandboxTimeoutError,
} from '..';
import { ok, failed } from './support/results';

describe('runSandbox: the seed example and result shape', () => {
  it('runs the seed example and prints 15', async () => {
    const result = await runSandbox(`
  const nums = [1, 2, 3, 4, 5];
  nums.reduce((a, b) => a + b, 0);
`);
    expect(result.success).toBe(true);
    if (result.success) expect(result.output).toBe(15);
  });

  it('reports stats and logs with every result', async () => {
    const r = await runSandbox('console.log("a", 1, { b: 2 }); console.warn("w"); 42');
    expect(ok(r)).toBe(42);
    expect(r.stats.wallTimeMs).toBeGreaterThan(0);
    expect(r.stats.cpuTimeMs).toBeGreaterThan(0);
    expect(r.stats.heapUsedBytes).toBeGreaterThan(100_000);
    expect(r.logs).toEqual([
      { level: 'log', message: 'a 1 { b: 2 }' },
      { level: 'warn', message: 'w' },
    ]);
  });

  it('captures every console level and bounds the log', async () => {
    const r = await runSandbox('for (const l of ["log","info","warn","error","debug"]) console[l](l); 0');
    expect(r.logs.map((l) => l.level)).toEqual(['log', 'info', 'warn', 'error', 'debug']);
    const flood = await runSandbox('for (let i = 0; i < 100000; i++) console.log("x".repeat(100)); 1', { maxLogEntries: 50 });
    expect(ok(flood)).toBe(1);
    expect(flood.logs.length).toBe(51);
    expect(flood.logs[50].message).toMatch(/99950 console entries dropped/);
    const big = await runSandbox('console.log("y".repeat(5_000_000)); 1');
    expect(big.logs[0].message.length).toBeLessThanOrEqual(1024 * 1024 + 20);
  });

  it('uses completion-value semantics and awaits a Promise completion value', async () => {
    expect(ok(await runSandbox('let x = 2; x * 21'))).toBe(42);
    expect(ok(await runSandbox('Promise.resolve(7)'))).toBe(7);
    expect(ok(await runSandbox('(async () => { await null; return "later"; })()'))).toBe('later');
    expect(ok(await runSandbox('var a = 1;'))).toBeUndefined();
  });

  it('copies structured data out: dates, maps, typed arrays, nested objects', async () => {
    const out = ok(
      await runSandbox(
        '({ d: new Date(0), m: new Map([[1, "a"]]), s: new Set([2]), u: new Uint8Array([1, 2, 3]), n: { deep: [1, { x: null }] }, big: 10n, re: /ab+c/gi })',
      ),
    ) as any;
    expect(out.d).toBeInstanceOf(Date);
    expect(out.d.getTime()).toBe(0);
    expect(out.m.get(1)).toBe('a');
    expect(out.s.has(2)).toBe(true);
    expect(Array.from(out.u)).toEqual([1, 2, 3]);
    expect(out.n).toEqual({ deep: [1, { x: null }] });
    expect(out.big).toBe(10n);
    expect(out.re).toBeInstanceOf(RegExp);
  });
});

describe('runSandbox: results that are one primitive', () => {
  // The addon makes these itself (isolet-core `primitive`); each must be what V8's own
  // deserializer makes, in both isolation modes, at every edge of that reader.
  const cases: [string, unknown][] = [
    ['0', 0],
    ['-0', -0],
    ['1.5', 1.5],
    ['NaN', NaN],
    ['-Infinity', -Infinity],
    ['2147483647', 2147483647],
    ['-2147483648', -2147483648],
    ['2147483648', 2147483648],
    ['true', true],
    ['false', false],
    ['null', null],
    ['undefined', undefined],
    ["''", ''],
    ["'caf\\u00e9'", 'caf\u00e9'],
    ["'x'.repeat(256)", 'x'.repeat(256)],
    ["'x'.repeat(257)", 'x'.repeat(257)],
    ["'\\u20ac'", '\u20ac'],
    ['12345678901234567890n', 12345678901234567890n],
  ];
  for (const isolation of ['process', 'thread'] as const) {
    it(`${isolation} mode: each comes out as itself`, async () => {
      for (const [code, expected] of cases) {
        const out = ok(await runSandbox(code, { isolation }));
        expect(Object.is(out, expected), `${code} gave ${String(out)}`).toBe(true);
      }
    });
  }
});

describe('runSandbox: errors', () => {
  it('turns a thrown error into SandboxRuntimeError with name, message and sandbox stack', async () => {
    const err = failed(await runSandbox('function f() { throw new TypeError("boom"); }\nf();'));
    expect(err).toBeInstanceOf(SandboxRuntimeError);
    expect(err).toBeInstanceOf(SandboxError);
    expect(err).toBeInstanceOf(Error);
    expect(err.name).toBe('SandboxRuntimeError');
    expect(err.message).toBe('TypeError: boom');
    const thrown = (err as SandboxRuntimeError).thrown!;
    expect(thrown.name).toBe('TypeError');
    expect(thrown.message).toBe('boom');
    expect(thrown.stack).toMatch(/at f \(sandbox\.js:1:\d+\)/);
    expect(err.stack).not.toMatch(/node_modules|\/work\/|internal\//);
  });

  it('handles thrown non-errors and rejected promises', async () => {
    // Named by type or constructor, never a misleading `Error` (see seam.spec.ts).
    expect(failed(await runSandbox('throw 42')).message).toBe('Number: 42');
    expect(failed(await runSandbox('throw { toString() { return "custom" } }')).message).toBe('Object: custom');
    const rejected = failed(await runSandbox('Promise.reject(new RangeError("nope"))'));
    expect(rejected).toBeInstanceOf(SandboxRuntimeError);
    expect(rejected.message).toBe('RangeError: nope');
  });

  it('a throwing getter on the thrown object cannot break error reporting', async () => {
    const err = failed(await runSandbox('throw { get name() { throw 1 }, get message() { throw 2 } }'));
    expect(err).toBeInstanceOf(SandboxRuntimeError);
  });

  it('reports syntax errors as SandboxValidationError with line and column', async () => {
    const err = failed(await runSandbox('const a = 1;\nconst b = ;')) as SandboxValidationError;
    expect(err).toBeInstanceOf(SandboxValidationError);
    expect(err.name).toBe('SandboxValidationError');
    expect(err.line).toBe(2);
    expect(err.column).toBe(11);
    expect(err.message).toMatch(/SyntaxError: Unexpected token ';'/);
  });

  it('reports syntax errors in capability mode at the user code position', async () => {
    const err = failed(await runSandbox('const x = 1;\nreturn x +;', { capabilities: { f: () => 1 } })) as SandboxValidationError;
    expect(err).toBeInstanceOf(SandboxValidationError);
    expect(err.line).toBe(2);
  });

  it('rejects invalid input with SandboxValidationError and never rejects the promise', async () => {
    for (const [code, opts] of [
      [42, undefined],
      [null, undefined],
      ['1', 'nope'],
      ['1', { timeoutMs: -1 }],
      ['1', { timeoutMs: 1.5 }],
      ['1', { memoryLimitMb: 'big' }],
      ['1', { memoryLimitMb: 1 }],
      ['1', { capabilities: { x: 1 } }],
      ['1', { capabilities: { Object: () => 1 } }],
      ['1', { capabilities: { 'not-an-identifier': () => 1 } }],
      ['1', { signal: {} }],
    ] as const) {
      const r = await runSandbox(code as any, opts as any);
      expect(r.success, JSON.stringify([code, opts])).toBe(false);
      expect(failed(r)).toBeInstanceOf(SandboxValidationError);
    }
  });

  it('refuses results that cannot be cloned, naming the path of the first bad value', async () => {
    const fn = failed(await runSandbox('(() => 1)'));
    expect(fn).toBeInstanceOf(SandboxRuntimeError);
    expect(fn.message).toBe(
      'DataCloneError: the result cannot be copied out of the sandbox: result: function (only data crosses: no functions, symbols, promises or proxies)',
    );
    const pathOf = async (code: string) => {
      const error = failed(await runSandbox(code));
      if (!(error instanceof SandboxRuntimeError)) throw new Error(`expected a SandboxRuntimeError, got ${error.name}: ${error.message}`);
      expect(error.thrown?.name).toBe('DataCloneError');
      return /sandbox: (.*) \(only data crosses/.exec(error.message)?.[1];
    };
    expect(await pathOf('Symbol("s")')).toBe('result: symbol');
    expect(await pathOf('new Proxy({}, {})')).toBe('result: Proxy');
    expect(await pathOf('({ f() {} })')).toBe('result.f: function');
    expect(await pathOf('({ items: [1, { ok: 1 }, { p: Promise.resolve() }] })')).toBe('result.items[2].p: Promise');
    expect(await pathOf('({ "a b": new WeakMap(), c: 1 })')).toBe('result["a b"]: WeakMap');
    expect(await pathOf('new Map([["k", 1], [2, () => 0]])')).toBe('result.get(2): function');
    expect(await pathOf('new Map([[{}, 1], [Symbol("k"), 2]])')).toBe('result[Map entry 1].key: symbol');
    expect(await pathOf('new Set([1, (function* () {})()])')).toBe('result[Set entry 1]: generator');
    expect(await pathOf('const o = { self: null, later: [() => 1] }; o.self = o; o')).toBe('result.later[0]: function');
    // A getter that throws while the result is copied is what it threw, not a path.
    const getter = failed(await runSandbox('({ get boom() { throw new RangeError("no") } })'));
    expect(getter.message).toBe('RangeError: no');
  });

  it('names the path in the run, under its limits: changed built-ins and huge results only change its own message', async () => {
    const messageOf = async (code: string, opts = {}) => failed(await runSandbox(code, opts)).message;
    // A long key is cut at 60 characters, never inside one.
    expect(await messageOf('({ ["é".repeat(70)]: () => 1 })')).toContain(`result["${'é'.repeat(60)}…"]: function`);
    // The walk uses the run's own built-ins: replaced, they cost the path, not the host.
    expect(await messageOf('Object.keys = () => { throw new Error("x") }; ({ f() {} })')).toBe('Error: f() {} could not be cloned.');
    const endless = failed(await runSandbox('Object.keys = () => { while (true); }; ({ f() {} })', { timeoutMs: 500 }));
    expect(endless).toBeInstanceOf(SandboxTimeoutError);
    // Past 100,000 values the walk gives up, and V8's own message stands.
    expect(await messageOf('const a = []; for (let i = 0; i < 200000; i++) a.push(i); a.push(() => 1); a')).toBe('Error: () => 1 could not be cloned.');
    expect(ok(await runSandbox('[1, 2, 3].map((x) => x * 2)'))).toEqual([2, 4, 6]);
  });

  it('caps the output size instead of exhausting host memory', async () => {
    const err = failed(await runSandbox('"x".repeat(20 * 1024 * 1024)', { memoryLimitMb: 256 }));
    expect(err).toBeInstanceOf(SandboxRuntimeError);
    expect(err.message).toMatch(/output limit/);
    const small = failed(await runSandbox('"x".repeat(2000)', { maxOutputBytes: 1000 }));
    expect(small.message).toMatch(/output limit of 1000 bytes/);
    const fits = ok(await runSandbox('"x".repeat(8 * 1024 * 1024)'));
    expect((fits as string).length).toBe(8 * 1024 * 1024);
  });
});

describe('runSandbox: isolation', () => {
  it('exposes only ECMAScript built-ins', async () => {
    const names = ok(await runSandbox('Object.getOwnPropertyNames(globalThis).sort()')) as string[];
    for (const forbidden of ['require', 'process', 'Buffer', 'fetch', 'setTimeout', 'setInterval', 'queueMicrotask', 'module', 'global', '__dirname', 'XMLHttpRequest', 'WebSocket']) {
      expect(names).not.toContain(forbidden);
    }
    expect(names).toContain('Object');
    expect(names).toContain('console');
    const types = ok(await runSandbox('[typeof require, typeof process, typeof Buffer, typeof fetch, typeof setTimeout]'));
    expect(types).toEqual(['undefined', 'undefined', 'undefined', 'undefined', 'undefined']);
  });

  it('has no require/process/timers even through constructor chains', async () => {
    const r = ok(await runSandbox(`
      const F = (function () {}).constructor;
      const g = F('return this')();
      [typeof g.process, typeof g.require, F('return typeof process')(), g === globalThis]
    `));
    expect(r).toEqual(['undefined', 'undefined', 'undefined', true]);
  });

  it('shares no state between runs: globals and built-in prototypes start fresh', async () => {
    expect(ok(await runSandbox('globalThis.leak = 1; Array.prototype.evil = () => "pwned"; Object.prototype.polluted = true; 1'))).toBe(1);
    expect(ok(await runSandbox('[typeof leak, typeof [].evil, ({}).polluted]'))).toEqual(['undefined', 'undefined', undefined]);
    expect(({} as any).polluted).toBeUndefined();
    expect((Array.prototype as any).evil).toBeUndefined();
  });

  it('keeps host prototypes untouched by __proto__ and constructor keys in the output', async () => {
    const out = ok(
      await runSandbox('JSON.parse(\'{"__proto__": {"polluted": "yes"}, "constructor": {"prototype": {"bad": 1}}}\')'),
    ) as any;
    expect(({} as any).polluted).toBeUndefined();
    expect((Object.prototype as any).bad).toBeUndefined();
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(Object.hasOwn(out, '__proto__')).toBe(true);
    // An own data property named __proto__, not the prototype setter.
    // biome-ignore lint/suspicious/noProto: the own property named __proto__ is the point
    expect(out.__proto__).toEqual({ polluted: 'yes' });
    expect(out.polluted).toBeUndefined();
  });

  it('delivers getters in the output as plain data, never as functions', async () => {
    const out = ok(await runSandbox('let n = 0; ({ get value() { n++; return "computed" + n; }, nested: { get x() { return 5; } } })')) as any;
    const desc = Object.getOwnPropertyDescriptor(out, 'value')!;
    expect(desc.get).toBeUndefined();
    expect(desc.value).toBe('computed1');
    expect(out.nested.x).toBe(5);
    expect(typeof Object.getOwnPropertyDescriptor(out.nested, 'x')!.value).toBe('number');
  });

  it('copies errors in the output as host-side plain errors', async () => {
    const out = ok(await runSandbox('new TypeError("as value")')) as any;
    expect(out).toBeInstanceOf(TypeError);
    expect(out.message).toBe('as value');
  });
});

describe('runSandbox: concurrency and the event loop', () => {
  it('runs 32 sandboxes in parallel, each with its own heap', async () => {
    const runs = Array.from({ length: 32 }, (_, i) =>
      runSandbox(`globalThis.mine = ${i}; let s = 0; for (let k = 0; k < 100000; k++) s += k % 7; [mine, s]`),
    );
    let expected = 0;
    for (let k = 0; k < 100000; k++) expected += k % 7;
    const results = await Promise.all(runs);
    results.forEach((r, i) => expect(ok(r)).toEqual([i, expected]));
  });

  it('does not block the host event loop while a sandbox computes', async () => {
    let ticks = 0;
    const timer = setInterval(() => ticks++, 10);
    const r = await runSandbox('const end = Date.now() + 400; while (Date.now() < end) {} "done"');
    clearInterval(timer);
    expect(ok(r)).toBe('done');
    expect(ticks).toBeGreaterThanOrEqual(10);
  });

  it('aborts a running sandbox with SandboxAbortedError', async () => {
    const controller = new AbortController();
    const started = Date.now();
    setTimeout(() => controller.abort(), 50);
    const r = await runSandbox('while (true) {}', { signal: controller.signal, timeoutMs: 10_000 });
    expect(failed(r)).toBeInstanceOf(SandboxAbortedError);
    expect(failed(r).name).toBe('SandboxAbortedError');
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('returns SandboxAbortedError at once for an already-aborted signal', async () => {
    const r = await runSandbox('1', { signal: AbortSignal.abort() });
    expect(failed(r)).toBeInstanceOf(SandboxAbortedError);
  });

  it('aborts while waiting on a host call', async () => {
    const controller = new AbortController();
    const r = runSandbox('await never(); return 1', {
      capabilities: { never: () => new Promise(() => {}) },
      signal: controller.signal,
      timeoutMs: 10_000,
    });
    setTimeout(() => controller.abort(), 50);
    expect(failed(await r)).toBeInstanceOf(SandboxAbortedError);
  });

  it('a timed-out run reports SandboxTimeoutError with the wall limit', async () => {
    const err = failed(await runSandbox('for(;;);', { timeoutMs: 50 })) as SandboxTimeoutError;
    expect(err).toBeInstanceOf(SandboxTimeoutError);
    expect(err.limit).toBe('wall');
    expect(err.code).toBe('ERR_ISOLET_TIMEOUT');
  });
});
