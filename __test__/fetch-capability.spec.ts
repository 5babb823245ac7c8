import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { runSandbox, createFetchCapability } from '..';

type CodedError = Error & { code?: string };
type FetchRequest = { url: unknown; method?: unknown; headers?: unknown; body?: unknown };
type FetchResponse = { status: number; statusText: string; headers: Record<string, string>; body: string };
type FetchHandler = (request: FetchRequest) => Promise<FetchResponse>;

// Three real servers on loopback:
//   main     (allowed)   every route below
//   other    (allowed)   /echo only, target of a cross-origin redirect
//   outside  (NOT allowed) counts every request it gets: it must stay at zero
let main: http.Server;
let other: http.Server;
let outside: http.Server;
let MAIN: string;
let OTHER: string;
let OUTSIDE: string;
let CLOSED: string; // an allowed origin where nothing listens
const hits = { outside: 0, loop: 0, slow: 0, upload: 0 };
const big = { chunksSent: 0, closedEarly: false };
const held: http.ServerResponse[] = [];

const CHUNK = Buffer.alloc(64 * 1024, 'x');
const BIG_MAX_CHUNKS = 400; // 25 MiB if nobody stopped reading: the test caps at 256 KiB

function readRequestBody(req: http.IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

async function echo(req: http.IncomingMessage, res: http.ServerResponse, origin: string) {
  const body = await readRequestBody(req);
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(
    JSON.stringify({
      origin,
      method: req.method,
      url: req.url,
      headers: req.headers,
      body: body.toString('utf8'),
      bodyHex: body.toString('hex'),
    }),
  );
}

function streamBig(res: http.ServerResponse) {
  res.writeHead(200, { 'content-type': 'application/octet-stream' });
  res.on('close', () => {
    if (!res.writableFinished) big.closedEarly = true;
  });
  const pump = () => {
    while (big.chunksSent < BIG_MAX_CHUNKS && !res.destroyed) {
      big.chunksSent++;
      if (!res.write(CHUNK)) {
        res.once('drain', pump);
        return;
      }
    }
    if (!res.destroyed) res.end();
  };
  pump();
}

async function route(req: http.IncomingMessage, res: http.ServerResponse) {
  const url = new URL(req.url ?? '/', MAIN);
  const chain = /^\/chain\/(\d+)$/.exec(url.pathname);
  if (chain) {
    const n = Number(chain[1]);
    if (n === 0) {
      res.end('end of chain');
    } else {
      res.writeHead(302, { location: `/chain/${n - 1}` });
      res.end();
    }
    return;
  }
  switch (url.pathname) {
    case '/ok':
      res.writeHead(200, { 'content-type': 'application/json', 'x-test': 'yes' });
      res.end(JSON.stringify({ ok: true, n: 42 }));
      return;
    case '/utf8':
      res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
      res.end('héllo ✓ 🎉');
      return;
    case '/not-found':
      res.writeHead(404, 'Nope', { 'content-type': 'text/plain' });
      res.end('missing');
      return;
    case '/cookies':
      res.setHeader('set-cookie', ['a=1', 'b=2']);
      res.end('cookies');
      return;
    case '/redirect-in':
      res.writeHead(302, { location: '/ok' });
      res.end('moved');
      return;
    case '/redirect-in-absolute':
      res.writeHead(301, { location: `${MAIN}/ok?from=abs` });
      res.end();
      return;
    case '/redirect-out':
      res.writeHead(302, { location: `${OUTSIDE}/secret` });
      res.end();
      return;
    case '/redirect-out-303':
      res.writeHead(303, { location: `${OUTSIDE}/secret` });
      res.end();
      return;
    case '/redirect-file':
      res.writeHead(302, { location: 'file:///etc/passwd' });
      res.end();
      return;
    case '/redirect-other':
      res.writeHead(307, { location: `${OTHER}/echo` });
      res.end();
      return;
    case '/redirect-loop':
      hits.loop++;
      res.writeHead(302, { location: '/redirect-loop' });
      res.end();
      return;
    case '/303':
      await readRequestBody(req);
      res.writeHead(303, { location: '/echo' });
      res.end();
      return;
    case '/307':
      await readRequestBody(req);
      res.writeHead(307, { location: '/echo' });
      res.end();
      return;
    case '/big':
      streamBig(res);
      return;
    case '/slow':
      hits.slow++;
      held.push(res); // never answered; ended in afterAll
      return;
    case '/slow-body':
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('partial');
      held.push(res);
      return;
    case '/upload':
      hits.upload++;
      return echo(req, res, 'main');
    case '/echo':
      return echo(req, res, 'main');
    default:
      res.writeHead(404);
      res.end();
  }
}

function listen(handler: http.RequestListener): Promise<[http.Server, string]> {
  const server = http.createServer(handler);
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      resolve([server, `http://127.0.0.1:${port}`]);
    });
  });
}

