// Issue 18, item 6: options whose reads throw (a getter, a Proxy trap, a revoked Proxy)
// are bad options like any other: a SandboxValidationError that names the option, from
// runSandbox as `{ success: false, error }` (never a rejection), from `new SandboxEngine`
// as a throw, and from `engine.submit()` as a session whose `done` is a typed error event
// (submit itself never throws). Before, they were ERR_ISOLET_INTERNAL, a rejection of
// runSandbox, or a synchronous throw of submit.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runSandbox, SandboxEngine, SandboxAbortedError, SandboxValidationError, type SandboxResult } from '..';

const boom = () => {
  throw new Error('boom');
};
/** An object whose `key` getter throws. */
const throwing = (key: string, extra: object = {}) => Object.defineProperty({ ...extra }, key, { get: boom, enumerable: true });
/** A Proxy whose every trap throws. */
const hostileProxy = () => new Proxy({}, { get: boom, ownKeys: boom, getOwnPropertyDescriptor: boom, getPrototypeOf: boom, has: boom });
const revoked = () => {
  const { proxy, revoke } = Proxy.revocable({}, {});
  revoke();
  return proxy;
};

/** runSandbox must resolve (the test fails on a rejection) with a validation error. */
async function invalid(code: unknown, options: unknown): Promise<SandboxValidationError> {
  const r = (await runSandbox(code as string, options as never)) as SandboxResult;
  expect(r.success).toBe(false);
  if (r.success) throw new Error('unreachable');
  expect(r.error).toBeInstanceOf(SandboxValidationError);
  expect(r.error.code).toBe('ERR_ISOLET_VALIDATION');
  return r.error as SandboxValidationError;
}

describe('runSandbox: an option that cannot be read', () => {
  it.each([
    ['a throwing getter', () => throwing('timeoutMs'), /^timeoutMs could not be read: reading it threw Error: boom$/],
    ['a Proxy whose traps throw', hostileProxy, /^runSandbox options could not be read: reading it threw Error: boom$/],
    ['a Proxy whose get trap throws', () => new Proxy({ timeoutMs: 100 }, { get: boom }), /^timeoutMs could not be read/],
    ['a revoked Proxy', revoked, /^runSandbox options could not be read: reading it threw TypeError: /],
    ['a getter that throws a value whose own getters throw', () => Object.defineProperty({}, 'memoryLimitMb', {
      enumerable: true,
      get() {
        throw Object.defineProperty({}, 'message', { get: boom });
      },
    }), /^memoryLimitMb could not be read: reading it threw an object$/],
    ['a throwing getter under an unknown name', () => throwing('timeout'), /^timeout could not be read/],
  ])('%s is a validation error naming it', async (_, options, message) => {
    expect((await invalid('1', options())).message).toMatch(message);
  });

  it.each([
    ['a throwing capabilities getter', () => throwing('capabilities'), /^capabilities could not be read/],
    ['capabilities as a Proxy whose traps throw', () => ({ capabilities: hostileProxy() }), /^capabilities could not be read/],
    ['a capability behind a throwing getter', () => ({ capabilities: throwing('fetchIt') }), /^capabilities\.fetchIt could not be read/],
    ['a namespace member behind a throwing getter', () => ({ capabilities: { gh: throwing('list') } }), /^capabilities\.gh\.list could not be read/],
    ['a described tool whose execute getter throws', () => ({ capabilities: { t: throwing('execute', { description: 'd' }) } }), /^capabilities\.t\.execute could not be read/],
    ['a lazy input schema that throws', () => ({ capabilities: { t: { description: 'd', inputSchema: boom, execute: () => 1 } } }), /^capabilities\.t\.inputSchema could not be read: calling it threw Error: boom$/],
  ])('%s is a validation error naming it', async (_, options, message) => {
    expect((await invalid('1', options())).message).toMatch(message);
  });

  it.each([
    ['a throwing signal getter', () => throwing('signal'), /^signal could not be read: reading it threw Error: boom$/],
    ['a Proxy signal whose traps throw', () => ({ signal: hostileProxy() }), /^signal must be an AbortSignal/],
    ['a Proxy of a real signal whose get trap throws', () => ({ signal: new Proxy(new AbortController().signal, { get: boom }) }), /^signal must be an AbortSignal/],
    ['a look-alike signal', () => ({ signal: Object.create(AbortSignal.prototype) }), /^signal must be an AbortSignal, got object$/],
  ])('%s is a validation error naming it', async (_, options, message) => {
    expect((await invalid('1', options())).message).toMatch(message);
  });

  it('code given as a Proxy is a validation error, not an internal one', async () => {
    expect((await invalid(hostileProxy(), undefined)).message).toMatch(/^code must be a string, got a value that could not be read/);
  });

  it('a signal that is a transparent Proxy of an AbortSignal still aborts the run', async () => {
    const controller = new AbortController();
    const signal = new Proxy(controller.signal, {});
    expect(await runSandbox('6 * 7', { isolation: 'thread', signal })).toMatchObject({ success: true, output: 42 });
    let go: () => void = () => {};
    const running = new Promise<void>((r) => (go = r));
    const p = runSandbox('await ready(); while (true) {}', { isolation: 'thread', timeoutMs: 30_000, signal, capabilities: { ready: () => go() } });
    await running;
    controller.abort();
    const r = await p;
    expect(r.success).toBe(false);
    expect(!r.success && r.error).toBeInstanceOf(SandboxAbortedError);
  });
});

