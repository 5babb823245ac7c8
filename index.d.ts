/// <reference path="./lib/globals.d.ts" />
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

/** Codes of a plain `SandboxError` (no subclass): failures of isolet, not of the code it ran. */
export type SandboxBaseErrorCode =
  /** A bug or resource failure in isolet (e.g. an isolate could not be made). */
  | 'ERR_ISOLET_INTERNAL'
  /** The engine refused the run for lack of room (queue full, too many stuck threads); retry later. */
  | 'ERR_ISOLET_OVERLOADED'
  /** The engine cannot take runs yet: `SandboxEngine.init()` has not completed. */
  | 'ERR_ISOLET_NOT_READY'
  /** Process isolation: the sandbox host process serving the run died. */
  | 'ERR_ISOLET_CRASHED';

/** Every stable `code` an isolet error can have (one per error kind; see README "Errors"). */
export type SandboxErrorCode =
  | 'ERR_ISOLET_TIMEOUT'
  | 'ERR_ISOLET_OOM'
  | 'ERR_ISOLET_RUNTIME'
  | 'ERR_ISOLET_VALIDATION'
  | 'ERR_ISOLET_ABORTED'
  | SandboxBaseErrorCode;

/** Base class of every isolet error. `stack` never holds host frames. */
export declare class SandboxError extends Error {
  constructor(message: string, options?: { code?: SandboxErrorCode; cause?: unknown });
  /** The class name; each subclass narrows it to its own. */
  readonly name: SandboxErrorName;
  /** Stable machine-readable code, e.g. `ERR_ISOLET_TIMEOUT`. */
  readonly code: SandboxErrorCode;
}

/** Execution exceeded its wall-clock (`limit: 'wall'`) or CPU-time (`limit: 'cpu'`) limit. */
export declare class SandboxTimeoutError extends SandboxError {
  constructor(message: string, options?: { limit?: 'wall' | 'cpu' });
  readonly name: 'SandboxTimeoutError';
  readonly code: 'ERR_ISOLET_TIMEOUT';
  readonly limit: 'wall' | 'cpu';
}

/** The isolate exceeded its memory limit (V8 heap or ArrayBuffer budget). */
export declare class SandboxOOMError extends SandboxError {
  constructor(message: string);
  readonly name: 'SandboxOOMError';
  readonly code: 'ERR_ISOLET_OOM';
}

/** What the sandboxed code threw, copied out as strings. */
export interface ThrownInfo {
  /** The thrown value's `name` (e.g. `TypeError`), else its constructor's name. */
  name: string;
  message: string;
  /** The sandbox's own stack (`at sandbox.js:line:column`); never host frames. */
  stack?: string;
  /**
   * A thrown object's own enumerable fields, as far as they could be copied (at most 16
   * KiB of them; functions and other values that cannot be copied are left out):
   * `throw { code: 'E_AUTH', status: 401 }` gives `thrown.code` and `thrown.status`.
   */
  [field: string]: unknown;
}

/** The sandboxed code threw (or its result could not be copied out). */
export declare class SandboxRuntimeError extends SandboxError {
  constructor(message: string, options?: { thrown?: ThrownInfo; limit?: 'maxOutputBytes' | 'maxOutputValues' });
  readonly name: 'SandboxRuntimeError';
  readonly code: 'ERR_ISOLET_RUNTIME';
  readonly thrown?: ThrownInfo;
  /** The bridge limit that refused the output, when one did. */
  readonly limit?: 'maxOutputBytes' | 'maxOutputValues';
}

/** Invalid input: non-string code, bad options, or a syntax error (with position). */
export declare class SandboxValidationError extends SandboxError {
  constructor(message: string, options?: { line?: number; column?: number });
  readonly name: 'SandboxValidationError';
  readonly code: 'ERR_ISOLET_VALIDATION';
  /** 1-based line of a syntax error. */
  readonly line?: number;
  /** 1-based column of a syntax error. */
  readonly column?: number;
}

/** The caller aborted the execution (AbortSignal, `session.abort()`, engine shutdown). */
export declare class SandboxAbortedError extends SandboxError {
  constructor(message: string);
  readonly name: 'SandboxAbortedError';
  readonly code: 'ERR_ISOLET_ABORTED';
}

/** A failure of isolet itself, as a plain `SandboxError` (no subclass). */
export type SandboxBaseError = SandboxError & { readonly name: 'SandboxError'; readonly code: SandboxBaseErrorCode };

/**
 * The error of a failed run: a union discriminated by `name` (and `code`), so
 * `if (error.name === 'SandboxTimeoutError') error.limit` type-checks.
 */
export type SandboxFailureError =
  | SandboxTimeoutError
  | SandboxOOMError
  | SandboxRuntimeError
  | SandboxValidationError
  | SandboxAbortedError
  | SandboxBaseError;

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
  /**
   * Promises the run rejected with no handler that still had none when it ended (each is
   * also a `warn` log entry: its reason and where); see `unhandledRejections`.
   */
  unhandledRejections?: number;
}

export interface LogEntry {
  level: 'log' | 'info' | 'warn' | 'error' | 'debug';
  message: string;
}

// The method form makes parameters bivariant, so typed handlers are assignable while
// contextual typing still gives untyped ones `unknown`.
/**
 * A host function exposed to the sandbox. Arguments and result are structured-cloned.
 * The arguments come from sandboxed code, so an inline handler's parameters are
 * `unknown` until checked (`readFile: (req) => ...` gives `req: unknown`). A handler
 * declared with typed parameters is accepted too (`(req: { path: string }) => ...`):
 * that type is your claim about what the code passes, not a check; give the tool an
 * `inputSchema` (see DescribedTool) to have it checked on the host.
 */
export type Capability = { bivariant(...args: unknown[]): unknown }['bivariant'];

