// The C++ seam: what it writes into the sandbox is defined, never assigned (so setters
// and `__proto__` the sandbox controls see nothing); thrown values are named truthfully;
// WebAssembly modules are compiled exactly once per process.
import { createRequire } from 'node:module';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  runSandbox,
  SandboxEngine,
  SandboxRuntimeError,
  SandboxValidationError,
  DEFAULT_ISOLATE_LIMITS,
  DEFAULT_BRIDGE_LIMITS,
  type SandboxEngineConfig,
  type SandboxResult,
  type SandboxSession,
} from '..';
import { ok } from './support/results';

const native = createRequire(__filename)(path.join(__dirname, '..', 'lib', 'native')) as { wasmCompilations(): number };

function thrownOf(r: SandboxResult<unknown>) {
  if (r.success) throw new Error('expected a failure');
  expect(r.error).toBeInstanceOf(SandboxRuntimeError);
  return (r.error as SandboxRuntimeError).thrown!;
}

const engines: SandboxEngine[] = [];
afterEach(async () => {
  while (engines.length) await engines.pop()!.shutdown();
  expect(Object.getOwnPropertyNames(Object.prototype)).not.toContain('polluted');
});

function newEngine(config: Partial<SandboxEngineConfig> = {}) {
  const engine = new SandboxEngine({
    isolation: 'thread',
    memoryMb: 64,
    maxConcurrentIsolates: 2,
    warmPoolSize: 0,
    wasmModules: [],
    defaultIsolateLimits: DEFAULT_ISOLATE_LIMITS,
    defaultBridgeLimits: DEFAULT_BRIDGE_LIMITS,
    ...config,
  });
  engines.push(engine);
  return engine;
}

async function result(session: SandboxSession) {
  const end = await session.done;
  if (end.type !== 'result') throw new Error(`expected a result, got ${JSON.stringify(end)}`);
  return end.data;
}

describe('setters the sandbox defines see nothing the seam writes', () => {
  it('Array.prototype and Object.prototype setters do not see host-call arguments or replies', async () => {
    const seenByHost: unknown[] = [];
    const out = ok(
      await runSandbox(
        `const seen = [];
        for (let i = 0; i < 4; i++) {
          Object.defineProperty(Array.prototype, i, { set(v) { seen.push(['Array.prototype[' + i + ']', v]) }, configurable: true });
        }
        for (const key of ['0', 'a', 'list', 'name', 'message']) {
          Object.defineProperty(Object.prototype, key, { set(v) { seen.push(['Object.prototype.' + key, v]) }, configurable: true });
        }
        const reply = await echo('secret-arg', { a: 1 }, [2, 3]);
        let rejected;
        try { await fail() } catch (e) { rejected = [e.name, e.message, e instanceof TypeError] }
        return { seen, reply, rejected };`,
        {
          capabilities: {
            echo: (...args: unknown[]) => {
              seenByHost.push(...args);
              return { value: 'reply', list: ['r0', 'r1'], name: 'n' };
            },
            fail: () => {
              throw new TypeError('host says no');
            },
          },
        },
      ),
    );
    expect(seenByHost).toEqual(['secret-arg', { a: 1 }, [2, 3]]);
    expect(out).toEqual({
      seen: [],
      reply: { value: 'reply', list: ['r0', 'r1'], name: 'n' },
      rejected: ['TypeError', 'host says no', true],
    });
  });

  it('an Error.prototype.name setter does not see the name of a rejected host call', async () => {
    const out = ok(
      await runSandbox(
        `let seen = null;
        Object.defineProperty(Error.prototype, 'name', { set(v) { seen = v }, get() { return 'Error' }, configurable: true });
        try { await fail() } catch (e) { return [seen, Object.getOwnPropertyDescriptor(e, 'name')?.value, e.message] }`,
        {
          capabilities: {
            fail: () => {
              const e = new Error('custom failure');
              e.name = 'QuotaError';
              throw e;
            },
          },
        },
      ),
    );
    expect(out).toEqual([null, 'QuotaError', 'custom failure']);
  });

  it('a capability named __proto__ is an own global, and the global keeps its prototype', async () => {
    const out = ok(
      await runSandbox(
        `const own = Object.getOwnPropertyDescriptor(globalThis, '__proto__');
        return [typeof own?.value, await own.value(), Object.getPrototypeOf(globalThis) === Object.getPrototypeOf(Object.create(globalThis)) ? 'changed' : 'kept',
                typeof Object.getPrototypeOf(globalThis), Object.getPrototypeOf(globalThis) === Function.prototype];`,
        { capabilities: { ['__proto__']: () => 'called' } },
      ),
    );
    expect(out).toEqual(['function', 'called', 'kept', 'object', false]);
  });

  it.each(['thread', 'process'] as const)('a data key named __proto__ is a value like any other and changes no prototype (%s)', async (isolation) => {
    const engine = newEngine({ isolation, processes: 1 } as Partial<SandboxEngineConfig>);
    await engine.init();
    const data = JSON.parse('{"__proto__": {"polluted": true}, "plain": 1}');
    const out = await result(
      engine.submit({
        requestId: 'proto-data',
        code: `return [data.__proto__, data.plain, Object.getPrototypeOf(data), ({}).polluted, data.__proto__ === Object.prototype];`,
        data,
      }),
    );
    expect(out).toEqual([{ polluted: true }, 1, null, undefined, false]);
  });
});

