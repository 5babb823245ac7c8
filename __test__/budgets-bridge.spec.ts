// Per-run bounds on what the host buffers for data requests and session events, WASM
// memories refused at init(), and host Errors that must not carry host stacks into the
// sandbox (docs/budgets.md). Everything through the public API, with real isolates.
import { afterEach, describe, expect, it } from 'vitest';
import {
  runSandbox,
  SandboxEngine,
  SandboxValidationError,
  type SandboxEngineConfig,
  type SandboxEvent,
  type SandboxSession,
} from '..';

const engines: SandboxEngine[] = [];
afterEach(async () => {
  while (engines.length) await engines.pop()!.shutdown();
});

async function makeEngine(config: Partial<SandboxEngineConfig> = {}) {
  const engine = new SandboxEngine({ memoryMb: 64, maxConcurrentIsolates: 2, ...config });
  engines.push(engine);
  await engine.init();
  return engine;
}

/** Consumes a session, answering data requests with `answer`; returns every event. */
async function drain(session: SandboxSession, answer: (ev: Extract<SandboxEvent, { type: 'dataRequest' }>) => void) {
  const events: SandboxEvent[] = [];
  for await (const ev of session) {
    events.push(ev);
    if (ev.type === 'dataRequest') answer(ev);
  }
  return events;
}

function final(events: SandboxEvent[]) {
  return events[events.length - 1] as any;
}

describe('data requests', () => {
  it('refuses an overlong key in the sandbox: no event, nothing buffered on the host', async () => {
    const engine = await makeEngine();
    const session = engine.submit({
      requestId: 'longkey',
      code: `
        const out = [];
        for (const n of [1024, 1025, 10 * 1024 * 1024]) {
          try { out.push(typeof data['k'.repeat(n)]); } catch (e) { out.push(e.message); }
        }
        return out;`,
    });
    const events = await drain(session, (ev) => session.respond(ev.id, 'v'));
    const requests = events.filter((e) => e.type === 'dataRequest') as Array<{ key: string }>;
    // Exactly the 1024-byte key reached the host.
    expect(requests.map((r) => r.key.length)).toEqual([1024]);
    expect(final(events).type).toBe('result');
    expect(final(events).data).toEqual([
      'string',
      'data key is longer than the limit of 1024 bytes',
      'data key is longer than the limit of 1024 bytes',
    ]);
  });

  it('bounds a storm of rejected keys: at most maxMessages requests, each key within 1 KiB', async () => {
    const engine = await makeEngine();
    const session = engine.submit({
      requestId: 'storm',
      code: `
        const why = {};
        for (let i = 0; i < 100000; i++) {
          // Alternate keys just under and far over the key limit.
          const key = i + ':' + 'k'.repeat(i % 2 ? 1000 : 100000);
          try { data[key]; } catch (e) {
            const m = e.message.replace(/[0-9]+/g, 'N');
            why[m] = (why[m] || 0) + 1;
            if (/message limit/.test(m)) return why;
          }
        }
        return why;`,
      bridgeLimits: { maxMessages: 50 },
    });
    const events = await drain(session, (ev) => session.reject(ev.id, 'no such key'));
    const requests = events.filter((e) => e.type === 'dataRequest') as Array<{ key: string }>;
    expect(requests).toHaveLength(50);
    expect(Math.max(...requests.map((r) => r.key.length))).toBeLessThanOrEqual(1024);
    expect(final(events).data).toEqual({
      'no such key': 50,
      'data key is longer than the limit of N bytes': 51,
      'Bridge message limit of N per execution exceeded': 1,
    });
  });

  it('has at most one request pending per run: reads block until answered', async () => {
    const engine = await makeEngine();
    const session = engine.submit({ requestId: 'one', code: 'return [data.a, data.b, data.c]' });
    const seen: string[] = [];
    for await (const ev of session) {
      if (ev.type !== 'dataRequest') continue;
      seen.push(ev.key);
      // Nothing else is requested while this one waits.
      await new Promise((r) => setTimeout(r, 50));
      expect(seen).toEqual(['a', 'b', 'c'].slice(0, seen.length));
      session.respond(ev.id, ev.key.toUpperCase());
    }
    expect(seen).toEqual(['a', 'b', 'c']);
    expect(((await session.done) as any).data).toEqual(['A', 'B', 'C']);
  });

  it('keeps answers within maxMessageBytes and rejection messages within 8 KiB', async () => {
    const engine = await makeEngine();
    const session = engine.submit({
      requestId: 'answers',
      code: `
        const out = [];
        try { data.a; } catch (e) { out.push(e.message.length); }
        out.push(data.b.length);
        return out;`,
      bridgeLimits: { maxMessageBytes: 1000 },
    });
    await drain(session, (ev) => {
      if (ev.key === 'a') session.reject(ev.id, 'r'.repeat(1_000_000));
      else {
        expect(() => session.respond(ev.id, 'x'.repeat(2000))).toThrow(SandboxValidationError);
        session.respond(ev.id, 'y'.repeat(900));
      }
    });
    const out = ((await session.done) as any).data as number[];
    expect(out[0]).toBeLessThanOrEqual(8 * 1024 + 20);
    expect(out[1]).toBe(900);
  });
});

