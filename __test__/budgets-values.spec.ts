// Values, not only bytes (issue 18): a result or a host call's arguments cost the parent
// what their values cost once built on its thread. A 16 MiB result of 4 M short strings
// was ~165 MB and a 1-2 s stall; a 17-byte array of length 3e7 was 240 MB. Each value
// limit set is the limit enforced, in both modes; the reproductions are judged
// from outside, in a child node.
import { describe, expect, it } from 'vitest';
import { createRequire } from 'node:module';
import * as v8 from 'node:v8';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runSandbox, SandboxEngine, DEFAULT_BRIDGE_LIMITS } from '..';
import { runChild } from './support/spawn';

const root = path.resolve(__dirname, '..');
const MODES = ['thread', 'process'] as const;

/** Code whose completion value is an array holding `n` values: itself and n - 1 strings. */
const valuesResult = (n: number) => `const a = []; for (let i = 0; i < ${n - 1}; i++) a.push('ab'); a`;

const native = createRequire(__filename)(path.join(root, 'lib', 'native.js')) as { countValues(bytes: Buffer, max: number): number };

/** A lower bound of the values V8's deserializer built for `v` (each shared object once). */
function built(v: unknown, seen = new Set<unknown>()): number {
  if (v === null || (typeof v !== 'object' && typeof v !== 'function')) return 1;
  if (seen.has(v)) return 1;
  seen.add(v);
  if (ArrayBuffer.isView(v)) return 2;
  if (v instanceof RegExp || v instanceof String) return 2;
  if (v instanceof Map) return [...v].reduce((n, [k, x]) => n + built(k, seen) + built(x, seen), 1);
  if (v instanceof Set) return [...v].reduce((n, x) => n + built(x, seen), 1);
  let n = 1;
  // A length far past an array's keys is dictionary elements (no slot per index): not
  // counted here, so this stays a lower bound.
  if (Array.isArray(v)) n += v.length > 2 * Object.keys(v).length + 1024 ? 0 : v.length;
  for (const key of Object.keys(v)) {
    const inSlot = Array.isArray(v) && String(Number(key)) === key && Number(key) < v.length;
    n += (inSlot ? -1 : 1) + built((v as Record<string, unknown>)[key], seen);
  }
  return n;
}

// The base serializer, as the bridge and the seam use: typed arrays as V8 writes them
// (Node's v8.serialize writes them as host objects the sandbox never sees).
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

