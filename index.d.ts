// Type definitions for isolet: run untrusted JavaScript in bare V8 isolates.

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

/** Names of the six error classes; `SandboxResult.error.name` is always one of them. */
export type SandboxErrorName =
  | 'SandboxError'
  | 'SandboxTimeoutError'
  | 'SandboxOOMError'
  | 'SandboxRuntimeError'
  | 'SandboxValidationError'
  | 'SandboxAbortedError';

/** Base class of every isolet error. `stack` never holds host frames. */
export declare class SandboxError extends Error {
  constructor(message: string, options?: { code?: string; cause?: unknown });
  /** Stable machine-readable code, e.g. `ERR_ISOLET_TIMEOUT`. */
  readonly code: string;
}

/** Execution exceeded its wall-clock (`limit: 'wall'`) or CPU-time (`limit: 'cpu'`) limit. */
export declare class SandboxTimeoutError extends SandboxError {
  constructor(message: string, options?: { limit?: 'wall' | 'cpu' });
  readonly code: 'ERR_ISOLET_TIMEOUT';
  readonly limit: 'wall' | 'cpu';
}

/** The isolate exceeded its memory limit (V8 heap or ArrayBuffer budget). */
export declare class SandboxOOMError extends SandboxError {
  constructor(message: string);
  readonly code: 'ERR_ISOLET_OOM';
}

/** What the sandboxed code threw, copied out as strings. */
export interface ThrownInfo {
  name: string;
  message: string;
  /** The sandbox's own stack (`at sandbox.js:line:column`); never host frames. */
  stack?: string;
}

/** The sandboxed code threw (or its result could not be copied out). */
export declare class SandboxRuntimeError extends SandboxError {
  constructor(message: string, options?: { thrown?: ThrownInfo });
  readonly code: 'ERR_ISOLET_RUNTIME';
  readonly thrown?: ThrownInfo;
}

/** Invalid input: non-string code, bad options, or a syntax error (with position). */
export declare class SandboxValidationError extends SandboxError {
  constructor(message: string, options?: { line?: number; column?: number });
  readonly code: 'ERR_ISOLET_VALIDATION';
  /** 1-based line of a syntax error. */
  readonly line?: number;
  /** 1-based column of a syntax error. */
  readonly column?: number;
}

/** The caller aborted the execution (AbortSignal, `session.abort()`, engine shutdown). */
export declare class SandboxAbortedError extends SandboxError {
  constructor(message: string);
  readonly code: 'ERR_ISOLET_ABORTED';
}

// ---------------------------------------------------------------------------
// runSandbox
// ---------------------------------------------------------------------------

/** Statistics reported with every result and every error. */
export interface ExecutionStats {
  /** Wall-clock time of the execution in ms (waiting on the host included). */
  wallTimeMs: number;
  /** CPU time of the isolate's thread in ms (waiting on the host excluded). */
  cpuTimeMs: number;
  /** Peak V8 heap use in bytes. */
  heapUsedBytes: number;
  /** V8 heap use at the end of the execution, in bytes. */
  heapAtEndBytes?: number;
  /** Host calls plus data requests made. */
  hostCalls?: number;
}

export interface LogEntry {
  level: 'log' | 'info' | 'warn' | 'error' | 'debug';
  message: string;
}

/** A host function exposed to the sandbox. Arguments and result are structured-cloned. */
export type Capability = (...args: any[]) => unknown | Promise<unknown>;

export interface SandboxOptions {
  /**
   * Host functions exposed as globals. With capabilities the code is the body of an
   * async function: only `return` gives `output`.
   */
  capabilities?: Record<string, Capability>;
  /** V8 heap limit in MB (ArrayBuffers are capped separately at the same size). Default 64. */
  memoryLimitMb?: number;
  /** Wall-clock limit in ms. Default 5000. */
  timeoutMs?: number;
  /** CPU-time limit in ms. Default: none (the wall-clock limit applies). */
  cpuTimeMs?: number;
  /** Aborts the run with SandboxAbortedError. */
  signal?: AbortSignal;
  /** Cap on the serialized output. Default 16 MiB. */
  maxOutputBytes?: number;
  /** Cap on one host-call argument list or reply. Default 16 MiB. */
  maxMessageBytes?: number;
  /** Cap on host calls per run. Default 1000. */
  maxHostCalls?: number;
  /** Console entries kept. Default 1000. */
  maxLogEntries?: number;
  /** Console bytes kept. Default 1 MiB. */
  maxLogBytes?: number;
  /** Bytes of host-call arguments and replies in flight at once. Default 64 MiB (see docs/budgets.md). */
  maxPendingHostCallBytes?: number;
  /** Host calls in flight at once. Default 128. */
  maxPendingHostCalls?: number;
}

export interface SandboxSuccess<T = unknown> {
  success: true;
  output: T;
  stats: ExecutionStats;
  logs: LogEntry[];
}

export interface SandboxFailure {
  success: false;
  error:
    | SandboxTimeoutError
    | SandboxOOMError
    | SandboxRuntimeError
    | SandboxValidationError
    | SandboxAbortedError
    | SandboxError;
  stats: ExecutionStats;
  logs: LogEntry[];
}