/**
 * An input schema: a JSON Schema object, an AI SDK `jsonSchema()` / `zodSchema()` value,
 * or a zod (or any Standard Schema) schema. Checked on the host before `execute` runs.
 */
export type ToolInputSchema = unknown;

/**
 * A tool in the AI SDK's shape (an AI SDK `tool({...})` is one). Its input (the first
 * argument in the sandbox) is checked against `inputSchema` on the host before `execute`
 * runs; a mismatch rejects the call with a TypeError in the sandbox naming the field
 * (`github.listIssues: input.repo must be a string, got a number`). An object counts as a
 * described tool when `execute` is a function and it has a string `description` or an
 * `inputSchema`; any other object is a namespace.
 */
export interface DescribedTool {
  /** Becomes JSDoc in `describeTools`. */
  description?: string;
  /**
   * A JSON Schema object, an AI SDK `jsonSchema()` / `zodSchema()` value (or a function
   * returning one), or a zod / Standard Schema schema.
   */
  inputSchema?: ToolInputSchema;
  /** Older AI SDK name of `inputSchema`. */
  parameters?: ToolInputSchema;
  /** Used only by `describeTools`, for the return type. */
  outputSchema?: ToolInputSchema;
  // The same type as Capability: a described tool and a namespace holding a tool named
  // `execute` look alike, and only identical signatures give inline parameters a type.
  /**
   * Called with the checked input and `{ toolCallId, messages: [] }` (ToolExecuteOptions).
   * Required at run time. Both are `unknown` unless you type them (as for Capability, a
   * typed parameter is your claim; `inputSchema` is the check).
   */
  execute?: Capability;
}

/** The second argument of a described tool's `execute` (the AI SDK's shape). */
export interface ToolExecuteOptions {
  /** `isolet-<dotted name>-<n>`, n counting this tool's calls in the run. */
  toolCallId: string;
  /** Always empty: a sandbox call has no conversation. */
  messages: unknown[];
}

/** One tool: a plain function or a described tool. */
export type ToolDefinition = Capability | DescribedTool;

/**
 * Capabilities or tools: each entry is a tool (`readFile(...)` in the sandbox) or a
 * namespace of tools one level deep (`{ github: { listIssues } }` -> `github.listIssues(...)`,
 * a frozen object in the sandbox). Host calls, tool policies and call counts use the
 * dotted name (`github.listIssues`).
 */
export type Capabilities = Record<string, ToolDefinition | Record<string, ToolDefinition>>;

/** Source language of sandboxed code. TypeScript is type-stripped, keeping every position. */
export type SandboxLanguage = 'javascript' | 'typescript';

/**
 * TypeScript declarations of `capabilities` (JSDoc from descriptions, input types from
 * schemas), for a model's prompt. Every tool returns a Promise inside the sandbox.
 */
export declare function describeTools(capabilities: Capabilities): string;

/**
 * What `resolve` answers for an import: the module's source, or the source with the
 * canonical key the module is kept under (its own relative imports are joined to it),
 * or `undefined` / `null` when there is no such module.
 */
export type ModuleResolution = string | { source: string; specifier?: string } | undefined | null;

/**
 * Resolves an import the `modules` map does not hold. `specifier` is the module's key
 * (a relative specifier already joined to its importer: `./a.js` from `lib/b.js` is
 * `lib/a.js`); `referrer` is the importer's key (`sandbox.mjs` for the run's own code).
 * Each call is one host message (`maxMessages` / `maxHostCalls`) and one of `maxModules`;
 * a source counts against `maxMessageBytes` and `maxModuleBytes`. It runs in this process:
 * nothing is read from disk or network unless it does so.
 */
export type ModuleResolver = (specifier: string, referrer: string) => ModuleResolution | Promise<ModuleResolution>;

/** ES module options, shared by `runSandbox` options and engine requests. */
export interface ModuleOptions {
  /**
   * `'module'`: the code is an ES module (static `import`, top-level `await`); its
   * `default` export, else its namespace as a plain object, is the result. Default
   * `'script'` (a script, or an async function body with capabilities / in the engine).
   */
  type?: 'script' | 'module';
  /**
   * Module sources by key, for static `import` and dynamic `import()` (in scripts too).
   * Keys are paths from the map's root (`./util.ts` and `util.ts` are the same key) or
   * bare names (`zod`). `.ts` / `.mts` modules (every module with `language:
   * 'typescript'`) are type-stripped.
   */
  modules?: Record<string, string>;
  /** Answers imports `modules` does not hold; without it such an import fails. */
  resolve?: ModuleResolver;
  /** Modules in a run's graph (the run's own code included) and calls to `resolve`. Default 256; 1 to 100000. */
  maxModules?: number;
  /** Source bytes of all the run's modules, given and resolved. Default 16 MiB; 1 to 1 GiB. */
  maxModuleBytes?: number;
}

/**
 * Options of `runSandbox`: exactly these names (any other is a SandboxValidationError
 * suggesting the nearest one). Numbers are whole numbers in the range given; one
 * outside it is a SandboxValidationError naming the option and the value.
 */