describe('session events', () => {
  it('streams console entries as kept: no more than maxLogEntries events, truncated to maxLogBytes', async () => {
    const engine = await makeEngine();
    const session = engine.submit({
      requestId: 'console',
      code: `
        console.log('x'.repeat(5 * 1024 * 1024));
        for (let i = 0; i < 5000; i++) console.log('line ' + i);
        return 'done';`,
      bridgeLimits: { maxLogEntries: 100, maxLogBytes: 4096 },
    });
    const events = await drain(session, () => {});
    const consoleEvents = events.filter((e) => e.type === 'status' && (e as any).status === 'console') as any[];
    expect(consoleEvents.length).toBeGreaterThan(0);
    expect(consoleEvents.length).toBeLessThanOrEqual(100);
    const bytes = consoleEvents.reduce((n, e) => n + Buffer.byteLength(e.message), 0);
    // Within the byte cap plus the one truncation marker.
    expect(bytes).toBeLessThanOrEqual(4096 + 32);
    expect(consoleEvents[0].message.endsWith('[truncated]')).toBe(true);
    // Every event the session buffered is accounted for: console, status and the result.
    expect(events.length).toBeLessThanOrEqual(100 + 4);
  });
});

// (module (memory ...) (export "mem" (memory 0))), limits encoded by hand.
function memoryModule(limits: number[], exported = true): Uint8Array {
  const memory = [0x05, limits.length + 1, 0x01, ...limits];
  const exportSection = exported ? [0x07, 0x07, 0x01, 0x03, 0x6d, 0x65, 0x6d, 0x02, 0x00] : [];
  return new Uint8Array([0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, ...memory, ...exportSection]);
}

