// Timers inside the sandbox (`web: true`), in both isolation modes: the HTML standard's
// ordering, arguments, ids and nesting clamp; a timer is work of the run (its wait counts
// against the wall-clock limit, costs no CPU time, and ends with the run: what is still
// pending when the result settles is dropped, as Cloudflare Workers do); bounded in number.
import { afterAll, describe, expect, it } from 'vitest';
import { createSandbox, runSandbox, type Isolation, type Sandbox, type SandboxOptions } from '..';
import { failed, ok } from './support/results';

const open: Sandbox[] = [];
afterAll(() => {
  for (const sb of open) sb.close();
});

describe.each(['thread', 'process'] as const)('timers (%s isolation)', (isolation: Isolation) => {
  const run = (code: string, options: SandboxOptions = {}) => runSandbox(code, { web: true, isolation, ...options });
  const out = async (code: string, options: SandboxOptions = {}) => ok(await run(code, options));

  it('exist only with web: true', async () => {
    const names = '["setTimeout", "setInterval", "clearTimeout", "clearInterval"].map((n) => typeof globalThis[n])';
    expect(ok(await runSandbox(names, { isolation }))).toEqual(['undefined', 'undefined', 'undefined', 'undefined']);
    expect(await out(names)).toEqual(['function', 'function', 'function', 'function']);
  });

  it('fire by deadline then creation, with their arguments, microtasks between two timers', async () => {
    const code = `(async () => {
      const log = [];
      const ids = [];
      // Delays 100 ms apart: the order holds unless this script stalls that long between two
      // calls (with 5 ms apart, a loaded CI machine fired 'b' before the 0 ms timer).
      ids.push(setTimeout((a, b) => log.push('b:' + a + b), 200, 1, 2));
      ids.push(setTimeout(() => { log.push('a'); Promise.resolve().then(() => log.push('a:micro')); }, 100));
      ids.push(setTimeout(() => log.push('c'), 200));
      const cleared = setTimeout(() => log.push('never'), 1);
      clearTimeout(cleared);
      clearTimeout('not an id');
      clearInterval(undefined);
      ids.push(setTimeout(function () { log.push('this:' + (this === globalThis)); }));
      await new Promise((r) => setTimeout(r, 400));
      return [log, ids.every((id) => Number.isInteger(id) && id > 0), new Set(ids).size, cleared > ids[2]];
    })()`;
    expect(await out(code)).toEqual([['this:true', 'a', 'a:micro', 'b:12', 'c'], true, 4, true]);
  });

  it('setInterval repeats until cleared, from inside its own callback too', async () => {
    const code = `new Promise((resolve) => {
      let n = 0;
      const id = setInterval((step) => { n += step; if (n === 5) { clearInterval(id); setTimeout(() => resolve(n), 20); } }, 1, 1);
    })`;
    expect(await out(code)).toBe(5);
  });

  it('nested zero-delay timers are clamped to 4 ms past five levels (HTML)', async () => {
    const code = `(async () => {
      const t0 = Date.now();
      await new Promise((r) => { let depth = 0; const f = () => (++depth < 10 ? setTimeout(f, 0) : r()); setTimeout(f, 0); });
      return Date.now() - t0;
    })()`;
    // Timers set at nesting levels 6 to 9 (so timers 7 to 10) wait at least 4 ms each;
    // Date.now() has 1 ms steps.
    expect(await out(code)).toBeGreaterThanOrEqual(15);
  });

  it('waiting for a timer costs no CPU time, and counts against the wall-clock limit', async () => {
    const r = await run('new Promise((r) => setTimeout(r, 300, "slept"))', { cpuTimeMs: 100 });
    expect(ok(r)).toBe('slept');
    expect(r.stats.wallTimeMs).toBeGreaterThanOrEqual(295);
    expect(r.stats.cpuTimeMs).toBeLessThan(100);
    const e = failed(await run('new Promise((r) => setTimeout(r, 60000))', { timeoutMs: 200 }));
    expect(e.name).toBe('SandboxTimeoutError');
  });

  it('a throwing callback fails the run with its error', async () => {
    const e = failed(await run('setTimeout(() => { throw new TypeError("in a timer") }, 1); new Promise((r) => setTimeout(r, 50))'));
    expect(e.name).toBe('SandboxRuntimeError');
    expect(e.message).toBe('TypeError: in a timer');
    expect((e as { thrown?: { name: string } }).thrown?.name).toBe('TypeError');
  });

  it('pending timers are bounded (10000): past it setTimeout throws a RangeError', async () => {
    const e = failed(await run('for (let i = 0; i < 1e6; i++) setTimeout(() => {}, 1000)'));
    expect(e.message).toMatch(/^RangeError: Failed to execute 'setTimeout': 10000 timers are already pending/);
    expect(await out('let n = 0; try { for (;;) { setInterval(() => {}, 1e9); n++ } } catch (e) { [n, e.constructor.name] }')).toEqual([10000, 'RangeError']);
    // Cleared timers make room again.
    expect(await out('const ids = Array.from({ length: 10000 }, () => setTimeout(() => {}, 1e9)); ids.forEach(clearTimeout); typeof setTimeout(() => {}, 1)')).toBe('number');
  });

  it('a string handler is refused with a TypeError (no code from strings)', async () => {
    expect(await out('try { setTimeout("globalThis.x = 1", 0) } catch (e) { [e.constructor.name, /not a function/.test(e.message)] }')).toEqual(['TypeError', true]);
    expect(await out('try { setTimeout() } catch (e) { e.constructor.name }')).toBe('TypeError');
  });

  it('timers pending when the result settles are dropped, and a sandbox run starts with none', async () => {
    const r = await run('setTimeout(() => console.log("late"), 0); 1');
    expect([ok(r), r.logs]).toEqual([1, []]);
    const sb = await createSandbox({ isolation, web: true });
    open.push(sb);
    expect(ok(await sb.run('globalThis.fired = false; setTimeout(() => { globalThis.fired = true }, 20); "set"'))).toBe('set');
    expect(ok(await sb.run('new Promise((r) => setTimeout(() => r(globalThis.fired), 100))'))).toBe(false);
    expect(ok(await sb.run('new Promise((r) => setTimeout(r, 5, "timers still work"))'))).toBe('timers still work');
  });

  it('AbortSignal.timeout aborts with a TimeoutError', async () => {
    const code = '(async () => { const s = AbortSignal.timeout(5); await new Promise((r) => s.addEventListener("abort", r)); return [s.aborted, s.reason.name, s.reason.code]; })()';
    expect(await out(code)).toEqual([true, 'TimeoutError', 23]);
  });
});
