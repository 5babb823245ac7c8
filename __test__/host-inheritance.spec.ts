// What a sandbox host inherits from its parent: nothing but its stdio and run channel, and
// a lower priority (niceness +10).
// A parent started with a descriptor it did not mark close-on-exec (a file the
// application opened, as `exec 40</etc/secret; node app.js` does) must not pass it on, and
// libuv in the host runs without io_uring rings that seccomp could not see through.
// Judged from outside: the host's /proc/<pid>/fd, listed by the parent.
import { describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runChild } from './support/spawn';

const root = path.resolve(__dirname, '..');

const SCENARIO = `
const fs = require('node:fs');
const { SandboxEngine } = require(${JSON.stringify(root)});
(async () => {
  const e = new SandboxEngine({ memoryMb: 64, maxConcurrentIsolates: 2, processes: 2, warmPoolSize: 1 });
  await e.init();
  const { pids, lockdown } = e.stats().processes;
  const hosts = pids.map((pid) => fs.readdirSync('/proc/' + pid + '/fd').map((fd) => {
    try { return fs.readlinkSync('/proc/' + pid + '/fd/' + fd); } catch { return 'gone'; }
  }));
  const planted = fs.readlinkSync('/proc/self/fd/5');
  // Niceness: field 19 of /proc/<pid>/stat, counted after the command's closing parenthesis.
  const nice = (pid) => Number(fs.readFileSync('/proc/' + pid + '/stat', 'utf8').split(') ')[1].split(' ')[16]);
  const niceness = { parent: nice(process.pid), hosts: pids.map(nice) };
  const run = await e.submit({ code: 'return 6 * 7' }).done;
  console.log(JSON.stringify({ planted, hosts, lockdown, niceness, data: run.data }));
  await e.shutdown();
})();
`;

describe('a sandbox host inherits nothing of its parent', () => {
  it('a descriptor planted in the parent (not close-on-exec) is not open in any host; no io_uring ring either', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'isolet-inherit-'));
    const secret = path.join(dir, 'secret.txt');
    fs.writeFileSync(secret, 'top secret');
    const fd = fs.openSync(secret, 'r');
    try {
      // stdio[5] reaches the child as descriptor 5, without close-on-exec.
      const r = await runChild(process.execPath, ['-e', SCENARIO], { stdio: ['ignore', 'pipe', 'pipe', 'ignore', 'ignore', fd], timeout: 30000 });
      expect(r.status, r.stderr).toBe(0);
      const out = JSON.parse(r.stdout.trim().split('\n').pop()!);
      expect(out.planted).toBe(secret);
      expect(out.data).toBe(42);
      expect(out.hosts).toHaveLength(2);
      for (const links of out.hosts as string[][]) {
        expect(links).not.toContain(secret);
        // stdin, stdout: /dev/null; stderr: a pipe; 3: the run channel; the rest is the host's own.
        expect(links.filter((l) => l.includes('io_uring'))).toEqual([]);
      }
      expect(out.lockdown).toMatchObject({ seccomp: true, ioUringRings: 0 });
      // Hosts run 10 below their parent (host_policy::HOST_NICENESS): the application's
      // event loop gets the CPU before sandboxed code does.
      expect(out.niceness.hosts).toEqual(out.hosts.map(() => Math.min(19, out.niceness.parent + 10)));
    } finally {
      fs.closeSync(fd);
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
