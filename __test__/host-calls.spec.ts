// Capabilities: host functions (sync and async) called from the sandbox.
import { describe, expect, it } from 'vitest';
import { runSandbox, SandboxTimeoutError, SandboxValidationError } from '..';
import { ok } from './support/results';

describe('capability semantics', () => {
  it('runs code as an async function body: only return gives output', async () => {
    const caps = { one: () => 1 };
    expect(ok(await runSandbox('const v = await one(); return v + 1;', { capabilities: caps }))).toBe(2);
    // A bare trailing expression is discarded, exactly as in the seed.
    expect(ok(await runSandbox('const v = await one(); v + 1;', { capabilities: caps }))).toBeUndefined();
    // Without capabilities the completion value counts.
    expect(ok(await runSandbox('const v = 1; v + 1;'))).toBe(2);
  });

  it('treats an empty capabilities object as capability mode too', async () => {
    expect(ok(await runSandbox('return 5', { capabilities: {} }))).toBe(5);
  });

  it('calls sync and async handlers with copied arguments and copies results back', async () => {
    const seen: unknown[] = [];
    const caps = {
      echo: (x: unknown) => {
        seen.push(x);
        return x;
      },
      later: async (a: number, b: number) => {
        await new Promise((r) => setTimeout(r, 20));
        return { sum: a + b, when: new Date(5) };
      },
    };
    const out = ok(
      await runSandbox('const a = await echo({ n: [1, 2], m: new Map([["k", 1]]) }); const b = await later(2, 3); return [a.n, a.m.get("k"), b.sum, b.when instanceof Date];', { capabilities: caps }),
    );
    expect(out).toEqual([[1, 2], 1, 5, true]);
    expect(seen[0]).toEqual({ n: [1, 2], m: new Map([['k', 1]]) });
  });

  it('every capability returns a Promise in the sandbox', async () => {
    expect(ok(await runSandbox('const p = syncOne(); return p instanceof Promise', { capabilities: { syncOne: () => 1 } }))).toBe(true);
  });

  it('overlaps concurrent host calls: ten 300 ms calls take about 300 ms, not 3,000', async () => {
    const wait = () => new Promise((r) => setTimeout(() => r('done'), 300));
    const r = await runSandbox('const all = await Promise.all(Array.from({ length: 10 }, () => wait())); return all.length', { capabilities: { wait } });
    expect(ok(r)).toBe(10);
    // Generous for a loaded machine, and still half of one call after another.
    expect(r.stats.wallTimeMs).toBeLessThan(1500);
  });

  it('turns a throwing handler into a catchable sandbox Error with name and message, never the host object', async () => {
    const caps = {
      bad: () => {
        const e = new RangeError('host says no');
        (e as any).secret = 'host-only';
        throw e;
      },
    };
    const out = ok(
      await runSandbox('try { await bad(); } catch (e) { return [e instanceof Error, e.name, e.message, e.secret, String(e.stack).includes("/work/") || String(e.stack).includes("node:")]; }', { capabilities: caps }),
    );
    expect(out).toEqual([true, 'RangeError', 'host says no', undefined, false]);
  });

  it('turns a rejecting handler into a sandbox Error; uncaught it fails the run as SandboxRuntimeError', async () => {
    const caps = { rej: () => Promise.reject(new TypeError('async no')) };
    expect(ok(await runSandbox('try { await rej() } catch (e) { return e.name + ":" + e.message }', { capabilities: caps }))).toBe('TypeError:async no');
    const r = await runSandbox('await rej(); return 1', { capabilities: caps });
    expect(r.success).toBe(false);
    if (!r.success) {
      expect(r.error.name).toBe('SandboxRuntimeError');
      expect(r.error.message).toBe('TypeError: async no');
    }
  });

  it('rejects non-Error throws with their string form', async () => {
    const out = ok(await runSandbox('try { await t() } catch (e) { return [e.name, e.message] }', { capabilities: { t: () => { throw 'plain'; } } }));
    expect(out).toEqual(['Error', 'plain']);
  });

  it('ends a run waiting on a never-settling handler at its timeout, and drops the late reply', async () => {
    let resolveLate: (v: unknown) => void = () => {};
    const caps = { hang: () => new Promise((r) => (resolveLate = r)) };
    const r = await runSandbox('await hang(); return "no"', { capabilities: caps, timeoutMs: 150 });
    expect(r.success).toBe(false);
    if (!r.success) expect(r.error).toBeInstanceOf(SandboxTimeoutError);
    resolveLate('too late');
    await new Promise((res) => setTimeout(res, 20));
    expect(ok(await runSandbox('return await one()', { capabilities: { one: () => 1 } }))).toBe(1);
  });

  it('refuses a handler result that cannot be copied, inside the sandbox', async () => {
    const out = ok(await runSandbox('try { await f() } catch (e) { return e.name }', { capabilities: { f: () => () => 1 } }));
    expect(out).toBe('DataCloneError');
  });

  it('refuses sandbox arguments that cannot be copied (functions, proxies)', async () => {
    let called = false;
    const caps = { take: () => (called = true) };
    const out = ok(await runSandbox('const r = []; for (const v of [() => 1, new Proxy({}, {})]) { try { await take(v); r.push("sent") } catch (e) { r.push("refused") } } return r', { capabilities: caps }));
    expect(out).toEqual(['refused', 'refused']);
    expect(called).toBe(false);
  });
});

describe('bridge limits on host calls', () => {
  it('limits the number of host calls per run', async () => {
    let calls = 0;
    const caps = { inc: () => ++calls };
    const out = ok(await runSandbox('let n = 0; try { for (;;) { await inc(); n++ } } catch (e) { return [n, e.name, e.message] }', { capabilities: caps, maxHostCalls: 5 }));
    expect(out).toEqual([5, 'RangeError', 'Bridge message limit of 5 per execution exceeded']);
    expect(calls).toBe(5);
  });

  it('limits argument bytes without copying them to the host', async () => {
    let called = false;
    const caps = { take: () => (called = true) };
    const out = ok(await runSandbox('try { await take("x".repeat(2000)) } catch (e) { return e.name + ": " + e.message }', { capabilities: caps, maxMessageBytes: 1000 }));
    expect(out).toMatch(/^RangeError: Host call arguments exceed the bridge limit of 1000 bytes/);
    expect(called).toBe(false);
  });

  it('limits reply bytes', async () => {
    const caps = { big: () => 'y'.repeat(5000) };
    const out = ok(await runSandbox('try { await big() } catch (e) { return e.name }', { capabilities: caps, maxMessageBytes: 1000 }));
    expect(out).toBe('RangeError');
  });
});

describe('capability names', () => {
  it('must be identifiers that do not shadow built-ins', async () => {
    for (const name of ['Object', 'Promise', 'globalThis', 'console', 'eval', 'a-b', '1x', '']) {
      const r = await runSandbox('return 1', { capabilities: { [name]: () => 1 } });
      expect(r.success, name).toBe(false);
      if (!r.success) expect(r.error, name).toBeInstanceOf(SandboxValidationError);
    }
  });
});
