// The bridge's fast codec for primitives (lib/bridge.js) against V8's own serializer:
// the same bytes out, the same values in, and untrusted bytes it does not fully
// understand handed to V8's deserializer (so they mean exactly what they meant before).
import { describe, expect, it } from 'vitest';
import * as v8 from 'node:v8';
import * as path from 'node:path';
import { createRequire } from 'node:module';
import { MessageChannel } from 'node:worker_threads';
import { runSandbox } from '..';
import { ok } from './support/results';

const bridge = createRequire(__filename)(path.join(__dirname, '..', 'lib', 'bridge.js')) as {
  serialize(value: unknown): Buffer;
  deserialize(bytes: Uint8Array, owned?: boolean): unknown;
  decodeFlat(bytes: Uint8Array, owned: boolean): unknown;
  NOT_FAST: symbol;
};

function v8Bytes(value: unknown): Buffer {
  const s = new v8.Serializer();
  s.writeHeader();
  s.writeValue(value);
  return s.releaseBuffer();
}

function v8Value(bytes: Buffer): unknown {
  const d = new v8.Deserializer(bytes);
  d.readHeader();
  return d.readValue();
}

const PRIMITIVES: unknown[] = [
  0, 1, -1, 63, 64, -64, -65, 127, 128, 8191, 8192, 2 ** 30 - 1, 2 ** 30, -(2 ** 30), 2 ** 31 - 1, -(2 ** 31),
  2 ** 31, -(2 ** 31) - 1, 2 ** 53, -0, 0.1, -1.5, 1e300, Number.MIN_VALUE, NaN, Infinity, -Infinity,
  true, false, null, undefined,
  '', 'a', 'hello', 'é\u00ff\u0000', 'x'.repeat(127), 'y'.repeat(128), 'z'.repeat(256), 'w'.repeat(257), '€', 'a\u{1F600}',
];

describe('bridge codec', () => {
  it('writes exactly the bytes V8 writes for every primitive, and reads them back', () => {
    for (const v of PRIMITIVES) {
      const bytes = bridge.serialize(v);
      expect([...bytes], `bytes of ${String(v)}`).toEqual([...v8Bytes(v)]);
      expect(Object.is(bridge.deserialize(bytes), v), `value of ${String(v)}`).toBe(true);
    }
  });

  it('reads what it cannot decode fast (or not at all) exactly as V8 does, including malformed bytes', () => {
    // Argument lists as a sandbox writes them (sparse arrays of primitives) and mutations of them.
    const seeds = [
      Buffer.from([255, 15, 97, 1, 73, 0, 73, 10, 64, 1, 1]),
      Buffer.from([255, 15, 97, 2, 73, 0, 34, 2, 97, 98, 73, 2, 78, 0, 0, 0, 0, 0, 0, 248, 63, 64, 2, 2]),
      Buffer.from([255, 15, 97, 0, 64, 0, 0]),
      v8Bytes({ a: 1 }),
      v8Bytes([1, 'two', null]),
      v8Bytes(-0.5),
      v8Bytes('abc'),
    ];
    // Keep the same version byte as this V8 (a real sandbox's bytes carry it).
    for (const seed of seeds) seed[1] = v8Bytes(0)[1];
    let seedValue = 1;
    const random = () => {
      seedValue = (seedValue * 1103515245 + 12345) % 2 ** 31;
      return seedValue / 2 ** 31;
    };
    let compared = 0;
    for (const seed of seeds) {
      for (let trial = 0; trial < 400; trial++) {
        const bytes = Buffer.from(seed);
        const edits = 1 + Math.floor(random() * 3);
        for (let e = 0; e < edits; e++) bytes[2 + Math.floor(random() * (bytes.length - 2))] = Math.floor(random() * 256);
        const cut = random() < 0.2 ? bytes.subarray(0, 2 + Math.floor(random() * (bytes.length - 2))) : bytes;
        let expected: { value?: unknown; threw?: boolean };
        try {
          expected = { value: v8Value(Buffer.from(cut)) };
        } catch {
          expected = { threw: true };
        }
        let actual: { value?: unknown; threw?: boolean };
        try {
          actual = { value: bridge.deserialize(Buffer.from(cut)) };
        } catch {
          actual = { threw: true };
        }
        expect(actual, `bytes ${[...cut].join(',')}`).toEqual(expected);
        compared += 1;
      }
    }
    expect(compared).toBe(seeds.length * 400);
  });

  it('carries every primitive across a host call both ways, in thread and process isolation', async () => {
    for (const isolation of ['thread', 'process'] as const) {
      const seen: unknown[][] = [];
      const out = ok(await runSandbox(
        `const back = [];
         for (const v of values) back.push(await echo(v, 7, 'k'));
         return back.map((v) => Object.is(v, -0) ? '-0' : (typeof v === 'number' && isNaN(v)) ? 'NaN' : v === undefined ? 'undef' : v);`.replace(
          'values',
          `[${PRIMITIVES.map((v) => (Object.is(v, -0) ? '-0' : typeof v === 'string' ? JSON.stringify(v) : String(v))).join(', ')}]`,
        ),
        {
          isolation,
          capabilities: {
            echo: (...args: unknown[]) => {
              seen.push(args);
              return args[0];
            },
          },
        },
      ));
      const label = (v: unknown) => (Object.is(v, -0) ? '-0' : typeof v === 'number' && Number.isNaN(v) ? 'NaN' : v === undefined ? 'undef' : v);
      expect(out).toEqual(PRIMITIVES.map(label));
      expect(seen.map((a) => [label(a[0]), a[1], a[2]])).toEqual(PRIMITIVES.map((v) => [label(v), 7, 'k']));
    }
  });
});

