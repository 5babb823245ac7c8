// Persistent sandboxes (createSandbox, engine.openSandbox): state kept across runs, call,
// close, limits of the sandbox and of each run, what closes a sandbox, isolation from
// other sandboxes and runs, slots of the engine (taken by runs, never by an idle sandbox).
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import * as fs from 'node:fs';
import {
  createSandbox,
  runSandbox,
  SandboxEngine,
  SandboxError,
  SandboxOOMError,
  SandboxRuntimeError,
  SandboxTimeoutError,
  SandboxValidationError,
  SandboxAbortedError,
  type Sandbox,
  type PersistentSandboxOptions,
  type Isolation,
} from '..';

const open: Sandbox[] = [];
const engines: SandboxEngine[] = [];
afterEach(async () => {
  while (open.length) open.pop()!.close();
  while (engines.length) await engines.pop()!.shutdown();
});

let isolation: Isolation = 'thread';

async function sandbox(options: PersistentSandboxOptions = {}) {
  const sb = await createSandbox({ isolation, ...options });
  open.push(sb);
  return sb;
}

async function engineOf(config: ConstructorParameters<typeof SandboxEngine>[0] = {}) {
  const engine = new SandboxEngine({ isolation, ...config });
  engines.push(engine);
  await engine.init();
  return engine;
}

/** Resident bytes of process `pid`. */
function rssOf(pid: number) {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) * 1024;
}

