// Process isolation's run channel (frames over a socket pair, see
// docs/process-isolation.md): a sandbox host is untrusted, so whatever it writes there
// can end only its own runs. Each attack is a real compromised host (a script the
// supervisor forks in place of the real one, __test__/support/compromised-sandbox-host.js)
// in a real child `node` that is judged from outside: its runs fail ERR_ISOLET_CRASHED,
// its memory stays bounded, the other host serves, the replacement serves.
import { describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runSandbox, SandboxEngine } from '..';
import { runChild } from './support/spawn';

const root = path.resolve(__dirname, '..');
const FAKE_HOST = path.join(__dirname, 'support', 'compromised-sandbox-host.js');

// Two hosts, one run each at once: one run lands on the compromised host, one on the
// real one. Then three more runs (served by the real host and the replacement).
const SCENARIO = `
const { SandboxEngine } = require(${JSON.stringify(root)});
require(${JSON.stringify(path.join(root, 'lib', 'native.js'))}).setSandboxHost(process.execPath, ${JSON.stringify(FAKE_HOST)});
(async () => {
  const engine = new SandboxEngine({ isolation: 'process', processes: 2, maxConcurrentIsolates: 2, warmPoolSize: 2, memoryMb: 64 });
  await engine.init();
  const rssBefore = process.memoryUsage().rss;
  let peakRss = rssBefore;
  const sampler = setInterval(() => { peakRss = Math.max(peakRss, process.memoryUsage().rss); }, 5);
  const code = 'return 6 * 7';
  // A tool that never answers: a host's calls to it stay in flight (see pending-flood).
  const tools = { hang: () => new Promise(() => {}) };
  const first = await Promise.all([0, 1].map((i) => engine.submit({ requestId: 'a' + i, code, tools }).done));
  // After the compromised host ends, the pool serves on.
  const later = [];
  for (let i = 0; i < 3; i++) later.push(await engine.submit({ requestId: 'b' + i, code: 'return 1 + ' + i }).done);
  clearInterval(sampler);
  const stats = engine.stats();
  await engine.shutdown();
  const brief = (r) => r.type === 'result' ? { data: r.data } : { name: r.error.name, code: r.error.code, message: r.error.message };
  console.log(JSON.stringify({ first: first.map(brief), later: later.map(brief), recycled: stats.processes.recycled, growthMb: (peakRss - rssBefore) / 1048576 }));
  process.exit(0);
})().catch((e) => { console.error(e); process.exit(1); });
`;

