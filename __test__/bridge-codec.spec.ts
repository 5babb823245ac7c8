// The bridge's fast codec for primitives (lib/bridge.js) against V8's own serializer:
// the same bytes out, the same values in, and untrusted bytes it does not fully
// understand handed to V8's deserializer (so they mean exactly what they meant before).
import { describe, expect, it } from 'vitest';
import * as v8 from 'node:v8';
import * as path from 'node:path';
import { createRequire } from 'node:module';
import { runSandbox, type SandboxResult } from '..';

const bridge = createRequire(__filename)(path.join(__dirname, '..', 'lib', 'bridge.js')) as {
  serialize(value: unknown): Buffer;
  deserialize(bytes: Buffer): unknown;
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

function ok<T>(r: SandboxResult<T>): T {
  if (!r.success) throw new Error(`expected success, got ${r.error.name}: ${r.error.message}`);
  return r.output;
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
