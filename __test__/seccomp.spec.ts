// Least privilege for sandbox host processes: `lockDown(parentPid)` (the internal binding
// the sandbox host entry script calls right after start-up). Everything here runs in
// child `node` processes judged from outside: once a process is locked down it stays so,
// and PDEATHSIG tests kill processes. Each refusal is tried for real, next to a control
// child that makes the same attempts without locking down and succeeds, so a probe that
// cannot observe a refusal fails the test.
import { fork, spawn } from 'node:child_process';
import dgram from 'node:dgram';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runChild as spawnAsync } from './support/spawn';

const root = path.resolve(__dirname, '..');
const linux = process.platform === 'linux';

let dir: string;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'isolet-seccomp-'));
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** Starts `node -e script args...`; resolves with its output once it exits. */
function runChild(script: string, args: string[], onLine?: (line: string, child: ReturnType<typeof spawn>) => void) {
  const child = spawn(process.execPath, ['-e', script, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  let pending = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
    pending += chunk;
    let nl: number;
    while ((nl = pending.indexOf('\n')) >= 0) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      onLine?.(line, child);
    }
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const done = new Promise<{ status: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>(
    (resolve) => child.on('close', (status, signal) => resolve({ status, signal, stdout, stderr })),
  );
  return { child, done };
}

/** True once `pid` is gone (or a zombie nobody has reaped yet: it runs no code). */
function gone(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}

async function waitGone(pid: number, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (gone(pid)) return true;
    await new Promise((r) => setTimeout(r, 25));
  }
  return gone(pid);
}

// The attempts, made from inside the child. argv: parentPid, lockDown|control, dir,
// tcpPort, httpPort, udpPort. Prints one JSON line, then waits for stdin to end so the
// parent can inspect /proc/<pid> of a live child.
const ATTEMPTS = `
const native = require(${JSON.stringify(path.join(root, 'lib', 'native'))});
const isolet = require(${JSON.stringify(root)});
const fs = require('node:fs');
const cp = require('node:child_process');
const net = require('node:net');
const dgram = require('node:dgram');
const http = require('node:http');
const path = require('node:path');
const os = require('node:os');
const { Worker } = require('node:worker_threads');
// This child plays a sandbox host: it runs isolates on its own threads.
const T = { isolation: 'thread' };
const [parentPid, mode, dir, tcpPort, httpPort, udpPort] = process.argv.slice(1);
const existing = path.join(dir, 'existing.txt');
const out = {};
if (mode === 'lockDown') out.status = native.lockDown(Number(parentPid));
const sync = (f) => { try { f(); return 'allowed'; } catch (e) { return (e.info && e.info.code) || e.code || String(e); } };
const settle = (start) => new Promise((resolve) => {
  const t = setTimeout(() => resolve('no answer'), 5000);
  start((v) => { clearTimeout(t); resolve(v); });
});
(async () => {
  // New programs and processes.
  const r = cp.spawnSync(process.execPath, ['-e', '0']);
  out.spawnSync = r.error ? r.error.code : 'allowed';
  out.execFileSync = sync(() => cp.execFileSync('/bin/true'));
  out.spawn = await settle((done) => {
    let c;
    try { c = cp.spawn('/bin/true'); } catch (e) { return done(e.code); }
    c.on('error', (e) => done(e.code));
    c.on('exit', () => done('allowed'));
  });
  // Files.
  out.openExisting = sync(() => fs.closeSync(fs.openSync(existing, 'r')));
  out.readPasswd = sync(() => fs.readFileSync('/etc/passwd'));
  out.writeNew = sync(() => fs.writeFileSync(path.join(dir, mode + '-new.txt'), 'x'));
  out.readFileAsync = await settle((done) => fs.readFile(existing, (e) => done(e ? e.code : 'allowed')));
  out.mkdir = sync(() => fs.mkdirSync(path.join(dir, mode + '-sub')));
  out.symlink = sync(() => fs.symlinkSync('/etc/passwd', path.join(dir, mode + '-link')));
  out.chmod = sync(() => fs.chmodSync(existing, 0o644));
  out.rename = sync(() => fs.renameSync(path.join(dir, mode + '-victim.txt'), path.join(dir, mode + '-moved.txt')));
  out.unlink = sync(() => fs.unlinkSync(path.join(dir, mode + '-doomed.txt')));
  out.watch = sync(() => fs.watch(dir).close());
  // Network, to servers the test started on 127.0.0.1.
  out.netConnect = await settle((done) => {
    const s = net.connect(Number(tcpPort), '127.0.0.1');
    s.on('error', (e) => done(e.code));
    s.on('connect', () => { s.destroy(); done('allowed'); });
  });
  out.httpGet = await settle((done) => {
    const req = http.get('http://127.0.0.1:' + httpPort + '/', (res) => { res.resume(); done('allowed'); });
    req.on('error', (e) => done(e.code));
  });
  out.udpSend = await settle((done) => {
    const s = dgram.createSocket('udp4');
    s.on('error', (e) => { done(e.code); });
    s.send('hello', Number(udpPort), '127.0.0.1', (e) => { s.close(); done(e ? e.code : 'allowed'); });
  });
  out.listen = await settle((done) => {
    const server = net.createServer();
    server.on('error', (e) => done(e.code));
    server.listen(0, '127.0.0.1', () => { server.close(); done('allowed'); });
  });
  // Other processes: signal 0 checks permission without delivering anything.
  out.signalParent = sync(() => process.kill(Number(parentPid), 0));
  out.signalSelf = sync(() => process.kill(process.pid, 0));
  // Scheduling: setting the parent's priority (to what it is, so the control changes nothing).
  out.reniceParent = sync(() => os.setPriority(Number(parentPid), os.getPriority(Number(parentPid))));
  out.reniceSelf = sync(() => os.setPriority(process.pid, os.getPriority(process.pid)));
  // Threads keep working: a worker thread, and sandbox runs on isolate threads
  // created after lock-down, several at once, with host calls back to this thread.
  out.worker = await settle((done) => {
    const w = new Worker('require("node:worker_threads").parentPort.postMessage(6 * 7)', { eval: true });
    w.on('message', (m) => { done(m); w.terminate(); });
    w.on('error', (e) => done('error ' + e.message));
  });
  const runs = await Promise.all([
    isolet.runSandbox('[1, 2, 3].map((x) => x * 2).reduce((a, b) => a + b)', T),
    isolet.runSandbox('let s = 0; for (let i = 0; i < 1e6; i++) s += i; s', T),
    isolet.runSandbox('return (await add(20, 22)) + ":" + JSON.stringify(await Promise.all([1, 2].map(async (x) => x)))',
      { ...T, capabilities: { add: async (a, b) => a + b } }),
    isolet.runSandbox('new Array(2e6).fill(1).length', { ...T, memoryLimitMb: 64 }),
    isolet.runSandbox('while (true) {}', { ...T, timeoutMs: 200 }),
    // A heap bomb: GC threads, mmap and madvise under pressure, then the heap limit.
    isolet.runSandbox('const a = []; while (true) a.push(new Array(1e5).fill(1.5))', { ...T, memoryLimitMb: 16 }),
  ]);
  out.runs = runs.map((r) => (r.success ? r.output : r.error.name));
  // An engine created after lock-down, with a WebAssembly module compiled at init()
  // (executable code pages) and instantiated in each isolate: (func (result i32) 42).
  const f42 = new Uint8Array([0,97,115,109,1,0,0,0,1,5,1,96,0,1,127,3,2,1,0,7,5,1,1,102,0,0,10,6,1,4,0,65,42,11]);
  const engine = new isolet.SandboxEngine({ ...T, memoryMb: 64, maxConcurrentIsolates: 3, warmPoolSize: 2, wasmModules: [{ name: 'm', source: f42 }] });
  await engine.init();
  const results = [];
  for (let i = 0; i < 4; i++) {
    for await (const ev of engine.submit({ requestId: 'r' + i, code: 'return wasm.m.f() + ' + i })) {
      if (ev.type === 'result') results.push(ev.data);
      if (ev.type === 'error') results.push('error ' + (ev.error && ev.error.name));
    }
  }
  await engine.shutdown();
  out.engine = results;
  console.log(JSON.stringify(out));
  process.stdin.resume();
  process.stdin.on('end', () => process.exit(0));
})().catch((e) => { console.log(JSON.stringify({ crashed: String(e && e.stack) })); process.exit(1); });
`;

interface Servers {
  tcpPort: number;
  httpPort: number;
  udpPort: number;
  seen: () => { tcp: number; http: number; udp: number };
  close: () => Promise<void>;
}

async function startServers(): Promise<Servers> {
  let tcp = 0;
  let httpCount = 0;
  let udp = 0;
  const tcpServer = net.createServer((s) => {
    tcp++;
    s.destroy();
  });
  const httpServer = http.createServer((_req, res) => res.end('ok'));
  httpServer.on('connection', () => httpCount++);
  const udpServer = dgram.createSocket('udp4');
  udpServer.on('message', () => udp++);
  await new Promise<void>((r) => tcpServer.listen(0, '127.0.0.1', r));
  await new Promise<void>((r) => httpServer.listen(0, '127.0.0.1', r));
  await new Promise<void>((r) => udpServer.bind(0, '127.0.0.1', r));
  return {
    tcpPort: (tcpServer.address() as net.AddressInfo).port,
    httpPort: (httpServer.address() as net.AddressInfo).port,
    udpPort: udpServer.address().port,
    seen: () => ({ tcp, http: httpCount, udp }),
    close: async () => {
      await new Promise((r) => tcpServer.close(r));
      await new Promise((r) => httpServer.close(r));
      await new Promise<void>((r) => udpServer.close(() => r()));
    },
  };
}

/** Runs ATTEMPTS in a child; returns its report and what /proc showed of its threads. */
async function attempt(mode: 'lockDown' | 'control', servers: Servers) {
  for (const name of ['victim', 'doomed']) fs.writeFileSync(path.join(dir, `${mode}-${name}.txt`), name);
  fs.writeFileSync(path.join(dir, 'existing.txt'), 'hello');
  let report: Record<string, unknown> | undefined;
  let threads: { seccomp: string; noNewPrivs: string }[] = [];
  const { child, done } = runChild(
    ATTEMPTS,
    [String(process.pid), mode, dir, String(servers.tcpPort), String(servers.httpPort), String(servers.udpPort)],
    (line, c) => {
      report = JSON.parse(line);
      // Judge every thread of the live child from outside.
      const taskDir = `/proc/${c.pid}/task`;
      try {
        threads = fs.readdirSync(taskDir).flatMap((tid) => {
          let status: string;
          try {
            status = fs.readFileSync(`${taskDir}/${tid}/status`, 'utf8');
          } catch (err) {
            // A thread that ended between the listing and the read (an isolate
            // finishing) has nothing left to judge.
            if ((err as NodeJS.ErrnoException).code === 'ENOENT' || (err as NodeJS.ErrnoException).code === 'ESRCH') return [];
            throw err;
          }
          return [{
            seccomp: /^Seccomp:\s*(\d+)/m.exec(status)?.[1] ?? '?',
            noNewPrivs: /^NoNewPrivs:\s*(\d+)/m.exec(status)?.[1] ?? '?',
          }];
        });
      } finally {
        // Always let the child finish, so a failure here fails the test instead of hanging it.
        c.stdin!.end();
      }
    },
  );
  const result = await done;
  expect(result.stderr).not.toMatch(/Abort|Segmentation|FATAL|libuv/i);
  expect(result.signal).toBeNull();
  expect(result.status, result.stdout + result.stderr).toBe(0);
  expect(report, result.stdout + result.stderr).toBeDefined();
  return { report: report!, threads, pid: child.pid! };
}

if (linux) describe('lockDown in a sandbox host process (Linux)', () => {
  it('refuses exec, fork, files, sockets and signals to others, while isolates, threads and host calls keep working', async () => {
    const servers = await startServers();
    try {
      const control = await attempt('control', servers);
      const afterControl = servers.seen();
      const locked = await attempt('lockDown', servers);
      const afterLocked = servers.seen();

      const refusedOps = [
        'spawnSync', 'execFileSync', 'spawn',
        'openExisting', 'readPasswd', 'writeNew', 'readFileAsync', 'mkdir', 'symlink', 'chmod', 'rename', 'unlink', 'watch',
        'netConnect', 'httpGet', 'udpSend', 'listen',
        'signalParent', 'reniceParent',
      ];
      // The control child could do all of it: the probes do observe each operation.
      for (const op of refusedOps) expect([op, control.report[op]]).toEqual([op, 'allowed']);
      expect(afterControl.tcp).toBeGreaterThan(0);
      expect(afterControl.http).toBeGreaterThan(0);
      expect(afterControl.udp).toBeGreaterThan(0);

      // The locked-down child is refused each one with EPERM...
      const status = locked.report.status as Record<string, unknown>;
      expect(status).toMatchObject({ seccomp: true, noNewPrivs: true, parentDeathSignal: true });
      expect(status.reason).toBeUndefined();
      expect(status.ioUringRings).toBeGreaterThanOrEqual(0);
      for (const op of refusedOps) expect([op, locked.report[op]]).toEqual([op, 'EPERM']);
      // ...and no connection or datagram reached the servers.
      expect(afterLocked).toEqual(afterControl);
      // Nothing was created, changed or removed on disk.
      expect(fs.existsSync(path.join(dir, 'lockDown-new.txt'))).toBe(false);
      expect(fs.existsSync(path.join(dir, 'lockDown-sub'))).toBe(false);
      expect(fs.existsSync(path.join(dir, 'lockDown-link'))).toBe(false);
      expect(fs.existsSync(path.join(dir, 'lockDown-victim.txt'))).toBe(true);
      expect(fs.existsSync(path.join(dir, 'lockDown-doomed.txt'))).toBe(true);

      // What a sandbox host needs still works, as in the control child.
      for (const r of [control.report, locked.report]) {
        expect(r.signalSelf).toBe('allowed');
        expect(r.reniceSelf).toBe('allowed');
        expect(r.worker).toBe(42);
        expect(r.runs).toEqual([12, 499999500000, '42:[1,2]', 2000000, 'SandboxTimeoutError', 'SandboxOOMError']);
        expect(r.engine).toEqual([42, 43, 44, 45]);
      }

      // Every thread of the locked-down child (including those started before
      // lock-down) is under the filter with no_new_privs; the control's are not.
      expect(locked.threads.length).toBeGreaterThan(3);
      for (const t of locked.threads) expect(t).toEqual({ seccomp: '2', noNewPrivs: '1' });
      for (const t of control.threads) expect(t).toEqual({ seccomp: '0', noNewPrivs: '0' });
    } finally {
      await servers.close();
    }
  });

  it('the IPC channel of child_process.fork keeps working after lock-down (json and advanced serialization)', async () => {
    const script = path.join(dir, 'ipc-child.js');
    fs.writeFileSync(
      script,
      `const native = require(${JSON.stringify(path.join(root, 'lib', 'native'))});
       const isolet = require(${JSON.stringify(root)});
       const status = native.lockDown(Number(process.argv[2]));
       process.on('message', async (m) => {
         if (m === 'bye') return process.disconnect();
         const r = await isolet.runSandbox(m.code, { isolation: 'thread' });
         process.send({ seccomp: status.seccomp, output: r.output, received: m.payload.length, reply: 'y'.repeat(m.payload.length) });
       });
       process.send('ready');`,
    );
    for (const serialization of ['json', 'advanced'] as const) {
      const child = fork(script, [String(process.pid)], { serialization, stdio: ['ignore', 'pipe', 'pipe', 'ipc'] });
      let stderr = '';
      child.stderr!.on('data', (d) => (stderr += d));
      const messages: unknown[] = [];
      const next = () => new Promise<unknown>((resolve) => child.once('message', resolve));
      expect(await next()).toBe('ready');
      const payload = 'x'.repeat(4 << 20);
      for (let i = 0; i < 3; i++) {
        const reply = next();
        child.send({ code: `${i} + 40`, payload });
        messages.push(await reply);
      }
      const exited = new Promise<[number | null, string | null]>((r) => child.on('exit', (code, signal) => r([code, signal])));
      child.send('bye');
      expect(await exited, stderr).toEqual([0, null]);
      expect(messages).toEqual(
        [40, 41, 42].map((output) => ({ seccomp: true, output, received: payload.length, reply: 'y'.repeat(payload.length) })),
      );
    }
  });

  it('reports the refused system calls, including every one the design names', async () => {
    const r = await spawnAsync(
      process.execPath,
      ['-e', `const n = require(${JSON.stringify(path.join(root, 'lib', 'native'))}); console.log(JSON.stringify(n.lockDown(process.ppid)))`],
      { timeout: 30_000 },
    );
    expect(r.status, r.stderr).toBe(0);
    const status = JSON.parse(r.stdout);
    expect(status.seccomp).toBe(true);
    const required = [
      'execve', 'execveat', 'clone', 'clone3', 'socket', 'socketpair', 'connect', 'bind', 'listen', 'accept',
      'accept4', 'openat', 'openat2', 'io_uring_setup', 'io_uring_enter', 'io_uring_register', 'ptrace',
      'process_vm_readv', 'process_vm_writev', 'mount', 'umount2', 'pivot_root', 'chroot', 'unshare', 'setns',
      'bpf', 'perf_event_open', 'kexec_load', 'init_module', 'finit_module', 'keyctl', 'add_key', 'request_key',
      'userfaultfd', 'kill', 'tgkill', 'prlimit64', 'setpriority', 'prctl', 'fanotify_init',
    ];
    // x86_64 also has the old forms (aarch64 has only the *at calls and clone).
    if (process.arch === 'x64') required.push('fork', 'vfork', 'open', 'creat');
    expect(status.refused).toEqual(expect.arrayContaining(required));
  });

  it('a second call changes nothing and returns the first status', async () => {
    const r = await spawnAsync(
      process.execPath,
      [
        '-e',
        `const n = require(${JSON.stringify(path.join(root, 'lib', 'native'))});
         const isolet = require(${JSON.stringify(root)});
         const a = n.lockDown(process.ppid); const b = n.lockDown(process.ppid);
         console.log(JSON.stringify(a)); console.log(JSON.stringify(b));
         isolet.runSandbox('1 + 1', { isolation: 'thread' }).then((x) => console.log(x.output));`,
      ],
      { timeout: 30_000 },
    );
    expect(r.status, r.stderr).toBe(0);
    const [first, second, output] = r.stdout.trim().split('\n');
    expect(JSON.parse(second)).toEqual(JSON.parse(first));
    expect(JSON.parse(first).seccomp).toBe(true);
    expect(output).toBe('2');
  });

  it('rejects a parentPid that is not a process id, before locking anything', async () => {
    const r = await spawnAsync(
      process.execPath,
      [
        '-e',
        `const n = require(${JSON.stringify(path.join(root, 'lib', 'native'))});
         for (const bad of [0, -1, 1.5, 2 ** 31, NaN, Infinity]) {
           try { n.lockDown(bad); console.log('accepted', bad); } catch (e) { console.log(String(e.message).includes('parentPid') ? 'rejected' : e.message); }
         }
         console.log(require('node:fs').readFileSync('/proc/self/status', 'utf8').match(/^Seccomp:\\s*(\\d)/m)[1]);`,
      ],
      { timeout: 30_000 },
    );
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.trim().split('\n')).toEqual([...Array(6).fill('rejected'), '0']);
  });

  it('exits at once if the parent it was told about is already gone', async () => {
    // The parent of this child is the test process; telling it a different parent pid
    // is what it sees if its real parent died after fork and it was re-parented.
    const r = await spawnAsync(
      process.execPath,
      [
        '-e',
        `const n = require(${JSON.stringify(path.join(root, 'lib', 'native'))});
         console.log('before'); n.lockDown(${process.pid} + 1 === process.ppid ? ${process.pid} + 2 : ${process.pid} + 1); console.log('after');`,
      ],
      { timeout: 30_000 },
    );
    expect(r.signal).toBeNull();
    expect(r.status).toBe(71);
    expect(r.stdout.trim()).toBe('before');
    expect(r.stderr).toMatch(/parent process \d+ is gone/);
  });

  // An intermediate `node` starts a grandchild (locked down or not) and is SIGKILLed.
  async function orphan(lock: boolean) {
    const grandchild = `
      const n = require(${JSON.stringify(path.join(root, 'lib', 'native'))});
      ${lock ? 'n.lockDown(Number(process.argv[1]));' : ''}
      console.log('ready');
      setInterval(() => {}, 1000);`;
    const intermediate = `
      const c = require('node:child_process').spawn(process.execPath, ['-e', ${JSON.stringify(grandchild)}, String(process.pid)], { stdio: ['ignore', 'pipe', 'ignore'] });
      c.stdout.once('data', () => console.log(c.pid));
      setInterval(() => {}, 1000);`;
    let grandchildPid = 0;
    const { child, done } = runChild(intermediate, [], (line, c) => {
      grandchildPid = Number(line);
      c.kill('SIGKILL');
    });
    const result = await done;
    expect(result.signal).toBe('SIGKILL');
    expect(grandchildPid).toBeGreaterThan(0);
    expect(child.pid).not.toBe(grandchildPid);
    return grandchildPid;
  }

  it('a locked-down child dies with its parent (PR_SET_PDEATHSIG)', async () => {
    const pid = await orphan(true);
    expect(await waitGone(pid, 2000)).toBe(true);
  });

  it('control: without lockDown the orphan lives on', async () => {
    const pid = await orphan(false);
    try {
      expect(await waitGone(pid, 1000)).toBe(false);
    } finally {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {}
    }
    expect(await waitGone(pid, 2000)).toBe(true);
  });
});

// Elsewhere the same binding must answer, not fail.
else describe('lockDown elsewhere', () => {
  it('reports why nothing was locked down instead of failing', async () => {
    const r = await spawnAsync(
      process.execPath,
      ['-e', `const n = require(${JSON.stringify(path.join(root, 'lib', 'native'))}); console.log(JSON.stringify(n.lockDown(process.ppid)))`],
      { timeout: 30_000 },
    );
    expect(r.status, r.stderr).toBe(0);
    const status = JSON.parse(r.stdout);
    expect(status).toMatchObject({ seccomp: false, noNewPrivs: false, parentDeathSignal: false });
    expect(status.reason).toMatch(/Linux-only/);
  });
});
