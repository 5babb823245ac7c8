// Issue 18, item 6: a run ended by `shutdown()` or `abort()` is SandboxAbortedError,
// whatever it was doing: stuck in a built-in that ignores termination (the watchdog gives
// its thread up), looping, waiting on a host call, or still queued. It used to end as
// `SandboxTimeoutError: Execution exceeded the wall-clock limit of 30000 ms` after 0.4 s,
// because the watchdog's abandonment read the stop reason after the run had left its
// stopping phase. Stuck threads burn CPU until their process ends, so each mode runs in a
// child `node` that exits when done.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runChild } from './support/spawn';

const root = path.resolve(__dirname, '..');

const STUCK = 'Array.prototype.indexOf.call({ length: 2 ** 53 - 1 }, 1)';

async function child(isolation: 'thread' | 'process') {
  const script = `
    const isolet = require(${JSON.stringify(root)});
    const out = (o) => console.log(JSON.stringify(o));
    const ended = (e) => ({ type: e.type, name: e.error && e.error.name, code: e.error && e.error.code, message: e.message });
    const started = async (s) => { for await (const e of s) if (e.type === 'status' && e.status === 'started') return; };
    const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
    (async () => {
      // shutdown(): one run of each kind in flight, one queued behind them.
      const engine = new isolet.SandboxEngine({ isolation: ${JSON.stringify(isolation)}, maxConcurrentIsolates: 3, processes: 1,
        tools: { never: () => new Promise(() => {}) } });
      await engine.init();
      const sessions = {
        builtin: engine.submit({ code: 'return ${STUCK}' }),
        loop: engine.submit({ code: 'while (true) {}' }),
        hostCall: engine.submit({ code: 'return await never()', toolPolicy: { allowedTools: ['never'] } }),
        queued: engine.submit({ code: 'return 1' }),
      };
      await Promise.all([sessions.builtin, sessions.loop, sessions.hostCall].map(started));
      await sleep(100);
      await engine.shutdown();
      for (const [what, s] of Object.entries(sessions)) out({ case: 'shutdown ' + what, ...ended(await s.done) });

      // abort(): a session stuck in the built-in, and runSandbox's signal.
      const e2 = new isolet.SandboxEngine({ isolation: ${JSON.stringify(isolation)}, processes: 1 });
      await e2.init();
      const s = e2.submit({ code: 'return ${STUCK}' });
      await started(s);
      await sleep(100);
      s.abort();
      out({ case: 'abort builtin', ...ended(await s.done) });
      await e2.shutdown();

      const controller = new AbortController();
      let go;
      const running = new Promise((r) => (go = r));
      const p = isolet.runSandbox('await ready(); return ${STUCK}', { isolation: ${JSON.stringify(isolation)}, timeoutMs: 30000,
        signal: controller.signal, capabilities: { ready: () => go() } });
      await running;
      await sleep(100);
      controller.abort();
      const r = await p;
      out({ case: 'runSandbox signal builtin', type: r.success ? 'result' : 'error', name: r.error && r.error.name, code: r.error && r.error.code, message: r.error && r.error.message });
      process.exit(0);
    })();`;
  const r = await runChild(process.execPath, ['-e', script], { timeout: 120_000 });
  return { status: r.status, stderr: r.stderr, ends: r.stdout.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l)) };
}

const SHUT = { type: 'error', name: 'SandboxAbortedError', code: 'ERR_ISOLET_ABORTED' };

describe.each(['thread', 'process'] as const)('%s isolation: runs stopped by their caller', (isolation) => {
  it('are SandboxAbortedError whatever they were doing, never a time limit they did not reach', async () => {
    const r = await child(isolation);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.ends).toEqual([
      { case: 'shutdown builtin', ...SHUT, message: 'The sandbox engine was shut down' },
      { case: 'shutdown loop', ...SHUT, message: 'The sandbox engine was shut down' },
      { case: 'shutdown hostCall', ...SHUT, message: 'The sandbox engine was shut down' },
      { case: 'shutdown queued', ...SHUT, message: 'The sandbox engine was shut down' },
      { case: 'abort builtin', ...SHUT, message: 'Execution was aborted by the caller' },
      { case: 'runSandbox signal builtin', ...SHUT, message: 'Execution was aborted by the caller' },
    ]);
  }, 120_000);
});
