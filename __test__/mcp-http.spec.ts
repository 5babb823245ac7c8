// `isolet mcp --http`: real servers on 127.0.0.1 (child processes, and one in-process from
// the programmatic API) driven by the official SDK's own StreamableHTTPClientTransport.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { runChild } from './support/spawn';

const ROOT = path.resolve(__dirname, '..');
const BIN = path.join(ROOT, 'bin', 'isolet.js');
const TOKEN = 'test-token-4f1c9a';

type Content = Array<{ type: string; text: string }>;
type Server = { child: ChildProcess; url: string; stderr: () => string; exited: Promise<number | null> };

/** Starts `isolet mcp --http 127.0.0.1:0 ...args` and resolves once it prints its URL. */
function startServer(args: string[], env: Record<string, string> = {}): Promise<Server> {
  const child = spawn(process.execPath, [BIN, 'mcp', '--http', '127.0.0.1:0', ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    child.stderr!.on('data', (d) => {
      stderr += d;
      const m = /serving run_code on (\S+)/.exec(stderr);
      if (m) resolve({ child, url: m[1], stderr: () => stderr, exited });
    });
    exited.then((code) => reject(new Error(`server exited ${code}: ${stderr}`)));
  });
}

async function connect(url: string, token: string | null = TOKEN, logs?: Array<{ level: string; data: unknown }>): Promise<Client> {
  const client = new Client({ name: 'isolet-http-test', version: '1.0.0' });
  if (logs) client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void logs.push(n.params as any));
  const headers: Record<string, string> = token === null ? {} : { authorization: `Bearer ${token}` };
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  return client;
}

async function call(client: Client, code: string, extra: Record<string, unknown> = {}, options: object = {}): Promise<{ isError?: boolean; content: Content }> {
  return (await client.callTool({ name: 'run_code', arguments: { code, ...extra } }, undefined, options)) as any;
}

/** A raw request, for what the SDK client never sends (a foreign Host header, a huge body). */
function raw(url: string, options: { method?: string; headers?: Record<string, string>; body?: string }): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: u.hostname, port: u.port, path: u.pathname, method: options.method ?? 'POST', headers: options.headers },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

const INIT = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
});
const JSON_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

/** Resolves when `logs` holds an entry whose data is `text`. */
async function logged(logs: Array<{ data: unknown }>, text: string): Promise<void> {
  while (!logs.some((l) => l.data === text)) await new Promise((r) => setTimeout(r, 20));
}