function output(r: Awaited<ReturnType<Sandbox['run']>>) {
  if (!r.success) throw r.error;
  return r.output;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(['thread', 'process'] as const)('%s isolation', (mode) => {
  beforeAll(() => {
    isolation = mode;
  });

  describe('state across runs', () => {
    it('keeps var, let, const, function, class and globalThis properties', async () => {
      const sb = await sandbox();
      expect(output(await sb.run('var a = 1; let b = 2; const c = 3; function f(x) { return x * 10 } class K { k() { return 7 } } globalThis.g = 4; a + b'))).toBe(3);
      expect(output(await sb.run('a + b + c + g + f(1) + new K().k()'))).toBe(27);
      // A later run updates what an earlier one made.
      expect(output(await sb.run('a = 100; b += 1; g = [g]; a + b'))).toBe(103);
      expect(output(await sb.run('[a, b, c, g]'))).toEqual([100, 3, 3, [4]]);
      // A const stays a const; a let cannot be declared twice (a script's rules).
      const r = await sb.run('c = 9');
      expect(r.success).toBe(false);
      if (!r.success) expect(r.error).toBeInstanceOf(SandboxRuntimeError);
      const again = await sb.run('let b = 1');
      expect(again.success).toBe(false);
      if (!again.success) expect(again.error.message).toMatch(/already been declared/);
    });

    it('runs top-level await and keeps what it declares', async () => {
      const sb = await sandbox({ capabilities: { double: async (x: number) => x * 2 } });
      expect(output(await sb.run('const x = await double(21); let { y, z = 2 } = { y: await Promise.resolve(5) }; var w = x + y; w'))).toBe(47);
      expect(output(await sb.run('class C { get v() { return x + z } } function h() { return w * 2 } await null; new C().v'))).toBe(44);
      expect(output(await sb.run('[x, y, z, w, h(), typeof C]'))).toEqual([42, 5, 2, 47, 94, 'function']);
      // The completion value is the last expression; a promise result is awaited.
      expect(output(await sb.run('await double(1); double(w)'))).toBe(94);
      // A rejection is the run's error; the sandbox stays usable.
      const r = await sb.run('await Promise.reject(new TypeError("nope"))');
      expect(r.success).toBe(false);
      if (!r.success) expect(r.error.message).toMatch(/TypeError: nope/);
      expect(output(await sb.run('w'))).toBe(47);
    });

    it('runs TypeScript', async () => {
      const sb = await sandbox({ language: 'typescript' });
      expect(output(await sb.run('interface P { n: number } const p: P = { n: 2 }; p.n'))).toBe(2);
      expect(output(await sb.run('const q: number = p.n * await Promise.resolve(3); q'))).toBe(6);
    });

    it('takes runs in turn: one made while another runs sees its effect', async () => {
      const sb = await sandbox({ capabilities: { wait: (ms: number) => sleep(ms) } });
      const first = sb.run('await wait(50); var seen = 1; seen');
      const second = sb.run('typeof seen === "number" ? seen + 1 : "not yet"');
      expect(output(await first)).toBe(1);
      expect(output(await second)).toBe(2);
    });
  });

  describe('sandbox.call', () => {
    it('calls a function defined inside with copies of its arguments', async () => {
      const sb = await sandbox();
      await sb.run('var calls = 0; function add(a, b) { calls++; return { sum: a.n + b, same: a === b } } async function later(v) { return v.map((x) => x + 1) }');
      const arg = { n: 1 };
      expect(output(await sb.call('add', arg, 2))).toEqual({ sum: 3, same: false });
      expect(output(await sb.call('later', [1, 2]))).toEqual([2, 3]);
      expect(output(await sb.run('calls'))).toBe(1);
      // The sandbox mutating its copy never changes the host's object.
      await sb.run('function mutate(o) { o.n = 99; return o.n }');
      expect(output(await sb.call('mutate', arg))).toBe(99);
      expect(arg.n).toBe(1);
    });

    it('fails, typed, for a missing function, a throw, or arguments that cannot be copied', async () => {
      const sb = await sandbox();
      await sb.run('function boom() { throw new RangeError("bad") }');
      const missing = await sb.call('nothing');
      expect(missing.success).toBe(false);
      if (!missing.success) expect(missing.error.message).toMatch(/nothing is not a function/);
      const thrown = await sb.call('boom');
      expect(thrown.success).toBe(false);
      if (!thrown.success) expect((thrown.error as SandboxRuntimeError).thrown?.name).toBe('RangeError');
      const uncopyable = await sb.call('boom', () => 1);
      expect(uncopyable.success).toBe(false);
      if (!uncopyable.success) expect(uncopyable.error).toBeInstanceOf(SandboxValidationError);
      expect(output(await sb.run('1 + 1'))).toBe(2);
    });
  });

  describe('close', () => {
    it('refuses every later run and call with a SandboxValidationError', async () => {
      const sb = await sandbox();
      await sb.run('var kept = 1');
      expect(sb.closed).toBe(false);
      expect(sb.closeReason).toBe(null);
      sb.close();
      sb.close();
      expect(sb.closed).toBe(true);
      expect(sb.closeReason).toBe('closed');
      for (const r of [await sb.run('kept'), await sb.call('Math.max', 1)]) {
        expect(r.success).toBe(false);
        if (!r.success) {
          expect(r.error).toBeInstanceOf(SandboxValidationError);
          expect(r.error.message).toMatch(/The sandbox is closed \(closed\)/);
        }
      }
    });

    it('aborts a run in flight, and Symbol.asyncDispose closes', async () => {
      const sb = await sandbox({ timeoutMs: 10_000 });
      const stuck = sb.run('while (true) {}');
      await sleep(100);
      sb.close();
      const r = await stuck;
      expect(r.success).toBe(false);
      if (!r.success) expect(r.error).toBeInstanceOf(SandboxAbortedError);
      const other = await createSandbox({ isolation: mode });
      await other[Symbol.asyncDispose]();
      expect(other.closeReason).toBe('closed');
    });

    it('a signal aborts one run; the sandbox stays open', async () => {
      const sb = await sandbox({ timeoutMs: 10_000 });
      await sb.run('var before = 1');
      const controller = new AbortController();
      const run = sb.run('while (true) {}', { signal: controller.signal });
      setTimeout(() => controller.abort(), 100);
      const r = await run;
      expect(r.success).toBe(false);
      if (!r.success) expect(r.error).toBeInstanceOf(SandboxAbortedError);
      expect(sb.closed).toBe(false);
      expect(output(await sb.run('before'))).toBe(1);
    });
  });

  describe('isolation', () => {
    it("one sandbox's state is visible to no other sandbox and to no one-shot run", async () => {
      const a = await sandbox();
      const b = await sandbox();
      await a.run('var secret = "a"; globalThis.shared = "a"; function only() { return 1 }');
      expect(output(await b.run('[typeof secret, typeof shared, typeof only]'))).toEqual(['undefined', 'undefined', 'undefined']);
      for (const isolation of ['thread', 'process'] as const) {
        const r = await runSandbox('[typeof secret, typeof shared, typeof only]', { isolation });
        expect(r.success && r.output).toEqual(['undefined', 'undefined', 'undefined']);
      }
      const c = await sandbox();
      expect(output(await c.run('typeof secret'))).toBe('undefined');
      expect(output(await a.run('secret'))).toBe('a');
    });
  });

  describe('what ends a run, and what ends the sandbox', () => {
    it('a stuck run ends at its wall-clock limit and the sandbox stays usable; others keep being served', async () => {
      const sb = await sandbox({ timeoutMs: 5000 });
      await sb.run('var n = 1');
      const started = Date.now();
      const [stuck, other] = await Promise.all([sb.run('while (true) {}', { timeoutMs: 200 }), runSandbox('2 + 2', { isolation: mode })]);
      expect(Date.now() - started).toBeLessThan(4000);
      expect(stuck.success).toBe(false);
      if (!stuck.success) {
        expect(stuck.error).toBeInstanceOf(SandboxTimeoutError);
        expect((stuck.error as SandboxTimeoutError).limit).toBe('wall');
      }
      expect(other.success && other.output).toBe(4);
      expect(sb.closed).toBe(false);
      expect(output(await sb.run('n + 1'))).toBe(2);
    });

    it('a run over its CPU limit ends; the sandbox stays usable', async () => {
      const sb = await sandbox();
      const r = await sb.run('for (;;) {}', { cpuTimeMs: 100, timeoutMs: 10_000 });
      expect(r.success).toBe(false);
      if (!r.success) expect((r.error as SandboxTimeoutError).limit).toBe('cpu');
      expect(sb.closed).toBe(false);
      expect(output(await sb.run('3'))).toBe(3);
    });

    it('running out of memory closes the sandbox; the engine keeps serving', async () => {
      const sb = await sandbox({ memoryLimitMb: 16 });
      const r = await sb.run('const keep = []; for (;;) keep.push(new Array(10000).fill(1))');
      expect(r.success).toBe(false);
      if (!r.success) expect(r.error).toBeInstanceOf(SandboxOOMError);
      expect(sb.closeReason).toBe('outOfMemory');
      const later = await sb.run('1');
      expect(later.success).toBe(false);
      if (!later.success) expect(later.error.message).toMatch(/closed \(outOfMemory\)/);
      const other = await runSandbox('1 + 1', { isolation: mode });
      expect(other.success && other.output).toBe(2);
    });

    it('memoryLimitMb is the heap of the sandbox for its life: what runs keep adds up', async () => {
      const sb = await sandbox({ memoryLimitMb: 24 });
      // About 4 MB kept per run: well under the limit in one run, over it after a few.
      await sb.run('var kept = []');
      let ended = -1;
      for (let i = 0; i < 20; i++) {
        const r = await sb.run('kept.push(new Array(500000).fill(i => i)); kept.length');
        if (!r.success) {
          expect(r.error).toBeInstanceOf(SandboxOOMError);
          ended = i;
          break;
        }
      }
      // 24 MB hold at most 6 such arrays (8 bytes per element).
      expect(ended).toBeGreaterThan(0);
      expect(ended).toBeLessThanOrEqual(6);
      expect(sb.closeReason).toBe('outOfMemory');
    });

    it('idleTimeoutMs closes a sandbox nobody runs', async () => {
      // 1 s: on a loaded machine a gap between two runs can pass 200 ms.
      const sb = await sandbox({ idleTimeoutMs: 1000 });
      // Runs keep it open.
      for (let i = 0; i < 5; i++) {
        expect(output(await sb.run(`${i}`))).toBe(i);
        await sleep(250);
      }
      expect(sb.closed).toBe(false);
      for (let i = 0; i < 500 && !sb.closed; i++) await sleep(20);
      expect(sb.closeReason).toBe('idleTimeout');
      const r = await sb.run('1');
      expect(r.success).toBe(false);
      if (!r.success) expect(r.error.message).toMatch(/closed \(idleTimeout\)/);
    });

    it('totalCpuTimeMs is the CPU of all runs together; used up, it closes the sandbox', async () => {
      const sb = await sandbox({ totalCpuTimeMs: 300, timeoutMs: 10_000 });
      const first = await sb.run('const t0 = Date.now(); while (Date.now() - t0 < 120) {} 1');
      expect(output(first)).toBe(1);
      expect(sb.closed).toBe(false);
      const second = await sb.run('for (;;) {}');
      expect(second.success).toBe(false);
      if (!second.success) {
        expect(second.error).toBeInstanceOf(SandboxTimeoutError);
        expect(second.error.message).toMatch(/total CPU time limit of 300 ms/);
      }
      expect(sb.closeReason).toBe('totalCpuTime');
      // Enforced at the total: the two runs used 300 ms of CPU, plus the watchdog's reaction.
      expect(sb.usage.cpuTimeMs).toBeGreaterThanOrEqual(300);
      expect(sb.usage.cpuTimeMs).toBeLessThan(300 + 250);
    });

    it('maxTotalHostCalls counts host calls of all runs; used up, it closes the sandbox', async () => {
      let served = 0;
      const sb = await sandbox({ maxTotalHostCalls: 5, capabilities: { ping: () => ++served } });
      expect(output(await sb.run('await ping(); await ping(); await ping()'))).toBe(3);
      expect(sb.closed).toBe(false);
      // Two calls are left: the third of this run is refused in the sandbox.
      const r = await sb.run('let said = "served"; await ping(); await ping(); try { await ping() } catch (e) { said = e.name + ": " + e.message } said');
      expect(r.success && r.output).toMatch(/^RangeError: Bridge message limit of 2/);
      expect(served).toBe(5);
      expect(sb.closeReason).toBe('totalHostCalls');
    });

    it('1,000 runs keep their state without this process (or the host) growing past the sandbox heap', async () => {
      const engine = await engineOf({ maxConcurrentIsolates: 2, processes: 1 });
      const shared = new Set(engine.stats().processes?.pids ?? []);
      const sb = await engine.openSandbox({ memoryLimitMb: 32 });
      open.push(sb);
      const step = 'count++; log.push("x".repeat(100)); if (log.length > 100) log.shift(); count';
      await sb.run('var count = 0; var log = []');
      for (let i = 0; i < 50; i++) await sb.run(step);
      // Process isolation: the sandbox's own host.
      const hostPid = engine.stats().processes?.pids.find((p) => !shared.has(p));
      const rss = () => process.memoryUsage().rss + (hostPid === undefined ? 0 : rssOf(hostPid));
      const before = rss();
      for (let i = 0; i < 1000; i++) {
        const r = await sb.run(step);
        if (!r.success) throw r.error;
      }
      const after = rss();
      expect(output(await sb.run('[count, log.length]'))).toEqual([1050, 100]);
      // Judged against the sandbox's heap limit: 1,000 runs may not cost its size again.
      expect(after - before).toBeLessThan(32 * 1024 * 1024);
    });
  });

  describe('options', () => {
    it('bad options are SandboxValidationErrors naming the option', async () => {
      await expect(createSandbox({ isolation: mode, idleTimeout: 5 } as never)).rejects.toThrow(/idleTimeout is not a known option.*did you mean idleTimeoutMs/);
      await expect(createSandbox({ isolation: mode, totalCpuTimeMs: 0 })).rejects.toBeInstanceOf(SandboxValidationError);
      await expect(createSandbox({ isolation: mode, maxTotalHostCalls: -1 })).rejects.toThrow(/maxTotalHostCalls must be a whole number/);
      await expect(createSandbox({ isolation: mode, memoryLimitMb: 1 })).rejects.toThrow(/memoryLimitMb/);
      await expect(createSandbox({ isolation: mode, signal: new AbortController().signal } as never)).rejects.toThrow(/signal is not a known option/);
      // Module options are checked like runSandbox's (see sandbox-modules.spec.ts).
      await expect(createSandbox({ isolation: mode, type: 'esm' } as never)).rejects.toThrow(/type must be 'script' or 'module'/);
      await expect(createSandbox({ isolation: mode, modules: { a: 1 } } as never)).rejects.toBeInstanceOf(SandboxValidationError);
      const sb = await sandbox();
      const bad = await sb.run('1', { memoryLimitMb: 8 } as never);
      expect(bad.success).toBe(false);
      if (!bad.success) {
        expect(bad.error).toBeInstanceOf(SandboxValidationError);
        expect(bad.error.message).toMatch(/memoryLimitMb is not a known option of sandbox.run options/);
      }
      const code = await sb.run(42 as never);
      expect(code.success).toBe(false);
      if (!code.success) expect(code.error.message).toMatch(/code must be a string/);
      expect(sb.closed).toBe(false);
    });

  });

  describe('engine.openSandbox', () => {
    it('an idle open sandbox holds no isolate slot: its runs take one while they run, and open sandboxes have a bound of their own', async () => {
      const engine = await engineOf({ maxConcurrentIsolates: 1, warmPoolSize: 0, maxOpenSandboxes: 2 });
      const sb = await engine.openSandbox({ capabilities: { id: (x: unknown) => x } });
      open.push(sb);
      expect(engine.stats().sandboxes).toEqual({ open: 1, maxOpenSandboxes: 2, maxOpenSandboxesPerTenant: 1 });
      expect(output(await sb.run('var v = await id(5); v'))).toBe(5);
      // Idle, it leaves the engine's one slot to a one-shot run, and to another sandbox's runs.
      const oneShot = await engine.submit({ code: 'return 7' }).done;
      expect(oneShot.type === 'result' && oneShot.data).toBe(7);
      const other = await engine.openSandbox();
      open.push(other);
      expect(output(await other.run('var w = 1; w'))).toBe(1);
      // A sandbox's run waits for the slot like any run, and runs once it is free.
      const busy = engine.submit({ code: 'const t = Date.now(); while (Date.now() - t < 1500) {} return 1' });
      await sleep(50);
      const waiting = sb.run('v + 1');
      await sleep(50);
      expect(engine.stats().queued).toBe(1);
      expect((await busy.done).type).toBe('result');
      expect(output(await waiting)).toBe(6);
      // Past maxOpenSandboxes an open is refused at once, typed, naming the bound.
      const refused = engine.openSandbox();
      await expect(refused).rejects.toBeInstanceOf(SandboxError);
      await expect(refused).rejects.toMatchObject({ code: 'ERR_ISOLET_OVERLOADED' });
      await expect(refused).rejects.toThrow(/2 persistent sandboxes open, at most maxOpenSandboxes \(2\)/);
      other.close();
      sb.close();
      for (let i = 0; i < 500 && (engine.stats().sandboxes.open > 0 || engine.stats().busy > 0); i++) await sleep(20);
      expect(engine.stats().sandboxes.open).toBe(0);
      expect(engine.stats().busy).toBe(0);
      await expect(engine.openSandbox({ isolation: mode === 'thread' ? 'process' : 'thread' })).rejects.toThrow(/isolation must be the engine's/);
    });

    it("sandbox runs and calls count in the engine's stats like one-shot runs, per tenant too", async () => {
      const engine = await engineOf({ maxConcurrentIsolates: 2 });
      const sb = await engine.openSandbox({ tenant: 'acme' });
      open.push(sb);
      const before = engine.stats();
      expect(output(await sb.run('var a = 1; function twice(x) { return 2 * x } a'))).toBe(1);
      expect(output(await sb.call('twice', 21))).toBe(42);
      expect((await sb.run('throw new Error("no")')).success).toBe(false);
      expect((await sb.run('while (true) {}', { timeoutMs: 100 })).success).toBe(false);
      expect((await sb.call('missing')).success).toBe(false);
      // Counted as each run gives its slot back, just after its answer (as one-shot runs).
      for (let i = 0; i < 1000 && engine.stats().busy > 0; i++) await sleep(10);
      const s = engine.stats();
      expect(s.busy).toBe(0);
      expect(s.completed - before.completed).toBe(2);
      expect((s.failed.SandboxRuntimeError ?? 0) - (before.failed.SandboxRuntimeError ?? 0)).toBe(2);
      expect((s.failed.SandboxTimeoutError ?? 0) - (before.failed.SandboxTimeoutError ?? 0)).toBe(1);
      const acme = s.tenants.find((t) => t.tenant === 'acme')!;
      // An idle sandbox holds no slot: nothing of acme runs, one sandbox of it is open.
      expect(acme).toMatchObject({ running: 0, sandboxes: 1, queued: 0, completed: 2, failed: { SandboxRuntimeError: 2, SandboxTimeoutError: 1 } });
      // A one-shot run of the same tenant adds to the same counts; closing adds none.
      const done = await engine.submit({ code: 'return 1', tenant: 'acme' }).done;
      expect(done.type).toBe('result');
      sb.close();
      await sleep(50);
      const after = engine.stats().tenants.find((t) => t.tenant === 'acme')!;
      expect(after).toMatchObject({ running: 0, sandboxes: 0, completed: 3, failed: { SandboxRuntimeError: 2, SandboxTimeoutError: 1 } });
      expect(engine.stats().completed - before.completed).toBe(3);
    });

    it("a host call still pending when its run ends is dropped: the host holds nothing, the next run never sees its late reply", async () => {
      const late: string[] = [];
      const sb = await sandbox({
        capabilities: {
          // Seconds apart, so a loaded machine keeps their order with the limits below.
          slow: () => new Promise((r) => setTimeout(() => (late.push('slow answered'), r('late')), 2000)),
          fresh: () => new Promise((r) => setTimeout(() => r('fresh'), 2500)),
          never: () => new Promise(() => {}),
        },
      });
      // Ends at its limit with `slow` pending; the next run's first call has the same
      // place in its run, and waits while the dropped reply comes.
      // (A limit of a second: the run reaches its call first on a loaded machine too.)
      const timedOut = await sb.run('await slow()', { timeoutMs: 1000 });
      expect(timedOut.success).toBe(false);
      if (!timedOut.success) expect(timedOut.error).toBeInstanceOf(SandboxTimeoutError);
      expect(late).toEqual([]);
      expect(output(await sb.run('await fresh()'))).toBe('fresh');
      expect(late).toEqual(['slow answered']);
      // A run that returns without awaiting its call ends; the call is dropped the same way.
      const started = performance.now();
      expect(output(await sb.run('slow(); "returned"'))).toBe('returned');
      expect(performance.now() - started).toBeLessThan(1500);
      expect(output(await sb.run('globalThis.seen = []; seen.push(await fresh()); seen'))).toEqual(['fresh']);
      // A call that never settles holds its run only to its limit, and the sandbox serves on.
      const t0 = performance.now();
      const stuck = await sb.run('await never()', { timeoutMs: 1000 });
      expect(stuck.success).toBe(false);
      expect(performance.now() - t0).toBeLessThan(1000 + 1000);
      expect(output(await sb.run('seen.length + 1'))).toBe(2);
      expect(sb.closed).toBe(false);
      expect(sb.usage.hostCalls).toBe(5);
    });

    it("the engine's shutdown closes its sandboxes", async () => {
      const engine = new SandboxEngine({ isolation: mode, maxConcurrentIsolates: 2 });
      await engine.init();
      const sb = await engine.openSandbox();
      await sb.run('var x = 1');
      await engine.shutdown();
      expect(sb.closeReason).toBe('shutdown');
      const r = await sb.run('x');
      expect(r.success).toBe(false);
      await expect(engine.openSandbox()).rejects.toThrow(/shut down/);
    });
  });
});

describe('process isolation: the host of a sandbox', () => {
  beforeAll(() => {
    isolation = 'process';
  });

  it('a tenant’s sandboxes share a host up to sandboxesPerHost, each with its own state; a full host starts another; the host ends with its last sandbox', async () => {
    const engine = await engineOf({ maxConcurrentIsolates: 4, processes: 1, sandboxesPerHost: 3 });
    const shared = new Set(engine.stats().processes!.pids);
    const hostsNow = () => engine.stats().processes!.pids.filter((p) => !shared.has(p));
    const started = engine.stats().processes!.started;
    const boxes: Sandbox[] = [];
    for (let i = 0; i < 4; i++) {
      const sb = await engine.openSandbox({ tenant: 'acme' });
      open.push(sb);
      boxes.push(sb);
      expect(output(await sb.run(`var mine = ${i}; mine`))).toBe(i);
    }
    // Three in the first host, the fourth in a second: two processes started, not four.
    expect(hostsNow()).toHaveLength(2);
    expect(engine.stats().processes!.started).toBe(started + 2);
    // Private: each sees its own state, none another's.
    expect(await Promise.all(boxes.map((sb) => sb.run('mine').then(output)))).toEqual([0, 1, 2, 3]);
    // Runs of sandboxes in one host run side by side (three slots there).
    const t0 = Date.now();
    const waits = await Promise.all(
      boxes.slice(0, 3).map((sb) => sb.run('Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1000); mine').then(output)),
    );
    expect(waits).toEqual([0, 1, 2]);
    // One after another would take 3 s.
    expect(Date.now() - t0).toBeLessThan(2500);
    // Opening in a host that serves, where one closed, starts no process.
    const [first] = hostsNow();
    boxes[0].close();
    const fifth = await engine.openSandbox({ tenant: 'acme' });
    open.push(fifth);
    expect(engine.stats().processes!.started).toBe(started + 2);
    expect(output(await fifth.run('typeof mine'))).toBe('undefined');
    // Closing all but one keeps their host; closing the last ends it.
    for (const sb of [boxes[1], fifth]) sb.close();
    await sleep(200);
    expect(hostsNow()).toContain(first);
    expect(output(await boxes[2].run('mine'))).toBe(2);
    boxes[2].close();
    for (let i = 0; i < 500 && hostsNow().includes(first); i++) await sleep(20);
    expect(hostsNow()).not.toContain(first);
    expect(hostsNow()).toHaveLength(1);
    const p = engine.stats().processes!;
    expect([p.crashed, p.recycled]).toEqual([0, {}]);
  });

  it('a heap bomb in a sandbox that shares its host ends only that sandbox: its host and its neighbour (same tenant) keep running', async () => {
    const engine = await engineOf({ maxConcurrentIsolates: 4, processes: 1, memoryMb: 32 });
    const shared = new Set(engine.stats().processes!.pids);
    const bomber = await engine.openSandbox({ tenant: 'acme' });
    const neighbour = await engine.openSandbox({ tenant: 'acme' });
    open.push(bomber, neighbour);
    expect(output(await neighbour.run('var kept = "state"; kept'))).toBe('state');
    const [host] = engine.stats().processes!.pids.filter((p) => !shared.has(p));
    expect(engine.stats().processes!.pids.filter((p) => !shared.has(p))).toEqual([host]);
    const bomb = await bomber.run('const a = []; for (;;) a.push(new Array(1e5).fill(1))');
    expect(bomb.success).toBe(false);
    if (!bomb.success) expect(bomb.error).toBeInstanceOf(SandboxOOMError);
    expect(bomber.closeReason).toBe('outOfMemory');
    // The heap limit stopped it inside its isolate: the shared host is the same process.
    expect(engine.stats().processes!.pids).toContain(host);
    expect(neighbour.closeReason).toBe(null);
    expect(output(await neighbour.run('kept'))).toBe('state');
    const p = engine.stats().processes!;
    expect([p.crashed, p.recycled]).toEqual([0, {}]);
  });

  it('a host that is lost ends each of its sandboxes with a typed error saying so; other tenants’ sandboxes and runs keep working', async () => {
    const engine = await engineOf({ maxConcurrentIsolates: 4, processes: 2 });
    const shared = new Set(engine.stats().processes!.pids);
    const a = await engine.openSandbox({ timeoutMs: 10_000, tenant: 'acme' });
    open.push(a);
    await a.run('var state = 1');
    // A tenant's sandboxes share a sandbox host process of their own, started when the first opens.
    const pidA = engine.stats().processes!.pids.find((p) => !shared.has(p))!;
    expect(pidA).toBeGreaterThan(0);
    const b = await engine.openSandbox({ tenant: 'acme' });
    open.push(b);
    await b.run('var mine = 3');
    expect(engine.stats().processes!.pids.length).toBe(shared.size + 1);
    // Another tenant's sandbox never shares it.
    const c = await engine.openSandbox({ tenant: 'globex' });
    open.push(c);
    await c.run('var other = 2');
    expect(engine.stats().processes!.pids.length).toBe(shared.size + 2);
    const inFlight = a.run('while (true) {}');
    await sleep(100);
    process.kill(pidA, 'SIGSEGV');
    const lost = await inFlight;
    expect(lost.success).toBe(false);
    if (!lost.success) expect(lost.error).toMatchObject({ code: 'ERR_ISOLET_CRASHED' });
    // Every sandbox of the lost host says so, the idle one too.
    for (const sb of [a, b]) {
      expect(sb.closeReason).toBe('hostLost');
      const after = await sb.run('typeof state');
      expect(after.success).toBe(false);
      if (!after.success) {
        expect(after.error).toBeInstanceOf(SandboxValidationError);
        expect(after.error.message).toMatch(/closed \(hostLost\): the sandbox host process serving it was lost/);
      }
    }
    expect(output(await c.run('other'))).toBe(2);
    const session = engine.submit({ code: 'return 6 * 7' });
    const done = await session.done;
    expect(done.type === 'result' && done.data).toBe(42);
    expect(engine.stats().sandboxes.open).toBe(1);
  });

  it('a run stuck in a built-in that ignores termination ends typed; the engine keeps serving', async () => {
    const engine = await engineOf({ maxConcurrentIsolates: 4, processes: 1 });
    const sb = await engine.openSandbox({ memoryLimitMb: 32 });
    open.push(sb);
    await sb.run('var before = 1');
    const r = await sb.run('Array.prototype.indexOf.call({ length: 2 ** 53 - 1 }, 1)', { timeoutMs: 300 });
    expect(r.success).toBe(false);
    if (!r.success) expect(r.error).toBeInstanceOf(SandboxTimeoutError);
    // Its thread could not be stopped: the sandbox is closed (the host is then replaced).
    expect(['unresponsive', 'hostLost']).toContain(sb.closeReason);
    const later = await sb.run('before');
    expect(later.success).toBe(false);
    const session = engine.submit({ code: 'return 1 + 1' });
    const done = await session.done;
    expect(done.type === 'result' && done.data).toBe(2);
    const fresh = await engine.openSandbox();
    open.push(fresh);
    expect(output(await fresh.run('typeof before'))).toBe('undefined');
  });
});