function close(server: http.Server | undefined): Promise<void> {
  if (!server) return Promise.resolve();
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

async function rejectionOf(promise: Promise<unknown>): Promise<CodedError> {
  try {
    await promise;
  } catch (err) {
    return err as CodedError;
  }
  throw new Error('expected the promise to reject');
}

function cap(options: Record<string, unknown> = {}): FetchHandler {
  return createFetchCapability({ allowedOrigins: [MAIN, OTHER, CLOSED], ...options } as never) as unknown as FetchHandler;
}

function creationError(options: unknown): Error {
  try {
    (createFetchCapability as (o: unknown) => unknown)(options);
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected createFetchCapability to throw');
}

beforeAll(async () => {
  [main, MAIN] = await listen((req, res) => {
    route(req, res).catch(() => res.destroy());
  });
  [other, OTHER] = await listen((req, res) => {
    if (req.url === '/echo') echo(req, res, 'other').catch(() => res.destroy());
    else {
      res.writeHead(404);
      res.end();
    }
  });
  [outside, OUTSIDE] = await listen((_req, res) => {
    hits.outside++;
    res.end('outside secret');
  });
  const [probe, probeUrl] = await listen(() => {});
  await close(probe);
  CLOSED = probeUrl;
});

afterAll(async () => {
  for (const res of held) res.destroy();
  await Promise.all([close(main), close(other), close(outside)]);
  expect(hits.outside).toBe(0);
});

describe('createFetchCapability: options', () => {
  it.each([
    ['no options', undefined],
    ['a string', 'http://127.0.0.1'],
    ['no allowedOrigins', {}],
    ['an empty allow-list', { allowedOrigins: [] }],
    ['a string allow-list', { allowedOrigins: 'http://127.0.0.1' }],
    ['a non-string origin', { allowedOrigins: [42] }],
    ['an unparsable origin', { allowedOrigins: ['not a url'] }],
    ['a non-http origin', { allowedOrigins: ['ftp://127.0.0.1'] }],
    ['a file: origin', { allowedOrigins: ['file:///etc'] }],
    ['an origin with a path', { allowedOrigins: ['http://127.0.0.1/api'] }],
    ['an origin with credentials', { allowedOrigins: ['http://user:pw@127.0.0.1'] }],
    ['a zero timeout', { allowedOrigins: ['http://127.0.0.1'], timeoutMs: 0 }],
    ['a fractional timeout', { allowedOrigins: ['http://127.0.0.1'], timeoutMs: 1.5 }],
    ['a string timeout', { allowedOrigins: ['http://127.0.0.1'], timeoutMs: '100' }],
    ['an overflowing timeout', { allowedOrigins: ['http://127.0.0.1'], timeoutMs: 2 ** 31 }],
    ['a negative maxResponseBytes', { allowedOrigins: ['http://127.0.0.1'], maxResponseBytes: -1 }],
    ['a NaN maxRequestBytes', { allowedOrigins: ['http://127.0.0.1'], maxRequestBytes: NaN }],
    ['an unknown method', { allowedOrigins: ['http://127.0.0.1'], allowedMethods: ['TRACE'] }],
    ['an empty method list', { allowedOrigins: ['http://127.0.0.1'], allowedMethods: [] }],
    ['an unknown option', { allowedOrigins: ['http://127.0.0.1'], timeout: 5 }],
  ])('rejects %s with SandboxValidationError', (_label, options) => {
    expect(creationError(options).name).toBe('SandboxValidationError');
  });

  it('names the option given, and the nearest known one for a typo', () => {
    expect(creationError({ allowedOrigin: ['http://127.0.0.1'] }).message).toBe(
      'createFetchCapability: allowedOrigin is not a known option of createFetchCapability; did you mean allowedOrigins?',
    );
    expect(creationError({ allowedOrigins: ['http://127.0.0.1'], timeoutMs: 0 }).message).toBe(
      'createFetchCapability: timeoutMs must be a whole number from 1 to 2147483647, got 0',
    );
  });

  it('accepts origins with a trailing slash and default ports', async () => {
    const port = new URL(MAIN).port;
    const handler = createFetchCapability({
      allowedOrigins: [`http://127.0.0.1:${port}/`],
    }) as unknown as FetchHandler;
    expect((await handler({ url: `${MAIN}/ok` })).status).toBe(200);
    expect(typeof createFetchCapability({ allowedOrigins: ['https://example.com:443'] })).toBe('function');
  });
});

describe('fetch called from the host', () => {
  it('GETs an allowed origin and returns status, headers and body', async () => {
    const res = await cap()({ url: `${MAIN}/ok` });
    expect(res.status).toBe(200);
    expect(res.statusText).toBe('OK');
    expect(res.headers['content-type']).toBe('application/json');
    expect(res.headers['x-test']).toBe('yes');
    expect(JSON.parse(res.body)).toEqual({ ok: true, n: 42 });
    expect(Object.getPrototypeOf(res)).toBe(Object.prototype);
    expect(Object.getPrototypeOf(res.headers)).toBe(Object.prototype);
  });

  it('decodes utf-8 bodies and joins repeated headers', async () => {
    expect((await cap()({ url: `${MAIN}/utf8` })).body).toBe('héllo ✓ 🎉');
    expect((await cap()({ url: `${MAIN}/cookies` })).headers['set-cookie']).toBe('a=1, b=2');
  });

  it('returns HTTP errors as ordinary responses', async () => {
    const res = await cap()({ url: `${MAIN}/not-found` });
    expect(res).toMatchObject({ status: 404, statusText: 'Nope', body: 'missing' });
  });

  it('refuses origins outside the allow-list without connecting', async () => {
    const handler = cap();
    const port = Number(new URL(MAIN).port);
    for (const url of [
      `${OUTSIDE}/secret`,
      `http://localhost:${port}/ok`, // same server, different origin
      `https://127.0.0.1:${port}/ok`, // different scheme
      `http://127.0.0.1:${port + 1}/ok`,
    ]) {
      const err = await rejectionOf(handler({ url }));
      expect(err.code).toBe('ERR_ISOLET_ORIGIN_NOT_ALLOWED');
      expect(err.message).toMatch(/^fetch: origin .* is not in the allow-list$/);
    }
    expect(hits.outside).toBe(0);
  });

  it.each([
    ['a relative URL', '/ok'],
    ['a file: URL', 'file:///etc/passwd'],
    ['a data: URL', 'data:text/plain,hi'],
    ['a javascript: URL', 'javascript:alert(1)'],
    ['garbage', 'http://'],
  ])('refuses %s', async (_label, url) => {
    const err = await rejectionOf(cap()({ url }));
    expect(err.code).toBe('ERR_ISOLET_INVALID_URL');
  });

  it('refuses credentials in the URL', async () => {
    const withCreds = MAIN.replace('http://', 'http://user:secret@');
    const err = await rejectionOf(cap()({ url: `${withCreds}/ok` }));
    expect(err.code).toBe('ERR_ISOLET_INVALID_URL');
    expect(err.message).not.toContain('secret');
  });

  it('follows redirects inside the allow-list', async () => {
    const res = await cap()({ url: `${MAIN}/redirect-in` });
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toEqual({ ok: true, n: 42 });
    const abs = await cap()({ url: `${MAIN}/redirect-in-absolute` });
    expect(abs.status).toBe(200);
  });

  it('refuses a redirect out of the allow-list, without following it', async () => {
    for (const path of ['/redirect-out', '/redirect-out-303']) {
      const err = await rejectionOf(cap()({ url: `${MAIN}${path}` }));
      expect(err.code).toBe('ERR_ISOLET_ORIGIN_NOT_ALLOWED');
      expect(err.message).toBe('fetch: refused a redirect to an origin that is not in the allow-list');
      expect(err.message).not.toContain(OUTSIDE);
    }
    const file = await rejectionOf(cap()({ url: `${MAIN}/redirect-file` }));
    expect(file.code).toBe('ERR_ISOLET_INVALID_URL');
    expect(hits.outside).toBe(0);
  });

  it('follows at most 5 redirects', async () => {
    const five = await cap()({ url: `${MAIN}/chain/5` });
    expect(five.body).toBe('end of chain');
    const six = await rejectionOf(cap()({ url: `${MAIN}/chain/6` }));
    expect(six.code).toBe('ERR_ISOLET_TOO_MANY_REDIRECTS');
    hits.loop = 0;
    const loop = await rejectionOf(cap()({ url: `${MAIN}/redirect-loop` }));
    expect(loop.code).toBe('ERR_ISOLET_TOO_MANY_REDIRECTS');
    expect(hits.loop).toBe(6);
  });

  it('turns POST into GET on 303 and keeps method and body on 307', async () => {
    const see = await cap()({ url: `${MAIN}/303`, method: 'POST', body: 'payload', headers: { 'content-type': 'text/plain' } });
    const seeEcho = JSON.parse(see.body);
    expect(seeEcho).toMatchObject({ method: 'GET', url: '/echo', body: '' });
    expect(seeEcho.headers['content-type']).toBeUndefined();
    const temp = await cap()({ url: `${MAIN}/307`, method: 'POST', body: 'payload', headers: { 'content-type': 'text/plain' } });
    expect(JSON.parse(temp.body)).toMatchObject({ method: 'POST', url: '/echo', body: 'payload' });
  });

  it('drops Authorization and Cookie on a redirect to another allowed origin', async () => {
    const res = await cap()({
      url: `${MAIN}/redirect-other`,
      method: 'PUT',
      body: 'data',
      headers: { Authorization: 'Bearer t0ken', Cookie: 'c=1', 'X-Keep': 'kept' },
    });
    const echoed = JSON.parse(res.body);
    expect(echoed.origin).toBe('other');
    expect(echoed.method).toBe('PUT');
    expect(echoed.body).toBe('data');
    expect(echoed.headers.authorization).toBeUndefined();
    expect(echoed.headers.cookie).toBeUndefined();
    expect(echoed.headers['x-keep']).toBe('kept');
  });

  it('stops reading a response past maxResponseBytes and cancels the stream', async () => {
    big.chunksSent = 0;
    big.closedEarly = false;
    const err = await rejectionOf(cap({ maxResponseBytes: 256 * 1024 })({ url: `${MAIN}/big` }));
    expect(err.code).toBe('ERR_ISOLET_RESPONSE_TOO_LARGE');
    expect(err.message).toContain(String(256 * 1024));
    for (let i = 0; i < 500 && !big.closedEarly; i++) await new Promise((r) => setTimeout(r, 20));
    expect(big.closedEarly).toBe(true);
    expect(big.chunksSent).toBeLessThan(BIG_MAX_CHUNKS);
  });

  it('times out a server that never answers', async () => {
    const started = Date.now();
    const err = await rejectionOf(cap({ timeoutMs: 300 })({ url: `${MAIN}/slow` }));
    expect(err.code).toBe('ERR_ISOLET_FETCH_TIMEOUT');
    expect(err.message).toBe('fetch: request timed out after 300 ms');
    expect(Date.now() - started).toBeLessThan(3000);
  });

  it('times out a body that never finishes', async () => {
    const err = await rejectionOf(cap({ timeoutMs: 300 })({ url: `${MAIN}/slow-body` }));
    expect(err.code).toBe('ERR_ISOLET_FETCH_TIMEOUT');
  });

  it('POSTs string and byte bodies with headers', async () => {
    const res = await cap()({
      url: `${MAIN}/echo`,
      method: 'post',
      headers: { 'Content-Type': 'application/json', 'X-Count': 3 },
      body: JSON.stringify({ hello: 'world' }),
    });
    const echoed = JSON.parse(res.body);
    expect(echoed.method).toBe('POST');
    expect(JSON.parse(echoed.body)).toEqual({ hello: 'world' });
    expect(echoed.headers['content-type']).toBe('application/json');
    expect(echoed.headers['x-count']).toBe('3');
    const bytes = await cap()({ url: `${MAIN}/echo`, method: 'PUT', body: new Uint8Array([0, 1, 254, 255]) });
    expect(JSON.parse(bytes.body).bodyHex).toBe('0001feff');
  });

  it('supports HEAD with an empty body', async () => {
    const res = await cap()({ url: `${MAIN}/ok`, method: 'HEAD' });
    expect(res.status).toBe(200);
    expect(res.body).toBe('');
  });

  it('refuses request bodies over maxRequestBytes before sending', async () => {
    hits.upload = 0;
    const handler = cap({ maxRequestBytes: 1024 });
    const ok = await handler({ url: `${MAIN}/upload`, method: 'POST', body: 'x'.repeat(1024) });
    expect(JSON.parse(ok.body).body).toHaveLength(1024);
    const err = await rejectionOf(handler({ url: `${MAIN}/upload`, method: 'POST', body: 'é'.repeat(513) }));
    expect(err.code).toBe('ERR_ISOLET_REQUEST_TOO_LARGE');
    expect(hits.upload).toBe(1);
  });

  it('refuses methods outside allowedMethods', async () => {
    const getOnly = cap({ allowedMethods: ['get'] });
    expect((await getOnly({ url: `${MAIN}/ok` })).status).toBe(200);
    const post = await rejectionOf(getOnly({ url: `${MAIN}/echo`, method: 'POST', body: 'x' }));
    expect(post.code).toBe('ERR_ISOLET_METHOD_NOT_ALLOWED');
    for (const method of ['TRACE', 'CONNECT', 'OPTIONS', 'FOO']) {
      expect((await rejectionOf(cap()({ url: `${MAIN}/ok`, method }))).code).toBe('ERR_ISOLET_METHOD_NOT_ALLOWED');
    }
  });

  it('reports connection failures without host details', async () => {
    const err = await rejectionOf(cap()({ url: `${CLOSED}/ok` }));
    expect(err.code).toBe('ERR_ISOLET_FETCH_FAILED');
    expect(err.message).toBe('fetch: network error (ECONNREFUSED)');
  });

  it.each([
    ['a bare string', 'http://127.0.0.1/'],
    ['null', null],
    ['an array', []],
  ])('throws TypeError when the argument is %s', async (_label, arg) => {
    const err = await rejectionOf((cap() as (a: unknown) => Promise<unknown>)(arg));
    expect(err).toBeInstanceOf(TypeError);
    expect(err.message).toMatch(/^fetch: expected an object/);
  });

  it.each([
    ['a numeric url', { url: 42 }],
    ['an unknown property', { url: 'http://x/', redirect: 'follow' }],
    ['a numeric method', { url: 'http://x/', method: 1 }],
    ['array headers', { url: 'http://x/', headers: [['a', 'b']] }],
    ['a Host header', { url: 'http://x/', headers: { Host: 'internal' } }],
    ['a Content-Length header', { url: 'http://x/', headers: { 'content-length': '5' } }],
    ['a Transfer-Encoding header', { url: 'http://x/', headers: { 'Transfer-Encoding': 'chunked' } }],
    ['a Proxy- header', { url: 'http://x/', headers: { 'Proxy-Foo': 'x' } }],
    ['a header with CRLF', { url: 'http://x/', headers: { 'x-a': 'b\r\nHost: evil' } }],
    ['an invalid header name', { url: 'http://x/', headers: { 'bad name': 'x' } }],
    ['an object header value', { url: 'http://x/', headers: { 'x-a': {} } }],
    ['an object body', { url: 'http://x/', method: 'POST', body: { a: 1 } }],
    ['a GET with a body', { url: 'http://x/', body: 'x' }],
    ['a huge url', { url: `http://x/${'a'.repeat(9000)}` }],
  ])('throws TypeError for %s', async (_label, request) => {
    const handler = createFetchCapability({ allowedOrigins: ['http://x'] }) as unknown as FetchHandler;
    const err = await rejectionOf(handler(request as FetchRequest));
    expect(err).toBeInstanceOf(TypeError);
    expect(err.message).toMatch(/^fetch: /);
  });
});

describe('fetch inside runSandbox', () => {
  it('fetches JSON from an allowed origin', async () => {
    const result = await runSandbox(
      `const res = await fetch({ url: ${JSON.stringify(`${MAIN}/ok`)} });
       return { status: res.status, type: res.headers["content-type"], data: JSON.parse(res.body) };`,
      { capabilities: { fetch: cap() } },
    );
    expect(result.success).toBe(true);
    expect((result as { output: unknown }).output).toEqual({
      status: 200,
      type: 'application/json',
      data: { ok: true, n: 42 },
    });
  });

  it('posts a body and follows an allowed redirect', async () => {
    const result = await runSandbox(
      `const res = await fetch({ url: ${JSON.stringify(`${MAIN}/307`)}, method: "POST",
                                 headers: { "content-type": "text/plain" }, body: "from the sandbox" });
       return JSON.parse(res.body).body;`,
      { capabilities: { fetch: cap() } },
    );
    expect(result.success).toBe(true);
    expect((result as { output: unknown }).output).toBe('from the sandbox');
  });

  it('turns refusals into catchable Errors with the same name and message', async () => {
    const result = await runSandbox(
      `const out = [];
       for (const url of ${JSON.stringify([`${OUTSIDE}/secret`, `${MAIN}/redirect-out`, 'file:///etc/passwd'])}) {
         try { await fetch({ url }); out.push("fetched"); }
         catch (e) { out.push({ isError: e instanceof Error, name: e.name, message: e.message }); }
       }
       try { await fetch({ url: 42 }); } catch (e) { out.push({ isError: e instanceof Error, name: e.name, message: e.message }); }
       return out;`,
      { capabilities: { fetch: cap() } },
    );
    expect(result.success).toBe(true);
    const out = (result as { output: Array<Record<string, unknown>> }).output;
    expect(out[0]).toEqual({
      isError: true,
      name: 'Error',
      message: `fetch: origin ${OUTSIDE} is not in the allow-list`,
    });
    expect(out[1]).toEqual({
      isError: true,
      name: 'Error',
      message: 'fetch: refused a redirect to an origin that is not in the allow-list',
    });
    expect(out[2]).toMatchObject({ isError: true, name: 'Error' });
    expect(out[3]).toMatchObject({ isError: true, name: 'TypeError' });
    expect(hits.outside).toBe(0);
  });

  it('a fetch that times out fails inside the run, not the host', async () => {
    const result = await runSandbox(
      `try { await fetch({ url: ${JSON.stringify(`${MAIN}/slow`)} }); return "answered"; }
       catch (e) { return e.message; }`,
      { capabilities: { fetch: cap({ timeoutMs: 200 }) }, timeoutMs: 3000 },
    );
    expect(result.success).toBe(true);
    expect((result as { output: unknown }).output).toBe('fetch: request timed out after 200 ms');
  });
});
