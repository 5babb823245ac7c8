// The web platform APIs inside the sandbox (`web: true`), through the public API in both
// isolation modes: the option (off by default, the same name everywhere, checked), each
// API against its standard's examples, typed errors for bad input, and attacks that must
// fail (memory, quotas) without hurting the host.
import { afterAll, describe, expect, it } from 'vitest';
import { createSandbox, processStats, runSandbox, SandboxEngine, type Isolation, type Sandbox, type SandboxOptions } from '..';
import { failed, ok } from './support/results';

const WEB_GLOBALS = [
  'atob', 'btoa', 'DOMException', 'TextEncoder', 'TextDecoder', 'URL', 'URLSearchParams', 'crypto', 'Crypto',
  'SubtleCrypto', 'CryptoKey', 'Event', 'EventTarget', 'CustomEvent', 'AbortController', 'AbortSignal',
  'structuredClone', 'queueMicrotask', 'performance', 'Performance', 'setTimeout', 'setInterval', 'clearTimeout',
  'clearInterval', 'Blob', 'File', 'Headers', 'Request', 'Response',
];

const open: Sandbox[] = [];
const engines: SandboxEngine[] = [];
afterAll(async () => {
  for (const sb of open) sb.close();
  for (const e of engines) await e.shutdown();
});

