// Programs of the kind models write, using the APIs every JS runtime has: each runs in this
// Node process and in the sandbox with `web: true` and must give the same answer, through
// runSandbox, the Code Mode executor and `isolet run` (where the web APIs are on by
// default), in both isolation modes. Some fetch JSON from a real HTTP server on 127.0.0.1
// (through a fetch capability) or abort around a slow capability. Without `web`, the same
// programs fail with a ReferenceError, never silently.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createFetchCapability, runSandbox } from '..';
import { IsoletExecutor } from '../lib/codemode';
import { entryPoints, MODES } from './support/entry-points';
import { failed, ok } from './support/results';

const PROGRAMS: Record<string, string> = {
  'sleep with setTimeout': `
    const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
    const start = Date.now();
    await sleep(20);
    return Date.now() - start >= 19;`,
  'retry with backoff': `
    let attempts = 0;
    async function flaky() { attempts++; if (attempts < 3) throw new Error('try again'); return 'ok'; }
    async function retry(fn, n) {
      for (let i = 0; ; i++) {
        try { return await fn(); } catch (e) { if (i >= n) throw e; await new Promise((r) => setTimeout(r, 2 ** i)); }
      }
    }
    return [await retry(flaky, 5), attempts];`,
  'debounce': `
    const calls = [];
    function debounce(fn, ms) { let t; return (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms); }; }
    const d = debounce((x) => calls.push(x), 10);
    d(1); d(2); d(3);
    await new Promise((r) => setTimeout(r, 40));
    return calls;`,
  'timeout race with AbortController': `
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(new Error('took too long')), 10);
    try {
      await new Promise((resolve, reject) => {
        controller.signal.addEventListener('abort', () => reject(controller.signal.reason));
      });
    } catch (e) {
      return [e.message, controller.signal.aborted];
    } finally {
      clearTimeout(timer);
    }`,
  'UTF-8 byte length': `
    const text = 'héllo wörld ✓ 😀';
    return [text.length, new TextEncoder().encode(text).length, new TextDecoder().decode(new TextEncoder().encode(text)) === text];`,
  'parse a URL and its query': `
    const url = new URL('https://api.example.com/v1/users?page=2&limit=10&sort=name#top');
    const params = Object.fromEntries(url.searchParams);
    url.searchParams.set('page', '3');
    return { host: url.host, path: url.pathname, params, next: url.toString(), hash: url.hash };`,
  'build a query string': `
    const qs = new URLSearchParams({ q: 'rust & js', lang: 'en' });
    qs.append('tag', 'a b');
    return [qs.toString(), qs.get('q'), [...qs.keys()]];`,
  'validate URLs': `
    return ['https://ok.example', 'not a url', 'ftp://x.y/z', '//no-scheme'].map((u) => {
      try { new URL(u); return true; } catch { return false; }
    });`,
  'base64 round trip': `
    const encoded = btoa('Hello, World!');
    const bytes = Uint8Array.from(atob(encoded), (c) => c.charCodeAt(0));
    return [encoded, atob(encoded), bytes.length];`,
  'base64 of UTF-8 text': `
    const b64 = btoa(String.fromCharCode(...new TextEncoder().encode('café ☕')));
    return [b64, new TextDecoder().decode(Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)))];`,
  'sha-256 hex digest': `
    const data = new TextEncoder().encode('hello world');
    const hash = await crypto.subtle.digest('SHA-256', data);
    return [...new Uint8Array(hash)].map((b) => b.toString(16).padStart(2, '0')).join('');`,
  'HMAC signature': `
    const enc = new TextEncoder();
    const key = await crypto.subtle.importKey('raw', enc.encode('secret'), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign', 'verify']);
    const sig = await crypto.subtle.sign('HMAC', key, enc.encode('message'));
    const ok = await crypto.subtle.verify('HMAC', key, sig, enc.encode('message'));
    return [btoa(String.fromCharCode(...new Uint8Array(sig))), ok];`,
  'random ids': `
    const ids = Array.from({ length: 20 }, () => crypto.randomUUID());
    const bytes = crypto.getRandomValues(new Uint8Array(16));
    return [new Set(ids).size, ids.every((id) => /^[0-9a-f-]{36}$/.test(id)), bytes.length];`,
  'deep copy with structuredClone': `
    const original = { date: new Date(0), nested: { list: [1, 2, { x: 3 }] }, map: new Map([['k', 'v']]) };
    const copy = structuredClone(original);
    copy.nested.list[2].x = 99;
    return [original.nested.list[2].x, copy.date instanceof Date, copy.map.get('k'), copy !== original];`,
  'microtask ordering': `
    const order = [];
    setTimeout(() => order.push('timeout'), 0);
    queueMicrotask(() => order.push('microtask'));
    Promise.resolve().then(() => order.push('promise'));
    order.push('sync');
    await new Promise((r) => setTimeout(r, 5));
    return order;`,
  'measure elapsed time': `
    const t0 = performance.now();
    let x = 0;
    for (let i = 0; i < 1e5; i++) x += i;
    const elapsed = performance.now() - t0;
    return [typeof elapsed, elapsed >= 0, x];`,
  'event emitter on EventTarget': `
    class Store extends EventTarget {
      #value = 0;
      set(v) { this.#value = v; this.dispatchEvent(new CustomEvent('change', { detail: v })); }
    }
    const store = new Store();
    const seen = [];
    store.addEventListener('change', (e) => seen.push(e.detail));
    store.addEventListener('change', (e) => seen.push('once:' + e.detail), { once: true });
    store.set(1); store.set(2);
    return seen;`,
  'catch a DOMException by name': `
    try { atob('***'); } catch (e) { return [e.name, e instanceof DOMException, e instanceof Error]; }`,
};

