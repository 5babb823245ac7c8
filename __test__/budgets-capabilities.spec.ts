// Per-run budgets of the built-in capabilities (docs/budgets.md): a run's fetches are
// aborted and their sockets closed when it ends; response bytes and file reads in flight
// are bounded per run. Real HTTP servers on 127.0.0.1, real files in temp dirs.
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { runSandbox, createFetchCapability, createFileReadCapability, currentRun, SandboxValidationError } from '..';
import { ok } from './support/results';
import { runChild } from './support/spawn';

const root = path.resolve(__dirname, '..');
const MiB = 1024 * 1024;

/** Polls `cond` every 10 ms until it holds or `ms` passed; returns whether it held. */
async function eventually(cond: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (cond()) return true;
    await new Promise((r) => setTimeout(r, 10));
  }
  return cond();
}

// A server that accepts requests and never answers (/hang), or sends `size` bytes and then
// holds the response open until released (/hold?size=N).
let server: http.Server;
let ORIGIN: string;
const sockets = { open: 0, opened: 0 };
const holding: http.ServerResponse[] = [];

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname === '/hang') return; // never answers
    if (url.pathname === '/hold') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('h'.repeat(Number(url.searchParams.get('size'))));
      holding.push(res);
      return;
    }
    res.writeHead(404).end();
  });
  server.on('connection', (socket) => {
    sockets.open++;
    sockets.opened++;
    socket.on('close', () => sockets.open--);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  ORIGIN = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterEach(() => {
  for (const res of holding.splice(0)) res.end();
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

describe('fetch: requests end with their run', () => {
  it('aborts requests and closes their sockets when the run returns without awaiting them', async () => {
    const fetch = createFetchCapability({ allowedOrigins: [ORIGIN], timeoutMs: 60_000 });
    const before = sockets.opened;
    // tick() gives the host time to start every request before the run returns: it waits
    // until the server has them all (a fixed 300 ms was too little on a loaded machine).
    const tick = () => eventually(() => sockets.opened - before >= 20, 10_000);
    const r = await runSandbox(
      `for (let i = 0; i < 20; i++) fetch({ url: '${ORIGIN}/hang?' + i }).catch(() => {}); await tick(); return 'left'`,
      { capabilities: { fetch, tick } },
    );
    expect(ok(r)).toBe('left');
    // Every request reached the server...
    expect(await eventually(() => sockets.opened - before >= 20, 5000)).toBe(true);
    // ...and every socket is closed long before the capability's own 60 s timeout.
    // Without the per-run pool, Node 20-24 keep an aborted request's socket for 4 s (keep-alive).
    expect(await eventually(() => sockets.open === 0, 2500), `${sockets.open} sockets still open`).toBe(true);
  });

  it('closes the sockets of a run that timed out while its requests were pending', async () => {
    const fetch = createFetchCapability({ allowedOrigins: [ORIGIN], timeoutMs: 60_000 });
    const before = sockets.opened;
    const r = await runSandbox(
      `await Promise.all(Array.from({ length: 10 }, (_, i) => fetch({ url: '${ORIGIN}/hang?t' + i })))`,
      { capabilities: { fetch }, timeoutMs: 3000 },
    );
    expect(r.success).toBe(false);
    expect(!r.success && r.error.name).toBe('SandboxTimeoutError');
    expect(sockets.opened - before).toBe(10);
    // Without the per-run pool, Node 20-24 keep an aborted request's socket for 4 s (keep-alive).
    expect(await eventually(() => sockets.open === 0, 2500), `${sockets.open} sockets still open`).toBe(true);
  });

  it('bounds response bytes in flight per run by the run\'s maxPendingHostCallBytes', async () => {
    const fetch = createFetchCapability({ allowedOrigins: [ORIGIN], timeoutMs: 60_000, maxResponseBytes: 2 * MiB });
    const size = 700 * 1000;
    const run = runSandbox(
      `
      const ps = [0, 1, 2].map((i) => fetch({ url: '${ORIGIN}/hold?size=${size}&i=' + i }));
      const out = await Promise.all(ps.map((p) => p.then((r) => r.body.length, (e) => e.message)));
      return out;
    `,
      { capabilities: { fetch }, maxMessageBytes: MiB, maxPendingHostCallBytes: MiB },
    );
    // All three responses have sent their 700 kB; no more than one fits in 1 MiB at once.
    expect(await eventually(() => holding.length === 3, 5000)).toBe(true);
    await new Promise((r) => setTimeout(r, 200));
    for (const res of holding.splice(0)) res.end();
    const out = ok(await run) as Array<number | string>;
    const refused = out.filter((x) => typeof x === 'string') as string[];
    expect(out.filter((x) => x === size)).toHaveLength(1);
    expect(refused).toHaveLength(2);
    for (const m of refused) {
      expect(m).toBe(`fetch: responses in flight for this run would hold more than ${MiB} bytes (maxPendingHostCallBytes); await some before fetching more`);
    }
  });

  it('keeps working when called by host code outside any run', async () => {
    const fetch = createFetchCapability({ allowedOrigins: [ORIGIN], timeoutMs: 60_000 });
    const pending = fetch({ url: `${ORIGIN}/hold?size=5` });
    expect(await eventually(() => holding.length === 1, 5000)).toBe(true);
    holding.splice(0)[0].end();
    expect((await pending).body).toBe('hhhhh');
  });
});

describe('file reads in flight per run', () => {
  let dir: string;
  beforeAll(() => {
    dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'isolet-budget-fr-')));
    fs.writeFileSync(path.join(dir, 'big.txt'), 'b'.repeat(2 * MiB));
    fs.writeFileSync(path.join(dir, 'mid.txt'), 'm'.repeat(700 * 1000));
    fs.writeFileSync(path.join(dir, 'small.txt'), 'hello');
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('validates maxReadsInFlight', () => {
    for (const bad of [0, -1, 1.5, 'x', 5000]) {
      expect(() => createFileReadCapability(dir, { maxReadsInFlight: bad as number })).toThrow(SandboxValidationError);
    }
    expect(() => createFileReadCapability(dir, { maxReadsInFlight: 4 })).not.toThrow();
  });

  it('refuses reads past maxReadsInFlight with a clear error, and serves them again once awaited', async () => {
    const readFile = createFileReadCapability(dir, { maxReadsInFlight: 2 });
    const out = ok(
      await runSandbox(
        `
        const ps = [];
        for (let i = 0; i < 40; i++) ps.push(readFile({ path: 'big.txt' }));
        const first = await Promise.all(ps.map((p) => p.then((r) => r.content.length, (e) => e.message)));
        const later = (await readFile({ path: 'small.txt' })).content;
        return { first, later };
      `,
        { capabilities: { readFile } },
      ),
    ) as { first: Array<number | string>; later: string };
    const refused = out.first.filter((x) => typeof x === 'string') as string[];
    const served = out.first.filter((x) => x === 2 * MiB);
    expect(served.length + refused.length).toBe(40);
    expect(served.length).toBeGreaterThanOrEqual(2);
    expect(refused.length).toBeGreaterThan(0);
    for (const m of refused) expect(m).toBe('readFile: 2 reads are already in flight for this run (maxReadsInFlight 2); await some before reading more');
    expect(out.later).toBe('hello');
  });

  it('holds file contents in flight within the run\'s maxPendingHostCallBytes', async () => {
    const readFile = createFileReadCapability(dir, { maxReadsInFlight: 64 });
    const out = ok(
      await runSandbox(
        `
        const ps = [];
        for (let i = 0; i < 30; i++) ps.push(readFile({ path: 'mid.txt' }));
        return await Promise.all(ps.map((p) => p.then((r) => r.content.length, (e) => e.message)));
      `,
        { capabilities: { readFile }, maxMessageBytes: MiB, maxPendingHostCallBytes: MiB },
      ),
    ) as Array<number | string>;
    const refused = out.filter((x) => typeof x === 'string') as string[];
    expect(out.filter((x) => x === 700 * 1000).length).toBeGreaterThanOrEqual(1);
    expect(refused.length).toBeGreaterThan(0);
    // Either the read budget refused it before reading, or the bridge refused the reply.
    for (const m of refused) {
      expect(m).toMatch(/^readFile: reads in flight for this run would hold more than 1048576 bytes|maxPendingHostCallBytes/);
    }
  });

  it('a readFile storm of 1000 un-awaited 10 MB reads leaves host memory bounded (child node)', async () => {
    const file = path.join(dir, 'ten.bin');
    fs.writeFileSync(file, Buffer.alloc(10 * 1000 * 1000, 'a'));
    const r = await runChild(
      process.execPath,
      [
        '-e',
        `const isolet = require(${JSON.stringify(root)});
        const readFile = isolet.createFileReadCapability(${JSON.stringify(dir)});
        isolet.runSandbox(\`
          const ps = [];
          for (let i = 0; i < 1000; i++) ps.push(readFile({ path: 'ten.bin' }).then((r) => r.content.length, (e) => e.message.slice(0, 40)));
          const out = await Promise.all(ps);
          return { served: out.filter((x) => x === 10000000).length, refused: out.length - out.filter((x) => x === 10000000).length };
        \`, { capabilities: { readFile }, timeoutMs: 30000 }).then((res) => {
          const hwm = Number(/VmHWM:\\s+(\\d+) kB/.exec(require('fs').readFileSync('/proc/self/status', 'utf8'))[1]) * 1024;
          console.log(JSON.stringify({ success: res.success, output: res.output, error: res.error && res.error.message, hwm }));
        });`,
      ],
      { timeout: 60_000 },
    );
    fs.rmSync(file);
    expect(r.signal, r.stderr).toBeNull();
    expect(r.status, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout.trim());
    expect(report.success, report.error).toBe(true);
    expect(report.output.served + report.output.refused).toBe(1000);
    expect(report.output.refused).toBeGreaterThan(0);
    expect(report.hwm).toBeLessThan(1024 * MiB);
  });
});

describe('currentRun() for your own capabilities', () => {
  it('gives a handler its run, whose signal aborts when the run ends (both isolation modes)', async () => {
    for (const isolation of ['process', 'thread'] as const) {
      let seen: AbortSignal | undefined;
      const hang = () => {
        seen = currentRun()?.signal;
        return new Promise(() => {}); // never answers
      };
      // (A limit the run reaches its call within, on a loaded machine too.)
      const r = await runSandbox('return await hang()', { capabilities: { hang }, timeoutMs: 3000, isolation });
      expect(r.success).toBe(false);
      expect(seen).toBeInstanceOf(AbortSignal);
      expect(await eventually(() => seen!.aborted, 2000)).toBe(true);
    }
    expect(currentRun()).toBeUndefined();
  });
});