describe('new SandboxEngine: a config that cannot be read', () => {
  it.each([
    ['a throwing getter', () => [throwing('memoryMb')], /^memoryMb could not be read: reading it threw Error: boom$/],
    ['a Proxy whose traps throw', () => [hostileProxy()], /^SandboxEngine config could not be read/],
    ['a revoked Proxy', () => [revoked()], /^SandboxEngine config could not be read/],
    ['a throwing tools getter', () => [throwing('tools')], /^tools could not be read/],
    ['a tool behind a throwing getter', () => [{ tools: throwing('search') }], /^tools\.search could not be read/],
    ['a nested limit behind a throwing getter', () => [{ defaultIsolateLimits: throwing('wallTimeMs') }], /^defaultIsolateLimits\.wallTimeMs could not be read/],
    ['a Proxy of nested limits whose traps throw', () => [{ defaultBridgeLimits: hostileProxy() }], /^defaultBridgeLimits could not be read/],
    ['a throwing deps getter', () => [{}, throwing('clock')], /^deps\.clock could not be read/],
  ])('%s throws a validation error naming it', (_, args, message) => {
    const [config, deps] = args() as [unknown, unknown];
    let thrown: unknown;
    try {
      new SandboxEngine(config as never, deps as never);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(SandboxValidationError);
    expect((thrown as Error).message).toMatch(message);
  });
});

describe('engine.submit: a request that cannot be read', () => {
  let engine: SandboxEngine;
  beforeAll(async () => {
    engine = new SandboxEngine({ isolation: 'thread', tools: { search: () => 1 } });
    await engine.init();
  });
  afterAll(() => engine.shutdown());

  const allowedThrowing = () => Object.defineProperty([], 0, { get: boom, enumerable: true });

  it.each([
    ['a throwing requestId getter', () => throwing('requestId', { code: 'return 1' }), /^request\.requestId could not be read/],
    ['a throwing code getter', () => throwing('code'), /^request\.code could not be read: reading it threw Error: boom$/],
    ['a Proxy whose traps throw', hostileProxy, /^request could not be read/],
    ['a revoked Proxy', revoked, /^request could not be read/],
    ['a nested limit behind a throwing getter', () => ({ code: 'return 1', isolateLimits: throwing('wallTimeMs') }), /^request\.isolateLimits\.wallTimeMs could not be read/],
    ['a tool policy Proxy whose traps throw', () => ({ code: 'return 1', toolPolicy: hostileProxy() }), /^request\.toolPolicy could not be read/],
    ['an allowed tool behind a throwing getter', () => ({ code: 'return 1', toolPolicy: { allowedTools: allowedThrowing() } }), /^request\.toolPolicy\.allowedTools\[0\] could not be read/],
    ['a data value behind a throwing getter', () => ({ code: 'return 1', data: throwing('user') }), /^request\.data\.user could not be read/],
    ['request tools behind a throwing getter', () => ({ code: 'return 1', tools: throwing('t') }), /^request\.tools\.t could not be read/],
  ])('%s: submit returns a session whose done is a validation error naming it', async (_, request, message) => {
    const session = engine.submit(request() as never);
    const end = await session.done;
    expect(end.type).toBe('error');
    if (end.type !== 'error') throw new Error('unreachable');
    expect(end.error).toBeInstanceOf(SandboxValidationError);
    expect(end.error.message).toMatch(message);
    expect(typeof session.requestId).toBe('string');
  });

  it('a throwing idGenerator or clock fails the session, typed, or is replaced; submit never throws', async () => {
    const e = new SandboxEngine({ isolation: 'thread' }, { idGenerator: boom, clock: boom });
    await e.init();
    try {
      const session = e.submit({ code: 'return 1' });
      const end = await session.done;
      expect(end.type).toBe('error');
      expect(end.type === 'error' && end.error).toBeInstanceOf(SandboxValidationError);
      expect(end.type === 'error' && end.error.message).toMatch(/^deps\.idGenerator threw Error: boom$/);
      // A request that names itself needs no id; the clock that throws is replaced.
      const named = await e.submit({ requestId: 'mine', code: 'return 1' }).done;
      expect(named).toMatchObject({ type: 'result', data: 1, requestId: 'mine' });
      expect(typeof named.at).toBe('number');
    } finally {
      await e.shutdown();
    }
  });
});
