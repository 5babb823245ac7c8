// Blob, File, Headers, Request and Response as their standards (File API, Fetch) define them,
// and fetch(input, init) over a fetch capability against real HTTP servers on 127.0.0.1, in
// both isolation modes: the final URL after redirects, each redirect checked against the
// allow-list again (a server off it is never contacted), raw body bytes, read-only response
// headers, `signal` aborting the host's request. Bad input and the limits give typed errors
// and the host keeps serving; bodies count against the run's memory.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createFetchCapability, createSandbox, runSandbox, SandboxEngine, type Isolation, type Sandbox, type SandboxOptions } from '..';
import { failed, ok } from './support/results';

interface Server {
  origin: string;
  hits: string[];
  closed: string[];
  server: http.Server;
}

async function listen(handler: (req: http.IncomingMessage, res: http.ServerResponse, s: Server) => void): Promise<Server> {
  const s = { hits: [] as string[], closed: [] as string[] } as unknown as Server;
  s.server = http.createServer((req, res) => {
    s.hits.push(`${req.method} ${req.url}`);
    res.on('close', () => {
      if (!res.writableFinished) s.closed.push(req.url!);
    });
    handler(req, res, s);
  });
  await new Promise<void>((r) => s.server.listen(0, '127.0.0.1', r));
  s.origin = `http://127.0.0.1:${(s.server.address() as AddressInfo).port}`;
  return s;
}

let api: Server;
let elsewhere: Server;
beforeAll(async () => {
  elsewhere = await listen((_req, res) => res.end('you should not be here'));
  api = await listen((req, res) => {
    const url = new URL(req.url!, 'http://x');
    switch (url.pathname) {
      case '/json':
        res.setHeader('content-type', 'application/json');
        res.setHeader('set-cookie', ['a=1', 'b=2']);
        return res.end(JSON.stringify({ hello: 'world', query: url.search }));
      case '/bytes':
        return res.end(Buffer.from([0, 0xff, 0xfe, 0x80, 0x41]));
      case '/redirect':
        res.statusCode = Number(url.searchParams.get('status') ?? 302);
        res.setHeader('location', url.searchParams.get('to') ?? '/json');
        return res.end();
      case '/echo': {
        const chunks: Buffer[] = [];
        req.on('data', (d) => chunks.push(d));
        req.on('end', () => {
          res.setHeader('content-type', 'application/json');
          res.end(JSON.stringify({ method: req.method, type: req.headers['content-type'] ?? null, token: req.headers['x-token'] ?? null, body: Buffer.concat(chunks).toString('base64') }));
        });
        return;
      }
      case '/big':
        return res.end(Buffer.alloc(Number(url.searchParams.get('n')), 0x61));
      case '/slow':
        setTimeout(() => res.end('late'), 3000).unref();
        return;
      default:
        res.statusCode = 404;
        return res.end('not here');
    }
  });
});
afterAll(() => {
  api.server.close();
  elsewhere.server.close();
});

const open: Sandbox[] = [];
const engines: SandboxEngine[] = [];
afterAll(async () => {
  for (const sb of open) sb.close();
  for (const e of engines) await e.shutdown();
});

