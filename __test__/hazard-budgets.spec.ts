// Memory V8 takes outside the heap must stay inside the run's budget: resizable
// ArrayBuffers and growable SharedArrayBuffers (reserved and committed through V8's page
// allocator, not the ArrayBuffer allocator) are charged at their maxByteLength, and
// console output is cut while it is formatted, before any line is joined.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runSandbox, runtime } from '..';
import { runChild } from './support/spawn';

const root = path.resolve(__dirname, '..');
const MiB = 2 ** 20;

async function thrown(code: string, memoryLimitMb = 64) {
  const r = await runSandbox(`try { ${code}; 'no error' } catch (e) { e.name + ': ' + e.message }`, { memoryLimitMb });
  if (!r.success) throw new Error(`${r.error.name}: ${r.error.message}`);
  return r.output as string;
}

describe('resizable and growable buffers', () => {
  it('count at their maximum byte length: the 64 MB limit cannot be passed by resize or grow', async () => {
    for (const ctor of ['ArrayBuffer', 'SharedArrayBuffer']) {
      const grow = ctor === 'ArrayBuffer' ? 'resize' : 'grow';
      expect(await thrown(`const b = new ${ctor}(1, { maxByteLength: 4 * 2 ** 30 }); b.${grow}(200 * 2 ** 20)`)).toBe(
        `RangeError: ArrayBuffer maxByteLength of ${4 * 2 ** 30} bytes exceeds the sandbox's ArrayBuffer budget of ${64 * MiB} bytes`,
      );
      expect(await thrown(`new ${ctor}(200 * 2 ** 20, { maxByteLength: 201 * 2 ** 20 })`)).toMatch(/^RangeError: .*budget of 67108864 bytes$/);
      // The limit set is the limit enforced: 60 MB fits under 64, 70 MB does not; 70 fits under 128.
      const fill = `const b = new ${ctor}(1, { maxByteLength: N * 2 ** 20 }); b.${grow}(N * 2 ** 20); new Uint8Array(b).fill(1)`;
      expect(await thrown(fill.replaceAll('N', '60'))).toBe('no error');
      expect(await thrown(fill.replaceAll('N', '70'))).toMatch(/^RangeError: .*budget/);
      expect(await thrown(fill.replaceAll('N', '70'), 128)).toBe('no error');
      // Fixed buffers share the same budget.
      expect(await thrown(`const f = new ArrayBuffer(40 * 2 ** 20); new ${ctor}(1, { maxByteLength: 30 * 2 ** 20 })`)).toMatch(/^RangeError: .*budget/);
    }
  });

  it('give their charge back when collected, and behave as the built-ins do', async () => {
    const r = await runSandbox(`
      let total = 0;
      for (let i = 0; i < 1000; i++) total += new ArrayBuffer(1, { maxByteLength: 2 ** 20 }).maxByteLength;
      let reads = 0;
      const len = { valueOf() { reads++; return 8; } };
      const opts = { get maxByteLength() { reads++; return 64; } };
      const b = new ArrayBuffer(len, opts);
      b.resize(32);
      class Sub extends ArrayBuffer {}
      const s = new Sub(4, { maxByteLength: 16 });
      let noNew = '';
      try { ArrayBuffer(1); } catch (e) { noNew = e.name; }
      let badMax = '';
      try { new ArrayBuffer(8, { maxByteLength: 4 }); } catch (e) { badMax = e.name; }
      const g = new SharedArrayBuffer(4, { maxByteLength: 64 });
      g.grow(48);
      [total, reads, b.byteLength, b.maxByteLength, b.resizable, b.constructor === ArrayBuffer,
       ArrayBuffer.prototype.constructor === ArrayBuffer, s instanceof Sub, s.maxByteLength, noNew, badMax,
       g.byteLength, g.growable, new ArrayBuffer(5).slice(1).byteLength, ArrayBuffer.name, ArrayBuffer.length]
    `);
    expect(r.success && r.output).toEqual([1000 * MiB, 2, 32, 64, true, true, true, true, 16, 'TypeError', 'RangeError', 48, true, 4, 'ArrayBuffer', 1]);
  });

  it('keep their charge across transfer(), so memory cannot be moved out of the budget', async () => {
    const probe = await runSandbox('typeof ArrayBuffer.prototype.transfer');
    if (probe.success && probe.output === 'undefined') {
      // transfer() arrived in V8 11.4: Node 20 has none, so nothing can move memory.
      expect(runtime.v8Version.startsWith('11.')).toBe(true);
      return;
    }
    // Each transferred buffer keeps 40 MB; its detached source dies. Without the charge
    // moving along, the sources' refunds let the total pass 64 MB.
    expect(await thrown(`const keep = [];
      for (let i = 0; i < 6; i++) {
        const t = new ArrayBuffer(1, { maxByteLength: 40 * 2 ** 20 }).transfer(40 * 2 ** 20);
        new Uint8Array(t).fill(1);
        keep.push(t);
      }`)).toMatch(/^RangeError: .*budget of 67108864 bytes$/);
    const r = await runSandbox(`
      let b = new ArrayBuffer(8, { maxByteLength: 20 * 2 ** 20 });
      for (let i = 0; i < 20; i++) b = b.transfer(16 * (i + 1));
      const fixed = [];
      for (let i = 0; i < 20; i++) fixed.push(new ArrayBuffer(1, { maxByteLength: 30 * 2 ** 20 }).transferToFixedLength(1024));
      let incompatible = '';
      try { ArrayBuffer.prototype.transfer.call({}); } catch (e) { incompatible = e.name; }
      [b.byteLength, b.resizable, b.maxByteLength, fixed.length, fixed[0].resizable, ArrayBuffer.prototype.transfer.name,
       ArrayBuffer.prototype.transfer.length, incompatible]`);
    expect(r.success && r.output).toEqual([320, true, 20 * MiB, 20, false, 'transfer', 0, 'TypeError']);
  });

  it('WebAssembly.Memory stays out of reach', async () => {
    const r = await runSandbox('[typeof WebAssembly, Object.getOwnPropertyNames(globalThis).includes("WebAssembly")]');
    expect(r.success && r.output).toEqual(['undefined', false]);
  });
});