// Long strings (the fast path out of the sandbox), ArrayBuffers and views (V8's paths).
function flatValues(): unknown[] {
  const buffer = new ArrayBuffer(5000);
  new Uint8Array(buffer).forEach((_, i, a) => (a[i] = (i * 7) & 0xff));
  return [
    'x'.repeat(1024), 'é'.repeat(3000), '中'.repeat(1500), 'a'.repeat(127) + '中'.repeat(1000), 'a'.repeat(128) + '中'.repeat(1000),
    '\ud800'.repeat(1100), '\u{1F600}'.repeat(600), 'z'.repeat(70000),
    buffer, new ArrayBuffer(1024), new Uint8Array(buffer), new Uint8Array(buffer, 8, 100), new Int8Array(buffer), new Uint8ClampedArray(buffer),
    new Int16Array(buffer, 2, 7), new Uint16Array(buffer), new Int32Array(buffer, 4), new Uint32Array(buffer), new Float32Array(buffer),
    new Float64Array(buffer, 8, 600), new BigInt64Array(buffer, 0, 10), new BigUint64Array(buffer, 16), new DataView(buffer, 3, 10),
    new DataView(buffer), Buffer.from(buffer), new Uint8Array(new ArrayBuffer(200000)).fill(9),
  ];
}

const kind = (v: unknown) => Object.prototype.toString.call(v);