async function attack(mode: string) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'isolet-channel-'));
  try {
    fs.writeFileSync(path.join(dir, 'mode'), mode);
    const r = await runChild(process.execPath, ['-e', SCENARIO], {
      timeout: 30000,
      env: { ...process.env, ISOLET_TEST_EVIL_DIR: dir },
    });
    expect(r.status, r.stderr).toBe(0);
    // The compromised host did get a run and answered it.
    expect(fs.existsSync(path.join(dir, 'answered'))).toBe(true);
    return JSON.parse(r.stdout.trim().split('\n').pop()!);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

describe('process isolation: a compromised host on the run channel', () => {
  it.each([
    ['huge', 'claims a 4 GB frame and streams garbage'],
    ['big-garbage', 'sends a 16 MB frame (under the limit) that is no event'],
    ['garbage', 'sends a frame of the right length that does not decode'],
    ['other-run', 'sends a frame for a run it was never given'],
    ['parent-kind', 'sends a kind only the parent sends'],
    ['bad-kind', 'sends an unknown kind'],
    ['console-flood', 'streams more console entries than the run keeps'],
    ['call-flood', 'sends more host calls than the run may make'],
    ['pending-flood', 'keeps more host calls in flight than the run allows (maxPendingHostCalls)'],
    ['log-flood', "sends a done whose log list claims 3 million entries (the run keeps 1000)"],
    ['health-flood', 'floods health frames'],
    ['sandbox-closed-flood', 'floods sandboxClosed frames for sandboxes it was never given'],
  ])('%s: a host that %s fails only its own run (ERR_ISOLET_CRASHED); the others serve', async (mode) => {
    const out = await attack(mode);
    const failed = out.first.filter((r: { code?: string }) => r.code !== undefined);
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatchObject({ name: 'SandboxError', code: 'ERR_ISOLET_CRASHED' });
    expect(failed[0].message).toMatch(/protocol/);
    expect(out.first.filter((r: { data?: number }) => r.data === 42)).toHaveLength(1);
    expect(out.later).toEqual([{ data: 1 }, { data: 2 }, { data: 3 }]);
    expect(out.recycled).toMatchObject({ protocol: 1 });
    // Nothing of the claimed or streamed gigabytes is buffered: at most the one frame
    // under its run's limit (16 MB here) and the ordinary churn.
    expect(out.growthMb).toBeLessThan(mode === 'big-garbage' ? 96 : 64);
  });
});

describe('process isolation: the run channel carries every event whole', () => {
  it('moves 32 MB each way, many host calls, data answers, console and errors, as in thread mode', async () => {
    const big = new Uint8Array(32 * 1024 * 1024).fill(7);
    const engine = new SandboxEngine({ isolation: 'process', processes: 1, memoryMb: 512 });
    await engine.init();
    try {
      const bridgeLimits = { maxOutputBytes: 128 << 20, maxMessageBytes: 64 << 20 };
      const session = engine.submit({
        requestId: 'big',
        code: `const a = await get(); let s = 0; for (let i = 0; i < 200; i++) s += await f(i);
          console.log('n', a.length); const b = new Uint8Array(a.length); b.set(a); b[0] = 9;
          let miss; try { miss = data.missing; } catch (e) { miss = e.message; }
          return { s, b, d: data.k, o: data.other.length, miss };`,
        tools: { get: () => big, f: (x: number) => x },
        data: { k: 'v'.repeat(100_000) },
        bridgeLimits,
        isolateLimits: { wallTimeMs: 20000 },
      });
      for await (const ev of session) {
        if (ev.type !== 'dataRequest') continue;
        if (ev.key === 'other') session.respond(ev.id, new Uint8Array(3 << 20));
        else session.reject(ev.id, `no ${ev.key}`);
      }
      const r = await session.done;
      expect(r.type, r.type === 'error' ? r.message : '').toBe('result');
      if (r.type !== 'result') return;
      const out = r.data as { s: number; b: Uint8Array; d: string; o: number; miss: string };
      expect(out.s).toBe(19900);
      expect(out.b.length).toBe(big.length);
      expect(out.b[0]).toBe(9);
      expect(out.b[big.length - 1]).toBe(7);
      expect(out.d).toBe('v'.repeat(100_000));
      expect(out.o).toBe(3 << 20);
      expect(out.miss).toBe('no missing');
      expect(r.logs).toEqual([{ level: 'log', message: `n ${big.length}` }]);
    } finally {
      await engine.shutdown();
    }
    const e = await runSandbox('throw new TypeError("x".repeat(70000))', { isolation: 'process' });
    expect(e.success).toBe(false);
    if (!e.success) {
      expect(e.error.name).toBe('SandboxRuntimeError');
      expect(e.error.message).toContain('TypeError');
    }
  });

  it('replies reach their runs in order while isolate threads read them themselves, among runs, aborts, data answers and 1 MB replies', async () => {
    // One host, four runs at once: each spins for its calls' replies and reads the socket
    // itself; run frames, aborts and data answers arrive between the replies.
    const engine = new SandboxEngine({ isolation: 'process', processes: 1, maxConcurrentIsolates: 4, warmPoolSize: 2 });
    await engine.init();
    try {
      const big = 'y'.repeat(1 << 20);
      const code = `let s = 0, order = [];
        for (let i = 0; i < 400; i++) { const r = await f(k, i); if (r.i !== i) order.push(i); s += r.v; if (i % 100 === 50) s += (await g()).length; }
        const d = data.extra; return { s, order, d };`;
      const tools = { f: (k: number, i: number) => ({ i, v: k * i }), g: () => big };
      const expected = (k: number) => k * ((399 * 400) / 2) + 4 * big.length;
      const runs = [];
      for (let k = 1; k <= 8; k++) {
        const session = engine.submit({ requestId: `r${k}`, code: code.replace('f(k, i)', `f(${k}, i)`), tools, data: {} });
        runs.push(
          (async () => {
            for await (const ev of session) if (ev.type === 'dataRequest') session.respond(ev.id, `extra ${k}`);
            return session.done;
          })(),
        );
        if (k === 3) setTimeout(() => session.abort(), 20);
      }
      const ends = await Promise.all(runs);
      ends.forEach((end, i) => {
        const k = i + 1;
        if (k === 3 && end.type === 'error') return expect(end.error.code).toBe('ERR_ISOLET_ABORTED');
        expect(end.type, end.type === 'error' ? end.message : '').toBe('result');
        if (end.type === 'result') expect(end.data).toEqual({ s: expected(k), order: [], d: `extra ${k}` });
      });
      expect(engine.stats().processes?.crashed).toBe(0);
    } finally {
      await engine.shutdown();
    }
  });
});
