/// <reference path="./globals.d.ts" />
// Types of `isolet/mcp`: the run_code MCP server of `isolet mcp`, from code. Needs the
// optional @modelcontextprotocol/server package (the official v2 SDK), and
// @modelcontextprotocol/node for serveHttp. Serves MCP 2025-11-25 (and the older 2025
// revisions a client asks for) and 2026-07-28.
import type { SandboxEngine, SandboxEngineConfig, SandboxLanguage, UnhandledRejections } from '../index';

/** Settings of the server, from `mcpSettings(config)`. */
export interface McpSettings {
  readonly engineConfig: SandboxEngineConfig;
  readonly limits: { memoryMb: number; wallTimeMs: number; cpuTimeMs: number };
  readonly language?: SandboxLanguage;
  readonly capabilities: Record<string, unknown>;
  readonly toolNames: string[];
}

/** The keys of `isolet mcp --config` (flags aside), checked the same way (docs/options.md). */
export interface McpConfig {
  timeoutMs?: number;
  cpuTimeMs?: number;
  memoryLimitMb?: number;
  /** @deprecated `memoryLimitMb`: still accepted, with a one-time DeprecationWarning. */
  memoryMb?: number;
  language?: SandboxLanguage;
  isolation?: 'process' | 'thread';
  /** Gives the code `readFile({ path })` over this directory, read-only. */
  readDir?: string;
  /**
   * Gives the code `fetch` to these origins: WHATWG `fetch(input, init)` with the web APIs
   * (the default), else the capability's `fetch({ url, ... })`.
   */
  allowedOrigins?: string[];
  /** @deprecated `allowedOrigins`: still accepted, with a one-time DeprecationWarning. */
  allowOrigins?: string[];
  /** The web platform APIs in every run (docs/web.md). Default `true`; `false` as `--no-web`. */
  web?: boolean;
  /** Passed to `SandboxEngine` as is. */
  engine?: SandboxEngineConfig;
  /**
   * A persistent sandbox per client: under 2025 revisions one per session, under
   * 2026-07-28 one per handle the server issues (the tool's `sandbox` argument).
   */
  stateful?: boolean;
  /** A stateful sandbox without a call for this long is closed. */
  idleTimeoutMs?: number;
  /** @deprecated `idleTimeoutMs`: still accepted, with a one-time DeprecationWarning. */
  statefulIdleMs?: number;
  /** What a run does about a promise rejected with no handler. Default `'warn'`. */
  unhandledRejections?: UnhandledRejections;
  /** `isolet mcp --http`'s settings (`serveHttp` takes them as its own argument). */
  http?: McpHttpOptions;
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
  /**
   * MCP sessions (2025) and stateful sandbox handles (2026-07-28) open at once. Past it a
   * quiet one (no request in flight, no stream open) is given up for a new one, else the
   * new one gets 503 with Retry-After. Default 16.
   */
  maxSessions?: number;
  /**
   * Of those, what one client (one bearer token from one remote address) holds; past it the
   * client's own least recently used idle one is closed. Default 4.
   */
  maxSessionsPerClient?: number;
  /**
   * A session with no request in flight and no stream open for this long is closed, and a
   * sandbox handle without a call for this long expires. Default 60000.
   */
  sessionIdleMs?: number;
  /** Largest request body; past it 413. Default 4194304. */
  maxBodyBytes?: number;
  /** run_code calls in flight per session (2025) or per client (2026-07-28); past it a call is an error result. Default 4. */
  maxRunsPerSession?: number;
}

export interface McpHttpServer {
  /** `http://host:port/mcp`. */
  readonly url: string;
  readonly host: string;
  readonly port: number;
  readonly engine: SandboxEngine;
  /** The MCP revisions served: `['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05', '2026-07-28']`. */
  readonly protocolVersions: string[];
  /** 2025 sessions open now. */
  sessionCount(): number;
  /** 2026-07-28 sandbox handles open now (stateful). */
  handleCount(): number;
  runsInFlight(): number;
  /** Refuses new requests, lets runs in flight finish and answer, closes sessions and the engine. */
  close(): Promise<void>;
}

/** Settings from a config object; throws SandboxValidationError for a bad key or value. */
export function mcpSettings(config?: McpConfig): McpSettings;

/**
 * An SDK `McpServer` with the run_code tool for one connection (2025 protocol, the
 * connection is the session), not yet connected to a transport: `server.connect(transport)`.
 */
export function createMcpServer(settings: McpSettings): { server: unknown; engine: SandboxEngine; close(): Promise<void> };

/** Serves MCP on this process's stdin/stdout, in the era the client opens with (2025 initialize, or 2026-07-28). */
export function serveStdio(settings: McpSettings): Promise<{ engine: SandboxEngine; readonly protocolVersions: string[]; close(): Promise<void> }>;

/** Serves MCP over Streamable HTTP; resolves once it listens. */
export function serveHttp(settings: McpSettings, options?: McpHttpOptions): Promise<McpHttpServer>;

/**
 * `engine.init()`, once per engine however many servers and calls share it: the promise
 * of the first call. For an engine given to several `createMcpServer` calls.
 */
export function initOnce(engine: SandboxEngine): Promise<void>;

/** A place refused (the server or the client holds as many sessions as it may): HTTP answers 503 with Retry-After. */
export class SlotRefused extends Error {
  constructor(message: string, retryAfterMs: number);
  /** How long to wait before trying again. */
  readonly retryAfterMs: number;
}

/**
 * The run_code service every server of one process shares (engine, runs in flight,
 * sandbox handles); `serveHttp` builds one for all its sessions. Its `newServer` makes the
 * SDK server of one session or of 2026-07-28 requests.
 */
export function createMcpService(
  settings: McpSettings,
  shared?: { engine?: SandboxEngine; maxRuns?: number; handleIdleMs?: number },
): {
  engine: SandboxEngine;
  newSession(): unknown;
  endSession(session: unknown): void;
  /** `'legacy'`: a 2025 session's server; `'modern'`: 2026-07-28 requests. */
  newServer(options: { era: 'legacy' | 'modern'; session?: unknown }): unknown;
  /** The revisions served. */
  readonly protocolVersions: string[];
  /** Sandbox handles open now (stateful, 2026-07-28). */
  handleCount(): number;
  close(): Promise<void>;
};

export const MCP_TOOL_NAME: 'run_code';

/** The `_meta` key of a 2026-07-28 stateful result that holds its sandbox handle. */
export const MCP_SANDBOX_META_KEY: 'isolet/sandbox';
