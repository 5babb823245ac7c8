// Per-run budgets on host calls in flight (docs/budgets.md): how many calls, and how many
// bytes of their arguments and replies the host holds, from the call until its reply has
// reached the sandbox. Each attack is tried; the bound that was set is the bound seen.
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  runSandbox,
  SandboxEngine,
  SandboxValidationError,
  DEFAULT_BRIDGE_LIMITS,
  type SandboxEvent,
} from '..';
import { ok } from './support/results';
import { runChild } from './support/spawn';

const root = path.resolve(__dirname, '..');
const MiB = 1024 * 1024;

/** Runs `script` in a fresh `node` with `isolet` required; judged from outside. */
async function runNode(script: string) {
  const r = await runChild(process.execPath, ['-e', `const isolet = require(${JSON.stringify(root)});\n${script}`], {
    timeout: 60_000,
  });
  return { status: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr };
}

const engines: SandboxEngine[] = [];
afterEach(async () => {
  while (engines.length) await engines.pop()!.shutdown();
});

// Sandbox code: settle every call, report how many were fulfilled and the first refusal.
const TALLY = `
  const out = await Promise.all(ps.map((p) => p.then(() => 'ok', (e) => e.name + ': ' + e.message)));
  return { ok: out.filter((x) => x === 'ok').length, refused: out.filter((x) => x !== 'ok') };
`;

describe('host calls in flight: bytes', () => {
  it('defaults to 64 MiB (four default messages) and 128 calls', () => {
    expect(DEFAULT_BRIDGE_LIMITS.maxPendingHostCallBytes).toBe(64 * MiB);
    expect(DEFAULT_BRIDGE_LIMITS.maxPendingHostCallBytes).toBe(4 * DEFAULT_BRIDGE_LIMITS.maxMessageBytes);
    expect(DEFAULT_BRIDGE_LIMITS.maxPendingHostCalls).toBe(128);
  });

  it('survives 330 un-awaited 15 MB calls to a slow async capability in a 64 MB run (child node, judged from outside)', async () => {
    // This crashed the host on its own heap limit before the budget existed. The time
    // limit is raised because serializing 330 x 15 MB takes seconds on a loaded machine.
    const r = await runNode(`
      const slow = () => new Promise((resolve) => setTimeout(() => resolve(1), 300));
      isolet.runSandbox(\`
        const big = 'x'.repeat(15 * 1024 * 1024);
        const ps = [];
        for (let i = 0; i < 330; i++) ps.push(slow(big));
        ${TALLY.replace(/`/g, '\\`')}
      \`, { capabilities: { slow }, timeoutMs: 60000 }).then((res) => {
        const hwm = Number(/VmHWM:\\s+(\\d+) kB/.exec(require('fs').readFileSync('/proc/self/status', 'utf8'))[1]) * 1024;
        console.log(JSON.stringify({ success: res.success, output: res.output, error: res.error && res.error.message, hwm }));
      });
    `);
    expect(r.signal, r.stderr).toBeNull();
    expect(r.status, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout.trim());
    expect(report.success, report.error).toBe(true);
    // 64 MiB holds four 15 MiB argument lists; every other call is refused in the sandbox.
    expect(report.output.ok).toBe(4);
    expect(report.output.refused).toHaveLength(326);
    expect(report.output.refused[0]).toMatch(/^RangeError: .*maxPendingHostCallBytes/);
    expect(report.output.refused[0]).toContain(`limit of ${64 * MiB} bytes`);
    // The host held a bounded amount: the run's heap, a few messages and Node itself.
    expect(report.hwm).toBeLessThan(768 * MiB);
  });

  it('enforces the byte budget it was given, and frees it when replies arrive', async () => {
    const seen: number[] = [];
    const slow = (s: string) =>
      new Promise((resolve) => {
        seen.push(s.length);
        setTimeout(() => resolve(s.length), 50);
      });
    // 300 kB of string serializes to 300 kB + a few header bytes: three fit in 1 MiB, four do not.
    const r = await runSandbox(
      `
      const arg = 'y'.repeat(300 * 1000);
      const ps = [];
      for (let i = 0; i < 6; i++) ps.push(slow(arg));
      const first = await Promise.all(ps.map((p) => p.then(() => 'ok', (e) => e.name + ': ' + e.message)));
      // Once the replies are in, the budget is free again.
      const again = await Promise.all([slow(arg), slow(arg), slow(arg)]);
      return { first, again };
    `,
      { capabilities: { slow }, maxMessageBytes: MiB, maxPendingHostCallBytes: MiB },
    );
    const out = ok(r) as { first: string[]; again: number[] };
    expect(out.first.slice(0, 3)).toEqual(['ok', 'ok', 'ok']);
    for (const refusal of out.first.slice(3)) {
      expect(refusal).toMatch(/^RangeError: host calls in flight already hold \d+ bytes; \d+ more would pass the limit of 1048576 bytes per execution \(maxPendingHostCallBytes\)$/);
    }
    expect(out.again).toEqual([300000, 300000, 300000]);
    // Refused calls never reached the host handler.
    expect(seen).toHaveLength(6);
  });

  it('counts replies too: replies piling up while the sandbox is busy are refused past the budget', async () => {
    let called = 0;
    const engine = new SandboxEngine({
      memoryMb: 64,
      tools: {
        big: () => {
          called++;
          return 'z'.repeat(400 * 1000);
        },
      },
    });
    engines.push(engine);
    await engine.init();
    const session = engine.submit({
      requestId: 'replies',
      code: `
        const ps = [];
        for (let i = 0; i < 5; i++) ps.push(big());
        // Blocks the isolate until the consumer answers: meanwhile all five replies arrive.
        const gate = data.gate;
        ${TALLY}
      `,
      toolPolicy: { allowedTools: ['big'] },
      bridgeLimits: { maxMessageBytes: MiB, maxPendingHostCallBytes: MiB },
    });
    let result: SandboxEvent | undefined;
    for await (const ev of session) {
      if (ev.type === 'dataRequest') {
        while (called < 5) await new Promise((r) => setTimeout(r, 5));
        // Let execute.js hand each reply to the native side.
        for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
        session.respond(ev.id, true);
      }
      if (ev.type === 'result' || ev.type === 'error') result = ev;
    }
    expect(result?.type, JSON.stringify(result)).toBe('result');
    const out = (result as { data: { ok: number; refused: string[] } }).data;
    // Two 400 kB replies fit in 1 MiB; the other three are replaced by RangeErrors.
    expect(out.ok).toBe(2);
    expect(out.refused).toHaveLength(3);
    for (const r of out.refused) expect(r).toMatch(/^RangeError: the reply was refused: .*maxPendingHostCallBytes/);
  });

  it('refuses a budget smaller than one message, naming the limit', async () => {
    const r = await runSandbox('return 1', { capabilities: {}, maxMessageBytes: 2 * MiB, maxPendingHostCallBytes: MiB });
    expect(r.success).toBe(false);
    expect(!r.success && r.error).toBeInstanceOf(SandboxValidationError);
    expect(!r.success && r.error.message).toMatch(/maxPendingHostCallBytes/);
    const bad = await runSandbox('return 1', { capabilities: {}, maxPendingHostCalls: 0 });
    expect(bad.success).toBe(false);
    expect(!bad.success && bad.error.message).toMatch(/maxPendingHostCalls/);
  });
});

