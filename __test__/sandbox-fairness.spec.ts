// Open sandboxes are bounded by memory, not by concurrency: an idle open sandbox holds no
// isolate slot (its runs take one while they run, through the same fair queue as one-shot
// runs), open sandboxes have bounds of their own (maxOpenSandboxes, and
// maxOpenSandboxesPerTenant for named tenants), and no run waits for a slot past its
// queue deadline (maxQueueMs). Both isolation modes; in process mode every sandbox opened
// here starts a host process of its own.
import { afterEach, describe, expect, it } from 'vitest';
import { createSandbox, processStats, runSandbox, SandboxEngine, SandboxError, type Sandbox, type SandboxEngineConfig } from '..';

const open: Sandbox[] = [];
const engines: SandboxEngine[] = [];
afterEach(async () => {
  while (open.length) open.pop()!.close();
  while (engines.length) await engines.pop()!.shutdown();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function output(r: Awaited<ReturnType<Sandbox['run']>>) {
  if (!r.success) throw r.error;
  return r.output;
}

/** Resolves when `check` holds, polling; fails after `ms`. */
async function until(check: () => boolean, what: string, ms = 10_000) {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting until ${what}`);
    await sleep(20);
  }
}

/** A run that holds its slot for `ms` of CPU. */
const spin = (ms: number) => `const t = Date.now(); while (Date.now() - t < ${ms}) {} return 'spun'`;

describe.each(['thread', 'process'] as const)('%s isolation', (isolation) => {
  async function engineOf(config: Partial<SandboxEngineConfig> = {}) {
    const engine = new SandboxEngine({ isolation, memoryMb: 64, processes: 1, warmPoolSize: 1, ...config });
    engines.push(engine);
    await engine.init();
    return engine;
  }

  async function openOn(engine: SandboxEngine, options: Parameters<SandboxEngine['openSandbox']>[0] = {}) {
    const sb = await engine.openSandbox(options);
    open.push(sb);
    return sb;
  }

  it("tenant a's idle sandboxes, more than the engine's slots, leave tenant b's one-shot run to start at once; closing them frees everything", async () => {
    const engine = await engineOf({ maxConcurrentIsolates: 2 });
    const shared = engine.stats().processes?.pids ?? [];
    const boxes: Sandbox[] = [];
    for (let i = 0; i < 5; i++) {
      const sb = await openOn(engine, { tenant: 'a' });
      expect(output(await sb.run(`globalThis.x = ${i}; x`))).toBe(i);
      boxes.push(sb);
    }
    // A run gives its slot back just after its answer (once its isolate is done with it).
    await until(() => engine.stats().busy === 0, 'no run holds a slot');
    const before = engine.stats();
    expect(before.sandboxes).toEqual({ open: 5, maxOpenSandboxes: 256, maxOpenSandboxesPerTenant: 64 });
    expect(before.tenants.find((t) => t.tenant === 'a')).toMatchObject({ sandboxes: 5, running: 0, queued: 0 });
    // Before, the five idle sandboxes held both slots and this waited for as long as
    // they stayed open. A slot is free: it is never queued.
    const started = performance.now();
    const done = await engine.submit({ code: 'return 6 * 7', tenant: 'b', isolateLimits: { wallTimeMs: 10_000, maxQueueMs: 0 } }).done;
    expect(done.type === 'result' && done.data).toBe(42);
    expect(performance.now() - started).toBeLessThan(5000);
    // The sandboxes kept their state, each its own.
    expect((await Promise.all(boxes.map((sb) => sb.run('x')))).map(output)).toEqual([0, 1, 2, 3, 4]);
    for (const sb of boxes) sb.close();
    await until(() => engine.stats().sandboxes.open === 0 && engine.stats().busy === 0, 'the sandboxes are closed');
    const after = engine.stats();
    expect([after.busy, after.queued, after.queueExpired]).toEqual([0, 0, 0]);
    expect(after.tenants.find((t) => t.tenant === 'a')).toMatchObject({ sandboxes: 0, running: 0, queued: 0, completed: 10 });
    if (isolation === 'process') {
      // Each sandbox's own host ended with it; the shared host stays.
      await until(() => engine.stats().processes!.pids.length === shared.length, "the sandboxes' hosts have ended");
      expect(engine.stats().processes!.pids).toEqual(shared);
    }
  });

  it('a tenant past maxOpenSandboxesPerTenant, and anyone past maxOpenSandboxes, is refused at once with a typed error naming the bound', async () => {
    const engine = await engineOf({ maxConcurrentIsolates: 1, maxOpenSandboxes: 5, maxOpenSandboxesPerTenant: 2, warmPoolSize: 0 });
    expect(engine.stats().sandboxes).toEqual({ open: 0, maxOpenSandboxes: 5, maxOpenSandboxesPerTenant: 2 });
    const a1 = await openOn(engine, { tenant: 'a' });
    await openOn(engine, { tenant: 'a' });
    const refused = engine.openSandbox({ tenant: 'a' });
    await expect(refused).rejects.toBeInstanceOf(SandboxError);
    await expect(refused).rejects.toMatchObject({ code: 'ERR_ISOLET_OVERLOADED' });
    await expect(refused).rejects.toThrow(/^Tenant 'a' has 2 persistent sandboxes open, at most maxOpenSandboxesPerTenant \(2\)/);
    // Another tenant is not held up by a's bound; sandboxes naming no tenant count against
    // the engine's bound only.
    await openOn(engine, { tenant: 'b' });
    await openOn(engine);
    const unnamed = await openOn(engine);
    const full = engine.openSandbox({ tenant: 'c' });
    await expect(full).rejects.toMatchObject({ code: 'ERR_ISOLET_OVERLOADED' });
    await expect(full).rejects.toThrow(/^The engine has 5 persistent sandboxes open, at most maxOpenSandboxes \(5\)/);
    const s = engine.stats();
    expect(s.sandboxes.open).toBe(5);
    expect(s.tenants.find((t) => t.tenant === 'a')?.sandboxes).toBe(2);
    expect(s.tenants.find((t) => t.tenant === null)?.sandboxes).toBe(2);
    // A close makes room, for the engine and for its tenant.
    a1.close();
    unnamed.close();
    const again = await openOn(engine, { tenant: 'a' });
    expect(output(await again.run('typeof x'))).toBe('undefined');
    await openOn(engine, { tenant: 'c' });
    expect(engine.stats().sandboxes.open).toBe(5);
  });

  it('a run queued behind busy slots past maxQueueMs fails typed, naming the option and the wait; one whose wait is shorter runs', async () => {
    const engine = await engineOf({ maxConcurrentIsolates: 1, maxQueueMs: 400 });
    const sb = await openOn(engine, { timeoutMs: 10_000 });
    expect(output(await sb.run('globalThis.kept = "state"; kept'))).toBe('state');
    await until(() => engine.stats().busy === 0, 'no run holds a slot');
    // Holds the one slot for 3 s: every run below waits for it.
    const busy = engine.submit({ code: spin(3000), isolateLimits: { wallTimeMs: 10_000 } });
    await until(() => engine.stats().busy === 1, 'the busy run holds the slot');
    const order: string[] = [];
    const note = <T>(name: string, p: Promise<T>) => p.then((v) => (order.push(name), v));
    // The engine's maxQueueMs (400) for a request that gives none; its own for one that does.
    const expires = note('expired', engine.submit({ code: 'return 1' }).done);
    const waits = note('waited', engine.submit({ code: 'return 2', isolateLimits: { maxQueueMs: 30_000 } }).done);
    // A sandbox's run: the sandbox's default is the engine's; a run may give its own.
    const sbExpires = note('sandbox expired', sb.run('kept'));
    const sbWaits = note('sandbox waited', sb.run('kept', { maxQueueMs: 30_000 }));
    const expired = await expires;
    expect(expired.type).toBe('error');
    if (expired.type === 'error') {
      expect(expired.error).toBeInstanceOf(SandboxError);
      expect(expired.error.code).toBe('ERR_ISOLET_OVERLOADED');
      expect(expired.message).toMatch(/^Every isolate slot of the engine is taken \(1 of 1, \d+ runs waiting\) and this run waited (\d+) ms for one, past its maxQueueMs of 400 ms/);
      expect(Number(/waited (\d+) ms/.exec(expired.message)![1])).toBeGreaterThanOrEqual(400);
    }
    const sbExpired = await sbExpires;
    expect(sbExpired.success).toBe(false);
    if (!sbExpired.success) {
      expect(sbExpired.error.code).toBe('ERR_ISOLET_OVERLOADED');
      expect(sbExpired.error.message).toMatch(/waited \d+ ms for one, past its maxQueueMs of 400 ms/);
    }
    // The sandbox stays open, its state intact; the runs that could wait longer ran once
    // the slot was free, after the busy run, and the expired ones before it ended.
    expect(sb.closed).toBe(false);
    const waited = await waits;
    expect(waited.type === 'result' && waited.data).toBe(2);
    expect(output(await sbWaits)).toBe('state');
    expect((await busy.done).type).toBe('result');
    expect(order.slice(0, 2).sort()).toEqual(['expired', 'sandbox expired']);
    expect(engine.stats().queueExpired).toBe(2);
    // Expired runs never held a slot: not counted as failed runs.
    expect(engine.stats().failed).toEqual({});
  });

  it('100 idle sandboxes behind createSandbox() keep their state privately; runSandbox and the next sandbox still run; closing frees their hosts', async () => {
    // The default engine is up (in process mode its shared hosts too) before counting.
    expect((await runSandbox('1', { isolation })).success).toBe(true);
    const hostsBefore = processStats().sandboxProcesses;
    const boxes: Sandbox[] = [];
    // Ten at a time: in process mode they share sandbox hosts, 16 to a host (sandboxesPerHost).
    for (let i = 0; i < 100; i += 10) {
      const batch = await Promise.all(Array.from({ length: 10 }, () => createSandbox({ isolation })));
      open.push(...batch);
      boxes.push(...batch);
    }
    expect(boxes).toHaveLength(100);
    await Promise.all(boxes.map((sb, i) => sb.run(`globalThis.x = ${i}`).then(output)));
    // The default engine has 8 slots; 100 idle sandboxes hold none of them.
    const r = await runSandbox('6 * 7', { isolation, tenant: 'b', timeoutMs: 10_000, maxQueueMs: 0 });
    expect(r.success && r.output).toBe(42);
    const seen = await Promise.all(boxes.map((sb) => sb.run('x').then(output)));
    expect(seen).toEqual(boxes.map((_, i) => i));
    // Packed into as few hosts as hold them: 7 processes for 100 sandboxes, not 100.
    if (isolation === 'process') expect(processStats().sandboxProcesses - hostsBefore).toBe(Math.ceil(100 / 16));
    for (const sb of boxes) sb.close();
    open.length = 0;
    if (isolation === 'process') await until(() => processStats().sandboxProcesses <= hostsBefore, 'their hosts have ended', 15_000);
    const after = await createSandbox({ isolation });
    open.push(after);
    expect(output(await after.run('typeof x'))).toBe('undefined');
  }, 60_000);
});