describe('the value count (isolet-core, read from V8 bytes)', () => {
  const shared = { s: 1 };
  const seeds: unknown[] = [
    ['ab', 'ab', 1, 2.5, true, null, undefined, 10n ** 30n],
    { a: 1, b: { c: [1, 2, { d: 'x' }] }, 'é': '€', 7: 'seven' },
    // biome-ignore lint/suspicious/noSparseArray: holes are what this case carries
    [0, , 2, , , 5],
    Object.assign([1, 2, 3], { extra: 'prop' }),
    new Map<unknown, unknown>([[1, { a: 1 }], ['k', [1, 2]]]),
    new Set([1, 'two', [3]]),
    [new Uint8Array([1, 2, 3]), new Float64Array(2), new DataView(new ArrayBuffer(8), 2, 4)],
    [new Date(0), /ab+c/gi, new String('boxed'), new Number(4), Object(5n), new Boolean(false)],
    // Short stacks: every byte of a seed is mutated.
    [Object.assign(new RangeError('r'), { stack: 'R' }), Object.assign(new Error('with cause'), { stack: 's', cause: { why: [1] } })],
    [shared, shared, [shared]],
    ((): unknown[] => { const a: unknown[] = []; a[100] = 'far'; return a; })(),
  ];

  it('is never below what V8 builds, for every shape the bridge carries and every one-byte mutation V8 still reads', () => {
    const tags = [0x00, 0x7f, 0x80, 0xff, ...'aAo"I-V^;\'$@{:,rmsc.'.split('').map((c) => c.charCodeAt(0))];
    let checked = 0;
    for (const seed of seeds) {
      const bytes = v8Bytes(seed);
      expect(native.countValues(bytes, 2 ** 32 - 1), `count of ${String(seed)}`).toBeGreaterThanOrEqual(built(v8Value(bytes)));
      for (let at = 2; at < bytes.length; at++) {
        for (const b of [...tags, bytes[at] ^ 1]) {
          const m = Buffer.from(bytes);
          m[at] = b;
          let value: unknown;
          try {
            value = v8Value(m);
          } catch {
            continue; // V8 refuses it: nothing is built
          }
          const n = native.countValues(m, 2 ** 32 - 1);
          // -2: unreadable, refused without building anything.
          if (n !== -2) expect(n, `byte ${at} = ${b} of ${[...bytes]}`).toBeGreaterThanOrEqual(built(value));
          checked++;
        }
      }
      for (let cut = 0; cut < bytes.length; cut++) {
        expect(native.countValues(bytes.subarray(0, cut), 1e9), `cut at ${cut}`).toBe(-2);
      }
    }
    expect(checked).toBeGreaterThan(100);
  });

  // What a value would cost built (issue 23): the estimate the parent bounds is held
  // against what V8's deserializer and the bridge's reader (lib/codec.js) build, heap used
  // after a full GC, in a child node. Never much under (a bound must hold); at most a
  // few times over (or data would be refused for nothing).
  it('estimates what a value costs built within 0.9-3x of what V8 and the bridge reader build, for the shapes data takes', async () => {
    const script = `
const v8 = require('node:v8');
const native = require(${JSON.stringify(path.join(root, 'lib', 'native.js'))});
const { Reader } = require(${JSON.stringify(path.join(root, 'lib', 'codec.js'))});
const ser = (v) => { const s = new v8.Serializer(); s.writeHeader(); s.writeValue(v); return s.releaseBuffer(); };
const byV8 = (b) => { const d = new v8.Deserializer(b); d.readHeader(); return d.readValue(); };
const byReader = (b) => { const r = new Reader(b); while (!r.run(Infinity)); return r.value; };
const used = () => { global.gc(); global.gc(); return v8.getHeapStatistics().used_heap_size; };
const shapes = {
  doubles: () => Array.from({ length: 300000 }, (_, i) => i + 0.5),
  ints: () => Array.from({ length: 300000 }, (_, i) => i),
  shortStrings: () => Array.from({ length: 300000 }, () => 'ab'),
  strings: () => Array.from({ length: 300000 }, (_, i) => 's' + i),
  rows5: () => Array.from({ length: 30000 }, (_, i) => ({ id: i, name: 'n' + i, email: 'u' + i + '@x.io', balance: i * 1.5, active: i % 2 === 0 })),
  rows32: () => Array.from({ length: 3000 }, (_, i) => { const o = {}; for (let k = 0; k < 32; k++) o['f' + k] = k % 3 ? i + k : 'v' + k; return o; }),
  emptyObjects: () => Array.from({ length: 200000 }, () => ({})),
  distinctKeys: () => Array.from({ length: 50000 }, (_, i) => ({ ['k' + i]: i })),
  nested: () => Array.from({ length: 50000 }, (_, i) => [i, [i + 0.5, 'x']]),
  map: () => new Map(Array.from({ length: 50000 }, (_, i) => [i, 'v' + i])),
  set: () => new Set(Array.from({ length: 50000 }, (_, i) => 'v' + i)),
  dates: () => Array.from({ length: 50000 }, (_, i) => new Date(i)),
};
const out = {};
for (const [name, make] of Object.entries(shapes)) {
  const b = ser(make());
  const [, cost] = native.tallyValues(b);
  let keep;
  const a0 = used(); keep = byV8(b); const a1 = used(); keep = null;
  const b0 = used(); keep = byReader(b); const b1 = used(); keep = null;
  out[name] = { cost, v8: a1 - a0, reader: b1 - b0 };
}
console.log(JSON.stringify(out));`;
    const r = await runChild(process.execPath, ['--expose-gc', '-e', script], { timeout: 60000 });
    expect(r.status, r.stderr).toBe(0);
    const measured = JSON.parse(r.stdout.trim().split('\n').pop()!) as Record<string, { cost: number; v8: number; reader: number }>;
    for (const [name, m] of Object.entries(measured)) {
      for (const built of [m.v8, m.reader]) {
        expect(m.cost / built, `${name}: estimate ${m.cost} against ${built} built`).toBeGreaterThan(0.9);
        expect(m.cost / built, `${name}: estimate ${m.cost} against ${built} built`).toBeLessThan(3);
      }
    }
  });

  it('stops at the limit: past it is -1, at it the count', () => {
    const bytes = v8Bytes(['a', 'b', 'c']);
    expect(native.countValues(bytes, 4)).toBe(4);
    expect(native.countValues(bytes, 3)).toBe(-1);
  });
});

