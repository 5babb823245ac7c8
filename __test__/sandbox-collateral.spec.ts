// No collateral for persistent sandboxes (process isolation): open sandboxes live in
// sandbox host processes of their own, one tenant's to a host, so a one-shot neighbour that
// ends its host (a memory bomb, a built-in that ignores termination, a V8 crash) cannot
// close a sandbox, and a hostile sandbox run ends nothing of another tenant. A sandbox's
// context cannot be started again elsewhere as an unseen one-shot run can, so nothing but
// its own tenant's runs may end it (its own, or a sandbox's sharing its host:
// `sandboxesPerHost`, which sandbox.spec.ts covers).
import { afterEach, describe, expect, it } from 'vitest';
import { SandboxEngine, type Sandbox } from '..';

const open: Sandbox[] = [];
const engines: SandboxEngine[] = [];
afterEach(async () => {
  while (open.length) open.pop()!.close();
  while (engines.length) await engines.pop()!.shutdown();
});

async function engineOf(config: ConstructorParameters<typeof SandboxEngine>[0] = {}) {
  const engine = new SandboxEngine({ isolation: 'process', memoryMb: 64, ...config });
  engines.push(engine);
  await engine.init();
  return engine;
}

async function openOn(engine: SandboxEngine, options: Parameters<SandboxEngine['openSandbox']>[0] = {}) {
  const sb = await engine.openSandbox(options);
  open.push(sb);
  return sb;
}

