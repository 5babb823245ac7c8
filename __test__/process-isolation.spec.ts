// Process isolation (the default): whatever a run does, it can end only its sandbox
// host process, never this one. Each attack here is real: a real child process, real
// signals, real memory. The host is judged by what it can still do afterwards.
import { describe, expect, it, afterAll } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  runSandbox,
  processStats,
  runtime,
  SandboxEngine,
  SandboxError,
  SandboxOOMError,
  SandboxRuntimeError,
  SandboxTimeoutError,
  SandboxValidationError,
} from '..';
import { runChild } from './support/spawn';

const root = path.resolve(__dirname, '..');

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    // A zombie still answers kill(0); it is gone for our purposes.
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^\d+ \(.*\) Z/.test(stat);
  } catch {
    return false;
  }
}

async function waitGone(pids: number[], ms = 10_000): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (pids.every((p) => !alive(p))) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return pids.every((p) => !alive(p));
}

let seq = 0;
const id = () => `p${++seq}`;

const engines: SandboxEngine[] = [];
async function makeEngine(config: Record<string, unknown> = {}): Promise<SandboxEngine> {
  const engine = new SandboxEngine({ memoryMb: 64, maxConcurrentIsolates: 2, warmPoolSize: 1, processes: 1, ...config });
  await engine.init();
  engines.push(engine);
  return engine;
}
afterAll(async () => {
  await Promise.all(engines.map((e) => e.shutdown()));
});

async function serving(engine: SandboxEngine): Promise<void> {
  const r = await engine.submit({ requestId: id(), code: 'return 6 * 7' }).done;
  expect(r).toMatchObject({ type: 'result', data: 42 });
}

describe('process isolation: options', () => {
  it('refuses an unknown isolation mode, naming the option and value', async () => {
    const r = await runSandbox('1', { isolation: 'vm' as never });
    expect(r.success).toBe(false);
    if (!r.success) {
      expect(r.error).toBeInstanceOf(SandboxValidationError);
      expect(r.error.message).toBe("isolation must be 'process' or 'thread', got 'vm'");
    }
    expect(() => new SandboxEngine({ isolation: 5 as never })).toThrow(/isolation must be 'process' or 'thread', got 5/);
    expect(() => new SandboxEngine({ processes: 0 })).toThrow('processes must be a whole number from 1 to 64, got 0');
  });

  it('runs the same code alike in both modes', async () => {
    const code = 'return [typeof require, typeof process, Object.getOwnPropertyNames(globalThis).length, await twice(21)]';
    const opts = { capabilities: { twice: (n: number) => n * 2 } };
    const p = await runSandbox(code, { ...opts, isolation: 'process' });
    const t = await runSandbox(code, { ...opts, isolation: 'thread' });
    expect(p.success && p.output).toEqual(t.success && t.output);
    expect(p.success && (p.output as unknown[])[3]).toBe(42);
  });

  it('locks every host down (seccomp, no_new_privs), judged from /proc', async () => {
    const engine = await makeEngine();
    const s = engine.stats().processes!;
    expect(s.lockdown).toMatchObject({ seccomp: true, noNewPrivs: true, parentDeathSignal: true });
    for (const pid of s.pids) {
      const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
      expect(status).toMatch(/^Seccomp:\s+2$/m);
      expect(status).toMatch(/^NoNewPrivs:\s+1$/m);
    }
    // The locked-down host still serves runs, host calls included.
    const end = await engine.submit({ requestId: id(), code: 'return [1 + 1, typeof globalThis.process]' }).done;
    expect(end).toMatchObject({ type: 'result', data: [2, 'undefined'] });
  });

  it('spreads an engine over the processes asked for', async () => {
    const engine = await makeEngine({ processes: 2, maxConcurrentIsolates: 4 });
    const s = engine.stats();
    expect(s.isolation).toBe('process');
    expect(s.processes!.live).toBe(2);
    expect(new Set(s.processes!.pids).size).toBe(2);
    expect(s.processes!.pids).not.toContain(process.pid);
  });
});

