// Programs of the kind models write, using the APIs every JS runtime has: each runs in this
// Node process and in the sandbox with `web: true` (both isolation modes) and must give the
// same answer. Without `web`, the same programs fail with a ReferenceError, never silently.
import { describe, expect, it } from 'vitest';
import { runSandbox } from '..';
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

async function inNode(body: string): Promise<unknown> {
  const AsyncFunction = Object.getPrototypeOf(async () => {}).constructor;
  return JSON.parse(JSON.stringify(await new AsyncFunction(body)()));
}

describe.each(['thread', 'process'] as const)('typical programs (%s isolation)', (isolation) => {
  it.each(Object.keys(PROGRAMS))('%s: same answer as Node', async (name) => {
    const body = PROGRAMS[name];
    const expected = await inNode(body);
    const output = ok(await runSandbox(`(async () => {${body}\n})()`, { web: true, isolation }));
    expect(output).toEqual(expected);
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
  });
});