describe('the data object', () => {
  it('is never a thenable: awaiting it asks the host for nothing', async () => {
    const engine = newEngine();
    await engine.init();
    const session = engine.submit({ requestId: 'await-data', code: 'const d = await data; return [d === data, typeof data.then, data.answer];' });
    const asked: string[] = [];
    for await (const event of session) {
      if (event.type === 'dataRequest') {
        asked.push(event.key);
        session.respond(event.id, 42);
      }
      if (event.type === 'result') expect(event.data).toEqual([true, 'undefined', 42]);
    }
    expect(asked).toEqual(['answer']);
  });
});

describe('the name of a thrown value', () => {
  it('is the constructor name when the value has no string name', async () => {
    const t = thrownOf(await runSandbox('function Test262Error(message) { this.message = message } throw new Test262Error("failed")'));
    expect([t.name, t.message]).toEqual(['Test262Error', 'failed']);
    const c = thrownOf(await runSandbox('class Oops { constructor() { this.message = "m" } } throw new Oops()'));
    expect([c.name, c.message]).toEqual(['Oops', 'm']);
  });

  it('is a string name, own or inherited, and Error only for values that say so', async () => {
    expect(thrownOf(await runSandbox('throw { name: "Custom", message: "x" }')).name).toBe('Custom');
    expect(thrownOf(await runSandbox('class E2 extends Error {} throw new E2("y")')).name).toBe('Error');
    expect(thrownOf(await runSandbox('class E3 extends Error { get name() { return "E3" } } throw new E3("y")')).name).toBe('E3');
    expect(thrownOf(await runSandbox('throw new RangeError("r")')).name).toBe('RangeError');
    // A non-string name does not count: the constructor names it.
    expect(thrownOf(await runSandbox('class Q { constructor() { this.name = 7 } } throw new Q()')).name).toBe('Q');
  });

  it('of a primitive is its type, never a misleading Error', async () => {
    const cases: Array<[string, string, string]> = [
      ['throw 5', 'Number', '5'],
      ['throw "text"', 'String', 'text'],
      ['throw true', 'Boolean', 'true'],
      ['throw 10n', 'BigInt', '10'],
      ['throw Symbol("s")', 'Symbol', 's'],
      ['throw null', 'null', 'null'],
      ['throw undefined', 'undefined', 'undefined'],
      ['throw Object.create(null)', 'Object', ''],
      ['throw { toString() { return "custom" } }', 'Object', 'custom'],
    ];
    for (const [code, name, message] of cases) {
      const t = thrownOf(await runSandbox(code));
      expect([code, t.name, t.message]).toEqual([code, name, message]);
    }
  });

  it('is found the same way for a rejected promise and in an engine', async () => {
    expect(thrownOf(await runSandbox('Promise.reject(7)')).name).toBe('Number');
    const engine = newEngine();
    await engine.init();
    const end = await engine.submit({ requestId: 't', code: 'function Test262Error() {} throw new Test262Error()' }).done;
    expect(end.type).toBe('error');
    expect(end.type === 'error' && (end.error as SandboxRuntimeError).thrown?.name).toBe('Test262Error');
  });
});