describe('process isolation: hard memory', () => {
  const bombs: Array<[string, string]> = [
    ['a 512 MB flat string', "const s = 'x'.repeat(2 ** 29 - 24); return s.indexOf('y')"],
    ['a resizable ArrayBuffer grown to 2 GiB', 'const b = new ArrayBuffer(1, { maxByteLength: 2 ** 32 }); b.resize(2 ** 31); new Uint8Array(b).fill(1); return b.byteLength'],
    ['a growable SharedArrayBuffer grown to 2 GiB', 'const b = new SharedArrayBuffer(1, { maxByteLength: 2 ** 32 }); b.grow(2 ** 31); new Uint8Array(b).fill(1); return b.byteLength'],
    ['JSON.parse of a 100 MB text', "return JSON.parse('[' + '1,'.repeat(5e7) + '1]').length"],
  ];
  for (const [what, code] of bombs) {
    // Resizable and growable buffers are charged at maxByteLength in the seam, so the
    // child refuses them with a RangeError before committing anything.
    const refused = /ArrayBuffer/.test(what);
    it(`ends ${what} with ${refused ? 'a RangeError from the budget' : 'SandboxOOMError'}, host memory untouched`, async () => {
      const engine = await makeEngine();
      const rss0 = process.memoryUsage().rss;
      const end = await engine.submit({ requestId: id(), code, isolateLimits: { wallTimeMs: 10000 } }).done;
      expect(end.type).toBe('error');
      if (end.type === 'error' && refused) {
        expect(end.error).toBeInstanceOf(SandboxRuntimeError);
        expect(end.error.message).toMatch(/RangeError: ArrayBuffer maxByteLength of 4294967296 bytes exceeds the sandbox's ArrayBuffer budget/);
      } else if (end.type === 'error') expect(end.error).toBeInstanceOf(SandboxOOMError);
      // The allocation happened in the child; this process grew by far less than it.
      expect(process.memoryUsage().rss - rss0).toBeLessThan(100 * 1024 * 1024);
      await serving(engine);
    });
  }

  it('does not end a run that stays within its limit', async () => {
    const engine = await makeEngine();
    // About 40 MB of live arrays under a 64 MB limit.
    const end = await engine.submit({ requestId: id(), code: 'const a = []; for (let i = 0; i < 40; i++) a.push(new Array(131072).fill(i)); return a.length' }).done;
    expect(end).toMatchObject({ type: 'result', data: 40 });
    expect(engine.stats().processes?.recycled.memory ?? 0).toBe(0);
  });
});

describe('process isolation: runs that cannot be stopped', () => {
  it('answers a builtin that ignores termination at its limit, recycles the host, keeps serving', async () => {
    const engine = await makeEngine();
    const [pid] = engine.stats().processes!.pids;
    const threadsBefore = processStats().quarantinedThreads;
    const t0 = Date.now();
    const end = await engine.submit({ requestId: id(), code: 'return Array.prototype.indexOf.call({ length: 2 ** 53 - 1 }, 1)', isolateLimits: { wallTimeMs: 300 } }).done;
    expect(Date.now() - t0).toBeLessThan(300 + 1000);
    expect(end.type).toBe('error');
    if (end.type === 'error') expect(end.error).toBeInstanceOf(SandboxTimeoutError);
    expect(await waitGone([pid])).toBe(true);
    const s = engine.stats().processes!;
    expect(s.recycled.stuck).toBe(1);
    // Nothing was left running in this process.
    expect(processStats().quarantinedThreads).toBe(threadsBefore);
    await serving(engine);
  });

  it('a host left with only its stuck thread uses under half a core while a neighbour finishes, and is gone after (issue 35)', async () => {
    const engine = await makeEngine({ maxConcurrentIsolates: 2, processes: 1 });
    const [pid] = engine.stats().processes!.pids;
    // The neighbour sleeps in the same host (one host): it keeps the host alive, using no CPU.
    // 8 s: it outlives the stuck run's answer, the lowering and the measurement below on a
    // loaded machine too.
    const neighbour = engine.submit({ requestId: id(), code: 'Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 8000); return 7', isolateLimits: { wallTimeMs: 15_000 } });
    const stuck = await engine.submit({ requestId: id(), code: 'return Array.prototype.indexOf.call({ length: 2 ** 53 - 1 }, 1)', isolateLimits: { wallTimeMs: 200 } }).done;
    expect(stuck.type).toBe('error');
    // The parent lowered the stuck thread (the host's filter refuses it that): niceness 19
    // under SCHED_OTHER (0), never SCHED_IDLE (5), whose lock holders stall their
    // neighbours; the host's other threads keep its niceness (the parent's + 10).
    const threadsOf = () =>
      fs
        .readdirSync(`/proc/${pid}/task`)
        .map((t) => fs.readFileSync(`/proc/${pid}/task/${t}/stat`, 'utf8').replace(/^.*\) /, '').split(' '))
        .map((f) => ({ nice: Number(f[16]), policy: Number(f[38]) }));
    for (let i = 0; i < 500 && (engine.stats().processes!.draining < 1 || !threadsOf().some((t) => t.nice === 19)); i++) {
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(engine.stats().processes!.draining).toBe(1);
    const threads = threadsOf();
    const hostNice = Math.min(19, os.getPriority(process.pid) + 10);
    expect(threads.filter((t) => t.nice !== hostNice || t.policy !== 0)).toEqual([{ nice: 19, policy: 0 }]);
    // The host's CPU time over 1 s, from /proc (clock ticks, 100 a second on Linux).
    const ticks = () => {
      const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /, '').split(' ');
      return Number(fields[11]) + Number(fields[12]);
    };
    const t0 = performance.now();
    const c0 = ticks();
    await new Promise((r) => setTimeout(r, 1000));
    const cores = (ticks() - c0) / 100 / ((performance.now() - t0) / 1000);
    // isolet_core::limits::quarantine_core_share() is 0.2; at the lowest priority alone, about 1.
    expect(cores).toBeLessThan(0.5);
    expect(await neighbour.done).toMatchObject({ type: 'result', data: 7 });
    expect(await waitGone([pid])).toBe(true);
    expect(engine.stats().processes!.recycled.stuck).toBe(1);
    await serving(engine);
  });

  it('survives a storm of unstoppable runs (the brick attack) and keeps serving', async () => {
    const engine = await makeEngine({ maxConcurrentIsolates: 4, processes: 2 });
    const shapes = [
      'Array.prototype.indexOf.call({ length: 2 ** 53 - 1 }, 1)',
      'Array.prototype.lastIndexOf.call({ length: 2 ** 53 - 1 }, 1)',
      'Array.prototype.includes.call({ length: 2 ** 53 - 1 }, 1)',
      'Array.prototype.sort.call({ length: 2 ** 32 - 1 })',
      'Array.from({ length: 3e6 }, (_, i) => i).map(new Intl.NumberFormat("en").format).length',
    ];
    // 33 such runs made a thread-mode process refuse all work (DESIGN.md, second round).
    const runs = Array.from({ length: 33 }, (_, i) => engine.submit({ requestId: id(), code: `return ${shapes[i % shapes.length]}`, isolateLimits: { wallTimeMs: 200 } }).done);
    const ends = await Promise.all(runs);
    for (const end of ends) {
      expect(end.type).toBe('error');
      if (end.type === 'error') expect(end.error).toBeInstanceOf(SandboxError);
    }
    await serving(engine);
    expect(processStats().quarantinedThreads).toBe(0);
  });

  it('ends a host that stops answering (SIGSTOP) at limit + 1 s, failing its runs with typed errors', async () => {
    const engine = await makeEngine();
    const [pid] = engine.stats().processes!.pids;
    const slow = engine.submit({ requestId: id(), code: 'const end = Date.now() + 100; while (Date.now() < end) {} return 1', isolateLimits: { wallTimeMs: 500 } });
    process.kill(pid, 'SIGSTOP');
    const t0 = Date.now();
    const end = await slow.done;
    expect(Date.now() - t0).toBeLessThan(500 + 1000);
    expect(end.type).toBe('error');
    if (end.type === 'error') expect(end.error).toBeInstanceOf(SandboxTimeoutError);
    expect(await waitGone([pid])).toBe(true);
    expect(engine.stats().processes!.recycled.overdue).toBe(1);
    await serving(engine);
  });
});

