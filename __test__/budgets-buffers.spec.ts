// Every buffer counts (issue 23, item 5): a buffer that enters the sandbox from the host can
// never grow the run past its memory limit. A resizable ArrayBuffer's maximum is reserved
// by V8 outside the heap and the ArrayBuffer budget: a capability answering one with
// maxByteLength 2^29 let a 64 MB run grow it to 256 MB, in both modes. Now such a buffer
// arrives fixed-length, with its current bytes (and a length-tracking view on it as a
// fixed-length view), however it comes in: a capability's answer, request data, a data
// answer, sandbox.call arguments; through the bridge's writer (lib/codec.js) and through
// v8.Serializer (a class instance holding it), where the sandbox's side rewrites the bytes
// (isolet-core `value_count::fixed_length_buffers`). A growable SharedArrayBuffer is not
// copyable at all, and a module source is a string, never a buffer.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSandbox, runSandbox, SandboxEngine, type Isolation, type SandboxSession } from '..';
import { ok } from './support/results';

const MAX = 2 ** 29;

/** A resizable buffer of 1 KiB (maximum 2^29) with a byte pattern, and a tracking view. */
function resizable() {
  const ab = new (ArrayBuffer as any)(1024, { maxByteLength: MAX }) as ArrayBuffer;
  const u8 = new Uint8Array(ab);
  for (let i = 0; i < u8.length; i++) u8[i] = i & 0xff;
  return { ab, u8 };
}

/** As a plain value (the bridge's writer) or inside a class instance (v8.Serializer). */
class Holder {
  v: unknown;
  constructor(v: unknown) {
    this.v = v;
  }
}
const SHAPES = {
  buffer: () => resizable().ab,
  view: () => resizable().u8,
  'buffer in a class instance': () => new Holder(resizable().ab),
  'view in a class instance': () => new Holder(resizable().u8),
};

/** What the sandbox sees of what it got, and whether it could grow it to 256 MB. */
const PROBE = `(got) => {
  const v = got && got.v !== undefined ? got.v : got;
  const ab = v instanceof ArrayBuffer ? v : v.buffer;
  let grew;
  try { ab.resize(256 * 1024 * 1024); grew = ab.byteLength; } catch (e) { grew = e.name; }
  return { resizable: ab.resizable, max: ab.maxByteLength, length: ab.byteLength, last: new Uint8Array(ab)[1023], viewLength: v instanceof ArrayBuffer ? null : v.length, grew };
}`;
const EXPECTED = (shape: string) => ({ resizable: false, max: 1024, length: 1024, last: 255, viewLength: shape.startsWith('view') ? 1024 : null, grew: 'TypeError' });

describe.each(['thread', 'process'] as Isolation[])('buffers from the host (%s mode)', (isolation) => {
  it.each(Object.keys(SHAPES))("a capability's answer: %s", async (shape) => {
    const get = () => SHAPES[shape as keyof typeof SHAPES]();
    const out = ok(await runSandbox(`return (${PROBE})(await get())`, { isolation, capabilities: { get } }));
    expect(out).toEqual(EXPECTED(shape));
  });

  it.each(Object.keys(SHAPES))('sandbox.call arguments: %s', async (shape) => {
    const sb = await createSandbox({ isolation });
    try {
      ok(await sb.run(`var probe = ${PROBE};`));
      expect(ok(await sb.call('probe', SHAPES[shape as keyof typeof SHAPES]()))).toEqual(EXPECTED(shape));
    } finally {
      sb.close();
    }
  });

  describe('a SandboxEngine request', () => {
    let engine: SandboxEngine;
    beforeAll(async () => {
      engine = new SandboxEngine({ isolation, processes: 1, memoryMb: 64 });
      await engine.init();
    });
    afterAll(() => engine.shutdown());
    const last = async (session: SandboxSession, onData?: (id: number) => void) => {
      let end: any;
      for await (const e of session) {
        if (e.type === 'dataRequest' && onData) onData(e.id);
        if (e.type === 'result' || e.type === 'error') end = e;
      }
      return end;
    };

    it.each(Object.keys(SHAPES))('its data: %s', async (shape) => {
      const end = await last(engine.submit({ requestId: shape, code: `return (${PROBE})(data.v)`, data: { v: SHAPES[shape as keyof typeof SHAPES]() } }));
      expect(end.type, end.message).toBe('result');
      expect(end.data).toEqual(EXPECTED(shape));
    });

    it.each(Object.keys(SHAPES))('a data answer: %s', async (shape) => {
      const session = engine.submit({ requestId: shape, code: `return (${PROBE})(data.v)` });
      const end = await last(session, (id) => session.respond(id, SHAPES[shape as keyof typeof SHAPES]()));
      expect(end.type, end.message).toBe('result');
      expect(end.data).toEqual(EXPECTED(shape));
    });
  });

  it('a growable SharedArrayBuffer cannot be copied in at all', async () => {
    const get = () => new (SharedArrayBuffer as any)(1024, { maxByteLength: MAX });
    const out = ok(await runSandbox('try { await get(); return "arrived"; } catch (e) { return e.name; }', { isolation, capabilities: { get } }));
    expect(out).toBe('DataCloneError');
  });

  it('a module source is a string: a buffer answered for one is refused', async () => {
    const r = await runSandbox('import x from "buf"; export default x;', { isolation, type: 'module', resolve: () => resizable().ab as unknown as string });
    expect(r.success).toBe(false);
    if (!r.success) expect(r.error.message).toMatch(/not a source string/);
  });

  it('buffers the run makes itself stay refused past its memory', async () => {
    const out = ok(await runSandbox('(() => { try { new ArrayBuffer(8, { maxByteLength: 2 ** 29 }); return "made"; } catch (e) { return e.name; } })()', { isolation }));
    expect(out).toBe('RangeError');
  });
});