describe.each(['thread', 'process'] as const)('web: true (%s isolation)', (isolation: Isolation) => {
  const run = (code: string, options: SandboxOptions = {}) => runSandbox(code, { web: true, isolation, ...options });
  const out = async (code: string, options: SandboxOptions = {}) => ok(await run(code, options));

  it('is off by default: the global object is exactly what it was', async () => {
    const names = `${JSON.stringify(WEB_GLOBALS)}.filter((n) => n in globalThis)`;
    expect(ok(await runSandbox(names, { isolation }))).toEqual([]);
    expect(ok(await runSandbox(names, { isolation, web: false }))).toEqual([]);
    expect(await out(names)).toEqual(WEB_GLOBALS);
    // Non-enumerable data properties, as WebIDL defines interface objects: Object.keys sees
    // nothing new, and a run may replace any of them.
    const keys = 'Object.keys(globalThis)';
    expect(await out(keys)).toEqual(ok(await runSandbox(keys, { isolation })));
    const descriptor = 'const d = Object.getOwnPropertyDescriptor(globalThis, "URL"); [d.writable, d.enumerable, d.configurable, typeof d.value]';
    expect(await out(descriptor)).toEqual([true, false, true, 'function']);
    expect(await out('URL = 5; URL')).toBe(5);
  });

  it('refuses a web option that is not a boolean, naming it', async () => {
    for (const web of ['yes', 1, null]) {
      const e = failed(await runSandbox('1', { isolation, web } as never));
      expect(e.name).toBe('SandboxValidationError');
      expect(e.message).toMatch(/^web must be a boolean, got /);
    }
  });

  it('atob and btoa are forgiving-base64 and throw InvalidCharacterError', async () => {
    expect(await out('[btoa("hello"), atob(" aGVs bG8 "), atob("aGVsbG8"), btoa("\\xff")]')).toEqual(['aGVsbG8=', 'hello', 'hello', '/w==']);
    expect(await out('try { btoa("€") } catch (e) { [e.name, e.code, e instanceof DOMException] }')).toEqual(['InvalidCharacterError', 5, true]);
    expect(failed(await run('atob("a")')).name).toBe('SandboxRuntimeError');
    expect(await out('try { atob() } catch (e) { e.constructor.name }')).toBe('TypeError');
  });

  it('TextEncoder and TextDecoder follow the Encoding standard', async () => {
    expect(await out('Array.from(new TextEncoder().encode("h€\\ud800"))')).toEqual([0x68, 0xe2, 0x82, 0xac, 0xef, 0xbf, 0xbd]);
    expect(await out('new TextEncoder().encode("héllo").byteLength')).toBe(6);
    expect(await out('const d = new Uint8Array(4); const r = new TextEncoder().encodeInto("a€b", d); [r.read, r.written, Array.from(d)]')).toEqual([2, 4, [0x61, 0xe2, 0x82, 0xac]]);
    const decode = `(() => {
      const d = new TextDecoder();
      const euro = new Uint8Array([0xe2, 0x82, 0xac]);
      const streamed = d.decode(euro.subarray(0, 1), { stream: true }) + d.decode(euro.subarray(1), { stream: true }) + d.decode();
      return [
        streamed,
        new TextDecoder().decode(new Uint8Array([0xef, 0xbb, 0xbf, 0x41])),
        new TextDecoder('utf-8', { ignoreBOM: true }).decode(new Uint8Array([0xef, 0xbb, 0xbf, 0x41])).length,
        new TextDecoder().decode(new Uint8Array([0xff])),
        new TextDecoder('utf-16le').decode(new Uint8Array([0x3d, 0xd8, 0x00, 0xde])),
        new TextDecoder('latin1').encoding,
        new TextDecoder('latin1').decode(new Uint8Array([0x80, 0xe9])),
        new TextDecoder().decode(new Uint8Array([0x68, 0x69]).buffer),
        new TextDecoder().decode(),
      ];
    })()`;
    expect(await out(decode)).toEqual(['€', 'A', 2, '\ufffd', '\u{1f600}', 'windows-1252', '€é', 'hi', '']);
    expect(await out('try { new TextDecoder("utf-8", { fatal: true }).decode(new Uint8Array([0xc0])) } catch (e) { [e.constructor.name, e.message] }')).toEqual([
      'TypeError',
      'The encoded data was not valid for encoding utf-8',
    ]);
    expect(await out('try { new TextDecoder("nope") } catch (e) { [e.constructor.name, e.message] }')).toEqual(['RangeError', 'The "nope" encoding is not supported']);
  });

  it('URL and URLSearchParams: setters, searchParams, canParse, parse, IDNA', async () => {
    const code = `(() => {
      const u = new URL('/a/../b?x=1#h', 'https://user@Example.COM:443');
      const before = [u.href, u.origin, u.host, u.pathname, u.search, u.hash, u.username];
      u.searchParams.append('y', 'a b&c');
      const afterAppend = u.href;
      u.search = '?z=2';
      const params = [...u.searchParams];
      u.port = '8080';
      u.hostname = 'münchen.de';
      u.port = 'bad';
      const p = new URLSearchParams([['b', '2'], ['a', '1'], ['b', '1']]);
      p.sort();
      return [before, afterAppend, params, u.href, p.toString(), p.getAll('b'), p.size, URL.canParse('x:y'), URL.canParse('nope'), URL.parse('nope'), URL.parse('a', 'http://h/').href, JSON.stringify({ u: new URL('http://h') }), String(new URLSearchParams('?a=%zz&b=+'))];
    })()`;
    expect(await out(code)).toEqual([
      ['https://user@example.com/b?x=1#h', 'https://example.com', 'example.com', '/b', '?x=1', '#h', 'user'],
      'https://user@example.com/b?x=1&y=a+b%26c#h',
      [['z', '2']],
      'https://user@xn--mnchen-3ya.de:8080/b?z=2#h',
      'a=1&b=2&b=1',
      ['2', '1'],
      3,
      true,
      false,
      null,
      'http://h/a',
      '{"u":"http://h/"}',
      'a=%25zz&b=+',
    ]);
    // A `new URL()` in try/catch gets the TypeError it asked for, not a ReferenceError.
    expect(await out('try { new URL("not a url") } catch (e) { [e.constructor.name, e.code, e.message] }')).toEqual(['TypeError', 'ERR_INVALID_URL', 'Invalid URL: not a url']);
    expect(await out('try { new URL("http://h").href = "::" ; 1 } catch (e) { e.constructor.name }')).toBe('TypeError');
  });

  it('crypto: getRandomValues with its quota, randomUUID, subtle digest and HMAC', async () => {
    const code = `(async () => {
      const hex = (b) => Array.from(new Uint8Array(b), (x) => x.toString(16).padStart(2, '0')).join('');
      const enc = new TextEncoder();
      const digests = [];
      for (const alg of ['SHA-1', 'sha-256', { name: 'SHA-384' }, 'SHA-512']) digests.push(hex(await crypto.subtle.digest(alg, enc.encode('abc'))).slice(0, 16));
      const key = await crypto.subtle.importKey('raw', enc.encode('Jefe'), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign', 'verify']);
      const data = enc.encode('what do ya want for nothing?');
      const sig = await crypto.subtle.sign('HMAC', key, data);
      const verified = [await crypto.subtle.verify('HMAC', key, sig, data), await crypto.subtle.verify('HMAC', key, sig, enc.encode('x'))];
      const errors = [];
      for (const f of [
        () => crypto.subtle.digest('MD5', data),
        () => crypto.subtle.importKey('raw', enc.encode('k'), { name: 'HMAC', hash: 'SHA-256' }, false, []),
        () => crypto.subtle.exportKey('raw', key),
      ]) errors.push(await f().then(() => 'resolved', (e) => e.name));
      const ids = new Set(Array.from({ length: 100 }, () => crypto.randomUUID()));
      const u = crypto.randomUUID();
      const filled = crypto.getRandomValues(new Uint32Array(8));
      let quota, mismatch;
      try { crypto.getRandomValues(new Uint8Array(65537)); } catch (e) { quota = [e.name, e.code]; }
      try { crypto.getRandomValues(new Float64Array(2)); } catch (e) { mismatch = e.name; }
      return [digests, hex(sig), key.type, key.algorithm, key.usages, verified, errors, ids.size, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(u),
        filled.some((x) => x !== 0), crypto.getRandomValues(new Uint8Array(65536)).length, quota, mismatch];
    })()`;
    expect(await out(code)).toEqual([
      ['a9993e364706816a', 'ba7816bf8f01cfea', 'cb00753f45a35e8b', 'ddaf35a193617aba'],
      '5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843',
      'secret',
      { name: 'HMAC', hash: { name: 'SHA-256' }, length: 32 },
      ['sign', 'verify'],
      [true, false],
      ['NotSupportedError', 'SyntaxError', 'InvalidAccessError'],
      100,
      true,
      true,
      65536,
      ['QuotaExceededError', 22],
      'TypeMismatchError',
    ]);
  });

  it('structuredClone copies with V8 serializer semantics and throws DataCloneError', async () => {
    const code = `(() => {
      const a = { d: new Date(5), m: new Map([[1, { x: 1 }]]), s: new Set([1]), b: new Uint8Array([1, 2]), r: /x/g };
      a.self = a;
      const c = structuredClone(a);
      const errors = [() => 1, Symbol('s'), { f() {} }].map((v) => { try { structuredClone(v); return 'cloned'; } catch (e) { return [e.name, e.code, e instanceof DOMException]; } });
      let transfer;
      try { structuredClone(1, { transfer: [new ArrayBuffer(1)] }); } catch (e) { transfer = e.name; }
      return [c !== a, c.self === c, c.d.getTime(), c.m.get(1).x, c.s.has(1), Array.from(c.b), c.r.flags, errors, transfer];
    })()`;
    expect(await out(code)).toEqual([true, true, 5, 1, true, [1, 2], 'g', [['DataCloneError', 25, true], ['DataCloneError', 25, true], ['DataCloneError', 25, true]], 'DataCloneError']);
  });

  it('DOMException is an Error with the standard names, codes and constants', async () => {
    const code = `(() => {
      const e = new DOMException('m', 'NotFoundError');
      const plain = new DOMException();
      return [e.name, e.message, e.code, e instanceof Error, Object.prototype.toString.call(e), String(e), typeof e.stack, plain.name, plain.message, plain.code, DOMException.ABORT_ERR, new DOMException('x', 'Custom').code, new DOMException('m', { name: 'AbortError', cause: 1 }).cause];
    })()`;
    expect(await out(code)).toEqual(['NotFoundError', 'm', 8, true, '[object DOMException]', 'NotFoundError: m', 'string', 'Error', '', 0, 20, 0, 1]);
  });

  it('EventTarget dispatch: order, once, capture, handleEvent, signal, preventDefault', async () => {
    const code = `(() => {
      const log = [];
      const t = new EventTarget();
      const once = () => log.push('once');
      t.addEventListener('x', (e) => log.push('bubble:' + e.eventPhase + ':' + (e.target === t)));
      t.addEventListener('x', () => log.push('capture'), { capture: true });
      t.addEventListener('x', once, { once: true });
      t.addEventListener('x', once, { once: true });
      t.addEventListener('x', { handleEvent(e) { log.push('object:' + e.type); } });
      const c = new AbortController();
      t.addEventListener('x', () => log.push('signalled'), { signal: c.signal });
      t.addEventListener('x', (e) => e.preventDefault());
      t.addEventListener('x', () => log.push('passive'), { passive: true });
      const first = t.dispatchEvent(new Event('x', { cancelable: true }));
      c.abort();
      const second = t.dispatchEvent(new Event('x'));
      const stopper = new EventTarget();
      stopper.addEventListener('y', (e) => { log.push('stop'); e.stopImmediatePropagation(); });
      stopper.addEventListener('y', () => log.push('never'));
      stopper.dispatchEvent(new CustomEvent('y', { detail: 1 }));
      const ev = new CustomEvent('z', { detail: { k: 1 } });
      let again;
      stopper.addEventListener('z', () => { try { stopper.dispatchEvent(ev); } catch (e) { again = e.name; } });
      stopper.dispatchEvent(ev);
      return [log, first, second, ev.detail.k, again, ev.eventPhase, Event.AT_TARGET];
    })()`;
    expect(await out(code)).toEqual([
      ['capture', 'bubble:2:true', 'once', 'object:x', 'signalled', 'passive', 'capture', 'bubble:2:true', 'object:x', 'passive', 'stop'],
      false,
      true,
      1,
      'InvalidStateError',
      0,
      2,
    ]);
  });

  it('AbortController and AbortSignal: reason, abort(), any(), throwIfAborted, onabort', async () => {
    const code = `(() => {
      const c = new AbortController();
      const seen = [];
      c.signal.onabort = (e) => seen.push(e.type);
      const any = AbortSignal.any([c.signal, new AbortController().signal]);
      c.abort('why');
      c.abort('again');
      let thrown;
      try { c.signal.throwIfAborted(); } catch (e) { thrown = e; }
      const plain = AbortSignal.abort();
      let illegal;
      try { new AbortSignal(); } catch (e) { illegal = e.constructor.name; }
      return [seen, c.signal.aborted, c.signal.reason, thrown, any.aborted, any.reason, plain.reason.name, plain.reason.code, illegal, AbortSignal.any([plain]).aborted];
    })()`;
    expect(await out(code)).toEqual([['abort'], true, 'why', 'why', true, 'why', 'AbortError', 20, 'TypeError', true]);
  });

  it('queueMicrotask runs in order, and a throwing callback fails the run with its error', async () => {
    expect(await out('(async () => { const log = []; queueMicrotask(() => log.push(1)); Promise.resolve().then(() => log.push(2)); queueMicrotask(() => log.push(3)); await null; await null; return log; })()')).toEqual([1, 2, 3]);
    const e = failed(await run('queueMicrotask(() => { throw new RangeError("boom") }); 1'));
    expect([e.name, (e as { thrown?: { name: string; message: string } }).thrown?.name, e.message]).toEqual(['SandboxRuntimeError', 'RangeError', 'RangeError: boom']);
    expect(failed(await run('queueMicrotask(5)')).message).toMatch(/parameter 1 is not of type 'Function'/);
  });

  it('performance.now() is coarsened to 100 µs and timeOrigin is the run start', async () => {
    const [samples, origin, json] = (await out('[Array.from({ length: 50 }, () => performance.now()), performance.timeOrigin, JSON.stringify(performance)]')) as [number[], number, string];
    for (const t of samples) expect(Math.abs(Math.round(t * 10) - t * 10)).toBeLessThan(1e-6);
    expect(samples).toEqual([...samples].sort((a, b) => a - b));
    expect(Math.abs(origin - Date.now())).toBeLessThan(5000);
    expect(JSON.parse(json)).toEqual({ timeOrigin: origin });
  });

  it('a persistent sandbox keeps the choice it was opened with', async () => {
    const web = await createSandbox({ isolation, web: true });
    const plain = await createSandbox({ isolation });
    open.push(web, plain);
    expect(ok(await web.run('globalThis.u = new URL("http://h/a"); u.pathname'))).toBe('/a');
    expect(ok(await web.run('[u.href, typeof TextEncoder]'))).toEqual(['http://h/a', 'function']);
    expect(ok(await plain.run('typeof URL'))).toBe('undefined');
    const e = failed(await web.run('1', { web: false } as never));
    expect(e.name).toBe('SandboxValidationError');
    expect(e.message).toMatch(/web/);
  });

  it('a SandboxEngine: the config is its requests default, a request may say otherwise', async () => {
    const engine = new SandboxEngine({ isolation, web: true, maxConcurrentIsolates: 1 });
    engines.push(engine);
    await engine.init();
    const result = async (request: Parameters<SandboxEngine['submit']>[0]) => {
      for await (const event of engine.submit(request)) if (event.type === 'result' || event.type === 'error') return event;
      throw new Error('no result');
    };
    expect(await result({ code: 'return typeof URL' })).toMatchObject({ type: 'result', data: 'function' });
    expect(await result({ code: 'return typeof URL', web: false })).toMatchObject({ type: 'result', data: 'undefined' });
    const refused = await result({ code: 'return 1', web: 'on' } as never);
    expect(refused).toMatchObject({ type: 'error', error: { name: 'SandboxValidationError' } });
    expect((refused as { message: string }).message).toMatch(/request\.web must be a boolean, got 'on'/);
  });

  it('attacks: the native primitives stay out of reach, stack-trace APIs included', async () => {
    const code = `(() => {
      const found = [];
      Error.prepareStackTrace = (e, callSites) => {
        for (const c of callSites) found.push([c.getFunctionName(), typeof c.getFunction(), typeof c.getThis()]);
        return '';
      };
      const attempts = [
        () => atob('!'),
        () => new TextDecoder('utf-8', { fatal: true }).decode(new Uint8Array([255])),
        () => new URL('x'),
        () => structuredClone(() => 1),
        () => crypto.getRandomValues(new Uint8Array(70000)),
      ];
      for (const f of attempts) { try { f(); } catch (e) { e.stack; } }
      const globals = ['op', 'lib', 'load', 'clone', 'OP', 'SCRIPT'].filter((n) => n in globalThis);
      return [found.filter(([, f, t]) => f !== 'undefined' || t !== 'undefined'), found.length > 5, globals];
    })()`;
    // Every frame inside the web layer is strict: no callee and no receiver to take.
    expect(await out(code)).toEqual([[], true, []]);
  });

  it('attacks: a huge TextEncoder input and a 100 MB URL end as out of memory, the host unharmed', async () => {
    // A rope of 256 Mi characters: encoding it needs 256 MiB of UTF-8, over the 64 MiB budget.
    const huge = failed(await run('new TextEncoder().encode("x".repeat(2 ** 28)).length'));
    expect(huge.name).toBe('SandboxOOMError');
    const url = failed(await run('new URL("http://h/" + "x".repeat(100e6)).href.length'));
    expect(url.name).toBe('SandboxOOMError');
    const clone = failed(await run('const a = new Array(2e6).fill("x".repeat(20)); structuredClone([a, a, a, a, a, a, a, a]).length'));
    expect(clone.name).toBe('SandboxOOMError');
    // Over its quota, getRandomValues throws before it touches the buffer.
    expect(await out('const b = new Uint8Array(1e6); try { crypto.getRandomValues(b) } catch (e) { [e.name, b.every((x) => x === 0)] }')).toEqual(['QuotaExceededError', true]);
    expect(await out('atob(btoa("still here"))')).toBe('still here');
  });

  it('attacks at the gigabyte: what TextEncoder, Blob and structuredClone would allocate counts against 64 MB', async () => {
    // V8's longest string is 2 ** 29 - 24 units (512 MB of one-byte text, a rope until
    // flattened). The Blob's and the clone's parts are flattened first.
    const cases = {
      textEncoder: 'new TextEncoder().encode("x".repeat(2 ** 29 - 24)).length',
      blob: 'const part = "x".repeat(2 ** 20); (part + "y").charCodeAt(1); new Blob(Array(1024).fill(part)).size',
      structuredClone: 'const s = "x".repeat(2 ** 26); (s + "y").charCodeAt(1); structuredClone(Array(16).fill(s)).length',
    };
    for (const [api, code] of Object.entries(cases)) {
      expect([api, failed(await run(code, { memoryLimitMb: 64, timeoutMs: 30_000 })).name]).toEqual([api, 'SandboxOOMError']);
    }
    expect(processStats().parkedThreads).toBe(0);
    expect(await out('atob(btoa("still here"))')).toBe('still here');
  });
});