export type SandboxResult<T = unknown> = SandboxSuccess<T> | SandboxFailure;

/**
 * Runs `code` in a fresh V8 isolate on a background thread. Never rejects: every
 * failure, invalid input included, resolves as `{ success: false, error }`.
 */
export declare function runSandbox<T = unknown>(code: string, options?: SandboxOptions): Promise<SandboxResult<T>>;

export declare const RUN_SANDBOX_DEFAULTS: Readonly<{ memoryLimitMb: 64; timeoutMs: 5000 }>;

// ---------------------------------------------------------------------------
// Capabilities
// ---------------------------------------------------------------------------

export interface FileReadOptions {
  /** Largest file served, in bytes. Default 10 MB. */
  maxBytes?: number;
  /** Reads one run may have in flight at once; more fail with ERR_ISOLET_TOO_MANY_READS. Default 8. */
  maxReadsInFlight?: number;
}

export interface FileReadRequest {
  /** Path relative to the capability's directory. */
  path: string;
  /** `utf8` (default) or `base64` for binary files. */
  encoding?: 'utf8' | 'base64';
}

export interface FileReadResult {
  path: string;
  content: string;
}

/**
 * A `readFile({ path })` capability that reads regular files inside `dir` only
 * (no `..` escape, absolute paths, symlinks out, devices, FIFOs or oversize files).
 */
export declare function createFileReadCapability(
  dir: string,
  options?: FileReadOptions,
): (request: FileReadRequest) => Promise<FileReadResult>;

export interface FetchCapabilityOptions {
  /** Exact origins that may be requested, e.g. `https://api.example.com`. */
  allowedOrigins: string[];
  /** Per-request timeout in ms. Default 10000. */
  timeoutMs?: number;
  /** Largest response body, in bytes. Default 5 MiB. */
  maxResponseBytes?: number;
  /** Largest request body, in bytes. Default 1 MiB. */
  maxRequestBytes?: number;
  /** Methods allowed. Default GET, HEAD, POST, PUT, PATCH, DELETE. */
  allowedMethods?: string[];
}

export interface FetchRequest {
  url: string;
  method?: string;
  headers?: Record<string, string>;
  body?: string | Uint8Array | ArrayBuffer;
}

export interface FetchResponse {
  status: number;
  statusText: string;
  headers: Record<string, string>;
  body: string;
}

/** A `fetch({ url, ... })` capability limited to an allow-list of origins. */
export declare function createFetchCapability(
  options: FetchCapabilityOptions,
): (request: FetchRequest) => Promise<FetchResponse>;

// ---------------------------------------------------------------------------
// SandboxEngine
// ---------------------------------------------------------------------------

export declare const DEFAULT_MEMORY_MB: 128;

/** CPU, memory and wall-clock limits for an isolate. */
export interface IsolateLimits {
  /** V8 heap limit in MB. Default: the engine's `memoryMb` (128). */
  memoryMb?: number;
  /** CPU time of the isolate's thread, in ms. Default 5000. */
  cpuTimeMs?: number;
  /** Wall-clock time, waiting on data requests and tools included, in ms. Default 30000. */
  wallTimeMs?: number;
}

/** Message size and count limits for the bridge, per execution. */
export interface BridgeLimits {
  /** Bytes of one message in either direction (tool args/replies, data answers). Default 16 MiB. */
  maxMessageBytes?: number;
  /** Tool calls plus data requests. Default 1000. */
  maxMessages?: number;
  /** Bytes of the serialized result. Default 16 MiB. */
  maxOutputBytes?: number;
  /** Console entries kept. Default 1000. */
  maxLogEntries?: number;
  /** Console bytes kept. Default 1 MiB. */
  maxLogBytes?: number;
  /** Bytes of tool-call arguments and replies in flight at once. Default 64 MiB (see docs/budgets.md). */
  maxPendingHostCallBytes?: number;
  /** Tool calls in flight at once. Default 128. */
  maxPendingHostCalls?: number;
}

export declare const DEFAULT_ISOLATE_LIMITS: Readonly<Required<IsolateLimits>>;
export declare const DEFAULT_BRIDGE_LIMITS: Readonly<Required<BridgeLimits>>;

/** Which of the engine's tools a request may call, and how often. Default: none. */
export interface ToolPolicy {
  allowedTools: string[];
  /** Per-tool call limits; tools not listed are unlimited (within `maxMessages`). */
  maxCallsPerTool?: Record<string, number>;
}

export declare const DEFAULT_TOOL_POLICY: Readonly<ToolPolicy>;

/** A WebAssembly module compiled at `init()`; sandbox code sees its exports as `wasm.<name>`. */
export interface WasmModuleConfig {
  /** A JavaScript identifier. */
  name: string;
  /** The module's bytes. It must have no imports. */
  source: Uint8Array | ArrayBuffer;
}