// (i32, i32) -> i32 add, exported as "add".
const ADD_WASM = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x07, 0x01, 0x60, 0x02, 0x7f, 0x7f, 0x01, 0x7f, 0x03, 0x02,
  0x01, 0x00, 0x07, 0x07, 0x01, 0x03, 0x61, 0x64, 0x64, 0x00, 0x00, 0x0a, 0x09, 0x01, 0x07, 0x00, 0x20, 0x00, 0x20,
  0x01, 0x6a, 0x0b,
]);
// () -> i32 returning 42, exported as "f".
const F42_WASM = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7f, 0x03, 0x02, 0x01, 0x00,
  0x07, 0x05, 0x01, 0x01, 0x66, 0x00, 0x00, 0x0a, 0x06, 0x01, 0x04, 0x00, 0x41, 0x2a, 0x0b,
]);
// Well-formed sections (so the Rust checks pass) whose function body does not type-check:
// `i32.add` with an empty stack. Only V8's compile finds it.
const BAD_BODY_WASM = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7f, 0x03, 0x02, 0x01, 0x00,
  0x0a, 0x05, 0x01, 0x03, 0x00, 0x6a, 0x0b,
]);

describe('WebAssembly modules are compiled exactly once', () => {
  it('N isolates and M runs make one compilation per module, none on the first run', async () => {
    const before = native.wasmCompilations();
    const engine = newEngine({
      maxConcurrentIsolates: 3,
      warmPoolSize: 2,
      wasmModules: [
        { name: 'math', source: ADD_WASM },
        { name: 'answer', source: F42_WASM },
      ],
    });
    await engine.init();
    expect(native.wasmCompilations() - before).toBe(2);
    const runs = Array.from({ length: 9 }, (_, i) =>
      result(engine.submit({ requestId: `w${i}`, code: `return [wasm.math.add(${i}, 1), wasm.answer.f(), typeof WebAssembly];` })),
    );
    const outs = await Promise.all(runs);
    expect(outs).toEqual(Array.from({ length: 9 }, (_, i) => [i + 1, 42, 'undefined']));
    expect(engine.stats().warmStarts + engine.stats().coldStarts).toBeGreaterThanOrEqual(9);
    expect(native.wasmCompilations() - before).toBe(2);
  });

  it('a module only V8 can find invalid rejects init() with SandboxValidationError naming it', async () => {
    const before = native.wasmCompilations();
    const engine = newEngine({ wasmModules: [{ name: 'good', source: F42_WASM }, { name: 'broken', source: BAD_BODY_WASM }] });
    const err = await engine.init().then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(SandboxValidationError);
    expect((err as Error).message).toMatch(/^wasm module "broken" is invalid: /);
    expect(native.wasmCompilations() - before).toBe(2);
  });

  it('a module with imports is refused before anything compiles', async () => {
    // (import "env" "log" (func)) and nothing else.
    const imports = new Uint8Array([
      0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x04, 0x01, 0x60, 0x00, 0x00, 0x02, 0x0b, 0x01, 0x03, 0x65,
      0x6e, 0x76, 0x03, 0x6c, 0x6f, 0x67, 0x00, 0x00,
    ]);
    const before = native.wasmCompilations();
    const engine = newEngine({ wasmModules: [{ name: 'imp', source: imports }] });
    const err = await engine.init().then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(SandboxValidationError);
    expect((err as Error).message).toBe(
      'wasm module "imp" is invalid: it imports "env.log"; modules with imports are not supported (a sandbox has nothing to import)',
    );
    expect(native.wasmCompilations()).toBe(before);
  });

  it('process isolation: the child compiles, and a module it finds invalid still rejects init()', async () => {
    const before = native.wasmCompilations();
    const good = newEngine({ isolation: 'process', processes: 1, wasmModules: [{ name: 'answer', source: F42_WASM }] } as Partial<SandboxEngineConfig>);
    await good.init();
    const outs = await Promise.all([1, 2, 3].map((i) => result(good.submit({ requestId: `p${i}`, code: 'return wasm.answer.f()' }))));
    expect(outs).toEqual([42, 42, 42]);
    // Nothing was compiled in this (the parent) process.
    expect(native.wasmCompilations()).toBe(before);

    const bad = newEngine({ isolation: 'process', processes: 1, wasmModules: [{ name: 'broken', source: BAD_BODY_WASM }] } as Partial<SandboxEngineConfig>);
    const err = await bad.init().then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(SandboxValidationError);
    expect((err as Error).message).toMatch(/^wasm module "broken" is invalid: /);
    expect(native.wasmCompilations()).toBe(before);
  });
});