describe('isolet mcp --http with a token', () => {
  let server: Server;
  const clients: Client[] = [];

  beforeAll(async () => {
    server = await startServer(['--timeout-ms', '5000', '--memory-limit-mb', '32', '--token-env', 'ISOLET_TEST_TOKEN'], { ISOLET_TEST_TOKEN: TOKEN });
  });

  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => {});
    server?.child.kill('SIGKILL');
  });

  it('lists run_code and runs good code, a throw, a timeout and a heap bomb, serving on after each', async () => {
    const client = await connect(server.url);
    clients.push(client);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual(['run_code']);
    expect(tools[0].description).toContain('Limits per run: 5000 ms wall-clock, 5000 ms CPU, 32 MB heap.');

    const good = await call(client, 'console.log("working"); const x = 20; x + 22');
    expect(good.isError).toBeFalsy();
    expect(good.content.map((c) => c.text)).toEqual(['42', 'console:\nworking']);
    const thrown = await call(client, 'const a = 1;\nthrow new TypeError("bad input")');
    expect(thrown.isError).toBe(true);
    expect(thrown.content[0].text).toMatch(/^SandboxRuntimeError \[ERR_ISOLET_RUNTIME\]: .*\nTypeError: bad input\n\s+at sandbox\.js:2:7/s);
    const slow = await call(client, 'while (true) {}');
    expect(slow.content[0].text).toMatch(/^SandboxTimeoutError \[ERR_ISOLET_TIMEOUT\]: .*5000 ms/);
    const bomb = await call(client, 'const a = []; while (true) a.push(new Array(2 ** 16).fill(a.length + 0.5));');
    expect(bomb.content[0].text).toMatch(/^SandboxOOMError \[ERR_ISOLET_OOM\]: .*32 MB/);
    expect((await call(client, '"still here"')).content[0].text).toBe('"still here"');
    expect(await client.ping()).toEqual({});
  });

  it('serves two clients at once, each in its own session', async () => {
    const [a, b] = await Promise.all([connect(server.url), connect(server.url)]);
    clients.push(a, b);
    const results = await Promise.all([1, 2, 3].flatMap((n) => [call(a, `${n} * 2`), call(b, `return ${n} * 3`)]));
    expect(results.map((r) => r.content[0].text)).toEqual(['2', '3', '4', '6', '6', '9']);
    const ids = [a, b].map((c) => (c as any)._transport.sessionId);
    expect(ids[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(ids[0]).not.toBe(ids[1]);
  });

  it('sends console output as log notifications at the level the client set, and progress when asked', async () => {
    const logs: Array<{ level: string; data: unknown }> = [];
    const client = await connect(server.url, TOKEN, logs);
    clients.push(client);
    const code = 'console.debug("d"); console.log("l"); console.warn("w"); console.error("e"); "ok"';
    // No level set yet: every level reaches the client.
    await call(client, code);
    expect(logs.map((l) => [l.level, l.data])).toEqual([['debug', 'd'], ['info', 'l'], ['warning', 'w'], ['error', 'e']]);
    logs.length = 0;
    await client.setLoggingLevel('warning');
    const progress: Array<{ progress: number; total?: number }> = [];
    const out = await call(client, code, {}, { onprogress: (p: any) => progress.push(p) });
    expect(logs.map((l) => [l.level, l.data])).toEqual([['warning', 'w'], ['error', 'e']]);
    // The result content keeps the whole console output.
    expect(out.content[1].text).toBe('console:\n[debug] d\nl\n[warn] w\n[error] e');
    expect(progress[0]).toMatchObject({ progress: 0, total: 5000 });
  });

  it('refuses a missing or wrong token with 401', async () => {
    await expect(connect(server.url, null)).rejects.toMatchObject({ code: 401 });
    await expect(connect(server.url, 'not-the-token')).rejects.toMatchObject({ code: 401 });
    const missing = await raw(server.url, { headers: JSON_HEADERS, body: INIT });
    expect(missing.status).toBe(401);
    expect(missing.headers['www-authenticate']).toBe('Bearer realm="isolet"');
    const wrong = await raw(server.url, { headers: { ...JSON_HEADERS, authorization: 'Bearer nope' }, body: INIT });
    expect(wrong.headers['www-authenticate']).toBe('Bearer realm="isolet", error="invalid_token"');
  });

  it('refuses a foreign Host or Origin header before anything else (DNS rebinding)', async () => {
    const port = new URL(server.url).port;
    const auth = { ...JSON_HEADERS, authorization: `Bearer ${TOKEN}` };
    const foreignHost = await raw(server.url, { headers: { ...auth, host: `evil.example.com:${port}` }, body: INIT });
    expect(foreignHost.status).toBe(403);
    expect(JSON.parse(foreignHost.body).error.message).toContain('Host');
    const foreignOrigin = await raw(server.url, { headers: { ...auth, origin: 'http://evil.example.com' }, body: INIT });
    expect(foreignOrigin.status).toBe(403);
    // The loopback names at the bound port pass.
    const local = await raw(server.url, { headers: { ...auth, host: `localhost:${port}`, origin: `http://localhost:${port}` }, body: INIT });
    expect(local.status).toBe(200);
  });
});

describe('isolet mcp --http bounds what clients can make it hold', () => {
  let server: Server;

  beforeAll(async () => {
    server = await startServer(['--max-sessions', '2', '--max-runs-per-session', '1', '--max-body-bytes', '4000', '--session-idle-ms', '1000', '--timeout-ms', '20000']);
  });

  afterAll(() => {
    server?.child.kill('SIGKILL');
  });

  it('caps sessions (503), body size (413) and runs per session; idle sessions close and free their place', async () => {
    const big = await raw(server.url, { headers: JSON_HEADERS, body: 'x'.repeat(5000) });
    expect(big.status).toBe(413);
    expect(big.body).toContain('maxBodyBytes');

    // Two sessions, each kept busy by a run in flight (a session with a request open never idles).
    const logsA: Array<{ level: string; data: unknown }> = [];
    const logsB: Array<{ level: string; data: unknown }> = [];
    // Three seconds each, asleep: time enough for the checks below on a loaded machine.
    const long = (name: string) => `console.log("started"); Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 3000); "${name}"`;
    // Each run is sent as soon as its session exists, long before it could idle.
    const a = await connect(server.url, null, logsA);
    const runA = call(a, long('a'));
    const b = await connect(server.url, null, logsB);
    const runB = call(b, long('b'));
    await Promise.all([logged(logsA, 'started'), logged(logsB, 'started')]);
    await expect(connect(server.url, null)).rejects.toMatchObject({ code: 503 });
    // One run in flight per session: a second call while the first runs is an error result.
    const second = await call(a, '"second"');
    expect(second.isError).toBe(true);
    expect(second.content[0].text).toContain('maxRunsPerSession');
    expect([(await runA).content[0].text, (await runB).content[0].text]).toEqual(['"a"', '"b"']);

    // A session whose client went away without ending it (no request, no stream open) is
    // closed once idle (the server says so on stderr): its id is unknown afterwards, and a
    // new client fits in the place it held.
    const idleId = (b as any)._transport.sessionId;
    await b.close();
    while (!server.stderr().includes(`session ${idleId} closed: idle for 1000 ms`)) await new Promise((r) => setTimeout(r, 50));
    const gone = await raw(server.url, { headers: { ...JSON_HEADERS, 'mcp-session-id': idleId }, body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'ping' }) });
    expect(gone.status).toBe(404);
    const c = await connect(server.url, null);
    // A client that ends its session (DELETE) frees its place at once.
    const cId = (c as any)._transport.sessionId;
    await (c as any)._transport.terminateSession();
    const ended = await raw(server.url, { headers: { ...JSON_HEADERS, 'mcp-session-id': cId }, body: JSON.stringify({ jsonrpc: '2.0', id: 10, method: 'ping' }) });
    expect(ended.status).toBe(404);
    await Promise.all([a, c].map((x) => x.close()));
  });
});

