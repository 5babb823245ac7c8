// Attack review of `isolet mcp --http`: whoever reaches the port, without the token, must
// not be able to lock out a client that has it. Raw sockets that never authenticate (idle,
// or half a header) from one other loopback address, from the client's own address, and
// from many addresses, against a real server child process; the client is the official
// SDK's. The server's descriptors are read from /proc.

import { afterEach, describe, expect, it } from 'vitest';
import * as net from 'node:net';
import { ISOLATIONS, TOKEN, call, connect, descriptorsOf, settle, sleep, startServer, type Server } from './support/mcp-server';

const { UNAUTHENTICATED_PER_ADDRESS, UNAUTHENTICATED_TOTAL, UNAUTHENTICATED_MS } = require('../lib/mcp-http');

const FLOOD = 500;
/** Descriptors the server may open besides the attack's: the client's sockets, a host's pipes. */
const SLACK = 40;

type Flood = { sockets: net.Socket[]; closed: () => number };

/** `count` sockets to the server (process `pid`), the i-th from `from(i)`; the odd ones send half a request header, the rest nothing. */
async function flood(pid: number, port: number, count: number, from: (i: number) => string): Promise<Flood> {
  let closed = 0;
  const sockets = await Promise.all(
    Array.from(
      { length: count },
      (_, i) =>
        new Promise<net.Socket>((resolve) => {
          const socket = net.connect({ host: '127.0.0.1', port, localAddress: from(i) });
          socket.on('error', () => {});
          socket.once('close', () => {
            closed++;
            resolve(socket);
          });
          socket.once('connect', () => {
            if (i % 2 === 1) socket.write(`POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\ncontent-type: appl`);
            resolve(socket);
          });
        }),
    ),
  );
  // The server has taken every connection from its backlog once neither its descriptors
  // nor the sockets it closes move any more.
  const state = () => `${descriptorsOf(pid)} ${closed}`;
  let last = '';
  for (let now = state(); now !== last; now = state()) {
    last = now;
    await sleep(200);
  }
  return { sockets, closed: () => closed };
}

/** An SDK client with the token initializes, lists the tools and runs `1 + 1`; how long that took. */
async function served(url: string): Promise<number> {
  const started = performance.now();
  const client = await connect(url);
  try {
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual(['run_code']);
    expect((await call(client, '1 + 1')).content[0].text).toBe('2');
    return performance.now() - started;
  } finally {
    await client.close();
  }
}

describe('isolet mcp --http: sockets without the token lock nobody out', () => {
  let server: Server | undefined;
  afterEach(() => server?.stop());

  for (const isolation of ISOLATIONS) {
    it(`${FLOOD} silent or half-header sockets from another address, from the client's own address, and from 20 addresses: a client with the token is served at once, descriptors stay bounded, and each socket is closed within its deadline (${isolation})`, async () => {
      server = await startServer({ isolation, timeoutMs: 5000 });
      const pid = server.child.pid!;
      await served(server.url);
      const base = descriptorsOf(pid);

      // One other address: past its cap its oldest sockets go.
      const other = await flood(pid, server.port, FLOOD, () => '127.0.0.2');
      expect(await served(server.url)).toBeLessThan(5000);
      expect(descriptorsOf(pid)).toBeLessThanOrEqual(base + UNAUTHENTICATED_PER_ADDRESS + SLACK);

      // The client's own address: the flood's oldest sockets make way for the client's
      // (the other address's are still within their deadline).
      const own = await flood(pid, server.port, FLOOD, () => '127.0.0.1');
      expect(await served(server.url)).toBeLessThan(5000);
      expect(descriptorsOf(pid)).toBeLessThanOrEqual(base + 2 * UNAUTHENTICATED_PER_ADDRESS + SLACK);

      // Twenty addresses, each under its own cap: past the total the oldest sockets go.
      const many = await flood(pid, server.port, FLOOD, (i) => `127.0.0.${2 + (i % 20)}`);
      expect(await served(server.url)).toBeLessThan(5000);
      expect(descriptorsOf(pid)).toBeLessThanOrEqual(base + UNAUTHENTICATED_TOTAL + SLACK);

      // None of them outlives its deadline, and the server is back to where it started.
      const all = [other, own, many];
      const closed = await settle(() => all.reduce((n, f) => n + f.closed(), 0), (n) => n === 3 * FLOOD, UNAUTHENTICATED_MS + 5000);
      expect(closed).toBe(3 * FLOOD);
      expect(await settle(() => descriptorsOf(pid), (n) => n <= base, 5000)).toBeLessThanOrEqual(base);
    });

    it(`authenticated sockets are capped by the sessions they can serve: past the cap a request gets 503 with retry-after (${isolation})`, async () => {
      // maxSessions 1 and maxRunsPerSession 1: 1 x (1 + 2) + 16 = 19 sockets.
      server = await startServer({ isolation, timeoutMs: 5000 }, ['--max-sessions', '1', '--max-runs-per-session', '1']);
      const cap = 19;
      const { port } = server;
      const ask = (socket: net.Socket) =>
        new Promise<string>((resolve) => {
          let text = '';
          const onData = (d: Buffer) => {
            text += d.toString('latin1');
            const head = text.indexOf('\r\n\r\n');
            const length = /content-length: (\d+)/i.exec(text);
            const whole = length ? text.length >= head + 4 + Number(length[1]) : text.endsWith('\r\n0\r\n\r\n');
            if (head >= 0 && whole) {
              socket.off('data', onData);
              resolve(text);
            }
          };
          socket.on('data', onData);
          // A socket the server closes answers what it got (nothing, for a refused one).
          socket.once('close', () => resolve(text));
          socket.write(`GET /mcp HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\nauthorization: Bearer ${TOKEN}\r\naccept: text/event-stream\r\n\r\n`);
        });
      const open = () =>
        new Promise<net.Socket>((resolve) => {
          const socket = net.connect({ host: '127.0.0.1', port }, () => resolve(socket));
          socket.on('error', () => {});
        });
      const held = await Promise.all(Array.from({ length: cap }, open));
      // Each is authenticated and kept alive (a GET without a session is a 400, with the token accepted).
      for (const answer of await Promise.all(held.map(ask))) expect(answer).toMatch(/^HTTP\/1\.1 400 /);
      const extra = await open();
      const refused = await ask(extra);
      expect(refused).toMatch(/^HTTP\/1\.1 503 /);
      expect(refused).toMatch(/\r\nretry-after: 5\r\n/i);
      expect(refused).toContain('maxSessions');
      // One place freed, the next client is accepted.
      held.pop()!.destroy();
      await sleep(100);
      const next = await open();
      expect(await ask(next)).toMatch(/^HTTP\/1\.1 400 /);
      for (const s of [...held, extra, next]) s.destroy();
    });
  }
});
