// A run's lifecycle under races, through the public API (thread isolation: the engine
// in this process). Runs that reach their limit as they finish, aborts that race
// completion or admission, and a shutdown while runs are stopping must each end exactly
// once, with the class that matches how they ended, and the engine must count each
// ending once, with the same class (the answer and the slot's release come from the
// run's one `finish`).
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  SandboxEngine,
  SandboxError,
  DEFAULT_ISOLATE_LIMITS,
  DEFAULT_BRIDGE_LIMITS,
  processStats,
  type SandboxEngineConfig,
  type SandboxEvent,
  type SandboxSession,
} from '..';
import { runChild } from './support/spawn';

const engines: SandboxEngine[] = [];
afterEach(async () => {
  while (engines.length) await engines.pop()!.shutdown();
});

async function makeEngine(config: Partial<SandboxEngineConfig> = {}) {
  const engine = new SandboxEngine({
    memoryMb: 128,
    maxConcurrentIsolates: 4,
    warmPoolSize: 2,
    wasmModules: [],
    defaultIsolateLimits: DEFAULT_ISOLATE_LIMITS,
    defaultBridgeLimits: DEFAULT_BRIDGE_LIMITS,
    isolation: 'thread',
    ...config,
  });
  engines.push(engine);
  await engine.init();
  return engine;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const root = path.resolve(__dirname, '..');

interface Ending {
  /** 'result' or the error's class name. */
  end: string;
  started: boolean;
  data?: unknown;
}

/** Reads a session to its end and checks it has exactly one terminal event, last. */
async function ending(session: SandboxSession): Promise<Ending> {
  const events: SandboxEvent[] = [];
  for await (const e of session) events.push(e);
  const terminal = events.filter((e) => e.type === 'result' || e.type === 'error');
  expect(terminal).toHaveLength(1);
  expect(events[events.length - 1]).toBe(terminal[0]);
  expect(await session.done).toBe(terminal[0]);
  const finished = events.filter((e) => e.type === 'status' && e.status === 'finished');
  expect(finished.length).toBeLessThanOrEqual(1);
  const started = events.some((e) => e.type === 'status' && e.status === 'started');
  const t = terminal[0];
  if (t.type === 'result') return { end: 'result', started, data: t.data };
  if (t.type !== 'error') throw new Error('unreachable');
  expect(t.error).toBeInstanceOf(SandboxError);
  return { end: t.error.name, started };
}

/** Waits until no run holds a slot (a run's slot is given back after its answer). */
async function settled(engine: SandboxEngine) {
  for (let i = 0; i < 1000 && (engine.stats().busy > 0 || engine.stats().queued > 0); i++) await sleep(10);
  const s = engine.stats();
  expect(s.busy).toBe(0);
  expect(s.queued).toBe(0);
  return s;
}

function tally(endings: Ending[], pick: (e: Ending) => boolean = () => true) {
  const counts: Record<string, number> = {};
  for (const e of endings.filter(pick)) counts[e.end] = (counts[e.end] ?? 0) + 1;
  return counts;
}

/** The engine counted, once per run that held a slot, the same endings its callers saw. */
function expectCountedOnce(stats: ReturnType<SandboxEngine['stats']>, endings: Ending[]) {
  const seen = tally(endings, (e) => e.started);
  const { result = 0, ...failed } = seen;
  expect(stats.completed).toBe(result);
  expect(stats.failed).toEqual(failed);
}

describe('run lifecycle races (thread isolation)', () => {
  it('200 runs that reach their time limit as they finish each end once, as a result or a timeout', async () => {
    const engine = await makeEngine();
    const sessions = Array.from({ length: 200 }, (_, i) => {
      // Each run busy-waits for about its own limit: the watchdog's stop and the run's
      // own return land within a tick of each other. Half use the wall clock, half CPU.
      const limitMs = 30 + (i % 5);
      const spinMs = limitMs - 2 + (i % 7);
      const isolateLimits = i % 2 ? { wallTimeMs: limitMs } : { cpuTimeMs: limitMs, wallTimeMs: 10_000 };
      return engine.submit({
        requestId: `t${i}`,
        code: `const end = Date.now() + ${spinMs}; while (Date.now() < end) {} return ${i};`,
        isolateLimits,
      });
    });
    const endings = await Promise.all(sessions.map(ending));
    endings.forEach((e, i) => {
      expect(['result', 'SandboxTimeoutError']).toContain(e.end);
      expect(e.started).toBe(true);
      if (e.end === 'result') expect(e.data).toBe(i);
    });
    const stats = await settled(engine);
    expectCountedOnce(stats, endings);
    // Every run unwound on termination: none was given up on and quarantined.
    expect(stats.quarantined).toBe(0);
    expect(processStats().quarantinedThreads).toBe(0);
  }, 120_000);

  it('aborts racing completion, start and admission each end a run once, as a result or an abort', async () => {
    const engine = await makeEngine({ maxConcurrentIsolates: 3, warmPoolSize: 1 });
    const sessions = Array.from({ length: 200 }, (_, i) => {
      const s = engine.submit({
        requestId: `a${i}`,
        code: `const end = Date.now() + ${i % 9}; while (Date.now() < end) {} return ${i};`,
      });
      // A quarter abort at once (queued), a quarter after 0-200 ms (queued, starting,
      // running or finishing by then), the rest run to their end meanwhile.
      if (i % 4 === 0) s.abort();
      else if (i % 4 === 2) setTimeout(() => s.abort(), (i % 50) * 4);
      return s;
    });
    const endings = await Promise.all(sessions.map(ending));
    endings.forEach((e, i) => {
      expect(i % 2 ? ['result'] : ['result', 'SandboxAbortedError']).toContain(e.end);
      if (e.end === 'result') expect(e.data).toBe(i);
    });
    // Aborted at once while others hold every slot: never started.
    expect(endings[8].end).toBe('SandboxAbortedError');
    expect(endings[8].started).toBe(false);
    expectCountedOnce(await settled(engine), endings);
    // A second abort after the end changes nothing.
    sessions.forEach((s) => s.abort());
    expectCountedOnce(engine.stats(), endings);
  }, 120_000);

  it('a shutdown while runs are stopping at their limit ends each once, and leaves no thread', async () => {
    const before = processStats().liveThreads;
    const engine = await makeEngine({ maxConcurrentIsolates: 4, warmPoolSize: 0 });
    const sessions = Array.from({ length: 24 }, (_, i) =>
      engine.submit({ requestId: `s${i}`, code: 'while (true) {}', isolateLimits: { wallTimeMs: 60 + (i % 4) * 5 } }),
    );
    // The first four are at their limit (the watchdog is stopping them); the rest wait.
    await sleep(70);
    const shutdown = engine.shutdown();
    const endings = await Promise.all(sessions.map(ending));
    await shutdown;
    for (const e of endings) expect(['SandboxTimeoutError', 'SandboxAbortedError']).toContain(e.end);
    // Queued runs are answered by the shutdown without ever starting.
    expect(endings.filter((e) => !e.started).every((e) => e.end === 'SandboxAbortedError')).toBe(true);
    expect(endings.filter((e) => !e.started).length).toBeGreaterThan(0);
    expectCountedOnce(engine.stats(), endings);
    expect(engine.stats().threads).toBe(0);
    expect(processStats().liveThreads).toBeLessThanOrEqual(before);
  }, 60_000);

  it('a full queue is refused as overloaded (ERR_ISOLET_OVERLOADED), and the refused run is never counted', async () => {
    const engine = await makeEngine({ maxConcurrentIsolates: 1, maxQueueSize: 2, warmPoolSize: 0 });
    const busy = 'const end = Date.now() + 150; while (Date.now() < end) {} return 1;';
    const sessions = ['a', 'b', 'c', 'd'].map((requestId) => engine.submit({ requestId, code: busy }));
    const refused = await sessions[3].done;
    expect(refused.type).toBe('error');
    if (refused.type !== 'error') return;
    expect(refused.error).toBeInstanceOf(SandboxError);
    expect(refused.error.name).toBe('SandboxError');
    expect(refused.error.code).toBe('ERR_ISOLET_OVERLOADED');
    expect(refused.message).toMatch(/queue is full \(2 waiting\)/);
    const endings = await Promise.all(sessions.map(ending));
    expect(endings.map((e) => e.end)).toEqual(['result', 'result', 'result', 'SandboxError']);
    const s = await settled(engine);
    expect(s.completed).toBe(3);
    expect(s.failed).toEqual({});
  }, 30_000);
});

describe('run lifecycle races with threads that ignore termination (thread isolation, child process)', () => {
  it('a run given up on by the watchdog ends once with its first stop reason, however aborts and shutdown race it', async () => {
    // Each run is stuck in a built-in that ignores termination; its wall limit stops it
    // 100 ms after it starts, the watchdog gives up on it 400 ms later, and an abort lands
    // 200-600 ms after the start: before, at or after that moment. A shutdown lands 300 ms
    // after the last start, while they are all still stopping.
    const script = `
      const isolet = require(${JSON.stringify(root)});
      (async () => {
        const engine = new isolet.SandboxEngine({ memoryMb: 64, maxConcurrentIsolates: 6, warmPoolSize: 0, isolation: 'thread',
          wasmModules: [], defaultIsolateLimits: isolet.DEFAULT_ISOLATE_LIMITS, defaultBridgeLimits: isolet.DEFAULT_BRIDGE_LIMITS });
        await engine.init();
        const sessions = [0, 1, 2, 3, 4, 5].map((i) =>
          engine.submit({ requestId: 'stuck' + i, code: 'return Array.prototype.indexOf.call({ length: 2 ** 53 - 1 }, 1)', isolateLimits: { wallTimeMs: 100 } }));
        // Timed from each run's start (a cold isolate may take a while on a busy machine).
        const started = sessions.map(async (s, i) => {
          for await (const e of s) if (e.type === 'status' && e.status === 'started') break;
          setTimeout(() => s.abort(), 200 + i * 80);
        });
        const shutdown = Promise.all(started).then(() => new Promise((r) => setTimeout(r, 300))).then(() => engine.shutdown());
        const ends = [];
        for (const s of sessions) {
          let terminal = 0;
          for await (const e of s) if (e.type === 'result' || e.type === 'error') terminal++;
          const e = await s.done;
          ends.push({ terminal, end: e.type === 'error' ? e.error.name : 'result', code: e.error && e.error.code });
        }
        await shutdown;
        const stats = engine.stats();
        console.log(JSON.stringify({ ends, completed: stats.completed, failed: stats.failed, quarantined: stats.quarantined, busy: stats.busy,
          processQuarantined: isolet.processStats().quarantinedThreads }));
        process.exitCode = 3;
      })();`;
    const r = await runChild(process.execPath, ['-e', script], { timeout: 120_000 });
    expect(r.signal).toBeNull();
    expect(r.stderr).toBe('');
    // The process leaves with its own exit code though quarantined threads still run.
    expect(r.status).toBe(3);
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!);
    // The wall limit was the first reason for every run, whatever abort came later.
    expect(out.ends).toEqual(Array.from({ length: 6 }, () => ({ terminal: 1, end: 'SandboxTimeoutError', code: 'ERR_ISOLET_TIMEOUT' })));
    // Each counted once, as the timeout its caller saw, with its thread in quarantine.
    expect(out.completed).toBe(0);
    expect(out.failed).toEqual({ SandboxTimeoutError: 6 });
    expect(out.busy).toBe(0);
    expect(out.quarantined).toBe(6);
    expect(out.processQuarantined).toBe(6);
  }, 150_000);
});