describe('process isolation: crashes', () => {
  it('turns a host killed by a signal into ERR_ISOLET_CRASHED for the runs in it, and replaces it', async () => {
    const engine = await makeEngine();
    const [pid] = engine.stats().processes!.pids;
    const run = engine.submit({ requestId: id(), code: 'while (true) {}', isolateLimits: { wallTimeMs: 5000 } });
    await new Promise((r) => setTimeout(r, 100));
    process.kill(pid, 'SIGSEGV');
    const end = await run.done;
    expect(end.type).toBe('error');
    if (end.type === 'error') {
      expect(end.error).toBeInstanceOf(SandboxError);
      expect((end.error as SandboxError).code).toBe('ERR_ISOLET_CRASHED');
    }
    const s = engine.stats().processes!;
    expect(s.crashed).toBe(1);
    expect(s.crashReasons['signal SIGSEGV']).toBe(1);
    await serving(engine);
  });

  it('leaves no descriptor or thread behind in this process for the hosts that died (25 crashes in a row)', async () => {
    // Each host costs this process its channel (and a copy Node's loop watches), its
    // stderr pipe, a pidfd, its /proc statm, an I/O thread and a writer thread: all of it
    // must go with it, or a crash loop would exhaust this process's descriptors or threads.
    const count = (dir: string) => fs.readdirSync(dir).length;
    const engine = await makeEngine({ processes: 1, maxConcurrentIsolates: 1, warmPoolSize: 1 });
    await serving(engine);
    let crashes = 0;
    const crash = async (times: number) => {
      for (let i = 0; i < times; i++) {
        const [pid] = engine.stats().processes!.pids;
        process.kill(pid, 'SIGSEGV');
        crashes++;
        await expect.poll(() => engine.stats().processes!.crashed, { timeout: 10_000 }).toBe(crashes);
        await serving(engine);
      }
      // A host's descriptors close as its I/O thread reaps it, Node's copy once its loop
      // reads the end of file.
      await new Promise((r) => setTimeout(r, 500));
    };
    // After a crash the engine keeps a second host ready: what 5 crashes hold is the
    // level 20 more must not pass.
    await crash(5);
    const fds = count('/proc/self/fd');
    const threads = count('/proc/self/task');
    await crash(20);
    await expect.poll(() => count('/proc/self/fd'), { timeout: 10_000 }).toBeLessThanOrEqual(fds + 2);
    await expect.poll(() => count('/proc/self/task'), { timeout: 10_000 }).toBeLessThanOrEqual(threads + 2);
  });

  it('contains V8 bugs reachable from JavaScript (test262 await-using: SIGSEGV on V8 13.6)', async () => {
    // On V8 versions with the bug the host process segfaults and the run gets
    // ERR_ISOLET_CRASHED; on fixed versions it is an ordinary TypeError. Either way
    // this process lives on and the next run is served.
    const code = '(async () => { for (await using i = null; i === null; i = { [Symbol.dispose]() {} }) {} })().then(() => "done", (e) => e.name)';
    const r = await runSandbox(code);
    if (r.success) expect(['done', 'TypeError']).toContain(r.output);
    // V8 11 and 12 (Node 20, 22) do not parse `await using` at all.
    else if (Number(runtime.v8Version.split('.')[0]) < 13) expect(r.error).toMatchObject({ code: 'ERR_ISOLET_VALIDATION' });
    else expect(r.error).toMatchObject({ code: 'ERR_ISOLET_CRASHED' });
    const next = await runSandbox('1 + 1');
    expect(next.success && next.output).toBe(2);
  });
});

