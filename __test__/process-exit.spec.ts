// The host process must exit cleanly and keep its exit code, whatever isolet's threads
// are doing: warm isolates waiting, runs in flight, or a quarantined thread still running
// at idle priority (thread mode), and whatever its sandbox host processes are doing.
// Regression: disposing warm isolates while Node tore V8 down segfaulted at exit, and a
// quarantined isolate made V8 13 abort in V8::Dispose.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const root = path.resolve(__dirname, '..');

function runNode(script: string) {
  const r = spawnSync(process.execPath, ['-e', `const isolet = require(${JSON.stringify(root)});\n${script}`], {
    encoding: 'utf8',
    timeout: 30_000,
  });
  return { status: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr };
}

describe('process exit', () => {
  it('exits cleanly with warm isolates idle (natural exit)', () => {
    for (let i = 0; i < 5; i++) {
      const r = runNode(`isolet.runSandbox('6 * 7').then((x) => console.log(x.output));`);
      expect(r.signal).toBeNull();
      expect(r.status).toBe(0);
      expect(r.stdout.trim()).toBe('42');
    }
  });

  it('process.exit() right after a burst of thread-mode runs exits cleanly (warm isolates being replaced)', () => {
    // process.exit() disposes Node's platform without environment cleanup hooks; isolet
    // stops its isolate threads from process.on('exit') first. Without that, 11 of 24
    // such processes ended with SIGSEGV on Node 20.
    for (let i = 0; i < 8; i++) {
      const r = runNode(`
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

  it('keeps process.exitCode and exits while runs are still in flight', () => {
    const r = runNode(`
      for (let i = 0; i < 4; i++) isolet.runSandbox('while (true) {}', { timeoutMs: 60000 });
      const engine = new isolet.SandboxEngine({ memoryMb: 64, maxConcurrentIsolates: 2, warmPoolSize: 2 });
      engine.init().then(() => { engine.submit({ requestId: 'x', code: 'for (;;) {}' }); setTimeout(() => { process.exitCode = 3; process.exit(); }, 100); });
    `);
    expect(r.signal).toBeNull();
    expect(r.status).toBe(3);
  });

  it('exits with its own code after a thread was quarantined', () => {
    const r = runNode(`
      isolet.runSandbox('Array.prototype.indexOf.call({ length: 2 ** 53 - 1 }, 1)', { timeoutMs: 100, isolation: 'thread' }).then((x) => {
        console.log(x.error.name, isolet.processStats().quarantinedThreads);
        process.exitCode = 7;
      });
    `);
    expect(r.signal).toBeNull();
    expect(r.stdout.trim()).toBe('SandboxTimeoutError 1');
    expect(r.status).toBe(7);
  });

  it('works inside worker threads, and a worker exiting leaves the main thread engine running', () => {
    const r = runNode(`
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
});