describe('host calls in flight: count', () => {
  it('enforces the call cap it was given; awaited calls free their slots', async () => {
    const wait = () => new Promise((r) => setTimeout(() => r('done'), 30));
    const r = await runSandbox(
      `
      const ps = [];
      for (let i = 0; i < 5; i++) ps.push(wait());
      ${TALLY.replace('return {', 'const first = {')}
      const again = await Promise.all([wait(), wait(), wait()]);
      return { first, again };
    `,
      { capabilities: { wait }, maxPendingHostCalls: 3 },
    );
    const out = ok(r) as { first: { ok: number; refused: string[] }; again: string[] };
    expect(out.first.ok).toBe(3);
    expect(out.first.refused).toEqual([
      'RangeError: 3 host calls are already in flight, the limit per execution (maxPendingHostCalls) is 3; await some before calling again',
      'RangeError: 3 host calls are already in flight, the limit per execution (maxPendingHostCalls) is 3; await some before calling again',
    ]);
    expect(out.again).toEqual(['done', 'done', 'done']);
  });

  it('applies to SandboxEngine tools through bridgeLimits', async () => {
    const engine = new SandboxEngine({ memoryMb: 64, tools: { wait: () => new Promise((r) => setTimeout(() => r(1), 30)) } });
    engines.push(engine);
    await engine.init();
    const session = engine.submit({
      requestId: 'count',
      code: `const ps = [wait(), wait(), wait()]; ${TALLY}`,
      toolPolicy: { allowedTools: ['wait'] },
      bridgeLimits: { maxPendingHostCalls: 2 },
    });
    const end = await session.done;
    expect(end.type).toBe('result');
    const out = (end as { data: { ok: number; refused: string[] } }).data;
    expect(out.ok).toBe(2);
    expect(out.refused[0]).toMatch(/maxPendingHostCalls\) is 2/);
  });
});