describe('isolet mcp --http stops gracefully', () => {
  it('on SIGTERM, a run in flight finishes and answers, sessions close, the process exits 0', async () => {
    const server = await startServer(['--timeout-ms', '20000']);
    try {
      const logs: Array<{ level: string; data: unknown }> = [];
      const client = await connect(server.url, null, logs);
      const pending = call(client, 'console.log("started"); let n = 0; while (n < 5e8) n++; "finished after SIGTERM"');
      await logged(logs, 'started');
      server.child.kill('SIGTERM');
      const out = await pending;
      expect(out.isError).toBeFalsy();
      expect(out.content[0].text).toBe('"finished after SIGTERM"');
      expect(await server.exited).toBe(0);
      expect(server.stderr()).toContain('isolet mcp: SIGTERM: shutting down (1 runs in flight, 1 sessions)');
      expect(server.stderr()).toContain('isolet mcp: stopped');
      // Nothing listens any more.
      await expect(raw(server.url, { headers: JSON_HEADERS, body: INIT })).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    } finally {
      server.child.kill('SIGKILL');
    }
  });
});

describe('isolet mcp --http usage', () => {
  const mcp = (args: string[], env: Record<string, string> = {}) =>
    runChild(process.execPath, [BIN, 'mcp', ...args], { timeout: 20000, input: '', env: { ...process.env, ...env } });

  it('checks its flags in isolet-core and exits 2 naming them', async () => {
    const noHttp = await mcp(['--max-sessions', '3']);
    expect(noHttp.status).toBe(2);
    expect(noHttp.stderr).toContain('isolet mcp: --max-sessions needs --http [host:]port (isolet mcp speaks stdio without it)');
    const badAddress = await mcp(['--http', ':8080']);
    expect(badAddress.status).toBe(2);
    expect(badAddress.stderr).toContain("--http must be [host:]port with a port from 0 to 65535 (8080, 0.0.0.0:8080, [::1]:8080), got ':8080'");
    const typo = await mcp(['--http', '0', '--max-session', '3']);
    expect(typo.stderr).toContain('--max-session is not a known option of isolet mcp; did you mean --max-sessions?');
    const unset = await mcp(['--http', '0', '--token-env', 'ISOLET_TEST_UNSET_TOKEN']);
    expect(unset.status).toBe(2);
    expect(unset.stderr).toContain('isolet mcp: the environment variable ISOLET_TEST_UNSET_TOKEN (the bearer token) is not set');
    const help = await mcp(['--help']);
    expect(help.stdout).toContain('--http [host:]port');
    expect(help.stdout).toContain('--max-sessions <n>       MCP sessions (and stateful sandbox handles) open at once\n                           (default 16)');
    expect(help.stdout).toContain('--max-sessions-per-client <n>');
    expect(help.stdout).toContain('(default 60000)');
  });

  it('reads the token from a file, and the http settings from --config', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'isolet-mcp-http-'));
    try {
      fs.writeFileSync(path.join(dir, 'token'), `${TOKEN}\n`);
      fs.writeFileSync(path.join(dir, 'isolet.json'), JSON.stringify({ timeoutMs: 700, http: { listen: '127.0.0.1:0', tokenFile: path.join(dir, 'token') } }));
      const child = spawn(process.execPath, [BIN, 'mcp', '--config', path.join(dir, 'isolet.json')], { stdio: ['ignore', 'ignore', 'pipe'] });
      let stderr = '';
      const url = await new Promise<string>((resolve) =>
        child.stderr!.on('data', (d) => {
          stderr += d;
          const m = /serving run_code on (\S+)/.exec(stderr);
          if (m) resolve(m[1]);
        }),
      );
      try {
        await expect(connect(url, null)).rejects.toMatchObject({ code: 401 });
        const client = await connect(url, TOKEN);
        expect((await client.listTools()).tools[0].description).toContain('Limits per run: 700 ms');
        await client.close();
      } finally {
        child.kill('SIGKILL');
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('serveHttp (programmatic API)', () => {
  it('serves the same tool in-process, with options checked by isolet-core', async () => {
    const { serveHttp, mcpSettings } = require('../lib/mcp');
    const settings = mcpSettings({ timeoutMs: 2000, memoryLimitMb: 32, isolation: 'thread' });
    await expect(serveHttp(settings, { port: 1 })).rejects.toThrow('port is not a known option of serveHttp options; did you mean listen?');
    expect(() => mcpSettings({ timeout: 5 })).toThrow('timeout is not a known option of the config file; did you mean timeoutMs?');
    const served = await serveHttp(settings, { token: TOKEN, maxSessions: 4 });
    try {
      expect(served.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
      const client = await connect(served.url);
      expect((await call(client, 'const s = [1, 2, 3].reduce((a, b) => a + b)\ns * 7')).content[0].text).toBe('42');
      expect(served.sessionCount()).toBe(1);
      await client.close();
    } finally {
      await served.close();
    }
  });
});

describe('serveHttp with stateful: true', () => {
  it('keeps one sandbox per MCP session: its calls share state, other sessions see none, and it closes with the session', async () => {
    const { serveHttp, mcpSettings } = require('../lib/mcp');
    const settings = mcpSettings({ stateful: true, idleTimeoutMs: 60_000, timeoutMs: 2000, memoryLimitMb: 32, isolation: 'thread', engine: { maxConcurrentIsolates: 4 } });
    const served = await serveHttp(settings, { token: TOKEN, maxSessions: 4 });
    try {
      const a = await connect(served.url);
      const b = await connect(served.url);
      expect((await call(a, 'var who = "a"; let n = 1; n')).content[0].text).toBe('1');
      expect((await call(b, 'typeof who')).content[0].text).toBe('"undefined"');
      expect((await call(b, 'var who = "b"; who')).content[0].text).toBe('"b"');
      expect((await call(a, 'n += await Promise.resolve(41); [who, n]')).content[0].text).toBe(JSON.stringify(['a', 42], null, 2));
      expect(served.engine.stats().sandboxes.open).toBe(2);
      // The client ends its session (DELETE); the server closes that session's sandbox.
      await (a.transport as StreamableHTTPClientTransport).terminateSession();
      await a.close();
      for (let i = 0; i < 500 && served.engine.stats().sandboxes.open > 1; i++) await new Promise((r) => setTimeout(r, 20));
      expect(served.engine.stats().sandboxes.open).toBe(1);
      expect((await call(b, 'who')).content[0].text).toBe('"b"');
      await b.close();
    } finally {
      await served.close();
    }
  });

  for (const isolation of ['process', 'thread'] as const) {
    it(`a session whose sandbox cannot be opened (the engine's maxOpenSandboxes held by other sessions) gets a tool error saying why, and is served once one closes (${isolation})`, async () => {
      const { serveHttp, mcpSettings } = require('../lib/mcp');
      const settings = mcpSettings({ stateful: true, idleTimeoutMs: 60_000, timeoutMs: 2000, memoryLimitMb: 32, isolation, engine: { maxConcurrentIsolates: 1, maxOpenSandboxes: 1, warmPoolSize: 0, processes: 1 } });
      const served = await serveHttp(settings, { token: TOKEN, maxSessions: 4 });
      try {
        const a = await connect(served.url);
        const b = await connect(served.url);
        expect((await call(a, 'var who = "a"; who')).content[0].text).toBe('"a"');
        const refused = await call(b, 'var who = "b"; who');
        expect(refused.isError).toBe(true);
        const text = (refused.content[0] as { text: string }).text;
        expect(text).toMatch(/^SandboxError \[ERR_ISOLET_OVERLOADED\]: No sandbox could be opened for this MCP session, so nothing ran: The engine has 1 persistent sandboxes open, at most maxOpenSandboxes \(1\)/);
        expect(text).toMatch(/one is freed when another session ends or has been idle for 60000 ms/);
        // The session that holds the sandbox is unharmed; the refused one is served once it closes.
        expect((await call(a, 'who')).content[0].text).toBe('"a"');
        await (a.transport as StreamableHTTPClientTransport).terminateSession();
        await a.close();
        let after = await call(b, 'typeof who');
        for (let i = 0; i < 100 && after.isError; i++) {
          await new Promise((r) => setTimeout(r, 100));
          after = await call(b, 'typeof who');
        }
        expect(after.isError).toBeFalsy();
        expect(after.content[0].text).toBe('"undefined"');
        await b.close();
      } finally {
        await served.close();
      }
    });
  }
});