function output(r: Awaited<ReturnType<Sandbox['run']>>) {
  if (!r.success) throw r.error;
  return r.output;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
let n = 0;
const rid = () => `sc${++n}`;

/** Pids of the engine's hosts not in `before` (a sandbox's own host, once opened). */
function newPids(engine: SandboxEngine, before: Iterable<number>) {
  const seen = new Set(before);
  return engine.stats().processes!.pids.filter((p) => !seen.has(p));
}

// One-shot runs that end (or try to end) the host they run in.
const HOSTILE_NEIGHBOURS: Record<string, { code: string; wallTimeMs: number }> = {
  'a heap bomb': { code: 'const a = []; for (;;) a.push(new Array(1e5).fill(1))', wallTimeMs: 3000 },
  // ArrayBuffer memory is outside the V8 heap: 1 GB of it touched page by page.
  'a host-memory bomb (big ArrayBuffers)': {
    code: 'const keep = []; for (let i = 0; i < 64; i++) { const b = new Uint8Array(16 * 2 ** 20); b.fill(1); keep.push(b) } return keep.length',
    wallTimeMs: 5000,
  },
  'a host-memory bomb (a flattened string)': { code: "const s = 'x'.repeat(2 ** 28); return (s + 'y').charCodeAt(10)", wallTimeMs: 5000 },
  // Its thread cannot be stopped: the host is drained and ended.
  'an unstoppable built-in': { code: 'return Array.prototype.indexOf.call({ length: 2 ** 53 - 1 }, 1)', wallTimeMs: 200 },
};

describe('an open sandbox outlives hostile neighbours (process isolation)', () => {
  it('keeps its host, its state and its answers through heap bombs, host-memory bombs, unstoppable built-ins and a crash of the shared host', async () => {
    // One shared host: before sandboxes had hosts of their own, the sandbox was in it.
    const engine = await engineOf({ maxConcurrentIsolates: 4, processes: 1, warmPoolSize: 2 });
    const shared = engine.stats().processes!.pids;
    const sb = await openOn(engine, { timeoutMs: 5000 });
    expect(output(await sb.run('var counter = 0; globalThis.items = ["kept"]; counter'))).toBe(0);
    const [own] = newPids(engine, shared);
    expect(own).toBeGreaterThan(0);
    let expected = 0;
    for (const [kind, hostile] of Object.entries(HOSTILE_NEIGHBOURS)) {
      for (let round = 0; round < 2; round++) {
        const bad = engine.submit({ requestId: rid(), code: hostile.code, isolateLimits: { wallTimeMs: hostile.wallTimeMs } }).done;
        // A sandbox run in flight while the neighbour ends its host, another after.
        const during = sb.run('Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 150); ++counter');
        const badEnd = await bad;
        expect(badEnd.type, kind).toBe('error');
        expect(output(await during), kind).toBe(++expected);
        expect(output(await sb.run('++counter + items[0]')), kind).toBe(`${++expected}kept`);
        expect(sb.closeReason, kind).toBe(null);
      }
    }
    // A V8 crash of every shared host, with a neighbour run in it (once none is starting:
    // hosts killed while starting would count as start failures, and enough of those
    // make the engine fail queued runs for a while).
    for (let i = 0; i < 400 && engine.stats().processes!.starting > 0; i++) await sleep(25);
    const running = engine.submit({ requestId: rid(), code: 'await new Promise(() => {})', isolateLimits: { wallTimeMs: 3000 } }).done;
    await sleep(100);
    const killed = engine.stats().processes!.pids.filter((pid) => pid !== own);
    for (const pid of killed) process.kill(pid, 'SIGSEGV');
    const during = sb.run('++counter');
    await running;
    expect(output(await during)).toBe(++expected);
    // (A run given to a killed host before its death is noticed would be alone there.)
    for (let i = 0; i < 400 && engine.stats().processes!.pids.some((p) => killed.includes(p)); i++) await sleep(25);
    const p = engine.stats().processes!;
    // The neighbours did end shared hosts; the sandbox's own is the same process.
    expect(p.crashed).toBeGreaterThanOrEqual(1);
    expect(p.recycled.stuck ?? 0).toBeGreaterThanOrEqual(1);
    expect(p.pids).toContain(own);
    expect(sb.closeReason).toBe(null);
    expect(output(await sb.run('[counter, items.length]'))).toEqual([expected, 1]);
    // And one-shot runs are served again.
    const after = await engine.submit({ requestId: rid(), code: 'return 6 * 7' }).done;
    expect(after.type === 'result' ? after.data : after).toBe(42);
  });

  it('a hostile sandbox run ends only its own sandbox: neighbours\u2019 runs (one waiting on a host call) and other sandboxes are unharmed', async () => {
    let calls = 0;
    const engine = await engineOf({
      maxConcurrentIsolates: 6,
      processes: 1,
      warmPoolSize: 2,
      tools: { later: () => (++calls, new Promise((r) => setTimeout(() => r(40), 600))) },
    });
    // Each with the time it is given: the built-in is stopped by its deadline; a bomb must be
    // ended by memory, not by a deadline a loaded machine reaches first (a timed-out run that
    // stopped leaves its sandbox open, as it should).
    const kinds: Record<string, { code: string; timeoutMs: number }> = {
      'an unstoppable built-in': { code: 'Array.prototype.indexOf.call({ length: 2 ** 53 - 1 }, 1)', timeoutMs: 300 },
      'a host-memory bomb (a flattened string)': { code: "{ const s = 'x'.repeat(2 ** 28); (s + 'y').charCodeAt(10) }", timeoutMs: 10_000 },
      'a host-memory bomb (big ArrayBuffers)': {
        code: '{ const keep = []; for (let i = 0; i < 64; i++) { const b = new Uint8Array(16 * 2 ** 20); b.fill(1); keep.push(b) } keep.length }',
        timeoutMs: 10_000,
      },
    };
    const victim = await openOn(engine, { tenant: 'victim' });
    expect(output(await victim.run('var notes = []; notes.length'))).toBe(0);
    for (const [kind, { code, timeoutMs }] of Object.entries(kinds)) {
      const before = engine.stats().processes!.pids;
      const hostile = await openOn(engine, { timeoutMs: 300, tenant: 'mallory' });
      expect(output(await hostile.run('var mine = 1; mine'))).toBe(1);
      const [hostileHost] = newPids(engine, before);
      // A neighbour one-shot run that made a host call (seen outside: it could not be
      // started again), and one that did not; and the other sandbox's run, all in flight.
      const waiting = engine.submit({ requestId: rid(), code: 'return (await later()) + 2', toolPolicy: { allowedTools: ['later'] } }).done;
      const plain = engine.submit({ requestId: rid(), code: 'const w = new Int32Array(new SharedArrayBuffer(4)); Atomics.wait(w, 0, 0, 300); return 2' }).done;
      const victimRun = victim.run(`Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 300); notes.push(${JSON.stringify(kind)}); notes.length`);
      const bad = await hostile.run(code, { timeoutMs });
      expect(bad.success, kind).toBe(false);
      if (timeoutMs > 300) expect(bad.success || bad.error.code, kind).toBe('ERR_ISOLET_OOM');
      expect(output(await victimRun), kind).toBe(Object.keys(kinds).indexOf(kind) + 1);
      const plainEnd = await plain;
      expect(plainEnd.type === 'result' && plainEnd.data, kind).toBe(2);
      const waitingEnd = await waiting;
      expect(waitingEnd.type === 'result' && waitingEnd.data, kind).toBe(42);
      // The hostile sandbox is closed (its host is gone or going); no one else is. Its close
      // follows its run's answer: a loaded machine took more than 50 ms for it.
      for (let i = 0; i < 500 && !hostile.closed; i++) await sleep(20);
      expect(hostile.closed, kind).toBe(true);
      expect(['unresponsive', 'hostLost', 'outOfMemory']).toContain(hostile.closeReason);
      expect(victim.closeReason, kind).toBe(null);
      const again = await hostile.run('mine');
      expect(again.success, kind).toBe(false);
      // Its host ends with it.
      for (let i = 0; i < 500 && engine.stats().processes!.pids.includes(hostileHost); i++) await sleep(20);
      expect(engine.stats().processes!.pids, kind).not.toContain(hostileHost);
    }
    expect(output(await victim.run('notes.join(", ")'))).toBe(Object.keys(kinds).join(', '));
    // Each neighbour's tool ran once: none was run twice.
    expect(calls).toBe(Object.keys(kinds).length);
  });

  it("sandboxesPerHost: 1 — a sandbox's host starts when it opens and ends when it closes; maxOpenSandboxes bounds them (not the slots), with a typed refusal", async () => {
    // More sandboxes than slots: an idle sandbox holds none.
    const engine = await engineOf({ maxConcurrentIsolates: 2, maxOpenSandboxes: 3, processes: 1, warmPoolSize: 1, sandboxesPerHost: 1 });
    const shared = engine.stats().processes!.pids;
    const started = engine.stats().processes!.started;
    const boxes = [await openOn(engine), await openOn(engine), await openOn(engine)];
    const own = newPids(engine, shared);
    expect(own).toHaveLength(3);
    expect(engine.stats().processes!.started).toBe(started + 3);
    for (const [i, sb] of boxes.entries()) expect(output(await sb.run(`var i = ${i}; i`))).toBe(i);
    const refused = engine.openSandbox();
    await expect(refused).rejects.toMatchObject({ code: 'ERR_ISOLET_OVERLOADED' });
    await expect(refused).rejects.toThrow(/The engine has 3 persistent sandboxes open, at most maxOpenSandboxes \(3\)/);
    boxes[1].close();
    for (let i = 0; i < 500 && engine.stats().processes!.pids.includes(own[1]); i++) await sleep(20);
    expect(engine.stats().processes!.pids).not.toContain(own[1]);
    // Ending it was no trouble: no spare, no replacement, nothing counted as recycled or crashed.
    const p = engine.stats().processes!;
    expect(p.pids.filter((pid) => !own.includes(pid))).toEqual(shared);
    expect([p.crashed, p.recycled]).toEqual([0, {}]);
    const again = await openOn(engine);
    expect(output(await again.run('typeof i'))).toBe('undefined');
    expect(output(await boxes[2].run('i'))).toBe(2);
  });
});