describe.each(['thread', 'process'] as const)('Blob, File, Headers, Request, Response (%s isolation)', (isolation: Isolation) => {
  const out = async (code: string) => ok(await runSandbox(`(async () => { ${code} })()`, { web: true, isolation }));

  it('Headers: names case-insensitive, values combined and trimmed, iteration sorted and lowercased, set-cookie apart', async () => {
    expect(
      await out(`
        const h = new Headers({ 'Content-Type': 'text/plain', Accept: ' a/b ' });
        h.append('accept', 'c/d'); h.append('Set-Cookie', 'x=1'); h.append('set-cookie', 'y=2'); h.set('X-Zed', '1'); h.delete('content-type');
        return [h.get('ACCEPT'), h.has('Content-Type'), [...h], h.getSetCookie(), [...new Headers([['b', '2'], ['a', '1']]).keys()], new Headers(h).get('x-zed'), h.get('missing')];`),
    ).toEqual([
      'a/b, c/d',
      false,
      [['accept', 'a/b, c/d'], ['set-cookie', 'x=1'], ['set-cookie', 'y=2'], ['x-zed', '1']],
      ['x=1', 'y=2'],
      ['a', 'b'],
      '1',
      null,
    ]);
    const errors = await out(`
      const e = (f) => { try { f(); return 'no error' } catch (err) { return err.constructor.name } };
      return [e(() => new Headers({ 'bad name': 'v' })), e(() => new Headers({ a: 'x\\ny' })), e(() => new Headers([['a']])), e(() => new Headers('a')), e(() => new Headers().get())];`);
    expect(errors).toEqual(['TypeError', 'TypeError', 'TypeError', 'TypeError', 'TypeError']);
  });

  it('Response: defaults, status range, null-body statuses, bodies read once, clone, json(), error(), redirect()', async () => {
    expect(
      await out(`
        const r = new Response('hé');
        const first = [r.status, r.ok, r.statusText, r.type, r.url, r.redirected, r.bodyUsed, r.headers.get('content-type')];
        const text = await r.text();
        let again; try { await r.text() } catch (e) { again = e.constructor.name }
        const j = Response.json({ a: [1] }, { status: 201, headers: { 'x-a': '1' } });
        const c = new Response(new Uint8Array([1, 2, 3]), { status: 299, statusText: 'Fine' });
        const copy = c.clone();
        const e = Response.error();
        const red = Response.redirect('https://example.com/next', 301);
        const status = (s) => { try { new Response(null, { status: s }); return 'ok' } catch (err) { return err.constructor.name } };
        let nullBody; try { new Response('x', { status: 204 }) } catch (err) { nullBody = err.constructor.name }
        return [first, text, again, r.bodyUsed, [j.status, j.headers.get('content-type'), j.headers.get('x-a'), await j.json()],
          [c.ok, c.statusText, [...await c.bytes()], Array.from(new Uint8Array(await copy.arrayBuffer()))],
          [e.type, e.status, e.ok], [red.status, red.headers.get('location')], [status(199), status(600), status(599)], nullBody,
          (await new Response(new URLSearchParams({ a: 'b c' })).blob()).type, await new Response(new Blob(['blob'], { type: 'Text/Plain' })).text(),
          new Response(new Blob([], { type: 'x/y' })).headers.get('content-type')];`),
    ).toEqual([
      [200, true, '', 'default', '', false, false, 'text/plain;charset=UTF-8'],
      'hé',
      'TypeError',
      true,
      [201, 'application/json', '1', { a: [1] }],
      [true, 'Fine', [1, 2, 3], [1, 2, 3]],
      ['error', 0, false],
      [301, 'https://example.com/next'],
      ['RangeError', 'RangeError', 'ok'],
      'TypeError',
      'application/x-www-form-urlencoded;charset=utf-8',
      'blob',
      'x/y',
    ]);
  });

  it('Request: URL, method normalization, forbidden methods, bodies, clone, signal', async () => {
    expect(
      await out(`
        const e = (f) => { try { f(); return 'no error' } catch (err) { return err.constructor.name } };
        const r = new Request('https://example.com/a?b#c', { method: 'post', body: 'x', headers: { 'X-A': '1' } });
        const copy = r.clone();
        const ac = new AbortController();
        const s = new Request('https://example.com', { signal: ac.signal });
        ac.abort('why');
        return [r.url, r.method, r.headers.get('x-a'), r.headers.get('content-type'), await copy.text(), r.bodyUsed, r.redirect,
          new Request('https://e.com', { method: 'patch' }).method, new Request(r).method,
          e(() => new Request('/relative')), e(() => new Request('https://u:p@e.com')), e(() => new Request('https://e.com', { method: 'TRACE' })),
          e(() => new Request('https://e.com', { body: 'x' })), e(() => new Request('https://e.com', { redirect: 'sometimes' })),
          [s.signal.aborted, s.signal.reason]];`),
    ).toEqual([
      'https://example.com/a?b#c',
      'POST',
      '1',
      'text/plain;charset=UTF-8',
      'x',
      false,
      'follow',
      'patch',
      'POST',
      'TypeError',
      'TypeError',
      'TypeError',
      'TypeError',
      'TypeError',
      [true, 'why'],
    ]);
  });

  it('Blob and File: size, type, slice with negative indices, text, bytes, arrayBuffer', async () => {
    expect(
      await out(`
        const b = new Blob(['hé', new Uint8Array([33]), new Blob(['!?'])], { type: 'TEXT/Plain' });
        const f = new File(['abc'], 'a.txt', { type: 'text/plain', lastModified: 5 });
        return [b.size, b.type, await b.text(), [...await b.slice(-3, -1).bytes()], b.slice(1, 3, 'x/y').type, await b.slice(10).text(),
          new Uint8Array(await b.arrayBuffer()).length, [f.name, f.lastModified, f.size, await f.text(), f instanceof Blob],
          new Blob(['x'], { type: 'caf\\u00e9' }).type];`),
    ).toEqual([6, 'text/plain', 'hé!!?', [33, 33], 'x/y', '', 6, ['a.txt', 5, 3, 'abc', true], '']);
  });
});