describe.each(MODES)('value limits (%s mode)', (isolation) => {
  it('maxOutputValues: a result of exactly the limit passes, one value more fails naming the limit', async () => {
    expect((await runSandbox(valuesResult(100), { isolation, maxOutputValues: 100 })).success).toBe(true);
    const over = await runSandbox(valuesResult(101), { isolation, maxOutputValues: 100 });
    expect(over.success).toBe(false);
    if (over.success) return;
    expect(over.error.name).toBe('SandboxRuntimeError');
    expect(over.error.code).toBe('ERR_ISOLET_RUNTIME');
    expect((over.error as { limit?: string }).limit).toBe('maxOutputValues');
    expect(over.error.message).toBe('The result holds more than 100 values, over the output limit (maxOutputValues)');
    // The default is the limit a run gets: a safety bound far above data (issue 23), held
    // here with a sparse array (every slot of its length counts; a few bytes, and within
    // what the parent may build: 8 bytes a slot).
    const d = DEFAULT_BRIDGE_LIMITS.maxOutputValues;
    expect(d).toBe(2 ** 23);
    const slots = (n: number) => `const a = []; a.length = ${n - 1}; a`;
    const at = await runSandbox(slots(d), { isolation });
    expect(at.success && (at.output as unknown[]).length).toBe(d - 1);
    const past = await runSandbox(slots(d + 1), { isolation });
    expect(past.success ? 'passed' : (past.error as { limit?: string }).limit).toBe('maxOutputValues');
  });

  it('counts property keys, holes, Map and Set entries, typed arrays and every slot of a sparse array', async () => {
    const exact = async (code: string, n: number) => {
      expect((await runSandbox(code, { isolation, maxOutputValues: n })).success, `${code} within ${n}`).toBe(true);
      const r = await runSandbox(code, { isolation, maxOutputValues: n - 1 });
      expect(r.success ? 'passed' : (r.error as { limit?: string }).limit, `${code} over ${n - 1}`).toBe('maxOutputValues');
    };
    await exact('({ a: 1, b: "x" })', 5); // object, 2 keys, 2 values
    await exact('new Map([[1, 2], [3, 4]])', 5);
    await exact('new Set([1, 2, 3])', 4);
    await exact('[new Uint8Array(4)]', 3); // array, ArrayBuffer, view
    await exact('[0, , 2]', 8); // holey: written sparse, 3 slots, 2 index keys, 2 values
    // 8 bytes, 12 KB once built: the element slots an index key makes V8 allocate.
    await exact('({ 1023: 0 })', 3 + 1552);
    await exact('({ 1700000000: 0 })', 3 + 18); // past V8's gap: dictionary elements
    // A few bytes, 72 MB once built: refused however few bytes it takes. (A far longer
    // one is the compromised host's below: in the sandbox it would cost the host itself.)
    const sparse = await runSandbox('const a = [1]; a.length = 9e6; a', { isolation });
    expect(sparse.success ? 'passed' : (sparse.error as { limit?: string }).limit).toBe('maxOutputValues');
  });

  it('maxMessageValues: arguments of exactly the limit reach the handler, one value more is a RangeError in the sandbox', async () => {
    let calls = 0;
    const take = (list: string[]) => {
      calls += 1;
      return list.length;
    };
    // The argument list, the array and its strings: k + 2 values.
    const code = (k: number) => `const l = []; for (let i = 0; i < ${k}; i++) l.push('ab');
      try { return await take(l); } catch (e) { return e.name + ': ' + e.message; }`;
    const at = await runSandbox(code(48), { isolation, capabilities: { take }, maxMessageValues: 50 });
    expect(at.success && at.output).toBe(48);
    const over = await runSandbox(code(49), { isolation, capabilities: { take }, maxMessageValues: 50 });
    expect(over.success ? over.output : over.error.message).toBe("RangeError: host call arguments hold more than 50 values, over the bridge limit (maxMessageValues)");
    expect(calls).toBe(1);
    // At the default (a safety bound far above data): sparse arrays, k slots are k + 2 values
    // with the argument list and the array.
    const d = DEFAULT_BRIDGE_LIMITS.maxMessageValues;
    expect(d).toBe(2 ** 23);
    const slots = (k: number) => `const l = []; l.length = ${k};
      try { return await take(l); } catch (e) { return e.name + ': ' + e.message; }`;
    expect((await runSandbox(slots(d - 2), { isolation, capabilities: { take } })).success && calls).toBe(2);
    const past = await runSandbox(slots(d - 1), { isolation, capabilities: { take } });
    expect(past.success && past.output).toContain('(maxMessageValues)');
    expect(calls).toBe(2);
  });

  it('maxPendingHostCallValues: un-awaited calls past the values in flight are refused until earlier ones settle', async () => {
    let calls = 0;
    const slow = (list: string[]) => {
      calls += 1;
      return new Promise((r) => setTimeout(() => r(list.length), 200));
    };
    // Each call: 50 values. Two fit in 100; the third is refused; after they settle it fits.
    const code = `const l = []; for (let i = 0; i < 48; i++) l.push('ab');
      const first = [slow(l), slow(l)];
      let third; try { await slow(l); } catch (e) { third = e.message; }
      await Promise.all(first);
      return [third, await slow(l)];`;
    const r = await runSandbox(code, { isolation, capabilities: { slow }, maxMessageValues: 50, maxPendingHostCallValues: 100 });
    expect(r.success, r.success ? '' : r.error.message).toBe(true);
    if (!r.success) return;
    const [third, after] = r.output as [string, number];
    expect(third).toBe('host calls in flight already hold 100 values; 50 more would pass the limit of 100 values per execution (maxPendingHostCallValues)');
    expect(after).toBe(48);
    expect(calls).toBe(3);
  });

  it('SandboxEngine: bridgeLimits.maxOutputValues of a request is the limit enforced', async () => {
    const engine = new SandboxEngine({ isolation, processes: 1, defaultBridgeLimits: { maxOutputValues: 10 } });
    await engine.init();
    try {
      const within = await engine.submit({ requestId: 'a', code: 'return [1, 2, 3, 4, 5, 6, 7, 8, 9]' }).done;
      expect(within.type).toBe('result');
      const over = await engine.submit({ requestId: 'b', code: 'return [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]' }).done;
      expect(over.type === 'error' && (over.error as { limit?: string }).limit).toBe('maxOutputValues');
      const raised = await engine.submit({ requestId: 'c', code: 'return [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]', bridgeLimits: { maxOutputValues: 11 } }).done;
      expect(raised.type).toBe('result');
    } finally {
      await engine.shutdown();
    }
  });
});