export interface SandboxOptions extends ModuleOptions {
  /**
   * Host functions exposed as globals. With capabilities the code is the body of an
   * async function: only `return` gives `output`.
   */
  capabilities?: Capabilities;
  /**
   * `typescript`: types are erased before compiling (positions kept, so errors and stack
   * frames point into the TypeScript); enums, namespaces and parameter properties give a
   * SandboxValidationError with line and column. Default `javascript`.
   */
  language?: SandboxLanguage;
  /** V8 heap limit in MB (ArrayBuffers are capped separately at the same size). Default 64; 8 to 8192. */
  memoryLimitMb?: number;
  /** Wall-clock limit in ms, waiting on capabilities included. Default 5000; 1 to 2147483647. */
  timeoutMs?: number;
  /** CPU-time limit in ms. Default: none (the wall-clock limit applies); 1 to 2147483647. */
  cpuTimeMs?: number;
  /** Aborts the run with SandboxAbortedError. */
  signal?: AbortSignal;
  /** Whose run this is: queued runs are served in turn across tenants; runs without one share one. 1 to 256 bytes. */
  tenant?: string;
  /**
   * Longest wait for an isolate slot, in ms: past it the run fails with a `SandboxError`,
   * code `ERR_ISOLET_OVERLOADED`, naming `maxQueueMs` and the wait, instead of waiting on.
   * 0: start now or fail. Default: the engine's `maxQueueMs` (30000); 0 to 2147483647.
   * For a persistent sandbox, each run's default (`sandbox.run` may give its own).
   */
  maxQueueMs?: number;
  /**
   * Cap on the serialized output, in bytes; built in this process, the output may cost at
   * most 6 times as much (estimated from its bytes first: past it, `SandboxRuntimeError`
   * with `limit: 'maxOutputBytes'`). Default 16 MiB; 1 to 1 GiB.
   */
  maxOutputBytes?: number;
  /**
   * Cap on one host-call argument list or reply, in bytes (an argument list built here
   * may cost 6 times as much). Default 16 MiB; 1 to 1 GiB.
   */
  maxMessageBytes?: number;
  /** Cap on host calls per run. Default 1000; 0 to 4294967295. */
  maxHostCalls?: number;
  /** Console entries kept. Default 1000; 0 to 1000000. */
  maxLogEntries?: number;
  /** Console bytes kept. Default 1 MiB; 1 to 1 GiB. */
  maxLogBytes?: number;
  /**
   * Bytes of host-call arguments and replies in flight at once. Default 4 x
   * `maxMessageBytes` (64 MiB); up to 16 GiB. Given alone it follows no other: a smaller
   * one takes `maxMessageBytes` down to it; given both, it must be at least
   * `maxMessageBytes`. See docs/budgets.md.
   */
  maxPendingHostCallBytes?: number;
  /** Host calls in flight at once. Default 128; 1 to 1000000. */
  maxPendingHostCalls?: number;
  /**
   * Cap on the values of the output: every value, property key, array element or hole,
   * Map/Set entry, and every slot of a sparse array's length counts one. A safety bound
   * far above data: what the output costs this process once built is bounded by
   * `maxOutputBytes` (at most 6 x it, estimated before anything is built: past it,
   * `limit: 'maxOutputBytes'`), and a big output is built a few milliseconds at a time.
   * Past it: `SandboxRuntimeError` with `limit: 'maxOutputValues'`.
   * Default 8388608; 1 to 4294967295. See docs/budgets.md.
   */
  maxOutputValues?: number;
  /**
   * Cap on the values of one host-call argument list, counted as for `maxOutputValues`;
   * past it the call is refused in the sandbox with a RangeError. Default 8388608; 1 to 4294967295.
   */
  maxMessageValues?: number;
  /**
   * Values of host-call arguments in flight at once. Default 4 x `maxMessageValues`
   * (33554432); up to 4294967295; with `maxMessageValues` as `maxPendingHostCallBytes`
   * with `maxMessageBytes`.
   */
  maxPendingHostCallValues?: number;
  /**
   * Where the isolate runs. `'process'` (default): in a supervised sandbox host process,
   * so a run that cannot be stopped, a crash or a memory overrun ends that process, never
   * this one. `'thread'`: on a thread of this process, for the lowest latency; see the
   * README's security model for what that mode cannot guarantee.
   */
  isolation?: Isolation;
  /**
   * `true` installs the web platform APIs in the sandbox's global object (not enumerable,
   * as in browsers): `atob`/`btoa`, `TextEncoder`/`TextDecoder`, `URL`/`URLSearchParams`,
   * `crypto.getRandomValues`/`randomUUID`/`subtle.digest`, `structuredClone`,
   * `queueMicrotask`, `DOMException`, `Event`/`EventTarget`/`AbortController`/`AbortSignal`,
   * `performance.now()` (100 µs steps), `setTimeout`/`setInterval` (timers belong to the run:
   * still pending when its result settles, they are dropped; at most 10000 pending),
   * `Blob`/`File`, `Headers`/`Request`/`Response`, and, when the capability `fetch` is a
   * `createFetchCapability(...)`, WHATWG `fetch(input, init)` over it (its allow-list checks
   * each request and each redirect; the sandbox gets the final URL and the raw body bytes;
   * `signal` aborts the host's request). None reaches the host's files, network or
   * full-resolution clock.
   * Default `false` here and in SandboxEngine (the Code Mode executor, the MCP server and
   * `isolet run` turn it on). `console` prints as Node's does with or without it. A
   * persistent sandbox keeps the choice it was opened with. See docs/web.md.
   */
  web?: boolean;
  /**
   * A promise the code rejected with no handler that still has none when the run ends:
   * `'warn'` (default) reports it as a `warn` log entry with its message and position and
   * counts it in `stats.unhandledRejections`; `'error'` also fails a run that would have
   * succeeded with a SandboxRuntimeError ("Unhandled promise rejection: ..."). For a
   * persistent sandbox, each run's default (`sandbox.run` may give its own).
   */
  unhandledRejections?: UnhandledRejections;
}

/** What a run does about a promise rejected with no handler; see SandboxOptions.unhandledRejections. */
export type UnhandledRejections = 'warn' | 'error';

/** Where isolates run: supervised child processes (default) or threads of this process. */
export type Isolation = 'process' | 'thread';

export interface SandboxSuccess<T = unknown> {
  success: true;
  output: T;
  stats: ExecutionStats;
  logs: LogEntry[];
}

