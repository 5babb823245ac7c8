// The host process must exit cleanly and keep its exit code, whatever isolet's threads
// are doing: warm isolates waiting, runs in flight, or a quarantined thread still running
// at the lowest priority (thread mode), and whatever its sandbox host processes are doing.
// Regression: disposing warm isolates while Node tore V8 down segfaulted at exit, and a
// quarantined isolate made V8 13 abort in V8::Dispose. The same holds when only
// `worker_threads` Workers load isolet (vitest's default pool): a quarantined thread left
// by a Worker crashed the process at the main thread's exit (SIGSEGV in the stuck
// thread after V8::Dispose freed V8's tables on Node 20-24, an abort in V8 on 26).
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runChild } from './support/spawn';

const root = path.resolve(__dirname, '..');

async function runNode(script: string) {
  const r = await runChild(process.execPath, ['-e', `const isolet = require(${JSON.stringify(root)});\n${script}`], {
    timeout: 30_000,
  });
  return { status: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr };
}

describe('process exit', () => {
  it('exits cleanly with warm isolates idle (natural exit)', async () => {
    for (let i = 0; i < 5; i++) {
      const r = await runNode(`isolet.runSandbox('6 * 7').then((x) => console.log(x.output));`);
      expect(r.signal).toBeNull();
      expect(r.status).toBe(0);
      expect(r.stdout.trim()).toBe('42');
    }
  });

  it('process.exit() right after a burst of thread-mode runs exits cleanly (warm isolates being replaced)', async () => {
    // process.exit() disposes Node's platform without environment cleanup hooks; isolet
    // stops its isolate threads from process.on('exit') first. Without that, 11 of 24
    // such processes ended with SIGSEGV on Node 20.
    for (let i = 0; i < 8; i++) {
      const r = await runNode(`
        (async () => {
          for (let i = 0; i < 60; i++) {
            await new Promise((r) => setTimeout(r, 1));
            await isolet.runSandbox('1 + 1', { isolation: 'thread' });
          }
          process.exit(0);
        })();
      `);
      expect(r.signal, r.stderr).toBeNull();
      expect(r.status, r.stderr).toBe(0);
    }
  });

  it('process.exit() right after runs end: no isolate thread is left by the time the process exits', async () => {
    // A thread's last act is running its thread-local destructors, OpenSSL's among them (V8
    // seeds each isolate from Node's entropy source); exit() runs OpenSSL's cleanup, which
    // frees every thread's state too. A thread still ending then was a double free ("double
    // free or corruption (fasttop)", about 1 exit in 200 of `isolet run` on Node 20). Isolet
    // joins its ended threads before the process exits. Seen from an 'exit' listener that
    // runs after isolet's: before, 10 of 40 such processes still had an isolate thread.
    // One process at a time: the suite runs beside other files.
    const script = `
      const fs = require('node:fs');
      process.on('exit', () => {
        const names = fs.readdirSync('/proc/self/task').map((t) => { try { return fs.readFileSync('/proc/self/task/' + t + '/comm', 'utf8').trim(); } catch { return ''; } });
        console.log(JSON.stringify(names.filter((n) => n === 'isolet-isolate' || n === 'isolet-sandbox')));
      });
      const grow = 'const a = []; for (let i = 0; i < 48; i++) a.push(new Array(2 ** 17).fill(i + 0.5)); return a.length';
      const engine = new isolet.SandboxEngine({ isolation: 'thread', memoryMb: 16, maxConcurrentIsolates: 8, warmPoolSize: 0 });
      engine.init()
        .then(() => Promise.all(Array.from({ length: 8 }, (_, i) => engine.submit({ requestId: 'r' + i, code: grow }).done)))
        .then((ends) => process.exit(ends.every((e) => e.type === 'error' && e.error.name === 'SandboxOOMError') ? 0 : 9));
    `;
    const left: string[] = [];
    for (let i = 0; i < 20; i++) {
      const r = await runNode(script);
      expect(r.signal, r.stderr).toBeNull();
      expect(r.status, r.stderr).toBe(0);
      left.push(r.stdout.trim());
    }
    expect(left).toEqual(Array(20).fill('[]'));
  }, 120_000);

  it('keeps process.exitCode and exits while runs are still in flight', async () => {
    const r = await runNode(`
      for (let i = 0; i < 4; i++) isolet.runSandbox('while (true) {}', { timeoutMs: 60000 });
      const engine = new isolet.SandboxEngine({ memoryMb: 64, maxConcurrentIsolates: 2, warmPoolSize: 2 });
      engine.init().then(() => { engine.submit({ requestId: 'x', code: 'for (;;) {}' }); setTimeout(() => { process.exitCode = 3; process.exit(); }, 100); });
    `);
    expect(r.signal).toBeNull();
    expect(r.status).toBe(3);
  });

  it('exits with its own code after a thread was quarantined', async () => {
    const r = await runNode(`
      isolet.runSandbox('Array.prototype.indexOf.call({ length: 2 ** 53 - 1 }, 1)', { timeoutMs: 100, isolation: 'thread' }).then((x) => {
        console.log(x.error.name, isolet.processStats().quarantinedThreads);
        process.exitCode = 7;
      });
    `);
    expect(r.signal).toBeNull();
    expect(r.stdout.trim()).toBe('SandboxTimeoutError 1');
    expect(r.status).toBe(7);
  });

  it('works inside worker threads, and a worker exiting leaves the main thread engine running', async () => {
    const r = await runNode(`
      const { Worker } = require('node:worker_threads');
      const src = 'const { runSandbox } = require(' + JSON.stringify(${JSON.stringify(root)}) + '); const { parentPort } = require("node:worker_threads"); runSandbox("2 + 3").then((r) => parentPort.postMessage(r.output));';
      const w = new Worker(src, { eval: true });
      w.on('message', (m) => console.log('worker', m));
      w.on('exit', async () => {
        const after = await isolet.runSandbox('1 + 1');
        console.log('main', after.output);
      });
    `);
    expect(r.signal).toBeNull();
    expect(r.status).toBe(0);
    expect(r.stdout.trim().split('\n')).toEqual(['worker 5', 'main 2']);
  });

  describe('when only Workers load isolet (the main thread never requires it)', () => {
    // A stuck thread-mode run: it ignores termination and is quarantined at its limit.
    const STUCK = `isolet.runSandbox('Array.prototype.indexOf.call({ length: 2 ** 53 - 1 }, 1)', { timeoutMs: 100, isolation: 'thread' })`;

    /** A Worker whose source loads isolet (as `isolet`) and then runs `body`. */
    const worker = (body: string) =>
      `new Worker(${JSON.stringify(
        `const isolet = require(${JSON.stringify(root)}); const { parentPort } = require('node:worker_threads');\n${body}`,
      )}, { eval: true })`;

    async function runMain(script: string, execArgv: string[] = []) {
      const r = await runChild(process.execPath, [...execArgv, '-e', `const { Worker } = require('node:worker_threads');\n${script}`], {
        timeout: 90_000,
      });
      return { status: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr };
    }

    it('exits cleanly with warm isolates idle in a Worker (natural exit)', async () => {
      for (let i = 0; i < 3; i++) {
        const r = await runMain(`${worker(`isolet.runSandbox('6 * 7', { isolation: 'thread' }).then((x) => parentPort.postMessage(x.output));`)}.on('message', (m) => console.log(m));`);
        expect(r.signal, r.stderr).toBeNull();
        expect(r.status, r.stderr).toBe(0);
        expect(r.stdout.trim()).toBe('42');
      }
    });

    it('a Worker calling process.exit() right after a burst of thread-mode runs ends only itself', async () => {
      for (let i = 0; i < 4; i++) {
        const r = await runMain(`
          ${worker(`(async () => {
            for (let i = 0; i < 60; i++) {
              await new Promise((r) => setTimeout(r, 1));
              await isolet.runSandbox('1 + 1', { isolation: 'thread' });
            }
            process.exit(0);
          })();`)}.on('exit', (code) => { console.log('worker', code); process.exitCode = 12; });
        `);
        expect(r.signal, r.stderr).toBeNull();
        expect(r.status, r.stderr).toBe(12);
        expect(r.stdout.trim()).toBe('worker 0');
      }
    });

    it('keeps the main thread exit code when it calls process.exit() while a Worker has runs in flight', async () => {
      const r = await runMain(`
        ${worker(`
          for (let i = 0; i < 4; i++) isolet.runSandbox('while (true) {}', { timeoutMs: 60000, isolation: 'thread' });
          const engine = new isolet.SandboxEngine({ isolation: 'thread', memoryMb: 64, maxConcurrentIsolates: 2, warmPoolSize: 2 });
          engine.init().then(() => { engine.submit({ requestId: 'x', code: 'for (;;) {}' }); parentPort.postMessage('busy'); });
        `)}.on('message', () => setTimeout(() => { process.exitCode = 3; process.exit(); }, 100));
      `);
      expect(r.signal, r.stderr).toBeNull();
      expect(r.status, r.stderr).toBe(3);
    });

    it('exits with its own code after a Worker that quarantined a thread has ended', async () => {
      // The stuck thread outlives its Worker; the process exit must not tear V8 down under it.
      for (let i = 0; i < 3; i++) {
        const r = await runMain(`
          ${worker(`${STUCK}.then((x) => console.log(x.error.name, isolet.processStats().quarantinedThreads));`)}
            .on('exit', (code) => { console.log('worker', code); setTimeout(() => { process.exitCode = 7; }, 20); });
        `);
        expect(r.signal, r.stderr).toBeNull();
        expect(r.status, r.stderr).toBe(7);
        expect(r.stdout.trim().split('\n')).toEqual(['SandboxTimeoutError 1', 'worker 0']);
      }
    });

    it('exits with its own code after terminating a Worker whose thread was quarantined', async () => {
      const r = await runMain(`
        const w = ${worker(`${STUCK}.then((x) => { parentPort.postMessage(x.error.name); setInterval(() => {}, 1000); });`)};
        w.on('message', (m) => { console.log(m); w.terminate().then(() => { process.exitCode = 4; }); });
      `);
      expect(r.signal, r.stderr).toBeNull();
      expect(r.status, r.stderr).toBe(4);
      expect(r.stdout.trim()).toBe('SandboxTimeoutError');
    });

    it('exits with its own code after terminating a Worker while its stuck run is still within its limit', async () => {
      // Terminating the Worker shuts its engine down: the run is asked to stop, ignores it
      // and its thread is quarantined during the Worker's teardown.
      const r = await runMain(`
        const w = ${worker(`isolet.runSandbox('Array.prototype.indexOf.call({ length: 2 ** 53 - 1 }, 1)', { timeoutMs: 60000, isolation: 'thread' }); parentPort.postMessage('started');`)};
        w.on('message', () => setTimeout(() => w.terminate().then(() => { process.exitCode = 6; }), 200));
      `);
      expect(r.signal, r.stderr).toBeNull();
      expect(r.status, r.stderr).toBe(6);
    });

    it('exits with its own code when a Worker with a quarantined thread is still alive at the natural exit', async () => {
      // Node's main thread stops the (unreferenced) Worker during its own teardown.
      const r = await runMain(`
        const w = ${worker(`${STUCK}.then((x) => { parentPort.postMessage(x.error.name); setInterval(() => {}, 1000); });`)};
        w.on('message', (m) => { console.log(m); w.unref(); process.exitCode = 9; });
      `);
      expect(r.signal, r.stderr).toBeNull();
      expect(r.status, r.stderr).toBe(9);
      expect(r.stdout.trim()).toBe('SandboxTimeoutError');
    });

    it('exits with its own code when it ends while an unreferenced Worker\'s stuck run is still within its limit', async () => {
      // The closest race: the Worker's run (running, within its limit) is quarantined only
      // when the main thread's teardown stops the Worker.
      for (let i = 0; i < 3; i++) {
        const r = await runMain(`
          const w = ${worker(`isolet.runSandbox('Array.prototype.indexOf.call({ length: 2 ** 53 - 1 }, 1)', { timeoutMs: 60000, isolation: 'thread' }); setTimeout(() => parentPort.postMessage(isolet.processStats().liveThreads), 150);`)};
          w.on('message', (m) => { console.log('live', m); w.unref(); process.exitCode = 20; });
        `);
        expect(r.signal, r.stderr).toBeNull();
        expect(r.status, r.stderr).toBe(20);
        expect(Number(r.stdout.trim().split(' ')[1])).toBeGreaterThanOrEqual(1);
      }
    });

    it('keeps the code of process.exit() on the main thread while a Worker holds a quarantined thread', async () => {
      const r = await runMain(`
        const w = ${worker(`${STUCK}.then((x) => { parentPort.postMessage(x.error.name); setInterval(() => {}, 1000); });`)};
        w.on('message', () => process.exit(13));
      `);
      expect(r.signal, r.stderr).toBeNull();
      expect(r.status, r.stderr).toBe(13);
    });

    it('exits with its own code after four Workers loading isolet at once each quarantined a thread', async () => {
      const r = await runMain(`
        let left = 4;
        for (let i = 0; i < 4; i++) {
          ${worker(`${STUCK}.then((x) => console.log(x.error.name));`)}.on('exit', () => { if (--left === 0) process.exitCode = 17; });
        }
      `);
      expect(r.signal, r.stderr).toBeNull();
      expect(r.status, r.stderr).toBe(17);
      expect(r.stdout.trim().split('\n')).toEqual(Array(4).fill('SandboxTimeoutError'));
    });

    it('exits with its own code when the main thread was blocked in a native call while a Worker quarantined a thread and ended', async () => {
      // The main thread cannot run JavaScript then: isolet reaches it once the call returns.
      const r = await runMain(`
        ${worker(`${STUCK}.then((x) => { console.log(x.error.name); process.exit(0); });`)};
        require('node:child_process').execSync('sleep 1');
        process.exitCode = 16;
      `);
      expect(r.signal, r.stderr).toBeNull();
      expect(r.status, r.stderr).toBe(16);
      expect(r.stdout.trim()).toBe('SandboxTimeoutError');
    });

    it('exits with its own code after a nested Worker quarantined a thread', async () => {
      const inner = worker(`${STUCK}.then((x) => console.log('inner', x.error.name));`);
      const r = await runMain(`
        new Worker(${JSON.stringify(`const { Worker } = require('node:worker_threads'); ${inner};`)}, { eval: true })
          .on('exit', () => { process.exitCode = 5; });
      `);
      expect(r.signal, r.stderr).toBeNull();
      expect(r.status, r.stderr).toBe(5);
      expect(r.stdout.trim()).toBe('inner SandboxTimeoutError');
    });

    it('a thread quarantined in a Worker that finishes on its own after the Worker ended leaves the quarantine', async () => {
      // indexOf from 2**53 - 1 - 3e6 ignores termination for ~1-2 s of CPU (slow path per index;
      // 1e6 took 0.36 s on Node 26, under the limit + 400 ms at which the thread is quarantined):
      // quarantined, it then gets only idle CPU time, a fifth of a core at most, hence the waits.
      const r = await runMain(`
        ${worker(`isolet.runSandbox('Array.prototype.indexOf.call({ length: 2 ** 53 - 1 }, 1, 2 ** 53 - 1 - 3e6)', { timeoutMs: 50, isolation: 'thread' })
          .then((x) => console.log(x.error.name, isolet.processStats().quarantinedThreads));`)}
          .on('exit', () => {
            const { processStats } = require(${JSON.stringify(root)});
            const deadline = Date.now() + 100000;
            const poll = setInterval(() => {
              const q = processStats().quarantinedThreads;
              if (q === 0 || Date.now() > deadline) { clearInterval(poll); console.log('left', q); process.exitCode = 8; }
            }, 50);
          });
      `);
      expect(r.signal, r.stderr).toBeNull();
      expect(r.status, r.stderr).toBe(8);
      expect(r.stdout.trim().split('\n')).toEqual(['SandboxTimeoutError 1', 'left 0']);
    }, 150_000);

    it('keeps its exit code after a heap bomb in thread mode and a stuck run in process mode in a Worker', async () => {
      const r = await runMain(`
        ${worker(`(async () => {
          const a = await isolet.runSandbox('const a = []; for (;;) a.push(new Array(1e5).fill(1))', { memoryLimitMb: 16, isolation: 'thread' });
          const b = await isolet.runSandbox('Array.prototype.indexOf.call({ length: 2 ** 53 - 1 }, 1)', { timeoutMs: 200, isolation: 'process' });
          console.log(a.error.name, b.error.name);
        })();`)}.on('exit', () => { process.exitCode = 11; });
      `);
      expect(r.signal, r.stderr).toBeNull();
      expect(r.status, r.stderr).toBe(11);
      expect(r.stdout.trim()).toBe('SandboxOOMError SandboxTimeoutError');
    });

    describe('under the permission model (no inspector: a Worker cannot reach the main thread)', () => {
      const permission = process.allowedNodeEnvironmentFlags.has('--permission') ? '--permission' : '--experimental-permission';
      const flags = [permission, '--allow-fs-read=*', '--allow-worker', '--allow-addons', '--allow-child-process'];

      it('a Worker warns that a stuck thread-mode run would crash the process at exit', async () => {
        const r = await runMain(`${worker(`isolet.runSandbox('1 + 1', { isolation: 'thread' }).then((x) => console.log(x.output));`)}`, flags);
        expect(r.signal, r.stderr).toBeNull();
        expect(r.status, r.stderr).toBe(0);
        expect(r.stdout.trim()).toBe('2');
        expect(r.stderr).toContain('[ISOLET_MAIN_THREAD]');
        expect(r.stderr).toContain('Load isolet on the main thread too');
      });

      it('with isolet loaded on the main thread as the warning advises, a stuck run in a Worker exits cleanly', async () => {
        const r = await runMain(
          `require(${JSON.stringify(root)});
          ${worker(`${STUCK}.then((x) => console.log(x.error.name));`)}.on('exit', () => { process.exitCode = 14; });`,
          flags,
        );
        expect(r.signal, r.stderr).toBeNull();
        expect(r.status, r.stderr).toBe(14);
        expect(r.stdout.trim()).toBe('SandboxTimeoutError');
        expect(r.stderr).not.toContain('ISOLET_MAIN_THREAD');
      });
    });

    it('the main thread can load isolet after a Worker did, and both keep working', async () => {
      const r = await runMain(`
        ${worker(`${STUCK}.then((x) => parentPort.postMessage(x.error.name));`)}.on('message', async (m) => {
          const isolet = require(${JSON.stringify(root)});
          const after = await isolet.runSandbox('1 + 1', { isolation: 'thread' });
          console.log(m, after.output, isolet.processStats().quarantinedThreads);
          process.exitCode = 10;
        });
      `);
      expect(r.signal, r.stderr).toBeNull();
      expect(r.status, r.stderr).toBe(10);
      expect(r.stdout.trim()).toBe('SandboxTimeoutError 2 1');
    });
  });
});
