// Escape attempts, many adapted from public vm2 advisories (GHSA-*). Each one is tried
// for real; the test fails if the attack works.
import { afterEach, describe, expect, it } from 'vitest';
import { runSandbox, SandboxRuntimeError } from '..';
import { ok } from './support/results';

afterEach(() => {
  // No attack may leave anything on the host's prototypes.
  expect(Object.prototype).toEqual({});
  expect(Object.getOwnPropertyNames(Object.prototype)).not.toContain('polluted');
});

describe('reaching the host through functions the sandbox can touch', () => {
  it('constructor chains lead only to the sandbox Function', async () => {
    const out = ok(
      await runSandbox(
        `const probes = [
          () => this.constructor.constructor('return typeof process')(),
          () => console.log.constructor('return typeof process')(),
          () => typeof (async () => {}).constructor('return require'),
          () => Object.getPrototypeOf(function* () {}).constructor('return typeof globalThis.process')().next().value,
          () => hostFn.constructor('return typeof process')(),
        ];
        return probes.map((p) => { try { return p() } catch (e) { return 'threw ' + e.name } });`,
        { capabilities: { hostFn: () => 1 } },
      ),
    );
    expect(out).toEqual(['undefined', 'undefined', 'function', 'undefined', 'undefined']);
  });

  it('capability functions are sandbox-side stubs, not host functions', async () => {
    const out = ok(
      await runSandbox('return [typeof hostFn, hostFn.name, String(hostFn).includes("native code"), Object.getPrototypeOf(hostFn) === Function.prototype]', {
        capabilities: { hostFn: () => 'host' },
      }),
    );
    expect(out).toEqual(['function', 'hostFn', true, true]);
  });

  it('Error.prepareStackTrace sees only sandbox frames (vm2 GHSA-ch3r-j5x3-6q2m style)', async () => {
    const out = ok(
      await runSandbox(
        `const seen = [];
         Error.prepareStackTrace = (err, frames) => { for (const f of frames) seen.push([typeof f.getThis(), String(f.getFileName())]); return 'x'; };
         try { await boom(); } catch (e) { e.stack; }
         try { null.x } catch (e) { e.stack; }
         return seen;`,
        { capabilities: { boom: () => { throw new Error('host failure'); } } },
      ),
    ) as [string, string][];
    for (const [, file] of out) expect(file === 'sandbox.js' || file === 'undefined').toBe(true);
    expect(JSON.stringify(out)).not.toMatch(/node:|\/work\/|node_modules/);
  });

  it('a hijacked Promise.prototype.then only affects the sandbox', async () => {
    let handlerRan = 0;
    const out = ok(
      await runSandbox(
        `const orig = Promise.prototype.then;
         let hijacked = 0;
         Promise.prototype.then = function (...a) { hijacked++; return orig.apply(this, a); };
         const v = await get().then((x) => x);
         return [v, hijacked > 0];`,
        { capabilities: { get: () => { handlerRan++; return 'value'; } } },
      ),
    );
    expect(out).toEqual(['value', true]);
    expect(handlerRan).toBe(1);
    expect(Promise.prototype.then.toString()).toContain('native code');
  });

  it('dynamic import and natives syntax are unavailable', async () => {
    const r = await runSandbox('import("fs")');
    expect(r.success).toBe(false);
    const natives = await runSandbox('%GetOptimizationStatus(function(){})');
    expect(natives.success).toBe(false);
    expect(natives.success === false && natives.error.name).toBe('SandboxValidationError');
  });
});

describe('marshalling hostile values', () => {
  it('a thenable completion value is not called on the host', async () => {
    const r = await runSandbox('({ then(resolve) { resolve("tricked") } })');
    expect(r.success).toBe(false);
    if (!r.success) expect(r.error).toBeInstanceOf(SandboxRuntimeError);
  });

  it('toJSON is ignored and throwing getters fail the run inside the sandbox', async () => {
    const r = await runSandbox('({ a: 1, toJSON() { return "replaced" } })');
    expect(r.success).toBe(false); // toJSON is a function: not cloneable
    const g = await runSandbox('({ get boom() { throw new Error("getter ran in the sandbox") } })');
    expect(g.success === false && g.error.message).toBe('Error: getter ran in the sandbox');
  });

  it('a getter that loops forever during copying is stopped by the time limit', async () => {
    const r = await runSandbox('({ get x() { for (;;) {} } })', { timeoutMs: 150 });
    expect(r.success === false && r.error.name).toBe('SandboxTimeoutError');
  });

  it('sandbox setters on Object.prototype do not observe host replies', async () => {
    const out = ok(
      await runSandbox(
        `let leaked;
         Object.defineProperty(Object.prototype, 'secret', { set(v) { leaked = v }, configurable: true });
         const reply = await give();
         return [leaked, Object.getOwnPropertyDescriptor(reply, 'secret').value];`,
        { capabilities: { give: () => ({ secret: 'token' }) } },
      ),
    );
    expect(out).toEqual([undefined, 'token']);
  });

  it('__proto__ keys sent to a capability do not pollute the host', async () => {
    let received: any;
    ok(
      await runSandbox('await take(JSON.parse(\'{"__proto__": {"polluted": true}, "a": 1}\')); return 1', {
        capabilities: { take: (v: unknown) => (received = v) },
      }),
    );
    expect(({} as any).polluted).toBeUndefined();
    expect(Object.getPrototypeOf(received)).toBe(Object.prototype);
    expect(received.a).toBe(1);
  });

  it('shared memory cannot be handed to the host', async () => {
    const r = await runSandbox('new SharedArrayBuffer(16)');
    expect(r.success === false && r.error).toBeInstanceOf(SandboxRuntimeError);
    const arg = ok(await runSandbox('try { await take(new Int32Array(new SharedArrayBuffer(8))) } catch (e) { return e.message }', { capabilities: { take: () => 1 } }));
    expect(String(arg)).toMatch(/could not be cloned|SharedArrayBuffer/);
  });

  it('an Error subclass with a hostile constructor in the output arrives as a plain host Error', async () => {
    const out = ok(await runSandbox('class Evil extends Error { constructor() { super("evil"); this.name = "Evil" } } new Evil()')) as Error;
    expect(Object.getPrototypeOf(out)).toBe(Error.prototype);
    expect(out.message).toBe('evil');
  });
});

describe('resource abuse through the bridge', () => {
  it('a flood of pending host calls is bounded by maxHostCalls', async () => {
    let calls = 0;
    const out = ok(
      await runSandbox('const ps = []; for (let i = 0; i < 5000; i++) ps.push(f().then(() => "ok", (e) => e.name)); const r = await Promise.all(ps); return [r.filter((x) => x === "ok").length, r.filter((x) => x === "RangeError").length];', {
        capabilities: { f: () => ++calls },
        // Lift the in-flight cap (budgets-host-calls.spec.ts) to see the total cap alone.
        maxPendingHostCalls: 5000,
      }),
    );
    expect(out).toEqual([1000, 4000]);
    expect(calls).toBe(1000);
  });

  it('a huge thrown message is truncated, not copied whole', async () => {
    const r = await runSandbox('throw new Error("m".repeat(10_000_000))');
    expect(r.success === false && r.error.message.length).toBeLessThan(20_000);
  });
});