/** Runs `body` (an async function body with `runSandbox`, `report`) in a child node. */
async function inChild(body: string, env: Record<string, string> = {}) {
  const script = `
const { runSandbox } = require(${JSON.stringify(root)});
const { monitorEventLoopDelay } = require('node:perf_hooks');
(async () => {
  await runSandbox('1', { isolation: process.env.MODE });
  global.gc();
  const rss0 = process.memoryUsage().rss;
  let peak = rss0;
  const sampler = setInterval(() => { peak = Math.max(peak, process.memoryUsage().rss); }, 5);
  const lag = monitorEventLoopDelay({ resolution: 10 });
  lag.enable();
  const out = await (async () => { ${body} })();
  await new Promise((r) => setTimeout(r, 300));
  lag.disable();
  clearInterval(sampler);
  global.gc();
  const mb = (n) => n / 1048576;
  console.log(JSON.stringify({ out, growthMb: mb(peak - rss0), heldMb: mb(process.memoryUsage().rss - rss0), lagMaxMs: lag.max / 1e6 }));
  process.exit(0);
})().catch((e) => { console.error(e); process.exit(1); });`;
  const r = await runChild(process.execPath, ['--expose-gc', '-e', script], { timeout: 60000, env: { ...process.env, ...env } });
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout.trim().split('\n').pop()!);
}

const brief = 'const brief = (r) => r.success ? "ok" : r.error.limit || r.error.message;';