/** Programs that call the network: `fetch` over a fetch capability of `origin` (a real server). */
const NETWORK: Record<string, (origin: string) => string> = {
  'fetch JSON': (origin) => `
    const data = await fetch('${origin}/users?page=2').then((r) => r.json());
    return data.users.map((u) => u.name);`,
  'fetch with a query string and check the status': (origin) => `
    const url = new URL('/users', '${origin}');
    url.searchParams.set('page', '1');
    const res = await fetch(url);
    if (!res.ok) throw new Error('HTTP ' + res.status);
    const { page, users } = await res.json();
    return [res.status, res.headers.get('content-type'), page, users.length];`,
  'POST JSON and read the echo': (origin) => `
    const res = await fetch('${origin}/echo', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ task: 'sum', args: [1, 2] }) });
    return await res.json();`,
  'retry a flaky endpoint with setTimeout': (origin) => `
    const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
    async function getWithRetry(url, tries) {
      for (let i = 1; ; i++) {
        const res = await fetch(url);
        if (res.ok) return [i, await res.text()];
        if (i >= tries) throw new Error('gave up after ' + i);
        await sleep(5 * i);
      }
    }
    return await getWithRetry('${origin}/flaky?id=' + crypto.randomUUID(), 5);`,
  'abort a slow request with a timeout': (origin) => `
    try {
      await fetch('${origin}/slow', { signal: AbortSignal.timeout(50) });
      return 'answered';
    } catch (e) {
      return [e.name, e instanceof DOMException];
    }`,
};

/** Programs that call a slow capability `slow(ms)` (a host function answering after ms). */
const SLOW: Record<string, string> = {
  'abort around a slow capability': `
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(new Error('too slow')), 30);
    const aborted = new Promise((_, reject) => controller.signal.addEventListener('abort', () => reject(controller.signal.reason)));
    try {
      return await Promise.race([slow(2000), aborted]);
    } catch (e) {
      return ['aborted', e.message];
    } finally {
      clearTimeout(timer);
    }`,
  'a slow capability within its time': `
    const result = await Promise.race([slow(10).then(() => 'done'), new Promise((r) => setTimeout(() => r('timeout'), 1000))]);
    return result;`,
};

