// Some V8 built-ins loop without checking for termination. In thread mode the caller
// must still get SandboxTimeoutError within timeout + 1 s; the stuck thread is lowered to
// the lowest priority and left to run (never stopped by a signal, which froze the host while
// the thread held a lock of Node's platform), is counted in processStats(), and leaves
// the count when it finishes on its own. Each case runs in a child `node`, judged from
// outside: exit code, stderr, and a heartbeat timer that must keep ticking.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runChild } from './support/spawn';

const root = path.resolve(__dirname, '..');

async function runNode(script: string, env: Record<string, string> = {}) {
  const r = await runChild(process.execPath, ['-e', `const isolet = require(${JSON.stringify(root)});\n${script}`], {
    timeout: 200_000,
    env: { ...process.env, ...env },
  });
  const lines = r.stdout.trim().split('\n').filter(Boolean);
  return { status: r.status, signal: r.signal, stderr: r.stderr, lines, json: lines.map((l) => JSON.parse(l)) };
}

// Counts 10 ms timer ticks of the host's event loop.
const HEARTBEAT = `let beats = 0; setInterval(() => beats++, 10).unref();
const sleep = (ms) => new Promise((res) => setTimeout(res, ms));`;

describe('thread mode: a built-in that ignores TerminateExecution', () => {
  it('times out in time, is quarantined at the lowest priority (niceness 19, never SCHED_IDLE), and the host keeps serving', async () => {
    const r = await runNode(`${HEARTBEAT}
      (async () => {
        // The engine starts first: the elapsed time below is the stuck run's alone.
        await isolet.runSandbox('1', { isolation: 'thread' });
        const started = Date.now();
        const stuck = await isolet.runSandbox('Array.prototype.indexOf.call({ length: 2 ** 53 - 1 }, 1)', { timeoutMs: 300, isolation: 'thread' });
        const elapsed = Date.now() - started;
        const stats = isolet.processStats();
        // Each thread's niceness and scheduling policy (fields 19 and 41 of its stat): the
        // lowered one is at niceness 19 under SCHED_OTHER (0), not SCHED_IDLE (5).
        const fs = require('node:fs');
        const lowered = fs.readdirSync('/proc/self/task')
          .map((t) => fs.readFileSync('/proc/self/task/' + t + '/stat', 'utf8').split(') ')[1].split(' '))
          .filter((f) => Number(f[16]) === 19 || Number(f[38]) !== 0)
          .map((f) => ({ nice: Number(f[16]), policy: Number(f[38]) }));
        console.log(JSON.stringify({ name: stuck.error && stuck.error.name, elapsed, quarantined: stats.quarantinedThreads, lowered }));
        // The stuck thread keeps running meanwhile; the host's event loop must not stall.
        const b0 = beats;
        await sleep(500);
        const runs = await Promise.all(Array.from({ length: 8 }, (_, i) => isolet.runSandbox(i + ' * 2', { isolation: 'thread' })));
        console.log(JSON.stringify({ beats: beats - b0, outputs: runs.map((x) => x.output), quarantined: isolet.processStats().quarantinedThreads }));
        process.exitCode = 7;
      })();
    `);
    expect(r.signal).toBeNull();
    expect(r.stderr).toBe('');
    expect(r.status).toBe(7);
    const [first, second] = r.json;
    expect(first.name).toBe('SandboxTimeoutError');
    // Answered at its limit + at most a second of grace when starved (STARVED_GRACE_MS), + room.
    expect(first.elapsed).toBeLessThan(300 + 1000 + 1000);
    expect(first.quarantined).toBe(1);
    expect(first.lowered).toEqual([{ nice: 19, policy: 0 }]);
    // 500 ms of 10 ms ticks: a frozen host gets none. Lenient for a loaded machine.
    expect(second.beats).toBeGreaterThanOrEqual(10);
    expect(second.outputs).toEqual([0, 2, 4, 6, 8, 10, 12, 14]);
    expect(second.quarantined).toBe(1);
  });

  it('is throttled to under half a core while it loops (issue 35: idle priority alone gave it a whole idle core)', async () => {
    const r = await runNode(`
      (async () => {
        const stuck = await isolet.runSandbox('Array.prototype.indexOf.call({ length: 2 ** 53 - 1 }, 1)', { timeoutMs: 100, isolation: 'thread' });
        await new Promise((res) => setTimeout(res, 200));
        // This process's CPU time (all threads) over 1.5 s of an event loop with nothing to do.
        const cpu0 = process.cpuUsage();
        const t0 = performance.now();
        await new Promise((res) => setTimeout(res, 1500));
        const cpu = process.cpuUsage(cpu0);
        const wall = performance.now() - t0;
        console.log(JSON.stringify({ name: stuck.error.name, quarantined: isolet.processStats().quarantinedThreads, cores: (cpu.user + cpu.system) / 1000 / wall }));
        process.exit(0);
      })();
    `);
    expect(r.signal).toBeNull();
    expect(r.stderr).toBe('');
    const [{ name, quarantined, cores }] = r.json;
    expect(name).toBe('SandboxTimeoutError');
    expect(quarantined).toBe(1);
    // isolet_core::limits::quarantine_core_share() is 0.2; unthrottled, it was about 1.
    expect(cores).toBeLessThan(0.5);
  });

  it('leaves the quarantine and frees its isolate when the built-in finishes on its own', async () => {
    // lastIndexOf over 2**27 holes takes about a second of CPU and ignores termination.
    const r = await runNode(`${HEARTBEAT}
      (async () => {
        // The engine starts first: the elapsed time below is the stuck run's alone.
        await isolet.runSandbox('1', { isolation: 'thread' });
        const live0 = isolet.processStats().liveThreads;
        const started = Date.now();
        const stuck = await isolet.runSandbox('Array.prototype.lastIndexOf.call({ length: 2 ** 27 }, 1)', { timeoutMs: 50, isolation: 'thread' });
        const at = { name: stuck.error && stuck.error.name, elapsed: Date.now() - started, ...isolet.processStats() };
        while (isolet.processStats().quarantinedThreads > 0 && Date.now() - started < 180000) await sleep(20);
        // The thread leaves the count, then ends: a moment later, or more on a loaded machine.
        for (let i = 0; i < 500 && isolet.processStats().liveThreads > Math.max(live0, 2); i++) await sleep(20);
        const after = isolet.processStats();
        const next = await isolet.runSandbox('6 * 7', { isolation: 'thread' });
        console.log(JSON.stringify({ at, after, live0, next: next.output }));
      })();
    `);
    expect(r.signal).toBeNull();
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const [{ at, after, live0, next }] = r.json;
    expect(at.name).toBe('SandboxTimeoutError');
    expect(at.elapsed).toBeLessThan(50 + 1000 + 1000);
    expect(at.quarantinedThreads).toBe(1);
    expect(after.quarantinedThreads).toBe(0);
    // The finished thread is gone: only the warm pool's threads are left.
    expect(after.liveThreads).toBeLessThanOrEqual(Math.max(live0, 2));
    expect(next).toBe(42);
    // A thread at the lowest priority runs little on a busy machine: allow for one.
  }, 210_000);

  it('keeps a SandboxEngine\'s counts right when its quarantined thread finishes, and shuts down', async () => {
    const r = await runNode(`${HEARTBEAT}
      (async () => {
        const engine = new isolet.SandboxEngine({ memoryMb: 64, maxConcurrentIsolates: 2, warmPoolSize: 1, isolation: 'thread' });
        await engine.init();
        const end = await engine.submit({ requestId: 'stuck', code: 'return Array.prototype.lastIndexOf.call({ length: 2 ** 27 }, 1)', isolateLimits: { wallTimeMs: 50 } }).done;
        const during = engine.stats();
        const started = Date.now();
        while (engine.stats().quarantined > 0 && Date.now() - started < 180000) await sleep(20);
        // The thread leaves the count, then ends: a moment later, or more on a loaded machine.
        for (let i = 0; i < 500 && (engine.stats().threads >= during.threads || engine.stats().busy > 0); i++) await sleep(20);
        const after = engine.stats();
        const next = await engine.submit({ requestId: 'next', code: 'return 6 * 7' }).done;
        await engine.shutdown();
        console.log(JSON.stringify({ end: end.type, during: [during.quarantined, during.threads], after: [after.quarantined, after.threads, after.busy], next: next.data }));
      })();
    `);
    expect(r.signal).toBeNull();
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const [{ end, during, after, next }] = r.json;
    expect(end).toBe('error');
    expect(during[0]).toBe(1);
    // Quarantine gone, its thread gone (only warm threads remain), no run occupies a slot.
    expect(after[0]).toBe(0);
    expect(after[1]).toBeLessThan(during[1]);
    expect(after[2]).toBe(0);
    expect(next).toBe(42);
    // A thread at the lowest priority runs little on a busy machine: allow for one.
  }, 210_000);

  it('refuses new runs once ISOLET_MAX_QUARANTINED threads are quarantined', async () => {
    const r = await runNode(
      `(async () => {
        const stuck = await isolet.runSandbox('Array.prototype.indexOf.call({ length: 2 ** 53 - 1 }, 1)', { timeoutMs: 100, isolation: 'thread' });
        const refused = await isolet.runSandbox('1', { isolation: 'thread' });
        console.log(JSON.stringify({ stuck: stuck.error.name, refused: refused.success ? null : [refused.error.name, refused.error.message, refused.error.code] }));
      })();`,
      { ISOLET_MAX_QUARANTINED: '1' },
    );
    expect(r.signal).toBeNull();
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const [{ stuck, refused }] = r.json;
    expect(stuck).toBe('SandboxTimeoutError');
    expect(refused[0]).toBe('SandboxError');
    expect(refused[1]).toMatch(/ISOLET_MAX_QUARANTINED=1.*restart the process/);
    expect(refused[2]).toBe('ERR_ISOLET_OVERLOADED');
  });

  it('a Worker that leaves a quarantined thread behind does not end the process or its exit code', async () => {
    // Regression: the Worker's environment teardown ended the whole process with the
    // Worker's exit code (0), so the main thread's later work and its code were lost.
    const r = await runNode(`
      const { Worker } = require('node:worker_threads');
      const src = 'const { runSandbox, processStats } = require(' + JSON.stringify(${JSON.stringify(root)}) + ');' +
        'const { parentPort } = require("node:worker_threads");' +
        'runSandbox("Array.prototype.indexOf.call({ length: 2 ** 53 - 1 }, 1)", { timeoutMs: 100, isolation: "thread" })' +
        '.then((r) => parentPort.postMessage([r.error.name, processStats().quarantinedThreads]));';
      const w = new Worker(src, { eval: true });
      w.on('message', (m) => console.log(JSON.stringify({ worker: m })));
      w.on('exit', async (code) => {
        await new Promise((res) => setTimeout(res, 200));
        const after = await isolet.runSandbox('1 + 1', { isolation: 'thread' });
        console.log(JSON.stringify({ workerExit: code, main: after.output, quarantined: isolet.processStats().quarantinedThreads }));
        process.exitCode = 5;
      });
    `);
    expect(r.signal).toBeNull();
    expect(r.stderr).toBe('');
    expect(r.json).toEqual([{ worker: ['SandboxTimeoutError', 1] }, { workerExit: 0, main: 2, quarantined: 1 }]);
    expect(r.status).toBe(5);
  });
});