describe('bridge codec for big flat values (long strings fast; ArrayBuffers and typed arrays through V8)', () => {
  it('writes exactly the bytes V8 writes, and reads V8\'s bytes back to the same value (strings fast)', () => {
    for (const v of flatValues()) {
      const label = `${kind(v)} of ${(v as { length?: number; byteLength?: number }).length ?? (v as ArrayBuffer).byteLength}`;
      const expected = v8Bytes(v);
      expect(bridge.serialize(v).equals(expected), `bytes of ${label}`).toBe(true);
      // Strings take the fast path; buffers and views go to V8's reader (see bridge.js).
      expect(bridge.decodeFlat(Buffer.from(expected), true) !== bridge.NOT_FAST, `${label} decoded fast`).toBe(typeof v === 'string');
      for (const owned of [false, true]) {
        const back = bridge.deserialize(Buffer.from(expected), owned);
        const fromV8 = v8Value(expected);
        expect(kind(back), label).toBe(kind(fromV8));
        expect(Object.getPrototypeOf(back), label).toBe(Object.getPrototypeOf(fromV8));
        expect(v8Bytes(back).equals(v8Bytes(fromV8)), `value of ${label}`).toBe(true);
      }
    }
  });

  it('leaves to V8 what is not a string (buffers, views, containers) and short strings', () => {
    const rab = new (ArrayBuffer as any)(4096, { maxByteLength: 8192 });
    const others: unknown[] = [new Uint8Array(rab), rab, new Uint8Array(4096), { a: 'x'.repeat(2000) }, ['x'.repeat(2000)]];
    for (const v of [...others, 'short']) {
      const bytes = v8Bytes(v);
      expect(bridge.serialize(v).equals(bytes), kind(v)).toBe(true);
      expect(v8Bytes(bridge.deserialize(bytes, true)).equals(v8Bytes(v8Value(bytes))), kind(v)).toBe(true);
    }
    for (const v of others) expect(bridge.decodeFlat(v8Bytes(v), true), kind(v)).toBe(bridge.NOT_FAST);
  });

  it('reads mutated and cut flat bytes exactly as V8 does (or throws where V8 throws)', () => {
    const seeds = [
      v8Bytes(new Uint8Array(1100).fill(3)),
      v8Bytes(new Float64Array(new ArrayBuffer(1600), 8, 100)),
      v8Bytes(new DataView(new ArrayBuffer(1500), 5, 20)),
      v8Bytes(new ArrayBuffer(1200)),
      v8Bytes('q'.repeat(1100)),
      v8Bytes('中'.repeat(600)),
      // Padding tags (0x00) before the value, which V8 skips and the fast paths leave to it.
      Buffer.concat([Buffer.from([0xff, v8Bytes(0)[1], 0, 0, 0, 0, 0, 0, 0, 0, 0]), v8Bytes(new Uint8Array(1100)).subarray(2)]),
    ];
    let seedValue = 7;
    const random = () => {
      seedValue = (seedValue * 1103515245 + 12345) % 2 ** 31;
      return seedValue / 2 ** 31;
    };
    let compared = 0;
    let fast = 0;
    const describe = (v: unknown) => (v === bridge.NOT_FAST ? 'not fast' : { kind: kind(v), bytes: [...v8Bytes(v)] });
    for (const seed of seeds) {
      for (let trial = 0; trial < 300; trial++) {
        const bytes = Buffer.from(seed);
        const edits = 1 + Math.floor(random() * 3);
        for (let e = 0; e < edits; e++) {
          // Mostly the framing (tags, lengths, view fields), where a mistake would matter.
          const at = random() < 0.7 ? 2 + Math.floor(random() * Math.min(12, bytes.length - 2)) : bytes.length - 1 - Math.floor(random() * 8);
          bytes[at] = Math.floor(random() * 256);
        }
        const cut = random() < 0.2 ? bytes.subarray(0, 2 + Math.floor(random() * (bytes.length - 2))) : bytes;
        let expected: unknown;
        try {
          expected = describe(v8Value(Buffer.from(cut)));
        } catch {
          expected = 'threw';
        }
        let actual: unknown;
        try {
          actual = describe(bridge.deserialize(Buffer.from(cut), true));
        } catch {
          actual = 'threw';
        }
        expect(actual, `bytes ${[...cut.subarray(0, 16)].join(',')}... (${cut.length})`).toEqual(expected);
        if (bridge.decodeFlat(Buffer.from(cut), false) !== bridge.NOT_FAST) fast += 1;
        compared += 1;
      }
    }
    expect(compared).toBe(seeds.length * 300);
    // The fuzz reaches the fast paths, not only V8's reader.
    expect(fast).toBeGreaterThan(100);
  });

  it('carries big flat values out of and into the sandbox, in thread and process isolation', async () => {
    // Over the 64 KiB from which strings are shared rather than copied.
    const u8 = new Uint8Array(256 << 10);
    for (let i = 0; i < u8.length; i++) u8[i] = i & 0xff;
    const str = 'héllo'.repeat(20000);
    const wide = 'h中llo'.repeat(20000);
    for (const isolation of ['thread', 'process'] as const) {
      const out = ok(await runSandbox(
        `const u = new Uint8Array(256 << 10); for (let i = 0; i < u.length; i++) u[i] = i & 0xff;
         const f = new Float64Array(u.buffer, 8, 1000);
         const inU8 = await getU8(), inStr = await getStr(), inWide = await getWide();
         let sum = 0; for (let i = 0; i < inU8.length; i += 409) sum += inU8[i];
         return { u, f, ab: u.buffer.slice(0, 100000), s: 'héllo'.repeat(20000), w: 'h中llo'.repeat(20000),
           inKind: Object.prototype.toString.call(inU8), inLen: inU8.length, sum, inStr: inStr === 'héllo'.repeat(20000), inWide: inWide === 'h中llo'.repeat(20000) };`,
        { isolation, memoryLimitMb: 256, maxOutputBytes: 32 << 20, capabilities: { getU8: () => u8, getStr: () => str, getWide: () => wide } },
      )) as Record<string, any>;
      expect(out.u).toEqual(u8);
      expect(out.f).toBeInstanceOf(Float64Array);
      expect(out.f.buffer).toBe(out.u.buffer);
      expect(out.ab.byteLength).toBe(100000);
      expect(out.s).toBe(str);
      expect(out.w).toBe(wide);
      let sum = 0;
      for (let i = 0; i < u8.length; i += 409) sum += u8[i];
      expect([out.inKind, out.inLen, out.sum, out.inStr, out.inWide]).toEqual(['[object Uint8Array]', u8.length, sum, true, true]);
    }
  });

  it('big typed array and string results (strings shared, not copied) are whole, plain, alive after GC and not shared with later runs', async () => {
    const code = (n: number) => `const u = new Uint8Array(1 << 20).fill(${n}); u`;
    const first = ok(await runSandbox(code(1), { isolation: 'thread' })) as Uint8Array;
    const second = ok(await runSandbox(code(2), { isolation: 'thread' })) as Uint8Array;
    const top = ok(await runSandbox('new Uint8Array(1 << 20).fill(5).buffer', { isolation: 'thread' })) as ArrayBuffer;
    // Big strings come out as external strings over the result's bytes.
    const latin1 = ok(await runSandbox("'é'.repeat(1 << 20)", { isolation: 'thread' })) as string;
    const wide = ok(await runSandbox("'中é'.repeat(1 << 19)", { isolation: 'thread' })) as string;
    (globalThis as any).gc?.();
    await new Promise((r) => setTimeout(r, 20));
    for (let i = 0; i < 10; i++) await runSandbox(code(3), { isolation: 'thread' });
    expect([first.byteOffset, first.buffer.byteLength, Object.getPrototypeOf(first.buffer)]).toEqual([0, 1 << 20, ArrayBuffer.prototype]);
    expect(first.every((b) => b === 1)).toBe(true);
    expect(second.every((b) => b === 2)).toBe(true);
    expect(top.byteLength).toBe(1 << 20);
    expect(latin1 === 'é'.repeat(1 << 20) && wide === '中é'.repeat(1 << 19)).toBe(true);
    expect(JSON.stringify({ s: latin1.slice(0, 3) + wide.slice(-3) })).toBe('{"s":"éééé中é"}');
    expect(new Uint8Array(top).every((b) => b === 5)).toBe(true);
    // Writable, and its own memory: writing one result leaves the other alone.
    first.fill(9);
    expect(second[0]).toBe(2);
    // Usable like any ArrayBuffer: aligned for wide views, sliceable, transferable.
    expect(new Float64Array(first.buffer).length).toBe((1 << 20) / 8);
    expect(new Uint8Array(first.buffer.slice(10, 20))).toEqual(new Uint8Array(10).fill(9));
    const { port1, port2 } = new MessageChannel();
    const got = new Promise<ArrayBuffer>((resolve) => port2.once('message', resolve));
    port1.postMessage(top, [top]);
    const moved = await got;
    port1.close();
    // Moved, as an ArrayBuffer of V8's own is: the original is detached.
    expect(top.byteLength).toBe(0);
    expect(moved.byteLength).toBe(1 << 20);
    expect(new Uint8Array(moved)[12345]).toBe(5);
  });
});