describe('the issue\'s reproductions, judged from outside (a child node)', () => {
  // Before value limits: +188 MB and a 2.1 s stall for one (process mode), 1.3 s (thread mode).
  // Since issue 23 the count's default is far above data; what refuses them is what they
  // would cost built: ~128 MB each, over 6 x maxOutputBytes (isolet-core `value_count`).
  it.each(MODES)('two results of 4 M short strings at once (%s mode): refused before they are built; the loop stays free', async (mode) => {
    const r = await inChild(
      `${brief} const code = "const a=[];for(let i=0;i<4e6;i++)a.push('ab');a";
       return (await Promise.all([runSandbox(code, { isolation: process.env.MODE }), runSandbox(code, { isolation: process.env.MODE })])).map(brief);`,
      { MODE: mode },
    );
    expect(r.out).toEqual(['maxOutputBytes', 'maxOutputBytes']);
    // Thread mode: the isolates' own heaps (64 MB each) live in this process while they
    // run, and part of their pages stay resident after; before, it held 211 MB.
    if (mode === 'process') expect(r.growthMb).toBeLessThan(64);
    expect(r.heldMb).toBeLessThan(mode === 'process' ? 48 : 100);
    // Building one of them stalled the loop 1.3-2.1 s. Refused, the stall left is the
    // engine's own (a second host starting, GC); generous for a loaded 2-core machine.
    expect(r.lagMaxMs).toBeLessThan(1000);
  });

  // Before value limits: +649 MB, all of it still held after the run ended (process mode).
  // Each list would cost the parent ~125 MB built, over 6 x maxMessageBytes (issue 23).
  it.each(MODES)('four un-awaited calls with 15.6 MB of short strings each to a slow capability (%s mode): refused in the sandbox', async (mode) => {
    const r = await inChild(
      `let calls = 0;
       const slow = () => { calls++; return new Promise((r) => setTimeout(() => r(1), 3000)); };
       const res = await runSandbox("const s=[];for(let i=0;i<3.9e6;i++)s.push('ab');const m=[];for(let i=0;i<4;i++)m.push(await slow(s).catch((e)=>e.message));return m",
         { isolation: process.env.MODE, capabilities: { slow }, timeoutMs: 20000, memoryLimitMb: 256 });
       return { calls, output: res.success ? res.output : res.error.message };`,
      { MODE: mode },
    );
    expect(r.out.calls).toBe(0);
    expect(r.out.output).toHaveLength(4);
    for (const m of r.out.output) expect(m).toContain('(maxMessageBytes)');
    if (mode === 'process') expect(r.growthMb).toBeLessThan(64);
    expect(r.heldMb).toBeLessThan(mode === 'process' ? 48 : 100);
  });

  // A compromised host that skips the count: the parent counts the bytes itself. Before,
  // the 17-byte result became a 30 M-slot array: +229 MB in the parent.
  it('process mode: a compromised host sending a 17-byte result of 3e7 slots fails its run with maxOutputValues', async () => {
    const out = await compromised('sparse-result', `const r = await engine.submit({ requestId: 'x', code: 'return 1' }).done;
      return r.type === 'result' ? { length: r.data.length } : { name: r.error.name, limit: r.error.limit };`);
    expect(out.out).toEqual({ name: 'SandboxRuntimeError', limit: 'maxOutputValues' });
    expect(out.growthMb).toBeLessThan(64);
  });

  // Its calls are counted too (isolet-core host_policy's EventBudget, off Node's thread):
  // five of 8,000,002 values each pass maxPendingHostCallValues (33,554,432) at the fifth,
  // which the real host's isolate would have refused: the host is not the one we started.
  it('process mode: a compromised host keeping more argument values in flight than the run allows is ended; only the calls within are served', async () => {
    const out = await compromised('value-calls', `let calls = 0;
      const hang = (a) => { calls++; return new Promise(() => {}); };
      const r = await engine.submit({ requestId: 'x', code: 'return 1', tools: { hang } }).done;
      return { calls, code: r.type === 'error' ? r.error.code : 'result', message: r.type === 'error' ? r.error.message : '' };`);
    expect(out.out).toMatchObject({ calls: 4, code: 'ERR_ISOLET_CRASHED' });
    expect(out.out.message).toMatch(/protocol/);
  });
});

/** Runs `body` against an engine whose one host is the compromised one, in `mode`. */
async function compromised(mode: string, body: string) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'isolet-values-'));
  try {
    fs.writeFileSync(path.join(dir, 'mode'), mode);
    const script = `
const { SandboxEngine } = require(${JSON.stringify(root)});
require(${JSON.stringify(path.join(root, 'lib', 'native.js'))}).setSandboxHost(process.execPath, ${JSON.stringify(path.join(__dirname, 'support', 'compromised-sandbox-host.js'))});
(async () => {
  const engine = new SandboxEngine({ isolation: 'process', processes: 1, maxConcurrentIsolates: 1, memoryMb: 64 });
  await engine.init();
  global.gc();
  const rss0 = process.memoryUsage().rss;
  let peak = rss0;
  const sampler = setInterval(() => { peak = Math.max(peak, process.memoryUsage().rss); }, 5);
  const out = await (async () => { ${body} })();
  clearInterval(sampler);
  console.log(JSON.stringify({ out, growthMb: (peak - rss0) / 1048576 }));
  await engine.shutdown();
  process.exit(0);
})().catch((e) => { console.error(e); process.exit(1); });`;
    const r = await runChild(process.execPath, ['--expose-gc', '-e', script], { timeout: 30000, env: { ...process.env, ISOLET_TEST_EVIL_DIR: dir } });
    expect(r.status, r.stderr).toBe(0);
    expect(fs.existsSync(path.join(dir, 'answered'))).toBe(true);
    return JSON.parse(r.stdout.trim().split('\n').pop()!);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