describe('WASM memories', () => {
  it('refuses at init() a module whose memory has no maximum, naming the module', async () => {
    const engine = new SandboxEngine({ memoryMb: 64, wasmModules: [{ name: 'unbounded', source: memoryModule([0x00, 0x01]) }] });
    engines.push(engine);
    const err = await engine.init().then(() => null, (e) => e);
    expect(err).toBeInstanceOf(SandboxValidationError);
    expect(err.message).toBe(
      'wasm module "unbounded" is refused: its memory 0 (exported as "mem") declares no maximum size; a sandboxed memory needs a maximum of at most 67108864 bytes (the run\'s memory budget)',
    );
    // The engine never became ready.
    const end = await engine.submit({ requestId: 'x', code: 'return 1' }).done;
    expect(end.type).toBe('error');
  });

  it('refuses a maximum above the engine\'s memory budget and accepts one at it', async () => {
    // 1025 pages = 64 MiB + 64 KiB (LEB 0x81 0x08); 1024 pages = 64 MiB (LEB 0x80 0x08).
    const over = new SandboxEngine({ memoryMb: 64, wasmModules: [{ name: 'big', source: memoryModule([0x01, 0x01, 0x81, 0x08], false) }] });
    engines.push(over);
    const err = await over.init().then(() => null, (e) => e);
    expect(err).toBeInstanceOf(SandboxValidationError);
    expect(err.message).toBe('wasm module "big" is refused: its memory 0 may grow to 67174400 bytes, over the run\'s memory budget of 67108864 bytes');

    const engine = await makeEngine({ wasmModules: [{ name: 'fits', source: memoryModule([0x01, 0x01, 0x80, 0x08]) }] });
    const end = (await engine.submit({ requestId: 'ok', code: 'const m = wasm.fits.mem; return [m.buffer.byteLength, m.grow(1)]' }).done) as any;
    expect(end.type, end.message).toBe('result');
    expect(end.data).toEqual([65536, 1]);
  });

  it('refuses an imported memory without maximum by name', async () => {
    // (import "env" "memory" (memory 1))
    const source = new Uint8Array([0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x02, 0x0f, 0x01, 0x03, 0x65, 0x6e, 0x76, 0x06, 0x6d, 0x65, 0x6d, 0x6f, 0x72, 0x79, 0x02, 0x00, 0x01]);
    const engine = new SandboxEngine({ memoryMb: 64, wasmModules: [{ name: 'imp', source }] });
    engines.push(engine);
    const err = await engine.init().then(() => null, (e) => e);
    expect(err).toBeInstanceOf(SandboxValidationError);
    expect(err.message).toMatch(/^wasm module "imp" is (invalid|refused)/);
  });
});

const HOST_TRACES = [/\/work\//, /\.[cm]?[jt]s\b/, /node:internal/, /\n\s+at /, /__test__/];

describe('host errors returned as values', () => {
  it('copies a returned Error with name and message only: .stack names no host frame', async () => {
    const made: Error[] = [];
    const caps = {
      one: () => {
        const e = new TypeError('bad input');
        made.push(e);
        return e;
      },
      nested: () => ({ list: [new RangeError('deep')], map: new Map([['k', new Error('in map')]]), set: new Set([new SyntaxError('in set')]), wrapped: new Error('outer', { cause: new URIError('inner') }) }),
      custom: () => {
        class HttpError extends Error {
          constructor() {
            super('404 from upstream');
            this.name = 'HttpError';
          }
        }
        return [new HttpError()];
      },
    };
    const r = await runSandbox(
      `
      const a = await one();
      const b = await nested();
      const [c] = await custom();
      const all = [a, b.list[0], b.map.get('k'), [...b.set][0], b.wrapped, b.wrapped.cause, c];
      return all.map((e) => ({ isError: e instanceof Error, name: e.name, message: e.message, stack: e.stack }));
    `,
      { capabilities: caps },
    );
    expect(r.success, !r.success ? r.error.message : '').toBe(true);
    const out = (r as any).output as Array<{ isError: boolean; name: string; message: string; stack: string }>;
    expect(out.map((e) => [e.name, e.message])).toEqual([
      ['TypeError', 'bad input'],
      ['RangeError', 'deep'],
      ['Error', 'in map'],
      ['SyntaxError', 'in set'],
      ['Error', 'outer'],
      ['URIError', 'inner'],
      // V8's serializer keeps only the standard error classes; the stack keeps the name.
      ['Error', '404 from upstream'],
    ]);
    const names = ['TypeError', 'RangeError', 'Error', 'SyntaxError', 'Error', 'URIError', 'HttpError'];
    out.forEach((e, i) => {
      expect(e.isError).toBe(true);
      for (const trace of HOST_TRACES) expect(e.stack).not.toMatch(trace);
      expect(e.stack).toBe(`${names[i]}: ${e.message}`);
    });
    // The host's own objects were not changed.
    expect(made[0].stack).toMatch(/\n\s+at /);
  });

  it('also for data answers and data given up front', async () => {
    const engine = await makeEngine();
    const session = engine.submit({
      requestId: 'errs',
      data: { early: { e: new Error('given up front') } },
      code: 'return [data.early.e.stack, data.late.stack]',
    });
    await drain(session, (ev) => session.respond(ev.id, new TypeError('answered')));
    const stacks = ((await session.done) as any).data as string[];
    expect(stacks).toEqual(['Error: given up front', 'TypeError: answered']);
  });
});