export interface SandboxEngineConfig {
  /** Memory per isolate, in MB (warm isolates use it). Default 128. */
  memoryMb: number;
  /** Executions running at once. */
  maxConcurrentIsolates: number;
  /** Isolates created ahead of time. */
  warmPoolSize: number;
  wasmModules: WasmModuleConfig[];
  defaultIsolateLimits: IsolateLimits;
  defaultBridgeLimits: BridgeLimits;
  /** Executions allowed to wait for a slot; more are refused with an error event. Default 1000. */
  maxQueueSize?: number;
  /** Host tools, exposed as globals; a request's `toolPolicy` decides which it may call. */
  tools?: Record<string, Capability>;
}

/** Injectable dependencies, for tests. */
export interface SandboxEngineDeps {
  /** Timestamps for events (`event.at`). Default `Date.now`. */
  clock: () => number;
  /** Request ids for requests that give none. Default `session_<n>`. */
  idGenerator: () => string;
  /** Receives engine lifecycle messages. */
  logger: Partial<Pick<Console, 'debug' | 'info' | 'warn' | 'error'>>;
}

/** Creates a session for a request (the engine's `submit`). */
export type SessionFactory = (request: ExecuteMessage) => SandboxSession;

/** Inbound: an execution request. */
export interface ExecuteMessage {
  requestId: string;
  /** Body of an async function: `return` gives the result. */
  code: string;
  /** Values of `data` known up front (no data request needed). */
  data?: Record<string, unknown>;
  isolateLimits?: IsolateLimits;
  bridgeLimits?: BridgeLimits;
  toolPolicy?: ToolPolicy;
}

/** Inbound: data supplied for a data request (see `SandboxSession.respond`). */
export interface DataResponseMessage {
  requestId: string;
  id: number;
  value: unknown;
}

interface EventBase {
  requestId: string;
  /** `deps.clock()` when the event was emitted. */
  at: number;
}

/** Outbound: progress. `console` carries the sandbox's console output. */
export interface StatusMessage extends EventBase {
  type: 'status';
  status: 'queued' | 'started' | 'console' | 'finished';
  message: string;
  level?: LogEntry['level'];
}

/** Outbound: the sandbox read `data[key]`; answer with `session.respond(id, value)`. */
export interface DataRequestMessage extends EventBase {
  type: 'dataRequest';
  id: number;
  key: string;
}

export interface ResultMessage<T = unknown> extends EventBase {
  type: 'result';
  data: T;
  stats: ExecutionStats;
  logs: LogEntry[];
}

export interface ErrorMessage extends EventBase {
  type: 'error';
  error: SandboxFailure['error'];
  message: string;
  stats: ExecutionStats;
  logs?: LogEntry[];
}

export type SandboxEvent = StatusMessage | DataRequestMessage | ResultMessage | ErrorMessage;

/** Async iterable of one execution's events; ends after its one `result` or `error`. */
export declare class SandboxSession implements AsyncIterable<SandboxEvent> {
  private constructor();
  readonly requestId: string;
  /** Resolves with the final `result` or `error` event. */
  readonly done: Promise<ResultMessage | ErrorMessage>;
  [Symbol.asyncIterator](): AsyncIterableIterator<SandboxEvent>;
  /** Answers a data request; throws SandboxValidationError for an unknown id. */
  respond(id: number, value: unknown): void;
  /** Fails a data request: the read throws an Error with `message` inside the sandbox. */
  reject(id: number, message?: string): void;
  /** Ends the execution (queued or running) with SandboxAbortedError. */
  abort(): void;
}

/** Per-engine statistics. */
export interface IsolateStats {
  /** Warm isolates ready. */
  warm: number;
  /** Warm isolates being created. */
  warming: number;
  /** Executions running. */
  busy: number;
  /** Executions waiting for a slot. */
  queued: number;
  completed: number;
  /** Failed executions by error class name. */
  failed: Partial<Record<SandboxErrorName, number>>;
  warmStarts: number;
  coldStarts: number;
  /** Isolate threads alive (warm, running and quarantined). */
  threads: number;
  /** Threads that ignored termination and were suspended for good. */
  quarantined: number;
}

export declare class SandboxEngine {
  constructor(config: Partial<SandboxEngineConfig>, deps?: Partial<SandboxEngineDeps>);
  /** Compiles the WASM modules (invalid bytes: SandboxValidationError) and warms the pool. */
  init(): Promise<void>;
  /** Starts an execution; never throws: problems arrive as an `error` event. */
  submit(request: ExecuteMessage): SandboxSession;
  /** Stops accepting work, aborts queued and running sessions, disposes every isolate. */
  shutdown(): Promise<void>;
  stats(): IsolateStats;
}

// ---------------------------------------------------------------------------
// autoFix
// ---------------------------------------------------------------------------

export * from './lib/autofix';

// ---------------------------------------------------------------------------
// Runtime information
// ---------------------------------------------------------------------------

/** Versions this binary runs on. */
export declare const runtime: Readonly<{ v8Version: string; nodeAbi: string; nodeVersion: string }>;

/** Process-wide isolate thread counts. */
export declare function processStats(): { liveThreads: number; quarantinedThreads: number };
