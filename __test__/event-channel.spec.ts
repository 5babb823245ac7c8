// Thread mode delivers the events of every run of an engine through one channel: isolate
// threads queue events and wake Node's thread once per batch. These tests hold what that
// must keep: each run's events in order and to its own session however runs interleave,
// Node's event loop alive exactly while runs are in flight (a process with nothing left to
// do exits on its own), shutdown and process.exit() at any moment, and an engine that is
// garbage-collected while its runs are in flight.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { SandboxEngine, runSandbox } from '..';
import { ok } from './support/results';
import { runChild } from './support/spawn';

const root = path.resolve(__dirname, '..');

async function runNode(script: string, args: string[] = []) {
  const r = await runChild(process.execPath, [...args, '-e', `const isolet = require(${JSON.stringify(root)});\n${script}`], {
    timeout: 60_000,
  });
  return { status: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr };
}

describe('one event channel per engine (thread mode)', () => {
  it('delivers the events of 8 interleaved runs each in order, to its own session', async () => {
    const engine = new SandboxEngine({ isolation: 'thread', memoryMb: 64, maxConcurrentIsolates: 8, warmPoolSize: 2 });
    await engine.init();
    try {
      const N = 60;
      const seen: number[][] = [];
      const sessions = Array.from({ length: 8 }, (_, r) => {
        seen[r] = [];
        const code = `let s = 0; for (let i = 0; i < ${N}; i++) { console.log('run ${r} line ' + i); s += await t(${r}, i); } return s;`;
        return engine.submit({
          requestId: `run-${r}`,
          code,
          tools: {
            t: (run: number, i: number) => {
              seen[r].push(run * 1000 + i);
              return i;
            },
          },
          toolPolicy: { allowedTools: ['t'] },
          bridgeLimits: { maxMessages: 1000 },
        });
      });
      const results = await Promise.all(
        sessions.map(async (s) => {
          const events = [];
          for await (const ev of s) events.push(ev);
          return events;
        }),
      );
      results.forEach((events, r) => {
        // Every event belongs to this session, the result comes last, exactly once.
        expect(events.every((e) => e.requestId === `run-${r}`)).toBe(true);
        const last = events[events.length - 1];
        expect(last.type, JSON.stringify(last)).toBe('result');
        expect(events.filter((e) => e.type === 'result' || e.type === 'error')).toHaveLength(1);
        expect((last as { data: unknown }).data).toBe((N * (N - 1)) / 2);
        // Console lines streamed in the order the run wrote them.
        const lines = events.filter((e) => e.type === 'status' && e.status === 'console').map((e) => (e as { message: string }).message);
        expect(lines).toEqual(Array.from({ length: N }, (_, i) => `run ${r} line ${i}`));
        // Host calls reached this run's own handler, in order.
        expect(seen[r]).toEqual(Array.from({ length: N }, (_, i) => r * 1000 + i));
      });
    } finally {
      await engine.shutdown();
    }
  });

  it('answers 100 calls in flight from each of 4 runs, every reply to its own call', async () => {
    const code = 'const v = await Promise.all(Array.from({ length: 100 }, (_, i) => f(tag, i))); return v.every((x, i) => x === tag * 1000 + i);';
    const runs = await Promise.all(
      [1, 2, 3, 4].map((tag) => runSandbox(`const tag = ${tag}; ${code}`, { isolation: 'thread', capabilities: { f: (t: number, i: number) => t * 1000 + i } })),
    );
    expect(runs.map(ok)).toEqual([true, true, true, true]);
  });

  it('lets Node exit on its own once runs are done (no process.exit, nothing left in flight)', async () => {
    const r = await runNode(`
      (async () => {
        const outputs = [];
        for (let i = 0; i < 20; i++) outputs.push((await isolet.runSandbox('1 + ' + i, { isolation: 'thread' })).output);
        const calls = await isolet.runSandbox('let s = 0; for (let i = 0; i < 200; i++) s += await f(i); return s;', { isolation: 'thread', capabilities: { f: (x) => x } });
        const engine = new isolet.SandboxEngine({ isolation: 'thread', memoryMb: 64, maxConcurrentIsolates: 2, warmPoolSize: 1 });
        await engine.init();
        const done = await engine.submit({ code: 'return data.x + 1', data: { x: 41 } }).done;
        process.on('exit', (code) => console.log('exit', code, outputs[19], calls.output, done.data));
      })();
    `);
    expect(r.signal, r.stderr).toBeNull();
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe('exit 0 20 19900 42');
  });

  it('ends every run of an engine shut down mid-run, drops late replies, and Node still exits on its own', async () => {
    const r = await runNode(`
      (async () => {
        const engine = new isolet.SandboxEngine({ isolation: 'thread', memoryMb: 64, maxConcurrentIsolates: 4, warmPoolSize: 2 });
        await engine.init();
        const slow = () => new Promise((resolve) => setTimeout(() => resolve(1), 300));
        const sessions = [
          engine.submit({ code: 'let s = 0; for (;;) s += await fast(); return s;', tools: { fast: () => 1 }, toolPolicy: { allowedTools: ['fast'] }, bridgeLimits: { maxMessages: 1e9 } }),
          engine.submit({ code: 'return await slow();', tools: { slow }, toolPolicy: { allowedTools: ['slow'] } }),
          engine.submit({ code: 'while (true) {}' }),
          engine.submit({ code: 'return 1' }),
          engine.submit({ code: 'return 2' }),
        ];
        await new Promise((r) => setTimeout(r, 100));
        await engine.shutdown();
        const ends = await Promise.all(sessions.map((s) => s.done));
        console.log(ends.map((e) => e.type === 'error' ? e.error.name : 'result').join(','));
        const late = engine.submit({ code: '1' });
        console.log('after', (await late.done).error.name);
      })();
    `);
    expect(r.signal, r.stderr).toBeNull();
    expect(r.status, r.stderr).toBe(0);
    const [ends, after] = r.stdout.trim().split('\n');
    const names = ends.split(',');
    // The three runs still going when the engine shut down end aborted; the two quick
    // ones may have finished first.
    expect(names.slice(0, 3)).toEqual(['SandboxAbortedError', 'SandboxAbortedError', 'SandboxAbortedError']);
    for (const n of names.slice(3)) expect(['result', 'SandboxAbortedError']).toContain(n);
    expect(after).toBe('after SandboxAbortedError');
  });

  it('survives process.exit() from inside a host call while other runs stream events (10 processes)', async () => {
    for (let i = 0; i < 10; i++) {
      const r = await runNode(`
        let n = 0;
        const f = (x) => { if (++n === 150 + ${i * 7}) process.exit(0); return x; };
        for (let k = 0; k < 6; k++) {
          isolet.runSandbox('let s = 0; for (let i = 0; i < 1000; i++) { console.log(i); s += await f(i); } return s;', { isolation: 'thread', capabilities: { f }, maxHostCalls: 1000 });
        }
      `);
      expect(r.signal, r.stderr).toBeNull();
      expect(r.status, r.stderr).toBe(0);
    }
  });

  it('process.exit() right after runs end exits cleanly, many times', async () => {
    for (let i = 0; i < 10; i++) {
      const r = await runNode(`
        (async () => {
          await Promise.all(Array.from({ length: 8 }, (_, k) => isolet.runSandbox('let s = 0; for (let i = 0; i < 20; i++) s += await f(i); return s + ' + k, { isolation: 'thread', capabilities: { f: (x) => x } })));
          ${i % 2 ? 'setImmediate(() => process.exit(0));' : 'process.exit(0);'}
        })();
      `);
      expect(r.signal, r.stderr).toBeNull();
      expect(r.status, r.stderr).toBe(0);
    }
  });

  it('delivers the runs of an engine that was garbage-collected mid-run, then lets Node exit', async () => {
    const r = await runNode(
      `
      async function once(k) {
        const engine = new isolet.SandboxEngine({ isolation: 'thread', memoryMb: 64, maxConcurrentIsolates: 2, warmPoolSize: 0 });
        await engine.init();
        const later = (x) => new Promise((resolve) => setTimeout(() => resolve(x), 5));
        // Only the session's promise is kept: the engine (and its native engine) can be collected.
        return engine.submit({ code: 'let s = 0; for (let i = 0; i < 10; i++) s += await later(i); return s + ' + k, tools: { later }, toolPolicy: { allowedTools: ['later'] } }).done;
      }
      (async () => {
        const pending = [];
        for (let k = 0; k < 20; k++) pending.push(once(k));
        const timer = setInterval(() => globalThis.gc(), 2);
        const ends = await Promise.all(pending);
        clearInterval(timer);
        globalThis.gc();
        process.on('exit', () => console.log(ends.map((e) => e.type === 'result' ? e.data : e.error.name).join(',')));
      })();
    `,
      ['--expose-gc'],
    );
    expect(r.signal, r.stderr).toBeNull();
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe(Array.from({ length: 20 }, (_, k) => 45 + k).join(','));
  });
});
