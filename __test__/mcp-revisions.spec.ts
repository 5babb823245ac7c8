// `isolet mcp` under every MCP revision it serves, through the official clients: the 1.x
// SDK (2025-11-25) and the v2 SDK pinned to 2025-03-26, 2025-06-18, 2025-11-25 and
// 2026-07-28, over stdio (a real child per client) and Streamable HTTP (a real server on
// 127.0.0.1), in both isolation modes. Stateless: list tools, 1 + 1, a syntax error, a loop
// stopped at its limit, a large result, and the JSON-RPC errors the revision names for an
// unknown tool and for bad arguments. Stateful: three calls sharing state (the session's
// sandbox under 2025, a server-issued handle under 2026-07-28), and a handle used by
// another client refused.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ISOLATIONS, TOKEN, startServer, type Server } from './support/mcp-server';
import { KINDS, MODERN, call, callError, httpClient, label, stdioClient, type AnyClient, type Kind, type ToolResult } from './support/mcp-clients';

const TIMEOUT_MS = 1500;
const BIG = 300_000;
const SANDBOX_META_KEY = 'isolet/sandbox';

let dir: string;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'isolet-mcp-revisions-'));
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function configFile(name: string, config: object): string {
  const file = path.join(dir, `${name}.json`);
  fs.writeFileSync(file, JSON.stringify(config));
  return file;
}

/** The whole stateless round for one client. */
async function stateless(client: AnyClient, kind: Kind) {
  if (kind.sdk === 'v2') expect((client as any).getNegotiatedProtocolVersion()).toBe(kind.revision);
  const { tools } = await client.listTools();
  expect(tools.map((t) => t.name)).toEqual(['run_code']);
  expect(Object.keys(tools[0].inputSchema.properties)).toEqual(['code', 'language']);
  expect(tools[0].description).toContain(`Limits per run: ${TIMEOUT_MS} ms wall-clock`);
  const [sum, syntax, loop, big, unknown, bad] = await Promise.all([
    call(client, { code: '1 + 1' }),
    call(client, { code: 'const a = 1;\nreturn a +;' }),
    call(client, { code: 'while (true) {}' }),
    call(client, { code: `'x'.repeat(${BIG})` }),
    callError(client, { code: '1' }, 'no_such_tool'),
    callError(client, { code: 5 }),
  ]);
  expect(sum).toMatchObject({ content: [{ type: 'text', text: '2' }] });
  expect(sum.isError).toBeFalsy();
  expect(syntax.isError).toBe(true);
  expect(syntax.content[0].text).toMatch(/^SandboxValidationError \[ERR_ISOLET_VALIDATION\]: SyntaxError: .*\nat line 2, column \d+/);
  expect(loop.isError).toBe(true);
  expect(loop.content[0].text).toMatch(new RegExp(`^SandboxTimeoutError \\[ERR_ISOLET_TIMEOUT\\]: .*${TIMEOUT_MS} ms`));
  expect(big.isError).toBeFalsy();
  expect(big.content[0].text.length).toBe(BIG + 2);
  expect(big.content[0].text).toBe(JSON.stringify('x'.repeat(BIG)));
  // An unknown tool is a JSON-RPC error (-32602) under every revision.
  expect(unknown).toMatchObject({ code: -32602 });
  expect((unknown as { message: string }).message).toContain('Unknown tool: no_such_tool');
  // Arguments that do not fit the schema: a JSON-RPC error up to 2025-06-18, a tool error
  // the model can read and correct from 2025-11-25 on (SEP-1303).
  if (kind.revision < '2025-11-25') {
    expect(bad).toMatchObject({ code: -32602 });
    expect((bad as { message: string }).message).toContain('Invalid arguments for tool run_code: code must be a string, got 5');
  } else {
    expect(bad).toMatchObject({ isError: true, content: [{ type: 'text', text: 'SandboxValidationError [ERR_ISOLET_VALIDATION]: code must be a string, got 5' }] });
  }
}

/** Three calls that build on each other; returns the 2026-07-28 handle (undefined under 2025). */
async function threeCalls(client: AnyClient, kind: Kind): Promise<string | undefined> {
  const modern = kind.revision === MODERN;
  const { tools } = await client.listTools();
  expect(Object.keys(tools[0].inputSchema.properties)).toEqual(modern ? ['code', 'language', 'sandbox'] : ['code', 'language']);
  const first = await call(client, { code: 'var n = 40; function add(k) { n += k; return n }; console.log("set"); n' });
  expect(first.isError).toBeFalsy();
  expect(first.content.slice(0, 2).map((c) => c.text)).toEqual(['40', 'console:\nset']);
  const handle = first._meta?.[SANDBOX_META_KEY] as string | undefined;
  if (modern) {
    expect(handle).toMatch(/^sbx_[A-Za-z0-9_-]{24}$/);
    expect(first.content[2].text).toContain(`sandbox: ${handle}`);
  } else {
    expect(handle).toBeUndefined();
  }
  const more = modern ? { sandbox: handle } : {};
  expect((await call(client, { code: 'const step = await Promise.resolve(1); add(step)', ...more })).content[0].text).toBe('41');
  expect((await call(client, { code: 'add(step)', ...more })).content[0].text).toBe('42');
  return handle;
}

