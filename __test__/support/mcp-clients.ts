// The official MCP clients the MCP specs drive isolet with: the 1.x SDK's Client
// (@modelcontextprotocol/sdk, which speaks 2025-11-25) and the v2 SDK's Client
// (@modelcontextprotocol/client), pinned to one revision: a 2025 one through `initialize`,
// or 2026-07-28 (`versionNegotiation: { mode: { pin } }`, no session). Over stdio (a real
// `isolet mcp` child) or Streamable HTTP (a real server on 127.0.0.x).
import * as http from 'node:http';
import * as path from 'node:path';
import { Readable } from 'node:stream';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport as StdioV1 } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport as HttpV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Client as ClientV2, StreamableHTTPClientTransport as HttpV2 } from '@modelcontextprotocol/client';
import { StdioClientTransport as StdioV2 } from '@modelcontextprotocol/client/stdio';

export const BIN = path.resolve(__dirname, '..', '..', 'bin', 'isolet.js');
export const MODERN = '2026-07-28';

/** A client kind: which SDK, and the revision it speaks. */
export type Kind = { sdk: 'v1' | 'v2'; revision: string };
/** Every revision isolet serves, through the client that speaks it (v1 speaks only its latest). */
export const KINDS: Kind[] = [
  { sdk: 'v1', revision: '2025-11-25' },
  { sdk: 'v2', revision: '2025-03-26' },
  { sdk: 'v2', revision: '2025-06-18' },
  { sdk: 'v2', revision: '2025-11-25' },
  { sdk: 'v2', revision: MODERN },
];
export const label = (k: Kind) => `${k.sdk === 'v1' ? 'SDK 1.x' : 'SDK v2'} ${k.revision}`;

export type Content = Array<{ type: string; text: string }>;
export type ToolResult = { isError?: boolean; content: Content; _meta?: Record<string, unknown> };

/** What the specs need of either SDK's Client. */
export interface AnyClient {
  listTools(): Promise<{ tools: Array<{ name: string; description?: string; inputSchema: any }> }>;
  callTool(params: { name: string; arguments?: Record<string, unknown> }, resultSchema?: unknown, options?: unknown): Promise<unknown>;
  close(): Promise<void>;
  getServerVersion(): unknown;
}

function v2Client(revision: string): ClientV2 {
  if (revision === MODERN) return new ClientV2({ name: 'isolet-test', version: '1.0.0' }, { versionNegotiation: { mode: { pin: MODERN } } });
  return new ClientV2({ name: 'isolet-test', version: '1.0.0' }, { supportedProtocolVersions: [revision] });
}

/** A client of `kind` over stdio: it starts `isolet mcp ...args` itself. */
export async function stdioClient(kind: Kind, args: string[], env: Record<string, string> = {}): Promise<AnyClient> {
  const params = { command: process.execPath, args: [BIN, 'mcp', ...args], env: { ...(process.env as Record<string, string>), ...env }, stderr: 'ignore' as const };
  if (kind.sdk === 'v1') {
    const client = new ClientV1({ name: 'isolet-test', version: '1.0.0' });
    await client.connect(new StdioV1(params));
    return client as unknown as AnyClient;
  }
  const client = v2Client(kind.revision);
  await client.connect(new StdioV2(params));
  return client as unknown as AnyClient;
}

/** A client of `kind` over Streamable HTTP, with the bearer token, from `localAddress` (default 127.0.0.1). */
export async function httpClient(kind: Kind, url: string, token: string | null, localAddress?: string): Promise<AnyClient> {
  const headers: Record<string, string> = token === null ? {} : { authorization: `Bearer ${token}` };
  const fetch = localAddress === undefined ? undefined : fetchFrom(localAddress);
  if (kind.sdk === 'v1') {
    const client = new ClientV1({ name: 'isolet-test', version: '1.0.0' });
    await client.connect(new HttpV1(new URL(url), { requestInit: { headers }, ...(fetch ? { fetch } : {}) }));
    return client as unknown as AnyClient;
  }
  const client = v2Client(kind.revision);
  await client.connect(new HttpV2(new URL(url), { requestInit: { headers }, ...(fetch ? { fetch } : {}) }));
  return client as unknown as AnyClient;
}

/** The MCP session id of an HTTP client under a 2025 revision (undefined under 2026-07-28). */
export function sessionIdOf(client: AnyClient): string | undefined {
  return (client as any).transport?.sessionId ?? (client as any)._transport?.sessionId;
}

/** The protocol version the client and the server agreed on. */
export function negotiatedVersion(client: AnyClient): string | undefined {
  const c = client as any;
  if (typeof c.getNegotiatedProtocolVersion === 'function') return c.getNegotiatedProtocolVersion();
  return c._transport?.protocolVersion ?? c.transport?.protocolVersion;
}

export async function call(client: AnyClient, args: Record<string, unknown>, name = 'run_code'): Promise<ToolResult> {
  return (await client.callTool({ name, arguments: args })) as ToolResult;
}

/** A JSON-RPC error of a call, or the result when there was none. */
export async function callError(client: AnyClient, args: Record<string, unknown>, name = 'run_code'): Promise<{ code: number; message: string } | ToolResult> {
  try {
    return await call(client, args, name);
  } catch (err) {
    const e = err as { code: number; message: string };
    return { code: e.code, message: e.message };
  }
}

/**
 * A `fetch` for the SDK transports whose connections leave from `localAddress` (another
 * loopback address is another client to the server), over node:http.
 */
export function fetchFrom(localAddress: string) {
  return (input: string | URL | Request, init: RequestInit = {}): Promise<Response> =>
    new Promise((resolve, reject) => {
      const url = new URL(input instanceof Request ? input.url : String(input));
      const headers: Record<string, string> = {};
      new Headers(init.headers).forEach((value, name) => (headers[name] = value));
      const req = http.request(url, { method: init.method ?? 'GET', headers, localAddress, agent: false, signal: init.signal ?? undefined }, (res) => {
        const out = new Headers();
        for (const [name, value] of Object.entries(res.headers)) {
          for (const v of Array.isArray(value) ? value : value === undefined ? [] : [value]) out.append(name, v);
        }
        const status = res.statusCode ?? 500;
        const body = status === 204 || status === 304 ? null : (Readable.toWeb(res) as ReadableStream);
        resolve(new Response(body, { status, headers: out }));
      });
      req.on('error', reject);
      req.end(typeof init.body === 'string' ? init.body : undefined);
    });
}
