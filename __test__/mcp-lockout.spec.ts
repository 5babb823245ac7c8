// `isolet mcp --http`: clients that vanish without ending their session (the SDKs' close()
// sends no DELETE) must not lock anyone out. What a client holds (2025 sessions, 2026-07-28
// sandbox handles) is bounded per client (one token from one address) below the total, a
// client at its bound gives up its own least recently used idle one, and a full server
// answers 503 with a retry hint. Real servers from the programmatic API, official clients
// (SDK 1.x and v2), both isolation modes.

import { describe, expect, it } from 'vitest';
import * as http from 'node:http';
import { ISOLATIONS, TOKEN, settle } from './support/mcp-server';
import { KINDS, MODERN, call, httpClient, sessionIdOf, type AnyClient, type Kind } from './support/mcp-clients';

const { serveHttp, mcpSettings } = require('../lib/mcp');

const VANISHING = 100;
/** Of them, these open a sandbox under 2026-07-28 first (a handle); the others only connect (a 2025 session). */
const WITH_SANDBOX = 20;
const SANDBOX_META_KEY = 'isolet/sandbox';

/** A raw `initialize` from `localAddress`: status, headers and the JSON-RPC answer. */
function initialize(port: number, localAddress: string): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  const body = JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } });
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, path: '/mcp', method: 'POST', localAddress, agent: false, headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${TOKEN}` } },
      (res) => {
        let text = '';
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** A well-behaved client: lists the tool, runs 1 + 1, keeps state across three calls, then ends its session. */
async function wellBehaved(url: string, kind: Kind, localAddress?: string): Promise<void> {
  const client = await httpClient(kind, url, TOKEN, localAddress);
  try {
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual(['run_code']);
    const first = await call(client, { code: 'var n = 1 + 1; n' });
    expect(first.content[0].text).toBe('2');
    const more = kind.revision === MODERN ? { sandbox: first._meta?.[SANDBOX_META_KEY] } : {};
    expect((await call(client, { code: 'n += 40; n', ...more })).content[0].text).toBe('42');
    expect((await call(client, { code: 'n', ...more })).content[0].text).toBe('42');
  } finally {
    if (kind.revision !== MODERN) await (client as any).transport.terminateSession?.();
    await client.close();
  }
}

for (const isolation of ISOLATIONS) {
  describe(`isolet mcp --http: clients that vanish lock nobody out (${isolation})`, () => {
    it(`${VANISHING} clients connect and vanish without a DELETE (${WITH_SANDBOX} after opening a sandbox under 2026-07-28); a well-behaved client, from the same address or another, is served at once`, async () => {
      const settings = mcpSettings({ stateful: true, timeoutMs: 5000, memoryLimitMb: 32, isolation, engine: { maxConcurrentIsolates: 2, warmPoolSize: 0, processes: 1 } });
      // The defaults: 16 sessions in all, 4 per client, 60 s before an idle one expires
      // (longer than this test: expiry is not what frees the places).
      const served = await serveHttp(settings, { token: TOKEN });
      try {
        const kinds2025 = KINDS.filter((k) => k.revision !== MODERN);
        for (let i = 0; i < VANISHING; i++) {
          const kind: Kind = i < WITH_SANDBOX ? { sdk: 'v2', revision: MODERN } : kinds2025[i % kinds2025.length];
          const client: AnyClient = await httpClient(kind, served.url, TOKEN);
          if (kind.revision === MODERN) expect((await call(client, { code: '"opened"' })).content[0].text).toBe('"opened"');
          else expect(sessionIdOf(client)).toMatch(/^[0-9a-f-]{36}$/);
          await client.close(); // no DELETE: the client just goes
          // One client (this token from 127.0.0.1) never holds more than its bound.
          expect(served.sessionCount() + served.handleCount()).toBeLessThanOrEqual(4);
        }
        // Served at once (no 503, no waiting for an idle timeout), in either era.
        await wellBehaved(served.url, { sdk: 'v1', revision: '2025-11-25' });
        await wellBehaved(served.url, { sdk: 'v2', revision: MODERN });
        await wellBehaved(served.url, { sdk: 'v2', revision: '2025-06-18' }, '127.0.0.2');
        await wellBehaved(served.url, { sdk: 'v2', revision: MODERN }, '127.0.0.2');
        // The vanished clients' sandboxes were closed with the places they gave up.
        expect(await settle(() => served.engine.stats().sandboxes.open, (open: number) => open <= 4, 10_000)).toBeLessThanOrEqual(4);
      } finally {
        await served.close();
      }
    }, 120_000);

    it('a sandbox handle without a call for sessionIdleMs expires: its sandbox is closed and the handle refused', async () => {
      const settings = mcpSettings({ stateful: true, timeoutMs: 5000, memoryLimitMb: 32, isolation, engine: { maxConcurrentIsolates: 1, warmPoolSize: 0, processes: 1 } });
      const served = await serveHttp(settings, { token: TOKEN, sessionIdleMs: 2000 });
      const client = await httpClient({ sdk: 'v2', revision: MODERN }, served.url, TOKEN);
      try {
        const first = await call(client, { code: 'var kept = "yes"; kept' });
        const sandbox = first._meta?.[SANDBOX_META_KEY] as string;
        // A call within the idle time finds it.
        expect((await call(client, { code: 'kept', sandbox })).content[0].text).toBe('"yes"');
        expect(served.handleCount()).toBe(1);
        expect(await settle(() => served.handleCount(), (n: number) => n === 0, 10_000)).toBe(0);
        expect(await settle(() => served.engine.stats().sandboxes.open, (n: number) => n === 0, 10_000)).toBe(0);
        const expired = await call(client, { code: 'kept', sandbox });
        expect(expired.isError).toBe(true);
        expect(expired.content[0].text).toContain(`sandbox "${sandbox}" is not an open sandbox of this client: it was never opened, has expired (2000 ms without a call)`);
      } finally {
        await client.close();
        await served.close();
      }
    });

    it('a session answers only the client that opened it; a 2026-07-28 client has at most maxRunsPerSession calls in flight', async () => {
      const settings = mcpSettings({ timeoutMs: 2000, memoryLimitMb: 32, isolation, engine: { maxConcurrentIsolates: 2, warmPoolSize: 0, processes: 1 } });
      const served = await serveHttp(settings, { token: TOKEN, maxRunsPerSession: 1 });
      const port = Number(new URL(served.url).port);
      const session = await httpClient({ sdk: 'v1', revision: '2025-11-25' }, served.url, TOKEN);
      const modern = await httpClient({ sdk: 'v2', revision: MODERN }, served.url, TOKEN);
      try {
        // The same session id, the same token, another address: as unknown as a made-up id.
        const ping = JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'ping' });
        const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${TOKEN}`, 'mcp-session-id': sessionIdOf(session)!, 'mcp-protocol-version': '2025-11-25' };
        const post = (localAddress: string) =>
          new Promise<number>((resolve, reject) => {
            const req = http.request({ host: '127.0.0.1', port, path: '/mcp', method: 'POST', localAddress, agent: false, headers }, (res) => {
              res.resume();
              res.on('end', () => resolve(res.statusCode ?? 0));
            });
            req.on('error', reject);
            req.end(ping);
          });
        expect(await post('127.0.0.2')).toBe(404);
        expect(await post('127.0.0.1')).toBe(200);
        // One call in flight per 2026-07-28 client: a second one meanwhile is a tool error.
        // A run that only its time limit ends, so that the second call surely finds it in flight.
        const long = call(modern, { code: 'while (true) {}' });
        await settle(() => served.runsInFlight(), (n: number) => n === 1, 10_000);
        const second = await call(modern, { code: '"second"' });
        expect(second.isError).toBe(true);
        expect(second.content[0].text).toContain('this client already has 1 run_code calls in flight (maxRunsPerSession)');
        expect((await long).content[0].text).toMatch(/^SandboxTimeoutError \[ERR_ISOLET_TIMEOUT\]/);
        expect((await call(modern, { code: '"after"' })).content[0].text).toBe('"after"');
      } finally {
        await Promise.allSettled([session.close(), modern.close()]);
        await served.close();
      }
    });

    it('a full server answers 503 with Retry-After; a client at its own bound gives up its least recently used session; a quiet session makes room', async () => {
      const settings = mcpSettings({ timeoutMs: 5000, memoryLimitMb: 32, isolation, engine: { maxConcurrentIsolates: 1, warmPoolSize: 0, processes: 1 } });
      const served = await serveHttp(settings, { token: TOKEN, maxSessions: 4, maxSessionsPerClient: 2 });
      const port = Number(new URL(served.url).port);
      const clients: AnyClient[] = [];
      const connect = async (address: string) => {
        const c = await httpClient({ sdk: 'v1', revision: '2025-11-25' }, served.url, TOKEN, address);
        clients.push(c);
        return c;
      };
      try {
        // Two clients (addresses) at their bound of 2 fill the server; each session keeps a
        // stream open (the SDK's GET stream): its client is there.
        const [a1, a2, b1, b2] = [await connect('127.0.0.1'), await connect('127.0.0.1'), await connect('127.0.0.2'), await connect('127.0.0.2')];
        for (const c of [a1, a2, b1, b2]) expect((await call(c, { code: '1 + 1' })).content[0].text).toBe('2');
        expect(served.sessionCount()).toBe(4);
        // A third client finds no quiet session to take: 503, with when to retry.
        const refused = await initialize(port, '127.0.0.3');
        expect(refused.status).toBe(503);
        const retryAfter = Number(refused.headers['retry-after']);
        expect(retryAfter).toBeGreaterThanOrEqual(1);
        const answer = JSON.parse(refused.body);
        expect(answer).toMatchObject({ jsonrpc: '2.0', id: 7, error: { code: -32000, data: { retryAfterMs: expect.any(Number) } } });
        expect(answer.error.message).toMatch(/^Server busy: 4 sessions or sandboxes open \(maxSessions\), none of them quiet; retry in \d+ s$/);
        // A client at its own bound opens another: its least recently used session goes, nobody else's.
        const a3 = await connect('127.0.0.1');
        expect((await call(a3, { code: '"a3"' })).content[0].text).toBe('"a3"');
        await expect(call(a1, { code: '1' })).rejects.toThrow();
        expect((await call(b1, { code: '"b1 still here"' })).content[0].text).toBe('"b1 still here"');
        // A client that goes away without a DELETE leaves a quiet session: a newcomer takes its place at once.
        // (Within the moment the server takes to see its stream close, far below the 60 s idle timeout.)
        await b2.close();
        let taken = await initialize(port, '127.0.0.3');
        for (let i = 0; i < 100 && taken.status !== 200; i++) {
          await new Promise((r) => setTimeout(r, 100));
          taken = await initialize(port, '127.0.0.3');
        }
        expect(taken.status).toBe(200);
        expect(JSON.parse(taken.body.replace(/^[\s\S]*?data: /, '').trim())).toMatchObject({ id: 7, result: { protocolVersion: '2025-11-25' } });
        expect(served.sessionCount()).toBe(4);
      } finally {
        await Promise.allSettled(clients.map((c) => c.close()));
        await served.close();
      }
    });
  });
}