describe('process isolation: host calls, data and lifecycle', () => {
  it('serves capabilities and data requests in the parent', async () => {
    const seen: number[] = [];
    const engine = await makeEngine({ tools: { record: (n: number) => { seen.push(process.pid); return n * 2; } } });
    const s = engine.submit({ requestId: id(), code: 'const a = await record(21); const b = data.answer; return [a, b]', toolPolicy: { allowedTools: ['record'] } });
    for await (const ev of s) {
      if (ev.type === 'dataRequest') s.respond(ev.id, 'forty-two');
    }
    expect(await s.done).toMatchObject({ type: 'result', data: [42, 'forty-two'] });
    // The handler ran here, in the host, not in the sandbox process.
    expect(seen).toEqual([process.pid]);
  });

  it("keeps a host's runs moving, within their limits, while this process's JavaScript holds Node's thread", async () => {
    // Node's loop reads the hosts' frames while it is free; held, the hosts' I/O threads
    // must read them instead, or no run would end (and free its slot for the next) until
    // it is free again, and a run's unread answer would look overdue.
    const engine = await makeEngine({ maxConcurrentIsolates: 2, processes: 1 });
    await serving(engine);
    const code = 'const t = Date.now(); while (Date.now() - t < 100); return Date.now()';
    // Limits and the hold with room for a loaded machine: what is tested is that the runs end
    // while Node's thread is held, not how fast.
    const runs = Array.from({ length: 8 }, () => engine.submit({ requestId: id(), code, isolateLimits: { wallTimeMs: 2000 } }).done);
    const heldUntil = Date.now() + 5000;
    while (Date.now() < heldUntil); // no turn of Node's loop meanwhile
    const results = await Promise.all(runs);
    for (const r of results) expect(r).toMatchObject({ type: 'result' });
    // All eight ended, two at a time, before Node's thread was free again.
    for (const r of results) expect((r as { data: number }).data).toBeLessThan(heldUntil);
    expect(engine.stats().processes?.recycled).toEqual({});
  });

  it('leaves no host process behind after shutdown', async () => {
    const engine = new SandboxEngine({ memoryMb: 64, maxConcurrentIsolates: 4, warmPoolSize: 2, processes: 2 });
    await engine.init();
    await engine.submit({ requestId: id(), code: 'return 1' }).done;
    const pids = engine.stats().processes!.pids;
    expect(pids.length).toBe(2);
    const running = engine.submit({ requestId: id(), code: 'while (true) {}' });
    await engine.shutdown();
    expect((await running.done).type).toBe('error');
    expect(await waitGone(pids)).toBe(true);
  });

  function runNode(script: string, _kill?: (child: number) => void) {
    const code = `const isolet = require(${JSON.stringify(root)});\n${script}`;
    return runChild(process.execPath, ['-e', code], { timeout: 20000 });
  }

  for (const [how, exit] of [
    ['a natural exit', ''],
    ['process.exit()', 'process.exit(5);'],
    ['an uncaught exception', "throw new Error('boom');"],
  ] as const) {
    it(`leaves no host process behind on ${how}`, async () => {
      const r = await runNode(`
        isolet.runSandbox('while (true) {}', { timeoutMs: 60000 });
        isolet.runSandbox('1').then(() => {
          const e = new isolet.SandboxEngine({ memoryMb: 64, maxConcurrentIsolates: 2, warmPoolSize: 1 });
          return e.init().then(() => e.submit({ code: 'return 1' }).done).then(() => {
            console.log(JSON.stringify(e.stats().processes.pids));
            ${exit || "setTimeout(() => { e.shutdown(); }, 10); process.exitCode = 0; setTimeout(() => process.exit(0), 3000);"}
          });
        });
      `);
      const pids: number[] = JSON.parse(r.stdout.trim().split('\n')[0]);
      expect(pids.length).toBeGreaterThan(0);
      expect(await waitGone(pids)).toBe(true);
    });
  }

  it('serves many engines left open without a listener warning, and ends all their hosts at exit', async () => {
    const r = await runNode(`
      process.on('warning', (w) => console.log('WARNING ' + w.name));
      (async () => {
        const engines = [];
        for (let i = 0; i < 12; i++) {
          const e = new isolet.SandboxEngine({ maxConcurrentIsolates: 1, processes: 1 });
          await e.init();
          engines.push(e);
        }
        const end = await engines[11].submit({ requestId: 'x', code: 'return 2' }).done;
        console.log(JSON.stringify(engines.flatMap((e) => e.stats().processes.pids)));
        console.log(end.type, end.data);
        process.exit(0);
      })();
    `);
    const lines = r.stdout.trim().split('\n');
    expect(lines.filter((l) => l.startsWith('WARNING'))).toEqual([]);
    expect(lines[1]).toBe('result 2');
    const pids: number[] = JSON.parse(lines[0]);
    expect(pids).toHaveLength(12);
    expect(await waitGone(pids)).toBe(true);
  });

  it('settles runs with a typed error when no host process can be started', async () => {
    // A process that may not fork (here: locked down itself) still gets answers.
    const r = await runNode(`
      require(${JSON.stringify(path.join(root, 'lib', 'native'))}).lockDown(process.ppid);
      Promise.all([isolet.runSandbox('1'), isolet.runSandbox('2'), isolet.runSandbox('3')]).then((rs) => {
        console.log(JSON.stringify(rs.map((x) => [x.success, x.error && x.error.code, x.error && x.error.message])));
      });
    `);
    expect(r.status).toBe(0);
    const results = JSON.parse(r.stdout.trim());
    expect(results).toHaveLength(3);
    for (const [success, code, message] of results) {
      expect(success).toBe(false);
      expect(code).toBe('ERR_ISOLET_CRASHED');
      expect(message).toMatch(/Could not start a sandbox host process \(spawn failed: EPERM\)/);
    }
  });

  it('opening a persistent sandbox when no host process can be started rejects, typed, saying why', async () => {
    // Each sandbox gets a host of its own; a process that may not fork cannot start one.
    const r = await runNode(`
      require(${JSON.stringify(path.join(root, 'lib', 'native'))}).lockDown(process.ppid);
      const engine = new isolet.SandboxEngine({ memoryMb: 64, maxConcurrentIsolates: 4, warmPoolSize: 0, processes: 1 });
      (async () => {
        await engine.init().catch(() => {});
        const out = [];
        for (let i = 0; i < 4; i++) {
          try {
            await engine.openSandbox();
            out.push(['opened']);
          } catch (e) {
            out.push([e.name, e.code, e.message]);
          }
        }
        out.push(engine.stats().sandboxes.open);
        console.log(JSON.stringify(out));
        await engine.shutdown();
      })();
    `);
    expect(r.status).toBe(0);
    const out = JSON.parse(r.stdout.trim());
    expect(out.pop()).toBe(0);
    for (const [name, code, message] of out) {
      expect(name).toBe('SandboxError');
      expect(['ERR_ISOLET_CRASHED', 'ERR_ISOLET_OVERLOADED']).toContain(code);
      expect(message).toMatch(/sandbox host process.*spawn failed: EPERM|sandbox host process started for the sandbox did not come up/);
    }
  });

  it('a host whose parent is killed with SIGKILL exits on its own', async () => {
    const { spawn } = await import('node:child_process');
    const child = spawn(process.execPath, ['-e', `
      const isolet = require(${JSON.stringify(root)});
      const e = new isolet.SandboxEngine({ memoryMb: 64, maxConcurrentIsolates: 2, warmPoolSize: 1, processes: 2 });
      e.init().then(() => e.submit({ code: 'return 1' }).done).then(() => {
        e.submit({ code: 'while (true) {}', isolateLimits: { wallTimeMs: 60000 } });
        console.log(JSON.stringify(e.stats().processes.pids));
      });
    `], { stdio: ['ignore', 'pipe', 'inherit'] });
    const line: string = await new Promise((resolve) => {
      let out = '';
      child.stdout.on('data', (d) => {
        out += d;
        if (out.includes('\n')) resolve(out.trim());
      });
    });
    const pids: number[] = JSON.parse(line);
    child.kill('SIGKILL');
    expect(await waitGone(pids, 3000)).toBe(true);
  });
});