describe('copy limits are exact for results and host-call arguments that grow V8\'s buffer', () => {
  // V8 grows its buffer by doubling: a limit checked on the buffer's capacity refused
  // results well under it (a 39 MB result under a 64 MB maxOutputBytes).
  const BUILD = 'const a = []; for (let i = 0; i < 15000; i++) a.push("x".repeat(90) + i);';
  const host: string[] = [];
  for (let i = 0; i < 15000; i++) host.push('x'.repeat(90) + i);
  const size = v8Bytes(host).length;
  const argsSize = v8Bytes([host]).length;

  for (const isolation of ['thread', 'process'] as const) {
    it(`maxOutputBytes of exactly the result's ${size} bytes passes, one byte less refuses (${isolation})`, async () => {
      const out = ok(await runSandbox(`${BUILD} a`, { isolation, maxOutputBytes: size })) as string[];
      expect(out.length).toBe(15000);
      const r = await runSandbox(`${BUILD} a`, { isolation, maxOutputBytes: size - 1 });
      expect(r.success).toBe(false);
      if (!r.success) expect(r.error.message).toMatch(new RegExp(`output limit of ${size - 1} bytes`));
    });

    it(`maxMessageBytes of exactly the arguments' ${argsSize} bytes passes, one byte less refuses (${isolation})`, async () => {
      const code = `${BUILD} try { return await take(a); } catch (e) { return e.name + ': ' + e.message; }`;
      const taken = ok(await runSandbox(code, { isolation, maxMessageBytes: argsSize, capabilities: { take: (a: string[]) => a.length } }));
      expect(taken).toBe(15000);
      const refused = ok(await runSandbox(code, { isolation, maxMessageBytes: argsSize - 1, capabilities: { take: (a: string[]) => a.length } }));
      expect(refused).toMatch(/^RangeError: /);
    });
  }
});

