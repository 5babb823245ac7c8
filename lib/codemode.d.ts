/// <reference path="./globals.d.ts" />
// Types of `isolet/codemode`. The Executor shapes are those of @cloudflare/codemode
// (executor-types), restated so that using isolet's executor needs no Cloudflare types.
import type { FetchRequest, FetchResponse, SandboxEngineConfig, SandboxLanguage } from '../index';

/** What one execution gives back. */
export interface ExecuteResult {
  result: unknown;
  /** Set when the code threw or was stopped: the thrown message, or why it was stopped. */
  error?: string;
  /** Console output; `console.warn` lines start `[warn] `, `console.error` lines `[error] `. */
  logs?: string[];
}

/** Tool functions exposed inside the sandbox as `name.fn(...)`. */
export interface ResolvedProvider {
  name: string;
  fns: Record<string, (...args: unknown[]) => Promise<unknown>>;
  /** Sandbox-side JavaScript run after the namespace exists; members it adds take precedence. */
  prelude?: string;
  /** `false`: a tool receives only its first argument. Default: every argument, in order. */
  positionalArgs?: boolean;
}

export interface ExecuteOptions {
  /** Workers RPC connectors: not supported by isolet (an execution with any fails with an error). */
  connectors?: Array<{ name: string; binding: { callTool(method: string, args: unknown): Promise<unknown> } }>;
}

/** The Executor contract of @cloudflare/codemode. */
export interface Executor {
  execute(
    code: string,
    providersOrFns: ResolvedProvider[] | Record<string, (...args: unknown[]) => Promise<unknown>>,
    options?: ExecuteOptions,
  ): Promise<ExecuteResult>;
}

/**
 * Options: its own, plus isolet's SandboxEngine config (`memoryLimitMb`, concurrency,
 * warm pool, limits), passed through to the engine. docs/options.md lists every option.
 */
export interface IsoletExecutorOptions extends Partial<SandboxEngineConfig> {
  /**
   * Wall-clock limit of one execution in ms (also its CPU limit unless
   * `defaultIsolateLimits.cpuTimeMs` says otherwise). Default 60000; 1 to 2147483647.
   */
  timeoutMs?: number;
  /**
   * @deprecated `timeoutMs` (DynamicWorkerExecutor's name): still accepted, with a
   * one-time DeprecationWarning; giving both is a SandboxValidationError.
   */
  timeout?: number;
  /** Language the model writes in. Default `javascript`. */
  language?: SandboxLanguage;
  /**
   * One persistent sandbox for every execution of this executor (opened at the first):
   * what an execution puts on `globalThis` the next one sees; its own declarations stay
   * its own. Each execution calls its own tools, and only while it runs. The sandbox is
   * hardened as it opens: built-ins are frozen (code that patches one, a polyfill say,
   * fails with a TypeError) and the code runs in strict mode, so no execution can change
   * what a later one runs or reach its tools (docs/codemode.md). Once the sandbox closes
   * (idleTimeoutMs, a memory overrun), the next execution starts in a new, empty one.
   * Default false.
   */
  stateful?: boolean;
  /** Stateful only: no execution for this long (ms) closes the sandbox. Default: none. */
  idleTimeoutMs?: number;
  /** @deprecated `idleTimeoutMs`: still accepted, with a one-time DeprecationWarning. */
  idleTimeout?: number;
  /**
   * The web platform APIs in every execution (URL, TextEncoder, crypto, timers, a
   * browser-like console...; docs/web.md). Default `true` here; `false` turns them off.
   * A stateful executor's sandbox keeps the choice it was opened with.
   */
  web?: boolean;
  /**
   * A fetch capability (`createFetchCapability({ allowedOrigins })`): with `web`, every
   * execution's global `fetch` is WHATWG fetch over it (its allow-list checks each request
   * and each redirect). Without it, executions have no `fetch` (as Code Mode's
   * `globalOutbound: null`).
   */
  fetch?: (request: FetchRequest) => Promise<FetchResponse>;
}

/** Runs Code Mode programs in isolet: one fresh isolate per execution. Never throws from `execute`. */
export declare class IsoletExecutor implements Executor {
  constructor(options?: IsoletExecutorOptions);
  /** The wall-clock limit of one execution, in ms (the `timeoutMs` option). */
  readonly timeoutMs: number;
  /** @deprecated `timeoutMs`. */
  readonly timeout: number;
  readonly language: SandboxLanguage;
  /** One persistent sandbox for every execution (the `stateful` option). */
  readonly stateful: boolean;
  /** The web platform APIs (the `web` option; default true). */
  readonly web: boolean;
  execute(
    code: string,
    providersOrFns: ResolvedProvider[] | Record<string, (...args: unknown[]) => Promise<unknown>>,
    options?: ExecuteOptions,
  ): Promise<ExecuteResult>;
  /** Stops the engine behind the executor. */
  dispose(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** `new IsoletExecutor(options)`. */
export declare function createExecutor(options?: IsoletExecutorOptions): IsoletExecutor;

/**
 * JavaScript code to the source of one function expression, decided from a parse as
 * @cloudflare/codemode's executor does: an arrow or function expression is kept (and
 * called by the executor); `export default` gives what it exports; one function
 * declaration is called; anything else is an async function body, which returns its last
 * statement when that is an expression. Markdown fences are dropped first.
 */
export declare function normalizeCode(code: string): string;

/** @cloudflare/codemode's rule for tool names inside the sandbox. */
export declare function sanitizeToolName(name: string): string;

export declare const DEFAULT_CODEMODE_TIMEOUT_MS: 60000;
