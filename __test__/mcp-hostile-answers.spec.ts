// Attack review of `isolet mcp --http`: a client that sends calls with big results and
// never reads the answers must not make the server hold copies of them, stall its event
// loop, or keep its session forever. A raw-HTTP attacker against a real server child
// process, whose memory is read from /proc; well-behaved clients use the official SDK.

import { describe, expect, it } from 'vitest';
import * as http from 'node:http';
import * as net from 'node:net';
import { ISOLATIONS, TOKEN, call, connect, descriptorsOf, memoryOf, settle, sleep, startServer, type Server } from './support/mcp-server';

const { READ_STALL_MS } = require('../lib/mcp-http');

const CALLS = 4;
// 16 MB of characters JSON escapes: 32 MB as the result's JSON text, 48 MB on the wire.
const BIG_RESULT = "'\"'.repeat(16_000_000)";
/**
 * Growth of the server's peak RSS allowed: the four runs' results (64 MB), a piece of each
 * answer in flight, and margin for the collector (measured 75-105 MB; 600 before answers
 * were written with backpressure).
 */
const MAX_GROWTH_MB = 200;

const HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18', authorization: `Bearer ${TOKEN}` };

/** A POST that reads its answer; resolves with the answer's headers. */
function post(port: number, body: object, sessionId?: string): Promise<http.IncomingHttpHeaders> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { ...HEADERS, ...(sessionId ? { 'mcp-session-id': sessionId } : {}) };
    const req = http.request({ host: '127.0.0.1', port, path: '/mcp', method: 'POST', headers, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.headers));
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

/**
 * A POST whose answer is never read: the socket is paused for good. With a session id, a
 * 2025 request; without, a 2026-07-28 one (its `_meta` and headers; no session).
 */
function postUnread(port: number, body: object, sessionId?: string): net.Socket {
  const payload = Buffer.from(JSON.stringify(body));
  const socket = net.connect({ host: '127.0.0.1', port });
  socket.on('error', () => {});
  socket.pause();
  const era =
    sessionId === undefined
      ? { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': 'run_code' }
      : { 'mcp-session-id': sessionId };
  const head = Object.entries({ ...HEADERS, ...era, host: `127.0.0.1:${port}`, 'content-length': String(payload.length) })
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  socket.write(`POST /mcp HTTP/1.1\r\n${head}\r\n`);
  socket.write(payload);
  return socket;
}

async function rawSession(port: number): Promise<string> {
  const init = await post(port, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'never-reads', version: '1' } } });
  const sessionId = init['mcp-session-id'] as string;
  await post(port, { jsonrpc: '2.0', method: 'notifications/initialized' }, sessionId);
  return sessionId;
}