export interface SandboxFailure {
  success: false;
  error: SandboxFailureError;
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
// Persistent sandboxes
// ---------------------------------------------------------------------------

/**
 * Options of `createSandbox` and `engine.openSandbox`: runSandbox's (but `signal`, which
 * is per run) and the sandbox-wide limits. `memoryLimitMb` is the isolate's heap for the
 * sandbox's whole life; `timeoutMs` and `cpuTimeMs` are each run's defaults; `maxHostCalls`
 * is per run. With capabilities the code is still a script (top-level `await` works).
 * Module options: `type` is each run's default; `modules` and `resolve` serve every run's
 * imports; `maxModules` and `maxModuleBytes` bound the sandbox's module graph for its life
 * (modules loaded by all runs together, plus the running run's own code), and calls to
 * `resolve` per run.
 */
export interface PersistentSandboxOptions extends Omit<SandboxOptions, 'signal'> {
  /** CPU time of all runs together, in ms; used up, it closes the sandbox (`totalCpuTime`). Default: none. */
  totalCpuTimeMs?: number;
  /**
   * No run for this long (ms) closes the sandbox (`idleTimeout`); a run waiting for an
   * isolate slot counts as a run. Default 600000 (10 minutes); 1 to 2147483647.
   */
  idleTimeoutMs?: number;
  /** Host calls of all runs together; used up, it closes the sandbox (`totalHostCalls`). Default: none. */
  maxTotalHostCalls?: number;
}

/** Options of one `sandbox.run`. */
export interface SandboxRunOptions {
  /** This run's wall-clock limit in ms (default: the sandbox's `timeoutMs`). */
  timeoutMs?: number;
  /** This run's CPU limit in ms (default: the sandbox's `cpuTimeMs`), cut to what is left of `totalCpuTimeMs`. */
  cpuTimeMs?: number;
  /** This run's language (default: the sandbox's). */
  language?: SandboxLanguage;
  /** Aborts this run with SandboxAbortedError (the sandbox stays open). */
  signal?: AbortSignal;
  /**
   * `'module'`: this run is an ES module (its `default` export, else its namespace, is
   * the result; its top-level declarations stay in the module, `globalThis.x = ...`
   * persists). Default: the sandbox's `type` (`'script'` unless it says otherwise).
   */
  type?: 'script' | 'module';
  /**
   * Modules this run may import, with the sandbox's own. A module a run imports stays
   * loaded, the same instance for every later run; a source given again for a loaded key
   * must be the same (else the run fails with a SandboxValidationError).
   */
  modules?: Record<string, string>;
  /** This run's resolver (default: the sandbox's `resolve`). */
  resolve?: ModuleResolver;
  /** This run's longest wait for an isolate slot, in ms (default: the sandbox's `maxQueueMs`); see SandboxOptions.maxQueueMs. */
  maxQueueMs?: number;
  /** This run's (default: the sandbox's); see SandboxOptions.unhandledRejections. */
  unhandledRejections?: UnhandledRejections;
}

/** Why a sandbox closed. */
export type SandboxCloseReason =
  | 'closed'
  | 'idleTimeout'
  | 'outOfMemory'
  | 'unresponsive'
  | 'totalCpuTime'
  | 'totalHostCalls'
  | 'shutdown'
  | 'hostLost'
  | 'internal';

/**
 * One isolate and one context kept across runs: top-level declarations and globals of a
 * run are there for the next. Runs take turns. Nothing of it is visible to any other
 * sandbox or run. With `isolation: 'process'` (the default) it lives in a sandbox host
 * process of its own, shared with no other run or sandbox; that host lost (its own run
 * crashed it, or it was killed) closes it (`hostLost`).
 */
export declare class Sandbox {
  private constructor();
  /** True once closed (by `close()`, a limit, idleness, or its engine's shutdown). */
  readonly closed: boolean;
  /** Why it closed; null while open. */
  readonly closeReason: SandboxCloseReason | null;
  /** What it has used of its sandbox-wide limits. */
  readonly usage: { runs: number; cpuTimeMs: number; hostCalls: number };
  /**
   * Evaluates `code` as a script in the sandbox's context; `output` is its completion
   * value (a promise is awaited). With `type: 'module'` the code is an ES module: its
   * `default` export, else its namespace, is `output`. Never rejects; a closed sandbox
   * gives a SandboxValidationError.
   */
  run<T = unknown>(code: string, options?: SandboxRunOptions): Promise<SandboxResult<T>>;
  /** Calls global function `name` with copies of `args`; its (awaited) return value is `output`. */
  call<T = unknown>(name: string, ...args: unknown[]): Promise<SandboxResult<T>>;
  /** Closes the sandbox: a run in flight is aborted, later ones fail. Idempotent. */
  close(): void;
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * Opens a persistent sandbox on runSandbox's default engine of its isolation (process
 * isolation: in a sandbox host process of its own, started now; resolves once it is
 * ready). Rejects with a SandboxValidationError for bad options, a SandboxError
 * (`ERR_ISOLET_OVERLOADED`) when every isolate slot is taken.
 */
export declare function createSandbox(options?: PersistentSandboxOptions): Promise<Sandbox>;

// ---------------------------------------------------------------------------
// Capabilities
// ---------------------------------------------------------------------------

/**
 * Why an isolet capability refused a call. Sandboxed code sees the refusal's `name` and
 * `message`; a host that calls the capability itself also gets this `code` on the
 * rejection (an `Error`, a `TypeError` for `ERR_ISOLET_INVALID_ARGUMENT`).
 */
export type CapabilityErrorCode = FileReadErrorCode | FetchErrorCode;

/** Refusals of `createFileReadCapability`'s `readFile` (docs/capabilities.md). */
export type FileReadErrorCode =
  | 'ERR_ISOLET_INVALID_ARGUMENT'
  | 'ERR_ISOLET_INVALID_PATH'
  | 'ERR_ISOLET_PATH_OUTSIDE'
  | 'ERR_ISOLET_NOT_FOUND'
  | 'ERR_ISOLET_NOT_A_FILE'
  | 'ERR_ISOLET_TOO_LARGE'
  | 'ERR_ISOLET_ACCESS_DENIED'
  | 'ERR_ISOLET_READ_FAILED'
  | 'ERR_ISOLET_READ_BUDGET'
  | 'ERR_ISOLET_TOO_MANY_READS';

/** Refusals of `createFetchCapability`'s `fetch` (docs/capabilities.md). */
export type FetchErrorCode =
  | 'ERR_ISOLET_INVALID_ARGUMENT'
  | 'ERR_ISOLET_INVALID_URL'
  | 'ERR_ISOLET_ORIGIN_NOT_ALLOWED'
  | 'ERR_ISOLET_METHOD_NOT_ALLOWED'
  | 'ERR_ISOLET_REQUEST_TOO_LARGE'
  | 'ERR_ISOLET_RESPONSE_TOO_LARGE'
  | 'ERR_ISOLET_RESPONSE_BUDGET'
  | 'ERR_ISOLET_TOO_MANY_REDIRECTS'
  | 'ERR_ISOLET_FETCH_TIMEOUT'
  | 'ERR_ISOLET_FETCH_FAILED'
  | RunEndedCode;

/** `code` of `RunContext.signal.reason` (and of a fetch stopped by it): the run has ended. */
export type RunEndedCode = 'ERR_ISOLET_RUN_ENDED';

/** A capability's refusal, as a host that calls the capability directly catches it. */
export interface CapabilityError<C extends CapabilityErrorCode = CapabilityErrorCode> extends Error {
  readonly code: C;
}

/** Options of `createFileReadCapability`: exactly these names. */
export interface FileReadOptions {
  /** Largest file served, in bytes. Default 10 MiB; 0 to 256 MiB. */
  maxBytes?: number;
  /** Reads one run may have in flight at once; more fail with ERR_ISOLET_TOO_MANY_READS. Default 8; 1 to 1024. */
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

/** The run a capability call is serving (see docs/budgets.md). */
export interface RunContext {
  /** Aborts when the run ends, however it ends (reason code `ERR_ISOLET_RUN_ENDED`). */
  readonly signal: AbortSignal;
  /** The run's host-call budgets. */
  readonly budgets: Readonly<{ maxPendingHostCallBytes: number; maxPendingHostCalls: number }>;
  /** Per-run state of a capability: `init()` runs once per run and key. */
  slot<T>(key: unknown, init: () => T): T;
}

/**
 * The run the current capability call serves, for your own capabilities (pass
 * `currentRun()?.signal` to what they start). Read it before the handler's first `await`;
 * outside a capability call it is `undefined`.
 */
export declare function currentRun(): RunContext | undefined;

/** Options of `createFetchCapability`: exactly these names. */
export interface FetchCapabilityOptions {
  /** Exact origins that may be requested, e.g. `https://api.example.com`. At least one. */
  allowedOrigins: readonly string[];
  /** Per-request timeout in ms. Default 10000; 1 to 2147483647. */
  timeoutMs?: number;
  /** Largest response body, in bytes. Default 5 MiB; 0 to 256 MiB. */
  maxResponseBytes?: number;
  /** Largest request body, in bytes. Default 1 MiB; 0 to 2^53 - 1. */
  maxRequestBytes?: number;
  /**
   * Methods allowed, any case, from GET HEAD POST PUT PATCH DELETE OPTIONS; at least one.
   * Default GET, HEAD, POST, PUT, PATCH, DELETE.
   */
  allowedMethods?: readonly string[];
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

/**
 * CPU, memory and wall-clock limits for an isolate: exactly these names. Whole numbers
 * in the range given (else a SandboxValidationError naming e.g. `isolateLimits.wallTimeMs`).
 */
export interface IsolateLimits {
  /**
   * V8 heap limit in MB (ArrayBuffers capped separately at the same size). Default: the
   * engine's `memoryLimitMb` (128); 8 to 8192. A request that asks for other memory than the
   * engine's gets a fresh (cold) isolate.
   */
  memoryMb?: number;
  /** CPU time of the isolate's thread, in ms. Default 5000; 1 to 2147483647. */
  cpuTimeMs?: number;
  /** Wall-clock time, waiting on data requests and tools included, in ms. Default 30000; 1 to 2147483647. */
  wallTimeMs?: number;
  /**
   * Longest wait for an isolate slot, in ms, before the request fails with an `error`
   * event (`ERR_ISOLET_OVERLOADED`, naming `maxQueueMs` and the wait). 0: start now or
   * fail. Default: the engine's `maxQueueMs`; 0 to 2147483647.
   */
  maxQueueMs?: number;
}

/** Message size and count limits for the bridge, per execution: exactly these names. */
export interface BridgeLimits {
  /** Bytes of one message in either direction (tool args/replies, data answers). Default 16 MiB; 1 to 1 GiB. */
  maxMessageBytes?: number;
  /** Tool calls plus data requests. Default 1000; 0 to 4294967295. */
  maxMessages?: number;
  /** Bytes of the serialized result. Default 16 MiB; 1 to 1 GiB. */
  maxOutputBytes?: number;
  /** Console entries kept. Default 1000; 0 to 1000000. */
  maxLogEntries?: number;
  /** Console bytes kept. Default 1 MiB; 1 to 1 GiB. */
  maxLogBytes?: number;
  /**
   * Bytes of tool-call arguments and replies in flight at once. Default 4 x
   * `maxMessageBytes` (64 MiB); up to 16 GiB. Derived limits follow the one they come
   * from (at either level: the engine's defaults or the request) unless given too; given
   * both, it must be at least `maxMessageBytes`. See docs/budgets.md.
   */
  maxPendingHostCallBytes?: number;
  /** Tool calls in flight at once. Default 128; 1 to 1000000. */
  maxPendingHostCalls?: number;
  /**
   * Values of the result (values, keys, elements, holes, sparse slots; see
   * docs/budgets.md): a safety bound far above data (what the result costs once built
   * is bounded by 6 x `maxOutputBytes`). Past it: `SandboxRuntimeError` with
   * `limit: 'maxOutputValues'`. Default 8388608; 1 to 4294967295.
   */
  maxOutputValues?: number;
  /** Values of one tool-call argument list; past it the call is a RangeError in the sandbox. Default 8388608; 1 to 4294967295. */
  maxMessageValues?: number;
  /** Values of tool-call arguments in flight at once. Default 4 x `maxMessageValues` (33554432); up to 4294967295. */
  maxPendingHostCallValues?: number;
}

export declare const DEFAULT_ISOLATE_LIMITS: Readonly<Required<IsolateLimits>>;
export declare const DEFAULT_BRIDGE_LIMITS: Readonly<Required<BridgeLimits>>;

/**
 * Which of the engine's tools a request may call, and how often. Default: none. Naming
 * a tool that is not registered is a SandboxValidationError.
 */
export interface ToolPolicy {
  /** Dotted names of engine tools (`lookup`, `github.listIssues`). Default `[]`. */
  allowedTools?: readonly string[];
  /**
   * Per-tool call limits (whole numbers, 0 or more); tools not listed are unlimited
   * (within `maxMessages`). Applies to a request's own tools too.
   */
  maxCallsPerTool?: Readonly<Record<string, number>>;
}

export declare const DEFAULT_TOOL_POLICY: Readonly<{ allowedTools: readonly string[] }>;

/** A WebAssembly module compiled at `init()`; sandbox code sees its exports as `wasm.<name>`. */
export interface WasmModuleConfig {
  /** A JavaScript identifier. */
  name: string;
  /** The module's bytes. It must have no imports. */
  source: Uint8Array | ArrayBuffer;
}

/**
 * Engine configuration (the seed's six fields, required here as in the seed, plus
 * isolet's optional ones). `new SandboxEngine()` takes a `Partial` of it: every field
 * has a default, and any other name is a SandboxValidationError suggesting the nearest.
 * docs/options.md lists every option.
 */
export interface SandboxEngineConfig {
  /**
   * Memory per isolate, in MB: the heap limit of every request that sets no
   * `isolateLimits.memoryMb` (warm isolates have it). Wins over
   * `defaultIsolateLimits.memoryMb`. Default: `defaultIsolateLimits.memoryMb`, else 128;
   * 8 to 8192. isolet's name for it everywhere; `memoryMb` (@coda/sandbox's) is accepted
   * as well. Give one of them.
   */
  memoryLimitMb?: number;
  /** @coda/sandbox's name for `memoryLimitMb`, accepted for good. */
  memoryMb: number;
  /** Executions running at once. Default 4; 1 to 1024. */
  maxConcurrentIsolates: number;
  /**
   * Isolates created ahead of time, each with its context prepared while it waits
   * (`console`, the web APIs, the `prelude`): a run that takes one starts at its own code.
   * Default 0; 0 to 256.
   */
  warmPoolSize: number;
  /** Compiled once at `init()`. Default none. */
  wasmModules: readonly WasmModuleConfig[];
  /**
   * Limits of a request that gives none. A field left out is taken from
   * `DEFAULT_ISOLATE_LIMITS`; a given engine `memoryLimitMb` (or `memoryMb`) wins over this `memoryMb`.
   */
  defaultIsolateLimits: IsolateLimits;
  /** Limits of a request that gives none. A field left out is taken from `DEFAULT_BRIDGE_LIMITS`. */
  defaultBridgeLimits: BridgeLimits;
  /**
   * Executions allowed to wait for a slot; more are refused with an error event
   * (`ERR_ISOLET_OVERLOADED`). Default 1000; 0 to 1000000.
   */
  maxQueueSize?: number;
  /**
   * Longest wait for an isolate slot of a run that gives none (`isolateLimits.maxQueueMs`,
   * `sandbox.run`'s, runSandbox's), in ms: past it the run fails (`ERR_ISOLET_OVERLOADED`,
   * naming `maxQueueMs` and the wait) instead of waiting on. Wins over
   * `defaultIsolateLimits.maxQueueMs`. Default 30000; 0 to 2147483647. See docs/budgets.md.
   */
  maxQueueMs?: number;
  /**
   * Persistent sandboxes open at once (`openSandbox`). An idle open sandbox holds no
   * isolate slot (its runs take one while they run) but keeps its memory (and in process
   * isolation a sandbox host process of its own), so this bounds them. Past it `openSandbox`
   * rejects with a `SandboxError`, code `ERR_ISOLET_OVERLOADED`, naming `maxOpenSandboxes`.
   * Default 256; 1 to 100000. See docs/budgets.md.
   */
  maxOpenSandboxes?: number;
  /**
   * Of those, the most one named `tenant` may hold (sandboxes naming none count against
   * `maxOpenSandboxes` only). Past it `openSandbox` rejects (`ERR_ISOLET_OVERLOADED`,
   * naming `maxOpenSandboxesPerTenant`). Default a quarter of `maxOpenSandboxes` (64), at
   * least 1; at most `maxOpenSandboxes`.
   */
  maxOpenSandboxesPerTenant?: number;
  /**
   * Host tools, exposed as globals or namespaces; a request's `toolPolicy` decides which
   * (by dotted name) it may call.
   */
  tools?: Capabilities;
  /** `'process'` (default) or `'thread'`; see `SandboxOptions.isolation`. */
  isolation?: Isolation;
  /**
   * Sandbox host processes kept running in process isolation (runs are spread over
   * them; each idle one holds 43-50 MB resident). Default 2; 1 to 64, and more than
   * `maxConcurrentIsolates` counts as `maxConcurrentIsolates`. Persistent sandboxes live
   * in sandbox hosts of their own besides (`sandboxesPerHost`).
   */
  processes?: number;
  /**
   * Process isolation: how many persistent sandboxes of one tenant share a sandbox host
   * (1 to 256; default 16). Sandboxes live in hosts of their own, apart from one-shot runs
   * and from other tenants, so nothing of another tenant can end them; sandboxes opened
   * without a `tenant` count as one tenant (name each end user's to keep users apart). Sharing a host
   * makes a sandbox cheap to open (no process start once its tenant has a host with room)
   * and to hold (about a megabyte, not a process each); the cost is that a sandbox that
   * ends its host (a crash, memory past the host's budget, a built-in that ignores
   * termination) ends the other sandboxes there too: each closes with `closeReason`
   * `'hostLost'` (a run of it in flight fails with the host's end, e.g.
   * `SandboxCrashedError`; later runs with a `SandboxValidationError` saying it is closed).
   * `1`: a host per sandbox.
   */
  sandboxesPerHost?: number;
  /**
   * A classic script evaluated into every run's fresh context before the run's code, so
   * its functions and globals are there for the run; with the engine's `web: true` it may
   * use the web APIs at its top level. Checked at `init()` (a syntax error
   * with its line and column, a throw, more than 2 s or the engine's `memoryLimitMb` reject
   * `init()` with a `SandboxValidationError`), compiled once per engine (per sandbox host
   * in process isolation) and then served from the code cache. It runs before tools,
   * `data` and WebAssembly modules exist, so it cannot capture them. A warm isolate
   * (`warmPoolSize`) evaluates it while it waits, so the run that takes it pays nothing of
   * it; a run on a new isolate evaluates it under that run's limits. Every run starts from
   * the pristine prelude state: what a run changes is gone for the next. At most 8 MiB
   * (UTF-8), modules included.
   *
   * As `{ source?, modules? }`: `source` is that script, and `modules` ES modules (by key,
   * JavaScript) that every run, one-shot or sandbox, may import without giving them.
   * Each is checked at `init()` (compiled and evaluated once, after `source`; a syntax
   * error, a throw or an import of a key that is not a prelude module rejects `init()`
   * with a `SandboxValidationError` naming the module), compiled through the code cache,
   * and evaluated in a run only when the run first imports it. A run's or sandbox's own
   * `modules` may not name a prelude module (a SandboxValidationError).
   */
  prelude?: string | PreludeOptions;
  /**
   * Compiled-code cache budget in MB, per engine (per sandbox host in process isolation):
   * V8 code caches of sources run at least twice (and of the prelude, always kept), least
   * recently used evicted first. 0 keeps only the prelude's. Default 32; 0 to 1024.
   */
  codeCacheMb?: number;
  /** The web platform APIs for requests that do not say (`ExecuteMessage.web`); see SandboxOptions.web. Default `false`. */
  web?: boolean;
  /**
   * For requests that do not say, and sandboxes the engine opens (`openSandbox`) whose
   * options do not; see SandboxOptions.unhandledRejections. Default `'warn'`.
   */
  unhandledRejections?: UnhandledRejections;
}

/** An engine's prelude as an object: a script, and modules every run may import. */
export interface PreludeOptions {
  /** A classic script evaluated into every run's fresh context before the run's code. */
  source?: string;
  /** ES modules by key (`lib/money.js`, `zod`), importable by every run of the engine. */
  modules?: Record<string, string>;
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
export type SessionFactory = <T = unknown>(request: ExecuteMessage) => SandboxSession<T>;

/** Inbound: an execution request: exactly these names. */
export interface ExecuteMessage extends ModuleOptions {
  /** Names the session and its events. Default: `deps.idGenerator()` (`session_<n>`). */
  requestId?: string;
  /** Body of an async function: `return` gives the result; with `type: 'module'`, an ES module. */
  code: string;
  /** Values of `data` known up front (no data request needed). */
  data?: Record<string, unknown>;
  /** Per field over the engine's `defaultIsolateLimits` (and `memoryLimitMb`). */
  isolateLimits?: IsolateLimits;
  /** Per field over the engine's `defaultBridgeLimits`. */
  bridgeLimits?: BridgeLimits;
  /** Default: no engine tool may be called. */
  toolPolicy?: ToolPolicy;
  /** Source language; see SandboxOptions.language. Default `javascript`. */
  language?: SandboxLanguage;
  /**
   * Tools of this request only, beside the engine's `tools` (a name may not clash).
   * They need no `toolPolicy` entry; `maxCallsPerTool` still applies.
   */
  tools?: Capabilities;
  /** Whose request this is; see SandboxOptions.tenant. */
  tenant?: string;
  /** The web platform APIs (see SandboxOptions.web). Default: the engine's `web`. */
  web?: boolean;
  /** See SandboxOptions.unhandledRejections. Default: the engine's. */
  unhandledRejections?: UnhandledRejections;
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

/** Outbound: the execution returned `data` (what `return` gave, copied out). */
export interface ResultMessage<T = unknown> extends EventBase {
  type: 'result';
  data: T;
  stats: ExecutionStats;
  logs: LogEntry[];
}

/** Outbound: the execution failed; `error.name` / `error.code` say why. */
export interface ErrorMessage extends EventBase {
  type: 'error';
  error: SandboxFailureError;
  message: string;
  stats: ExecutionStats;
  logs?: LogEntry[];
}

/** One event of a session; `T` is the type of the `result` event's `data`. */
export type SandboxEvent<T = unknown> = StatusMessage | DataRequestMessage | ResultMessage<T> | ErrorMessage;

/**
 * Async iterable of one execution's events; ends after its one `result` or `error`.
 * `T` (from `engine.submit<T>()`) types the result's `data`; it is not checked at run
 * time: the sandboxed code decides what it returns.
 */
export declare class SandboxSession<T = unknown> implements AsyncIterable<SandboxEvent<T>> {
  private constructor();
  readonly requestId: string;
  /** Resolves with the final `result` or `error` event. */
  readonly done: Promise<ResultMessage<T> | ErrorMessage>;
  [Symbol.asyncIterator](): AsyncIterableIterator<SandboxEvent<T>>;
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
  /** Threads that ignored termination and still run at the lowest priority (or are parked after a fatal OOM); drops when one finishes on its own. */
  quarantined: number;
  /** The engine's isolation mode. */
  isolation: Isolation;
  /** Per tenant (`tenant: null`: the runs that name none): queued runs are served in turn across tenants. Idle tenants are kept for the 256 most recent. */
  tenants: TenantStats[];
  /** Process isolation only: the sandbox host processes and their supervision. */
  processes?: SandboxProcessStats;
  /** The compiled-code cache (process isolation: every live host's, added up). */
  codeCache: CodeCacheStats;
  /**
   * Persistent sandboxes: how many are open, and the engine's bounds on them. An idle one
   * holds no isolate slot; its runs count in `busy` and `queued` like any run.
   */
  sandboxes: { open: number; maxOpenSandboxes: number; maxOpenSandboxesPerTenant: number };
  /** Runs that waited for a slot past their `maxQueueMs` and failed (not counted in `failed`: they never ran). */
  queueExpired: number;
}

/** The compiled-code cache of an engine (`SandboxEngineConfig.codeCacheMb`). */
export interface CodeCacheStats {
  /** Compilations served from cached data. */
  hits: number;
  /** Compilations of cacheable sources not served (seen for the first time, or not kept). */
  misses: number;
  /** Cached data V8 refused (the source was compiled again and the entry dropped). */
  rejected: number;
  /** Entries evicted to make room. */
  evictions: number;
  entries: number;
  /** Bytes the entries are charged (cached data + source + bookkeeping). */
  bytes: number;
  /** The budget (`codeCacheMb`; added up over hosts in process isolation). */
  budgetBytes: number;
}

/** One tenant's runs in an engine. */
export interface TenantStats {
  tenant: string | null;
  queued: number;
  running: number;
  /** Persistent sandboxes of the tenant open now. */
  sandboxes: number;
  completed: number;
  /** Failed runs by error class name. */
  failed: Partial<Record<SandboxErrorName, number>>;
}

/** Supervision counts of an engine's sandbox host processes. */
export interface SandboxProcessStats {
  /** Hosts starting or serving (each open persistent sandbox's own host included). */
  live: number;
  /** Hosts not yet ready (a replacement coming up counts here). */
  starting: number;
  /** Hosts taking no new work, to be ended once their runs finish. */
  draining: number;
  /** Hosts started so far (replacements included). */
  started: number;
  /** Hosts that ended on their own (a signal such as SIGSEGV, V8's fatal OOM). */
  crashed: number;
  /** Hosts the supervisor replaced, by reason: `stuck` (a run ignored termination),
   *  `memory` (resident memory over budget), `overdue` (a run unanswered past its
   *  limit + 750 ms), `start-timeout`, `protocol` (a frame that breaks the protocol). */
  recycled: Partial<Record<'stuck' | 'memory' | 'overdue' | 'start-timeout' | 'protocol', number>>;
  /** Crashes by cause (`signal SIGSEGV`, `exit code 134`, ...). */
  crashReasons: Record<string, number>;
  /** Process ids of the live and draining hosts. */
  pids: number[];
  /** What least privilege a host could apply on this system. */
  lockdown: { seccomp: boolean; noNewPrivs: boolean; parentDeathSignal: boolean; reason?: string; ioUringRings: number } | null;
}

export declare class SandboxEngine {
  constructor(config: Partial<SandboxEngineConfig>, deps?: Partial<SandboxEngineDeps>);
  /** Compiles the WASM modules (invalid bytes: SandboxValidationError) and warms the pool. */
  init(): Promise<void>;
  /**
   * Starts an execution; never throws: problems arrive as an `error` event. `T` types
   * the `result` event's `data` (default `unknown`); it is not checked at run time.
   */
  submit<T = unknown>(request: ExecuteMessage): SandboxSession<T>;
  /**
   * Opens a persistent sandbox on this engine; it holds one isolate slot until closed
   * (process isolation: and a sandbox host process of its own, started for it).
   * `isolation` must be the engine's or left out.
   */
  openSandbox(options?: PersistentSandboxOptions): Promise<Sandbox>;
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

/**
 * Isolate threads of this process, and the sandbox host processes it supervises.
 * `parkedThreads` / `parkedBytes`: threads (thread isolation) that a run ended in V8's
 * fatal out-of-memory, parked for good, and what their isolates hold; past
 * `maxParkedBytes` (`ISOLET_MAX_PARKED_MB`, default 512 MB) new runs are refused with
 * `ERR_ISOLET_OVERLOADED` naming the bound and process isolation.
 */
export declare function processStats(): {
  liveThreads: number;
  quarantinedThreads: number;
  sandboxProcesses: number;
  parkedThreads: number;
  parkedBytes: number;
  maxParkedBytes: number;
};