describe.each(['thread', 'process'] as const)('fetch over a fetch capability (%s isolation)', (isolation: Isolation) => {
  const fetchCap = () => createFetchCapability({ allowedOrigins: [api.origin] });
  const run = (code: string, options: SandboxOptions = {}) =>
    runSandbox(code, { web: true, isolation, capabilities: { fetch: fetchCap() }, ...options });
  const out = async (code: string, options: SandboxOptions = {}) => ok(await run(code, options));

  it('fetch(...).then((r) => r.json()), the final URL after redirects, raw bytes, read-only headers', async () => {
    const o = api.origin;
    expect(
      await out(`
        const data = await fetch('${o}/json?x=1').then((r) => r.json());
        const r = await fetch(new Request('${o}/redirect?to=/redirect%3Fto%3D/json'));
        const bytes = await fetch('${o}/bytes').then((r) => r.bytes());
        let readOnly; try { r.headers.set('x', '1') } catch (e) { readOnly = e.constructor.name }
        const manual = await fetch('${o}/redirect?to=/json', { redirect: 'manual' });
        let refused; try { await fetch('${o}/redirect', { redirect: 'error' }) } catch (e) { refused = [e.constructor.name, e.message] }
        const missing = await fetch('${o}/nothing');
        return [data, r.url, r.redirected, r.status, r.type, r.headers.getSetCookie(), [...bytes], readOnly, [manual.status, manual.headers.get('location')], refused, [missing.status, missing.ok, await missing.text()]];`),
    ).toEqual([
      { hello: 'world', query: '?x=1' },
      `${o}/json`,
      true,
      200,
      'basic',
      ['a=1', 'b=2'],
      [0, 0xff, 0xfe, 0x80, 0x41],
      'TypeError',
      [302, '/json'],
      ['TypeError', "fetch: the response is a redirect (302) and the request's redirect mode is 'error'"],
      [404, false, 'not here'],
    ]);
  });

  it('sends the method, headers and body bytes as given', async () => {
    const r = await out(`
      const post = await fetch('${api.origin}/echo', { method: 'POST', headers: { 'content-type': 'application/json', 'x-token': 't' }, body: JSON.stringify({ a: 1 }) }).then((r) => r.json());
      const bytes = await fetch('${api.origin}/echo', { method: 'PUT', body: new Uint8Array([0, 255]) }).then((r) => r.json());
      const form = await fetch('${api.origin}/echo', { method: 'POST', body: new URLSearchParams({ q: 'a b' }) }).then((r) => r.json());
      return [post, bytes, form];`);
    expect(r).toEqual([
      { method: 'POST', type: 'application/json', token: 't', body: Buffer.from('{"a":1}').toString('base64') },
      { method: 'PUT', type: null, token: null, body: Buffer.from([0, 255]).toString('base64') },
      { method: 'POST', type: 'application/x-www-form-urlencoded;charset=UTF-8', token: null, body: Buffer.from('q=a+b').toString('base64') },
    ]);
  });

  it('refuses a URL off the allow-list and a redirect that leaves it: the other server is never contacted', async () => {
    const before = elsewhere.hits.length;
    const r = await out(`
      const tries = ['${elsewhere.origin}/direct', '${api.origin}/redirect?to=${encodeURIComponent(`${elsewhere.origin}/via-redirect`)}', 'http://localhost:${new URL(api.origin).port}/json', 'file:///etc/passwd', 'data:,hi'];
      const out = [];
      for (const url of tries) { try { await fetch(url); out.push('fetched') } catch (e) { out.push([e.constructor.name, e.message]) } }
      return out;`);
    expect(r).toEqual([
      ['TypeError', `fetch: origin ${elsewhere.origin} is not in the allow-list`],
      ['TypeError', 'fetch: refused a redirect to an origin that is not in the allow-list'],
      ['TypeError', `fetch: origin http://localhost:${new URL(api.origin).port} is not in the allow-list`],
      ['TypeError', 'fetch: url must use http: or https:'],
      ['TypeError', 'fetch: url must use http: or https:'],
    ]);
    expect(elsewhere.hits.length).toBe(before);
  });

  it('aborting the signal rejects at once and aborts the host request; an aborted signal sends nothing', async () => {
    const before = api.hits.filter((h) => h.startsWith('GET /slow')).length;
    const r = await out(`
      const ac = new AbortController();
      // 500 ms: the request reaches the server first on a loaded machine too.
      setTimeout(() => ac.abort(), 500);
      const t = performance.now();
      let e1; try { await fetch('${api.origin}/slow', { signal: ac.signal }) } catch (e) { e1 = [e.name, e instanceof DOMException, performance.now() - t < 2000] }
      let e2; try { await fetch('${api.origin}/slow?never', { signal: AbortSignal.abort(new Error('mine')) }) } catch (e) { e2 = e.message }
      let e3; try { await fetch('${api.origin}/slow?timeout', { signal: AbortSignal.timeout(500) }) } catch (e) { e3 = e.name }
      await new Promise((r) => setTimeout(r, 200));
      return [e1, e2, e3];`);
    expect(r).toEqual([['AbortError', true, true], 'mine', 'TimeoutError']);
    // The server saw two requests to /slow, and both connections closed unanswered.
    await expect.poll(() => api.hits.filter((h) => h.startsWith('GET /slow')).length - before, { timeout: 10_000 }).toBe(2);
    await expect.poll(() => api.closed.filter((u) => u === '/slow' || u === '/slow?timeout').length, { timeout: 5000 }).toBeGreaterThanOrEqual(2);
  });

  it('bodies over the bridge limits are typed errors and the host keeps serving', async () => {
    const r = (await out(
      `const e = async (f) => { try { await f(); return 'no error' } catch (err) { return [err.constructor.name, err.message] } };
       return [
         await e(() => fetch('${api.origin}/echo', { method: 'POST', body: new Uint8Array(300000) })),
         await e(() => fetch('${api.origin}/big?n=300000')),
         (await fetch('${api.origin}/json')).status,
       ];`,
      { maxMessageBytes: 200000 },
    )) as [[string, string], [string, string], number];
    expect(r[0][0]).toBe('TypeError');
    expect(r[0][1]).toMatch(/exceed the bridge limit of 200000 bytes/);
    expect(r[1]).toEqual(['TypeError', expect.stringMatching(/fetch's reply: \d+ bytes, over the bridge limit of 200000 bytes/)]);
    expect(r[2]).toBe(200);
    const capped = createFetchCapability({ allowedOrigins: [api.origin], maxResponseBytes: 1000 });
    const small = ok(await runSandbox(`try { await fetch('${api.origin}/big?n=5000') } catch (e) { return [e.constructor.name, e.message] }`, { web: true, isolation, capabilities: { fetch: capped } }));
    expect(small).toEqual(['TypeError', 'fetch: response body is larger than the limit of 1000 bytes']);
  });

  it('a response body counts against the run\'s memory, and so does a Blob', async () => {
    const big = createFetchCapability({ allowedOrigins: [api.origin], maxResponseBytes: 64 << 20 });
    const r = await runSandbox(`const b = await fetch('${api.origin}/big?n=${40 << 20}').then((r) => r.arrayBuffer()); return b.byteLength`, {
      web: true,
      isolation,
      memoryLimitMb: 16,
      maxMessageBytes: 64 << 20,
      capabilities: { fetch: big },
    });
    expect(failed(r).name).toBe('SandboxOOMError');
    const blob = await runSandbox('const part = "x".repeat(1 << 20); new Blob(Array(64).fill(part)).size', { web: true, isolation, memoryLimitMb: 16 });
    expect(failed(blob).name).toBe('SandboxOOMError');
    expect(ok(await run(`return (await fetch('${api.origin}/json')).status`))).toBe(200);
  });

  it('exists only with web and a fetch capability; a fetch of the caller\'s own stays as it is', async () => {
    expect(ok(await runSandbox('typeof fetch', { web: true, isolation }))).toBe('undefined');
    expect(ok(await runSandbox('return typeof fetch', { isolation, capabilities: { fetch: fetchCap() } }))).toBe('function');
    // Without web the capability itself: a plain request object in, a plain object out.
    expect(ok(await runSandbox(`return (await fetch({ url: '${api.origin}/json' })).status`, { isolation, capabilities: { fetch: fetchCap() } }))).toBe(200);
    const own = ok(await runSandbox('return await fetch("anything")', { web: true, isolation, capabilities: { fetch: async (x: unknown) => ({ got: x }) } }));
    expect(own).toEqual({ got: 'anything' });
    // In a namespace it is a tool like any other.
    expect(ok(await runSandbox('return [typeof fetch, typeof http.fetch]', { web: true, isolation, capabilities: { http: { fetch: fetchCap() } } }))).toEqual(['undefined', 'function']);
  });

  it('in an engine (engine tools and request tools) and in a persistent sandbox', async () => {
    const engine = new SandboxEngine({ isolation, web: true, tools: { fetch: fetchCap() } });
    engines.push(engine);
    await engine.init();
    const code = `return (await fetch('${api.origin}/json')).json()`;
    const allowed = await engine.submit({ code, toolPolicy: { allowedTools: ['fetch'] } }).done;
    expect(allowed).toMatchObject({ type: 'result', data: { hello: 'world' } });
    const denied = await engine.submit({ code: 'return typeof fetch' }).done;
    expect(denied).toMatchObject({ type: 'result', data: 'undefined' });
    const own = new SandboxEngine({ isolation, web: true });
    engines.push(own);
    await own.init();
    expect(await own.submit({ code, tools: { fetch: fetchCap() } }).done).toMatchObject({ type: 'result', data: { hello: 'world' } });
    const sb = await createSandbox({ web: true, isolation, capabilities: { fetch: fetchCap() } });
    open.push(sb);
    expect(ok(await sb.run(`const r = await fetch('${api.origin}/json'); globalThis.kept = await r.json(); 1`))).toBe(1);
    expect(ok(await sb.run(`kept.hello + ' ' + (await fetch('${api.origin}/json')).status`))).toBe('world 200');
  });
});
