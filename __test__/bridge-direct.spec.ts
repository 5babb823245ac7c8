// Big Uint8Arrays and ASCII strings returned by capabilities are written into the sandbox's
// reply by the addon itself, in V8's serialization format, instead of by v8.Serializer
// (lib/bridge.js `directBytesVersionFor`). Everything the sandbox sees must be what the
// serializer would have given it (process isolation still serializes: the same checks run
// there as the reference), the reply is a snapshot taken when the capability returns, and
// maxMessageBytes counts the same bytes.
import { describe, expect, it } from 'vitest';
import * as v8 from 'node:v8';
import * as path from 'node:path';
import { runSandbox, type SandboxResult } from '..';
import { runChild } from './support/spawn';

const MiB = 1024 * 1024;
const ISOLATIONS = ['thread', 'process'] as const;

function ok(r: SandboxResult): any {
  if (!r.success) throw new Error(`run failed: ${r.error.name}: ${r.error.message}`);
  return r.output;
}

/** What the base v8.Serializer writes for `value` (what lib/bridge.js `serialize` sends). */
function serializedLength(value: unknown) {
  const s = new v8.Serializer();
  s.writeHeader();
  s.writeValue(value);
  return s.releaseBuffer().length;
}

function patterned(n: number, into: Uint8Array<ArrayBufferLike> = new Uint8Array(n)) {
  for (let i = 0; i < into.length; i++) into[i] = (i * 31 + 7) & 255;
  return into;
}

const SHAPE = `const u = await get();
  return { u, offset: u.byteOffset, whole: u.buffer.byteLength, resizable: u.buffer.resizable === true,
    plain: Object.getPrototypeOf(u) === Uint8Array.prototype };`;

describe.each(ISOLATIONS)('byte replies into the sandbox (%s)', (isolation) => {
  const limits = { isolation, maxMessageBytes: 16 * MiB, memoryLimitMb: 256 };

  it('a big Uint8Array arrives whole, byte for byte, as a plain Uint8Array', async () => {
    const u8 = patterned(4 * MiB + 3);
    const out = ok(await runSandbox(SHAPE, { ...limits, capabilities: { get: () => u8 } }));
    expect(out.plain).toBe(true);
    expect(out.offset).toBe(0);
    expect(out.whole).toBe(u8.length);
    expect(out.resizable).toBe(false);
    expect(Buffer.compare(Buffer.from(out.u), Buffer.from(u8))).toBe(0);
  });

  it('a big Buffer arrives as a Uint8Array with its bytes', async () => {
    const buf = Buffer.alloc(MiB);
    patterned(MiB, buf);
    const out = ok(await runSandbox(SHAPE, { ...limits, capabilities: { get: () => buf } }));
    expect(out.plain).toBe(true);
    expect(Buffer.compare(Buffer.from(out.u), buf)).toBe(0);
  });

  it('a view into part of a buffer arrives over the whole buffer, at its offset', async () => {
    const whole = patterned(2 * MiB);
    const view = whole.subarray(4096, 4096 + MiB);
    const out = ok(await runSandbox(SHAPE, { ...limits, capabilities: { get: () => view } }));
    expect(out.offset).toBe(4096);
    expect(out.whole).toBe(2 * MiB);
    expect(Buffer.compare(Buffer.from(out.u), Buffer.from(view))).toBe(0);
  });

  it('a subclass whose getters lie is read by what it is, not by what it says', async () => {
    class Lying extends Uint8Array {
      override get byteOffset() {
        return 0;
      }
      override get length() {
        return 5;
      }
    }
    const whole = patterned(2 * MiB);
    const lying = new Lying(whole.buffer as ArrayBuffer, 8192, MiB);
    const out = ok(await runSandbox(SHAPE, { ...limits, capabilities: { get: () => lying } }));
    expect(out.plain).toBe(true);
    expect(out.offset).toBe(8192);
    expect(out.whole).toBe(2 * MiB);
    expect(Buffer.compare(Buffer.from(out.u), Buffer.from(whole.buffer, 8192, MiB))).toBe(0);
  });

  // Issue 23: a buffer from the host cannot grow the run past its memory limit (a
  // resizable one's maximum is reserved outside the heap and its budget), so it arrives
  // fixed-length, with its bytes (budgets-buffers.spec.ts holds every way in).
  it('a Uint8Array over a resizable buffer arrives fixed-length, with its bytes', async () => {
    const ab = new (ArrayBuffer as any)(MiB, { maxByteLength: 2 * MiB }) as ArrayBuffer;
    const u8 = patterned(MiB, new Uint8Array(ab));
    const out = ok(await runSandbox('const u = await get(); return [u.buffer.resizable, u.buffer.maxByteLength, u[MiB - 1]]'.replace('MiB', String(MiB)), {
      ...limits,
      capabilities: { get: () => u8 },
    }));
    expect(out).toEqual([false, MiB, u8[MiB - 1]]);
  });

  it('the reply is the array as it was when the capability returned', async () => {
    const u8 = patterned(MiB);
    const expected = Buffer.from(u8);
    const get = () => {
      queueMicrotask(() => u8.fill(0));
      return u8;
    };
    const out = ok(await runSandbox(SHAPE, { ...limits, capabilities: { get } }));
    expect(Buffer.compare(Buffer.from(out.u), expected)).toBe(0);
    expect(u8[1]).toBe(0); // the host's own array was cleared after the reply
  });

  it("maxMessageBytes of exactly a big Uint8Array's serialized size passes, one byte less refuses", async () => {
    const u8 = patterned(MiB + 5);
    const size = serializedLength(u8);
    const code = 'try { return (await get()).length } catch (e) { return e.name + ": " + e.message }';
    expect(ok(await runSandbox(code, { ...limits, maxMessageBytes: size, capabilities: { get: () => u8 } }))).toBe(u8.length);
    const refused = ok(await runSandbox(code, { ...limits, maxMessageBytes: size - 1, capabilities: { get: () => u8 } }));
    expect(refused).toBe(`RangeError: get's reply: ${size} bytes, over the bridge limit of ${size - 1} bytes (maxMessageBytes)`);
  });
});

