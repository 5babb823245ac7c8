// Issue 18: a refused host call costs the host nothing per refusal. Past `maxMessages`
// (or a tool's call limit, or the in-flight budget) a call is rejected inside the
// isolate at once; before, each refusal queued a rejection for the isolate thread, and
// `for (;;) { ping(); }` never let it drain them (+411 MB of the parent's peak RSS in
// thread mode; in process mode the host passed its RSS budget and was killed).
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runSandbox, DEFAULT_BRIDGE_LIMITS } from '..';
import { runChild } from './support/spawn';

const root = path.resolve(__dirname, '..');
const MiB = 2 ** 20;
// Host memory a looping run may add over its whole time limit, refusals included.
const BOUND = 64 * MiB;

/** Runs `body` (an async function body with `isolet`, `hwm(pid)` and `hosts()` in scope) in a fresh node; returns what it prints as JSON. */
async function inChild(body: string): Promise<any> {
  const script = `const isolet = require(${JSON.stringify(root)});
    const fs = require('node:fs');
    const hwm = (pid = 'self') => Number(/VmHWM:\\s+(\\d+)/.exec(fs.readFileSync('/proc/' + pid + '/status', 'utf8'))[1]) * 1024;
    // This process's children: the sandbox host processes of process isolation.
    const hosts = () => fs.readdirSync('/proc').filter((p) => /^\\d+$/.test(p)).filter((p) => {
      try { return Number(/PPid:\\s+(\\d+)/.exec(fs.readFileSync('/proc/' + p + '/status', 'utf8'))[1]) === process.pid; } catch { return false; }
    });
    (async () => { ${body} })().then((v) => { console.log(JSON.stringify(v)); process.exit(0); });`;
  const child = await runChild(process.execPath, ['-e', script], { timeout: 120_000 });
  expect(child.stderr).toBe('');
  expect(child.status).toBe(0);
  return JSON.parse(child.stdout);
}

const LOOP = `const r = await isolet.runSandbox('for (;;) { ping(); }', { isolation: ISOLATION, timeoutMs: 3000, capabilities: { ping: () => 1 } });`;

describe('refused host calls', () => {
  it('are rejected in the sandbox with the limit that refused them', async () => {
    const { maxMessages, maxPendingHostCalls } = DEFAULT_BRIDGE_LIMITS;
    const settle = 'then(() => "ok", (e) => e.name + ": " + e.message)';
    // Past the in-flight budget: calls not awaited beyond maxPendingHostCalls.
    const burst = await runSandbox(
      `const calls = [];
       for (let i = 0; i < ${maxPendingHostCalls + 10}; i++) calls.push(ping().${settle});
       const settled = await Promise.all(calls);
       return [settled.filter((s) => s === 'ok').length, settled.at(-1)];`,
      { isolation: 'thread', capabilities: { ping: () => 1 } },
    );
    expect(burst.success && burst.output).toEqual([
      maxPendingHostCalls,
      expect.stringMatching(new RegExp(`^RangeError: ${maxPendingHostCalls} host calls are already in flight.*maxPendingHostCalls`)),
    ]);
    // Past maxMessages: every later call, one at a time.
    const many = await runSandbox(
      `let ok = 0;
       for (let i = 0; i < ${maxMessages}; i++) { await ping(); ok++; }
       const late = await Promise.all([ping().${settle}, ping().${settle}]);
       return [ok, ...late];`,
      { isolation: 'thread', capabilities: { ping: () => 1 } },
    );
    const refusal = `RangeError: Bridge message limit of ${maxMessages} per execution exceeded`;
    expect(many.success && many.output).toEqual([maxMessages, refusal, refusal]);
  });

  it('thread mode: for (;;) { ping(); } to its time limit adds under 64 MB to the host peak RSS', async () => {
    const { name, hostCalls, grew } = await inChild(`
      await isolet.runSandbox('1', { isolation: 'thread' });
      const before = hwm();
      ${LOOP.replace('ISOLATION', "'thread'")}
      return { name: r.error && r.error.name, hostCalls: r.stats.hostCalls, grew: hwm() - before };`);
    expect(name).toBe('SandboxTimeoutError');
    expect(hostCalls).toBe(DEFAULT_BRIDGE_LIMITS.maxMessages);
    expect(grew).toBeLessThan(BOUND);
  });

  it('process mode: the same loop adds under 64 MB to its sandbox host, which survives it', async () => {
    const { name, hostCalls, before, after } = await inChild(`
      // Every host warmed by a run first, so each has its baseline peak.
      await Promise.all([1, 2, 3, 4].map(() => isolet.runSandbox('1', { isolation: 'process' })));
      const before = Object.fromEntries(hosts().map((p) => [p, hwm(p)]));
      ${LOOP.replace('ISOLATION', "'process'")}
      const after = Object.fromEntries(hosts().map((p) => [p, hwm(p)]));
      return { name: r.error && r.error.name, hostCalls: r.stats.hostCalls, before, after };`);
    // Not an RSS kill of the host (which ended such runs as SandboxOOMError): the time limit.
    expect(name).toBe('SandboxTimeoutError');
    expect(hostCalls).toBe(DEFAULT_BRIDGE_LIMITS.maxMessages);
    expect(Object.keys(before).length).toBeGreaterThan(0);
    // The same hosts, none replaced, none grown past the bound.
    expect(Object.keys(after).sort()).toEqual(Object.keys(before).sort());
    for (const pid of Object.keys(before)) expect(after[pid] - before[pid]).toBeLessThan(BOUND);
  });
});