// Concurrent: each test has a server child of its own, and most of each test's time is
// READ_STALL_MS of waiting (run one after another, the file took 47 s).
describe.concurrent('isolet mcp --http: a client that does not read its answers', () => {
  /** Starts a server, runs `test` with it, stops it. */
  async function withServer(options: Parameters<typeof startServer>[0], test: (server: Server) => Promise<void>) {
    const server = await startServer(options);
    try {
      await test(server);
    } finally {
      server.stop();
    }
  }

  for (const isolation of ISOLATIONS) {
    it(`${CALLS} unread answers of 16 MB cost the server about their results, not copies of them; another client is served meanwhile, and the session ends after READ_STALL_MS (${isolation})`, async () => {
      await withServer({ isolation, timeoutMs: 20_000 }, async (server) => {
        const pid = server.child.pid!;
        const client = await connect(server.url);
        expect((await call(client, '1 + 1')).content[0].text).toBe('2');
        const sessionId = await rawSession(server.port);
        await sleep(200);
        const base = memoryOf(pid);
        const fds = descriptorsOf(pid);

        const unread = Array.from({ length: CALLS }, (_, i) =>
          postUnread(server.port, { jsonrpc: '2.0', id: 10 + i, method: 'tools/call', params: { name: 'run_code', arguments: { code: BIG_RESULT } } }, sessionId),
        );
        // While the answers wait, a well-behaved client is served (each call well within its limits).
        const answered: number[] = [];
        const ended = () => server.stderr().includes(`session ${sessionId} closed: its client read nothing of its answers for ${READ_STALL_MS} ms`);
        let peak = base.peakMb;
        const deadline = Date.now() + READ_STALL_MS + 10_000;
        while (!ended() && Date.now() < deadline) {
          const started = performance.now();
          expect((await call(client, '6 * 7')).content[0].text).toBe('42');
          answered.push(performance.now() - started);
          peak = Math.max(peak, memoryOf(pid).peakMb);
          expect(peak - base.rssMb).toBeLessThan(MAX_GROWTH_MB);
          await sleep(50);
        }
        expect(ended()).toBe(true);
        expect(answered.length).toBeGreaterThan(5);
        expect(Math.max(...answered)).toBeLessThan(5000);
        // The ended session's sockets are gone (its attacker still holds its own ends).
        expect(await settle(() => descriptorsOf(pid), (n) => n <= fds, 5000)).toBeLessThanOrEqual(fds);
        for (const socket of unread) socket.destroy();
        await client.close();
      });
    }, 60_000);

    it(`2026-07-28, no session: ${CALLS} unread answers of 16 MB cost the server about their results; another client is served meanwhile, and each response is closed after READ_STALL_MS (${isolation})`, async () => {
      await withServer({ isolation, timeoutMs: 20_000 }, async (server) => {
        const pid = server.child.pid!;
        const client = await connect(server.url);
        expect((await call(client, '1 + 1')).content[0].text).toBe('2');
        await sleep(200);
        const base = memoryOf(pid);
        const fds = descriptorsOf(pid);
        const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };
        const unread = Array.from({ length: CALLS }, (_, i) =>
          postUnread(server.port, { jsonrpc: '2.0', id: 10 + i, method: 'tools/call', params: { name: 'run_code', arguments: { code: BIG_RESULT }, _meta: meta } }),
        );
        const closed = () => server.stderr().split(`a client read nothing of its answer for ${READ_STALL_MS} ms: its response is closed`).length - 1;
        let peak = base.peakMb;
        const deadline = Date.now() + READ_STALL_MS + 15_000;
        let served = 0;
        while (closed() < CALLS && Date.now() < deadline) {
          expect((await call(client, '6 * 7')).content[0].text).toBe('42');
          served++;
          peak = Math.max(peak, memoryOf(pid).peakMb);
          expect(peak - base.rssMb).toBeLessThan(MAX_GROWTH_MB);
          await sleep(50);
        }
        expect(closed()).toBe(CALLS);
        expect(served).toBeGreaterThan(5);
        expect(await settle(() => descriptorsOf(pid), (n) => n <= fds, 5000)).toBeLessThanOrEqual(fds);
        for (const socket of unread) socket.destroy();
        await client.close();
      });
    }, 60_000);

    it(`a big result reaches the SDK client whole and exactly: strings escaped piece by piece (surrogate pairs across pieces), objects as compact JSON, stateless and stateful (${isolation})`, async () => {
      // 6 characters a round, 2.4 M in all: a piece boundary (65,536) falls inside the emoji.
      const text = '"\u0001é😀x'.repeat(400_000);
      const rows = Array.from({ length: 5_000 }, (_, i) => ({ i, s: '😀"\\' }));
      for (const stateful of [false, true]) {
        await withServer({ isolation, timeoutMs: 20_000, ...(stateful ? { stateful: true } : {}) }, async (server) => {
          const client = await connect(server.url);
          const [big, object, small] = await Promise.all([
            call(client, `'"\\u0001é😀x'.repeat(400_000)`),
            call(client, `Array.from({ length: 5_000 }, (_, i) => ({ i, s: '😀"\\\\' }))`),
            call(client, '({ a: [1, 2] })'),
          ]);
          expect(big.content[0].text === JSON.stringify(text)).toBe(true);
          expect(object.content[0].text === JSON.stringify(rows)).toBe(true);
          // Small results keep their indentation.
          expect(small.content[0].text).toBe(JSON.stringify({ a: [1, 2] }, null, 2));
          await client.close();
        });
      }
    });
  }
});