describe.each(ISOLATIONS)('string replies into the sandbox (%s)', (isolation) => {
  const limits = { isolation, maxMessageBytes: 16 * MiB, memoryLimitMb: 256 };
  const ascii = 'The quick brown fox jumps over the lazy dog. 0123456789\n'.repeat(80_000);
  const latin1 = `\u00e9${ascii}`;
  const twoByte = `\u4e2d${ascii}`;
  const asciiTwoByteBacked = twoByte.slice(1); // ASCII characters, maybe two-byte storage

  it.each([
    ['ASCII', ascii],
    ['Latin-1', latin1],
    ['two-byte', twoByte],
    ['ASCII sliced out of a two-byte string', asciiTwoByteBacked],
    // Non-ASCII characters where bridge.js's sample does not look: the addon finds them.
    ['ASCII but for one Latin-1 character', `${ascii.slice(0, 1001)}\u00ff${ascii.slice(1002)}`],
    ['ASCII but for one two-byte character', `${ascii.slice(0, 1001)}\u4e2d${ascii.slice(1002)}`],
    ['ASCII but for a lone surrogate at the end', `${ascii.slice(1)}\ud800`],
  ])('a big %s string arrives equal', async (_name, value) => {
    const out = ok(await runSandbox('const s = await get(); return [s.length, s]', { ...limits, capabilities: { get: () => value } }));
    expect(out[0]).toBe(value.length);
    expect(out[1] === value).toBe(true);
  });

  it("maxMessageBytes of exactly a big ASCII string's serialized size passes, one byte less refuses", async () => {
    const size = serializedLength(ascii);
    const code = 'try { return (await get()).length } catch (e) { return e.name + ": " + e.message }';
    expect(ok(await runSandbox(code, { ...limits, maxMessageBytes: size, capabilities: { get: () => ascii } }))).toBe(ascii.length);
    const refused = ok(await runSandbox(code, { ...limits, maxMessageBytes: size - 1, capabilities: { get: () => ascii } }));
    expect(refused).toBe(`RangeError: get's reply: ${size} bytes, over the bridge limit of ${size - 1} bytes (maxMessageBytes)`);
  });
});

describe('replies in flight when a run ends', () => {
  it('many runs ending with 16 MB replies queued free them (RSS bounded, in a child node)', async () => {
    // Each run asks for three 16 MB arrays and spins until its time limit, so the replies
    // sit queued for an isolate that never takes them; 12 runs queue 576 MB in all.
    const script = `
      const { runSandbox } = require(${JSON.stringify(path.join(__dirname, '..', 'index.js'))});
      const u8 = new Uint8Array(16 << 20).fill(1);
      const str = 'x'.repeat(16 << 20);
      const rss = () => process.memoryUsage().rss;
      let calls = 0;
      const run = () => runSandbox('get(); get(); text(); for (;;) {}', {
        isolation: 'thread', timeoutMs: 300, maxMessageBytes: 32 << 20, maxPendingHostCallBytes: 128 << 20,
        capabilities: { get: () => (calls++, u8), text: () => (calls++, str) },
      });
      (async () => {
        for (let i = 0; i < 3; i++) await run();
        const before = rss();
        const codes = [];
        calls = 0;
        for (let i = 0; i < 12; i++) codes.push((await run()).error?.code);
        await new Promise((r) => setTimeout(r, 50));
        console.log(JSON.stringify({ grewMb: (rss() - before) / (1 << 20), codes, calls }));
      })();`;
    const child = await runChild(process.execPath, ['-e', script], { timeout: 60_000 });
    expect(child.status, child.stderr).toBe(0);
    const { grewMb, codes, calls } = JSON.parse(child.stdout.trim().split('\n').pop()!);
    expect(new Set(codes)).toEqual(new Set(['ERR_ISOLET_TIMEOUT']));
    expect(calls).toBe(36); // every reply was made, and queued for a run that ended
    console.log(`RSS grew ${grewMb.toFixed(1)} MB over 12 runs`);
    expect(grewMb).toBeLessThan(160);
  });
});