/**
 * Under 2026-07-28 a request asks for log notifications in its own `_meta`: none without a
 * level, those at or above it with one. The notifications of one call, in order.
 */
async function logsOf(client: AnyClient, logLevel: string | undefined): Promise<Array<[string, unknown]>> {
  const logs: Array<[string, unknown]> = [];
  (client as any).setNotificationHandler('notifications/message', (n: { params: { level: string; data: unknown } }) => void logs.push([n.params.level, n.params.data]));
  const code = 'console.debug("d"); console.log("l"); console.warn("w"); console.error("e"); "done"';
  const meta = logLevel === undefined ? {} : { _meta: { 'io.modelcontextprotocol/logLevel': logLevel } };
  const r = (await client.callTool({ name: 'run_code', arguments: { code }, ...meta })) as ToolResult;
  expect(r.content.map((c) => c.text)).toEqual(['"done"', 'console:\n[debug] d\nl\n[warn] w\n[error] e']);
  return logs;
}

for (const isolation of ISOLATIONS) {
  describe(`isolet mcp over Streamable HTTP, every revision (${isolation})`, () => {
    let plain: Server;
    let stateful: Server;
    beforeAll(async () => {
      [plain, stateful] = await Promise.all([
        startServer({ timeoutMs: TIMEOUT_MS, memoryLimitMb: 32, isolation }),
        startServer({ timeoutMs: TIMEOUT_MS, memoryLimitMb: 32, isolation, stateful: true }),
      ]);
    });
    afterAll(() => {
      plain?.stop();
      stateful?.stop();
    });

    for (const kind of KINDS) {
      it(`${label(kind)}: tools, 1 + 1, a syntax error, a timeout, a large result, an unknown tool and bad arguments`, async () => {
        const client = await httpClient(kind, plain.url, TOKEN);
        try {
          await stateless(client, kind);
        } finally {
          await client.close();
        }
      });
    }

    it('2026-07-28 on the wire: resultType and caching hints, the revision\'s errors with their HTTP statuses and the request id', async () => {
      const meta = { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {} };
      const post = async (method: string, params: object, headers: Record<string, string> = {}) => {
        const res = await fetch(plain.url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${TOKEN}`, 'mcp-protocol-version': MODERN, 'mcp-method': method, ...headers },
          body: JSON.stringify({ jsonrpc: '2.0', id: 41, method, params }),
        });
        return { status: res.status, body: await res.json() };
      };
      const ok = await post('tools/call', { name: 'run_code', arguments: { code: '6 * 7' }, _meta: meta }, { 'mcp-name': 'run_code' });
      expect(ok).toMatchObject({ status: 200, body: { id: 41, result: { resultType: 'complete', content: [{ type: 'text', text: '42' }] } } });
      const list = await post('tools/list', { _meta: meta });
      expect(list.body.result).toMatchObject({ resultType: 'complete', ttlMs: 300000, cacheScope: 'private' });
      const discover = await post('server/discover', { _meta: meta });
      expect(discover.body.result).toMatchObject({ supportedVersions: [MODERN], capabilities: { tools: { listChanged: false }, logging: {} } });
      expect(await post('tools/list', {})).toMatchObject({ status: 400, body: { id: 41, error: { code: -32602 } } });
      expect(await post('ping', { _meta: meta })).toMatchObject({ status: 404, body: { id: 41, error: { code: -32601 } } });
      expect(await post('tools/list', { _meta: { ...meta, 'io.modelcontextprotocol/protocolVersion': '2099-01-01' } }, { 'mcp-protocol-version': '2099-01-01' })).toMatchObject({
        status: 400,
        body: { id: 41, error: { code: -32022, data: { supported: [MODERN], requested: '2099-01-01' } } },
      });
      expect(await post('tools/list', { _meta: meta }, { 'mcp-method': 'prompts/list' })).toMatchObject({ status: 400, body: { id: 41, error: { code: -32020 } } });
    });

    it(`${label({ sdk: 'v2', revision: MODERN })}: logs only at the level the request asks`, async () => {
      const client = await httpClient({ sdk: 'v2', revision: MODERN }, plain.url, TOKEN);
      try {
        expect(await logsOf(client, undefined)).toEqual([]);
        expect(await logsOf(client, 'warning')).toEqual([['warning', 'w'], ['error', 'e']]);
        expect(await logsOf(client, 'debug')).toEqual([['debug', 'd'], ['info', 'l'], ['warning', 'w'], ['error', 'e']]);
      } finally {
        await client.close();
      }
    });

    for (const kind of KINDS.filter((k) => k.sdk === 'v1' || k.revision === '2025-03-26' || k.revision === MODERN)) {
      it(`${label(kind)}: stateful across three calls; nobody else reaches that state`, async () => {
        const client = await httpClient(kind, stateful.url, TOKEN);
        const other = await httpClient(kind, stateful.url, TOKEN, '127.0.0.2');
        try {
          const handle = await threeCalls(client, kind);
          if (kind.revision === MODERN) {
            // The handle is checked against its caller: the same token from another address
            // is another client, refused as if the handle did not exist.
            const stolen = await call(other, { code: 'n', sandbox: handle });
            expect(stolen.isError).toBe(true);
            expect(stolen.content[0].text).toBe(
              `SandboxValidationError [ERR_ISOLET_VALIDATION]: sandbox "${handle}" is not an open sandbox of this client: it was never opened, has expired (60000 ms without a call) or belongs to another client. Call run_code without sandbox to start a new one.`,
            );
            const guessed = await call(client, { code: 'n', sandbox: 'sbx_AAAAAAAAAAAAAAAAAAAAAAAA' });
            expect(guessed.content[0].text).toContain('is not an open sandbox of this client');
            // The owner's sandbox is untouched; another client's call without a handle gets a sandbox of its own.
            expect((await call(client, { code: 'n', sandbox: handle })).content[0].text).toBe('42');
            expect((await call(other, { code: 'typeof n' })).content[0].text).toBe('"undefined"');
          } else {
            // Another session has its own sandbox; a handle is no argument under 2025.
            expect((await call(other, { code: 'typeof n' })).content[0].text).toBe('"undefined"');
            const refused = await callError(client, { code: 'n', sandbox: 'sbx_x' });
            const why = 'sandbox is not an argument of run_code in this protocol revision: the session keeps the sandbox';
            if (kind.revision < '2025-11-25') expect(refused).toMatchObject({ code: -32602, message: expect.stringContaining(why) });
            else expect(refused).toMatchObject({ isError: true, content: [{ text: expect.stringContaining(why) }] });
          }
        } finally {
          await Promise.all([client.close(), other.close()]);
        }
      });
    }
  });

  describe(`isolet mcp over stdio, every revision (${isolation})`, () => {
    for (const kind of KINDS) {
      it(`${label(kind)}: tools, 1 + 1, a syntax error, a timeout, a large result, an unknown tool and bad arguments`, async () => {
        const config = configFile(`plain-${isolation}`, { timeoutMs: TIMEOUT_MS, memoryLimitMb: 32, isolation });
        const client = await stdioClient(kind, ['--config', config]);
        try {
          await stateless(client, kind);
        } finally {
          await client.close();
        }
      });
    }

    it(`${label({ sdk: 'v2', revision: MODERN })}: logs only at the level the request asks`, async () => {
      const config = configFile(`plain-${isolation}`, { timeoutMs: TIMEOUT_MS, memoryLimitMb: 32, isolation });
      const client = await stdioClient({ sdk: 'v2', revision: MODERN }, ['--config', config]);
      try {
        expect(await logsOf(client, undefined)).toEqual([]);
        expect(await logsOf(client, 'error')).toEqual([['error', 'e']]);
      } finally {
        await client.close();
      }
    });

    for (const kind of KINDS.filter((k) => k.sdk === 'v1' || k.revision === MODERN)) {
      it(`${label(kind)}: stateful across three calls; another connection's handle is refused`, async () => {
        const config = configFile(`stateful-${isolation}`, { timeoutMs: TIMEOUT_MS, memoryLimitMb: 32, isolation, stateful: true });
        const client = await stdioClient(kind, ['--config', config]);
        try {
          const handle = await threeCalls(client, kind);
          if (kind.revision === MODERN) {
            const other = await stdioClient(kind, ['--config', config]);
            try {
              const refused: ToolResult = await call(other, { code: 'n', sandbox: handle });
              expect(refused.isError).toBe(true);
              expect(refused.content[0].text).toContain(`sandbox "${handle}" is not an open sandbox of this client`);
            } finally {
              await other.close();
            }
          }
        } finally {
          await client.close();
        }
      });
    }
  });
}
