/// <reference path="./globals.d.ts" />
// Types of `isolet/mcp`: the run_code MCP server of `isolet mcp`, from code. Needs the
// optional @modelcontextprotocol/sdk package.
import type { SandboxEngine, SandboxEngineConfig, SandboxLanguage } from '../index';

/** Settings of the server, from `mcpSettings(config)`. */
export interface McpSettings {
  readonly engineConfig: SandboxEngineConfig;
  readonly limits: { memoryMb: number; wallTimeMs: number; cpuTimeMs: number };
  readonly language?: SandboxLanguage;
  readonly capabilities: Record<string, unknown>;
  readonly toolNames: string[];
}

/** The keys of `isolet mcp --config` (flags aside), checked the same way. */
export interface McpConfig {
  timeoutMs?: number;
  cpuTimeMs?: number;
  memoryMb?: number;
  language?: SandboxLanguage;
  isolation?: 'process' | 'thread';
  /** Gives the code `readFile({ path })` over this directory, read-only. */
  readDir?: string;
  /** Gives the code `fetch({ url, ... })` to these origins. */
  allowOrigins?: string[];
  /** Passed to `SandboxEngine` as is. */
  engine?: SandboxEngineConfig;
}

/** Streamable HTTP options (the `http` object of `isolet mcp --config`). */
export interface McpHttpOptions {
  /** `[host:]port`; the host is 127.0.0.1 unless given. Default `127.0.0.1:0` (a free port). */
  listen?: string;
  /** Host header values accepted besides `localhost`, `127.0.0.1` and `[::1]` at the bound port; an entry without a port accepts any. */
  allowedHosts?: string[];
  /** Origin header values accepted besides the loopback ones at the bound port (requests without Origin pass). */
  allowedOrigins?: string[];
  /** Require `Authorization: Bearer <token>`: the token itself, */
  token?: string;
  /** or the environment variable that holds it, */
  tokenEnv?: string;
  /** or a file that holds it (surrounding white space ignored). */
  tokenFile?: string;
  /** MCP sessions open at once; a new one past it gets 503. Default 16. */
  maxSessions?: number;
  /** A session without a request for this long is closed. Default 300000. */
  sessionIdleMs?: number;
  /** Largest request body; past it 413. Default 4194304. */
  maxBodyBytes?: number;
  /** run_code calls in flight per session; past it a call is an error result. Default 4. */
  maxRunsPerSession?: number;
}

export interface McpHttpServer {
  /** `http://host:port/mcp`. */
  readonly url: string;
  readonly host: string;
  readonly port: number;
  readonly engine: SandboxEngine;
  sessionCount(): number;
  runsInFlight(): number;
  /** Refuses new requests, lets runs in flight finish and answer, closes sessions and the engine. */
  close(): Promise<void>;
}

/** Settings from a config object; throws SandboxValidationError for a bad key or value. */
export function mcpSettings(config?: McpConfig): McpSettings;

/** An SDK `Server` with the run_code tool, not yet connected to a transport. */
export function createMcpServer(settings: McpSettings): { server: unknown; engine: SandboxEngine; close(): Promise<void> };

/** Serves MCP on this process's stdin/stdout. */
export function serveStdio(settings: McpSettings): Promise<{ server: unknown; engine: SandboxEngine; close(): Promise<void> }>;

/** Serves MCP over Streamable HTTP; resolves once it listens. */
export function serveHttp(settings: McpSettings, options?: McpHttpOptions): Promise<McpHttpServer>;

/**
 * `engine.init()`, once per engine however many servers and calls share it: the promise
 * of the first call. For an engine given to several `createMcpServer` calls.
 */
export function initOnce(engine: SandboxEngine): Promise<void>;

export const MCP_TOOL_NAME: 'run_code';