describe('console output', () => {
  it('is cut at maxLogBytes while formatting: 60,000 arguments of 1 KB do not reach host memory', async () => {
    // Judged from outside: the child reports its own peak RSS (VmHWM) before and after.
    const script = `const isolet = require(${JSON.stringify(root)});
      const hwm = () => Number(/VmHWM:\\s+(\\d+)/.exec(require('node:fs').readFileSync('/proc/self/status', 'utf8'))[1]) * 1024;
      (async () => {
        await isolet.runSandbox('1', { isolation: 'thread' });
        const before = hwm();
        const r = await isolet.runSandbox("console.log(...Array(60000).fill('x'.repeat(1000))); 'done'", { timeoutMs: 30000, isolation: 'thread' });
        console.log(JSON.stringify({ output: r.output, entries: r.logs.length, length: r.logs[0].message.length, grew: hwm() - before }));
      })();`;
    const child = await runChild(process.execPath, ['-e', script], { timeout: 60_000 });
    expect(child.stderr).toBe('');
    expect(child.status).toBe(0);
    const { output, entries, length, grew } = JSON.parse(child.stdout);
    expect(output).toBe('done');
    expect(entries).toBe(1);
    // The default maxLogBytes (1 MiB) plus the truncation marker.
    expect(length).toBeGreaterThanOrEqual(MiB);
    expect(length).toBeLessThan(MiB + 64);
    // Was +1.1 GB when the whole line was joined first.
    expect(grew).toBeLessThan(64 * MiB);
  });

  it('formats nothing once the log is full, yet counts what it dropped', async () => {
    const r = await runSandbox(`
      let touched = 0;
      const noisy = { [Symbol.for('nodejs.util.inspect.custom')]() { touched++; return 'n'; } };
      for (let i = 0; i < 3000; i++) console.log(noisy);
      touched`);
    expect(r.success).toBe(true);
    if (!r.success) return;
    // Only the entries the default cap (1000) keeps were formatted.
    expect(r.output).toBe(1000);
    expect(r.logs.length).toBe(1001);
    expect(r.logs[1000].message).toMatch(/2000 console entries dropped/);
  });

  it('formats ordinary entries as Node\'s console does', async () => {
    const r = await runSandbox("console.log('a', { b: 1 }, [1, 2], 3, null, undefined); console.warn(new Error('boom')); 1");
    expect(r.success && r.logs).toEqual([
      { level: 'log', message: 'a { b: 1 } [ 1, 2 ] 3 null undefined' },
      { level: 'warn', message: 'Error: boom\n    at sandbox.js:1:70' },
    ]);
  });
});