const slow = (ms: number) => new Promise((resolve) => setTimeout(() => resolve('late'), ms).unref());
const flaky = new Map<string, number>();
let server: http.Server;
let origin = '';
beforeAll(async () => {
  server = http.createServer((req, res) => {
    const url = new URL(req.url!, 'http://x');
    res.setHeader('content-type', 'application/json');
    if (url.pathname === '/users') {
      return res.end(JSON.stringify({ page: Number(url.searchParams.get('page')), users: [{ name: 'Ada' }, { name: 'Alan' }] }));
    }
    if (url.pathname === '/echo') {
      let body = '';
      req.on('data', (d) => (body += d));
      req.on('end', () => res.end(JSON.stringify({ method: req.method, received: JSON.parse(body) })));
      return;
    }
    if (url.pathname === '/flaky') {
      const id = url.searchParams.get('id')!;
      const n = (flaky.get(id) ?? 0) + 1;
      flaky.set(id, n);
      res.statusCode = n < 3 ? 503 : 200;
      return res.end(n < 3 ? 'busy' : 'ok');
    }
    if (url.pathname === '/slow') return void setTimeout(() => res.end('"late"'), 3000).unref();
    res.statusCode = 404;
    res.end('{}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => server.close());

async function inNode(body: string): Promise<unknown> {
  const AsyncFunction = Object.getPrototypeOf(async () => {}).constructor;
  return JSON.parse(JSON.stringify(await new AsyncFunction('slow', body)(slow)));
}

/** Every program with its body for this server: name -> [body, needs the network, needs slow]. */
function all(): Array<[string, string, boolean, boolean]> {
  return [
    ...Object.entries(PROGRAMS).map(([name, body]): [string, string, boolean, boolean] => [name, body, false, false]),
    ...Object.entries(NETWORK).map(([name, body]): [string, string, boolean, boolean] => [name, body(origin), true, false]),
    ...Object.entries(SLOW).map(([name, body]): [string, string, boolean, boolean] => [name, body, false, true]),
  ];
}
const NAMES = [...Object.keys(PROGRAMS), ...Object.keys(NETWORK), ...Object.keys(SLOW)];
const program = (name: string) => all().find(([n]) => n === name)!;

const entry = entryPoints('web-programs');
const executors: IsoletExecutor[] = [];
afterAll(async () => {
  for (const e of executors) await e.dispose();
});

describe.each(MODES)('typical programs (%s isolation)', (isolation) => {
  let executor: IsoletExecutor;
  beforeAll(() => {
    // On by default in the executor; its fetch is over this capability.
    executor = new IsoletExecutor({ isolation, timeoutMs: 10_000, maxConcurrentIsolates: 2, fetch: createFetchCapability({ allowedOrigins: [origin] }) });
    executors.push(executor);
  });

  it.each(NAMES)('%s: same answer as Node through runSandbox', async (name) => {
    const [, body] = program(name);
    const expected = await inNode(body);
    const capabilities = { fetch: createFetchCapability({ allowedOrigins: [origin] }), slow };
    const output = ok(await runSandbox(body, { web: true, isolation, capabilities }));
    expect(output).toEqual(expected);
  });

  it.each(NAMES)('%s: same answer as Node through the Code Mode executor', async (name) => {
    const [, body] = program(name);
    const expected = await inNode(body);
    const provider = { name: 'tools', fns: { slow: async (ms: unknown) => slow(Number(ms)) }, prelude: 'const slow = tools.slow;' };
    const r = await executor.execute(`async () => {${body}\n}`, [provider]);
    expect(r.error).toBeUndefined();
    expect(r.result).toEqual(expected);
  });

  // isolet run gives the code readFile and fetch only (--read-dir, --allowed-origins): no slow capability.
  it.each(NAMES.filter((n) => !program(n)[3]))('%s: same answer as Node through isolet run', async (name) => {
    const [, body] = program(name);
    const expected = await inNode(body);
    const r = await entry.isoletRun('program.js', body, ['--isolation', isolation, '--allowed-origins', origin]);
    expect([r.exit, r.stderr]).toEqual([0, '']);
    expect(JSON.parse(r.stdout)).toEqual(expected);
  });
});

describe('without web: true', () => {
  it('the same programs fail with a ReferenceError', async () => {
    // ('validate URLs' is the silent wrong answer: its catch turns the
    // ReferenceError into false for every URL; with web: true it is right.)
    for (const name of ['parse a URL and its query', 'sleep with setTimeout', 'sha-256 hex digest', 'deep copy with structuredClone']) {
      const e = failed(await runSandbox(`(async () => {${PROGRAMS[name]}\n})()`, { isolation: 'thread' }));
      expect(e.message, name).toMatch(/^ReferenceError: \w+ is not defined/);
    }
    const off = await entry.isoletRun('off.js', NETWORK['fetch JSON'](origin), ['--no-web', '--allowed-origins', origin]);
    expect(off.exit).toBe(1);
  });
});