describe('host Errors inside values given to the sandbox (the fast scan and its fallbacks)', () => {
  // Each shape hides a host Error where the set-less scan must find it or give up: it
  // must reach the sandbox as a copy whose stack names no host frame.
  const shapes: Record<string, () => unknown> = {
    'top level in an object': () => ({ a: 1, e: new Error('boom') }),
    'in an array': () => [1, 2, [3, new TypeError('boom')]],
    'in a Map value': () => new Map([['k', { e: new Error('boom') }]]),
    'in a Map key': () => new Map([[new Error('boom'), 1]]),
    'in a Set': () => new Set([1, new Error('boom')]),
    'after a cycle': () => {
      const o: any = { name: 'loop' };
      o.self = o;
      o.e = new Error('boom');
      return o;
    },
    'deeper than the scan goes (200 levels)': () => {
      let o: any = { e: new Error('boom') };
      for (let i = 0; i < 200; i++) o = { next: o };
      return o;
    },
    'in a DAG too wide for a set-less scan (2^40 paths)': () => {
      let o: any = { e: new Error('boom') };
      for (let i = 0; i < 40; i++) o = { l: o, r: o };
      return o;
    },
    'that is the cause of another': () => ({ outer: new Error('boom', { cause: new TypeError('boom') }) }),
    'inherited enumerable keys are scanned, own keys are copied': () => Object.assign(Object.create({ inherited: 1 }), { e: new RangeError('boom') }),
  };
  const findStacks = `
    const stacks = [];
    const seen = new Set();
    const walk = (v) => {
      if (v === null || typeof v !== 'object' || seen.has(v)) return;
      seen.add(v);
      if (v instanceof Error) { stacks.push(String(v.stack)); walk(v.cause); return; }
      if (v instanceof Map) { for (const [k, x] of v) { walk(k); walk(x); } return; }
      if (v instanceof Set) { for (const x of v) walk(x); return; }
      for (const k of Object.keys(v)) walk(v[k]);
    };
    walk(await get());
    return stacks;`;

  for (const [name, make] of Object.entries(shapes)) {
    it(`strips the host stack of an Error ${name}`, async () => {
      const stacks = ok(await runSandbox(findStacks, { isolation: 'thread', capabilities: { get: make } })) as string[];
      expect(stacks.length).toBeGreaterThan(0);
      for (const stack of stacks) {
        expect(stack).toMatch(/^(Range|Type)?Error: boom$/);
        expect(stack).not.toContain(__dirname);
      }
    });
  }

  it('an Error that is its own cause ends in neither a hang nor a host stack', async () => {
    const e: any = new Error('boom');
    e.cause = e;
    const r = await runSandbox('const v = await get(); return String(v.e.stack) + String(v.e.cause === v.e);', { isolation: 'thread', capabilities: { get: () => ({ e }) } });
    // V8 cannot read back an error that is its own cause: the sandbox sees a copy error.
    const text = r.success ? String(r.output) : `${r.error.name}: ${r.error.message}`;
    expect(text).not.toContain(__dirname);
    expect(text).not.toContain('at ');
  });

  it('gives a clean value unchanged and whole (cycles and shared subtrees kept)', async () => {
    const shared = { n: 1 };
    const value: any = { a: shared, b: shared, list: [shared, { deep: { deeper: [1, 2, 3] } }] };
    value.self = value;
    const out = ok(await runSandbox('const v = await get(); return [v.self === v, v.a === v.b, v.list[0] === v.a, v.list[1].deep.deeper.length];', { isolation: 'thread', capabilities: { get: () => value } }));
    expect(out).toEqual([true, true, true, 3]);
  });
});
