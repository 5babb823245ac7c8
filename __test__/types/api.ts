// Compile-time tests of the public types, checked by `tsc -p __test__` (part of `npm test`).
// Nothing here runs: every check is a type. A `// @ts-expect-error` line fails the build
// if it compiles, so the "must not compile" cases fail when the types get looser.
import { tool } from 'ai';
import { z } from 'zod';
import {
  SandboxEngine,
  SandboxError,
  SandboxTimeoutError,
  SandboxOOMError,
  SandboxRuntimeError,
  SandboxValidationError,
  SandboxAbortedError,
  runSandbox,
  createSandbox,
  createFileReadCapability,
  createFetchCapability,
  DEFAULT_ISOLATE_LIMITS,
  DEFAULT_BRIDGE_LIMITS,
  DEFAULT_TOOL_POLICY,
  type Capabilities,
  type CapabilityError,
  type ErrorMessage,
  type ResultMessage,
  type SandboxBaseErrorCode,
  type SandboxEngineConfig,
  type CodeCacheStats,
  type SandboxErrorCode,
  type SandboxErrorName,
  type SandboxEvent,
  type SandboxFailureError,
  type SandboxSession,
  type Sandbox,
  type SandboxCloseReason,
  type SessionFactory,
  type ToolExecuteOptions,
  type ModuleResolver,
} from '../..';
import { IsoletExecutor, type Executor as IsoletExecutorContract } from '../../lib/codemode';

/** `true` only when A and B are the same type (`any` is equal to nothing else). */
type Equal<A, B> = (<X>() => X extends A ? 1 : 2) extends <X>() => X extends B ? 1 : 2 ? true : false;
// biome-ignore lint/correctness/noUnusedVariables: T is checked by its constraint only
function assertType<T extends true>(): void {}
/** Fails to compile unless `value` has exactly type `T`. */
function exactly<T>() {
  return <V>(value: V, ..._: Equal<V, T> extends true ? [] : ['type differs']) => value;
}

declare const engine: SandboxEngine;

// --- submit<T>: the result's data is T; without T it is unknown ---------------------------
export async function typedSubmit() {
  const session = engine.submit<{ n: number }>({ code: 'return { n: 1 }' });
  assertType<Equal<typeof session, SandboxSession<{ n: number }>>>();
  for await (const event of session) {
    if (event.type === 'result') {
      exactly<number>()(event.data.n);
      // @ts-expect-error a property the type argument does not have
      event.data.m;
    }
  }
  const end = await session.done;
  assertType<Equal<typeof end, ResultMessage<{ n: number }> | ErrorMessage>>();
  if (end.type === 'result') exactly<{ n: number }>()(end.data);
  else exactly<SandboxFailureError>()(end.error);
}

export async function untypedSubmit() {
  const session = engine.submit({ requestId: 'r', code: 'return 1' });
  for await (const event of session) {
    assertType<Equal<typeof event, SandboxEvent<unknown>>>();
    if (event.type === 'result') {
      exactly<unknown>()(event.data);
      // @ts-expect-error data is unknown without a type argument
      event.data.n;
    }
  }
  const end = await session.done;
  // @ts-expect-error data exists only on the result branch
  end.data;
  // A session factory keeps the type argument too.
  const factory: SessionFactory = (request) => engine.submit(request);
  exactly<SandboxSession<string[]>>()(factory<string[]>({ code: 'return []' }));
}

export async function typedRunSandbox() {
  const r = await runSandbox<number>('6 * 7');
  if (r.success) exactly<number>()(r.output);
  const u = await runSandbox('6 * 7');
  // @ts-expect-error output is unknown without a type argument
  if (u.success) u.output.toFixed();
}

// --- error.name: the six names, each class its own literal -----------------------------
export function errorNames(err: SandboxError, timeout: SandboxTimeoutError) {
  exactly<SandboxErrorName>()(err.name);
  exactly<'SandboxTimeoutError'>()(timeout.name);
  exactly<'SandboxOOMError'>()(new SandboxOOMError('m').name);
  exactly<'SandboxRuntimeError'>()(new SandboxRuntimeError('m').name);
  exactly<'SandboxValidationError'>()(new SandboxValidationError('m').name);
  exactly<'SandboxAbortedError'>()(new SandboxAbortedError('m').name);
  // @ts-expect-error read-only
  err.name = 'Nope';
  // @ts-expect-error not one of the six names
  const nope: SandboxError['name'] = 'Nope';
  void nope;
  // @ts-expect-error read-only, even with a valid name
  timeout.name = 'SandboxTimeoutError';
  // @ts-expect-error a subclass's name is its own literal
  const other: 'SandboxOOMError' = timeout.name;
  void other;
}

/** Exhaustive over the names: a name added to or dropped from the union breaks this switch. */
export function describeName(name: SandboxErrorName): string {
  switch (name) {
    case 'SandboxError':
    case 'SandboxTimeoutError':
    case 'SandboxOOMError':
    case 'SandboxRuntimeError':
    case 'SandboxValidationError':
    case 'SandboxAbortedError':
      return name;
    default:
      return exactly<never>()(name);
  }
}

// --- error.code: the stable codes -------------------------------------------------------
export function errorCodes(err: SandboxError) {
  exactly<SandboxErrorCode>()(err.code);
  exactly<'ERR_ISOLET_TIMEOUT'>()(new SandboxTimeoutError('m').code);
  exactly<'ERR_ISOLET_OOM'>()(new SandboxOOMError('m').code);
  exactly<'ERR_ISOLET_RUNTIME'>()(new SandboxRuntimeError('m').code);
  exactly<'ERR_ISOLET_VALIDATION'>()(new SandboxValidationError('m').code);
  exactly<'ERR_ISOLET_ABORTED'>()(new SandboxAbortedError('m').code);
  new SandboxError('m', { code: 'ERR_ISOLET_OVERLOADED' });
  // @ts-expect-error not a stable code
  new SandboxError('m', { code: 'ERR_ISOLET_NOPE' });
  // @ts-expect-error not a stable code
  const nope: SandboxErrorCode = 'ERR_ISOLET_NOPE';
  void nope;
}

/** Exhaustive over the codes: a code added to or dropped from the union breaks this switch. */
export function describeCode(code: SandboxErrorCode): string {
  switch (code) {
    case 'ERR_ISOLET_TIMEOUT':
    case 'ERR_ISOLET_OOM':
    case 'ERR_ISOLET_RUNTIME':
    case 'ERR_ISOLET_VALIDATION':
    case 'ERR_ISOLET_ABORTED':
    case 'ERR_ISOLET_INTERNAL':
    case 'ERR_ISOLET_OVERLOADED':
    case 'ERR_ISOLET_NOT_READY':
    case 'ERR_ISOLET_CRASHED':
      return code;
    default:
      return exactly<never>()(code);
  }
}

// --- a failure's error narrows by name and by code --------------------------------------
export async function narrowing() {
  const r = await runSandbox('x');
  if (r.success) return;
  const error = r.error;
  // @ts-expect-error `limit` exists only on SandboxTimeoutError
  error.limit;
  if (error.name === 'SandboxTimeoutError') exactly<'wall' | 'cpu'>()(error.limit);
  if (error.name === 'SandboxRuntimeError') exactly<string | undefined>()(error.thrown?.name);
  if (error.name === 'SandboxValidationError') exactly<number | undefined>()(error.line);
  if (error.name === 'SandboxError') exactly<SandboxBaseErrorCode>()(error.code);
  if (error.code === 'ERR_ISOLET_OOM') exactly<SandboxOOMError>()(error);
  if (error.code === 'ERR_ISOLET_CRASHED') exactly<'SandboxError'>()(error.name);
  if (error instanceof SandboxTimeoutError) exactly<'ERR_ISOLET_TIMEOUT'>()(error.code);
}

// --- capabilities and tools: what the sandbox passes is unknown -------------------------
export async function capabilities() {
  await runSandbox('return f(1)', {
    capabilities: {
      inline: (arg) => exactly<unknown>()(arg),
      asyncInline: async (...args) => exactly<unknown[]>()(args),
      // Typed parameters are the host's claim, accepted as with any callback.
      typed: ({ id }: { id: number }) => id + 1,
      readFile: createFileReadCapability('/tmp'),
      fetch: createFetchCapability({ allowedOrigins: ['https://api.example.com'] }),
      github: {
        listIssues: (input) => exactly<unknown>()(input),
        described: {
          description: 'Adds one',
          inputSchema: { type: 'object', properties: { n: { type: 'number' } } },
          execute: (input, options: ToolExecuteOptions) => {
            exactly<unknown>()(input);
            return exactly<string>()(options.toolCallId);
          },
        },
      },
      // A described tool at the top level: its inline parameters are unknown too.
      add: {
        description: 'Adds two numbers',
        inputSchema: { type: 'object', properties: { a: { type: 'number' } } },
        execute: (input, options) => [exactly<unknown>()(input), exactly<unknown>()(options)],
      },
      schemaOnly: { inputSchema: z.object({ a: z.number() }), execute: (input: { a: number }) => input.a },
    },
  });
  await runSandbox('', {
    capabilities: {
      // @ts-expect-error an unchecked argument cannot be used as if it were typed
      bad: (arg) => arg.path,
    },
  });
  await runSandbox('', {
    capabilities: {
      // @ts-expect-error an unchecked input cannot be used as if it were typed
      bad: { description: 'd', execute: (input) => input.n },
    },
  });
  // An AI SDK tool is a described tool, as such and inside a namespace.
  const weather = tool({
    description: 'Current weather of a city',
    inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }) => ({ city, tempC: 21 }),
  });
  const tools: Capabilities = { weather, ns: { weather } };
  await runSandbox('', { capabilities: tools });
  // @ts-expect-error a capability is a function, a described tool or a namespace
  await runSandbox('', { capabilities: { n: 5 } });
}

export function refusals(err: unknown) {
  const e = err as CapabilityError;
  if (e.code === 'ERR_ISOLET_PATH_OUTSIDE' || e.code === 'ERR_ISOLET_ORIGIN_NOT_ALLOWED') return e.message;
  // @ts-expect-error not a capability refusal code
  if (e.code === 'ERR_ISOLET_NOPE') return '';
  return '';
}

export function dataAndRespond(session: SandboxSession) {
  session.respond(1, { any: ['value', 1, null] });
  session.respond(2, undefined);
  // @ts-expect-error ids are numbers
  session.respond('1', 1);
  engine.submit({ code: '', data: { a: 1, b: [new Date()] } });
}

// --- options: every accepted name, nothing else -----------------------------------------
export async function options() {
  await runSandbox('1', {
    capabilities: {},
    language: 'typescript',
    memoryLimitMb: 64,
    timeoutMs: 5000,
    cpuTimeMs: 1000,
    signal: AbortSignal.timeout(1),
    maxOutputBytes: 1,
    maxMessageBytes: 1,
    maxHostCalls: 0,
    maxLogEntries: 0,
    maxLogBytes: 1,
    maxPendingHostCallBytes: 1,
    maxPendingHostCalls: 1,
    isolation: 'thread',
  });
  // @ts-expect-error misspelled option (timeoutMs)
  await runSandbox('1', { timeout: 5 });
  // @ts-expect-error not a language
  await runSandbox('1', { language: 'python' });
  // @ts-expect-error not an isolation mode
  await runSandbox('1', { isolation: 'vm' });

  // The seed's pattern, with every field required as the seed has it.
  const config: SandboxEngineConfig = {
    memoryMb: 128,
    maxConcurrentIsolates: 4,
    warmPoolSize: 2,
    wasmModules: [],
    defaultIsolateLimits: DEFAULT_ISOLATE_LIMITS,
    defaultBridgeLimits: DEFAULT_BRIDGE_LIMITS,
  };
  new SandboxEngine(config);
  new SandboxEngine({
    ...config,
    maxQueueSize: 10,
    tools: { add: (a: number, b: number) => a + b },
    isolation: 'process',
    processes: 2,
    defaultIsolateLimits: { cpuTimeMs: 100 },
    wasmModules: [{ name: 'm', source: new Uint8Array(8) }],
    prelude: 'function add(a, b) { return a + b; }',
    codeCacheMb: 16,
  });
  const cache: CodeCacheStats = engine.stats().codeCache;
  exactly<number>()(cache.hits + cache.misses + cache.rejected + cache.evictions + cache.entries + cache.bytes + cache.budgetBytes);
  // @ts-expect-error the prelude is a source string
  new SandboxEngine({ prelude: () => 1 });
  // @ts-expect-error misspelled option (maxConcurrentIsolates)
  new SandboxEngine({ maxConcurrency: 2 });
  new SandboxEngine({ memoryLimitMb: 64 });
  // @ts-expect-error the seed's fields are required in the full config type
  const partial: SandboxEngineConfig = { memoryMb: 64 };
  void partial;

  engine.submit({
    requestId: 'r',
    code: 'return 1',
    language: 'javascript',
    data: {},
    isolateLimits: { memoryMb: 32, cpuTimeMs: 1, wallTimeMs: 1 },
    bridgeLimits: { maxMessageBytes: 1, maxMessages: 0, maxOutputBytes: 1, maxLogEntries: 0, maxLogBytes: 1, maxPendingHostCallBytes: 1, maxPendingHostCalls: 1 },
    toolPolicy: DEFAULT_TOOL_POLICY,
    tools: {},
  });
  engine.submit({ code: '', toolPolicy: { allowedTools: ['a'] as const, maxCallsPerTool: { a: 1 } } });
  // @ts-expect-error misspelled limit (wallTimeMs)
  engine.submit({ code: '', isolateLimits: { wallTimeMS: 1 } });
  // @ts-expect-error maxHostCalls is runSandbox's name; the bridge says maxMessages
  engine.submit({ code: '', bridgeLimits: { maxHostCalls: 1 } });
  // @ts-expect-error code is required
  engine.submit({ requestId: 'r' });
}

// --- ES modules ------------------------------------------------------------------
export async function modules(engine: SandboxEngine) {
  const resolve: ModuleResolver = async (specifier, referrer) => {
    exactly<string>()(specifier);
    exactly<string>()(referrer);
    return specifier === 'pkg' ? { source: 'export default 1', specifier: 'pkg/index.js' } : undefined;
  };
  const r = await runSandbox<number>('export default 1', { type: 'module', modules: { './a.ts': 'export const a: number = 1' }, resolve, maxModules: 10, maxModuleBytes: 1024 });
  if (r.success) exactly<number>()(r.output);
  await runSandbox('import("x")', { resolve: () => 'export default 2' });
  engine.submit({ code: 'export default 1', type: 'module', modules: { zod: '' }, resolve: (s) => (s === 'a' ? 'export {}' : null) });
  // @ts-expect-error `type` is 'script' or 'module'
  await runSandbox('', { type: 'commonjs' });
  // @ts-expect-error module sources are strings
  await runSandbox('', { modules: { a: 1 } });
  // @ts-expect-error resolve answers a source, { source, specifier? } or nothing
  await runSandbox('', { resolve: () => 42 });
}

// --- isolet/codemode (its fit to @cloudflare/codemode's own types: codemode.spec.ts) ----
export function codemode() {
  const executor: IsoletExecutorContract = new IsoletExecutor({ timeoutMs: 1000, memoryLimitMb: 64, language: 'typescript' });
  void executor.execute('async () => 1', { add: async (...args) => exactly<unknown[]>()(args) });
  exactly<number>()(new IsoletExecutor({ stateful: true, idleTimeoutMs: 1000 }).timeoutMs);
  // Deprecated spellings still type-check (and warn once at run time).
  new IsoletExecutor({ timeout: 1000, memoryMb: 64, stateful: true, idleTimeout: 1000 });
  // @ts-expect-error misspelled option (timeoutMs)
  new IsoletExecutor({ timeoutMS: 1000 });
}

// --- persistent sandboxes ----------------------------------------------------------------
export async function persistent() {
  const sb: Sandbox = await createSandbox({ isolation: 'thread', idleTimeoutMs: 1000, totalCpuTimeMs: 500, maxTotalHostCalls: 10, capabilities: { f: () => 1 } });
  const r = await sb.run<number>('1', { timeoutMs: 100, cpuTimeMs: 50 });
  if (r.success) exactly<number>()(r.output);
  const c = await sb.call('f', 1, 'two', { three: 3 });
  if (c.success) exactly<unknown>()(c.output);
  exactly<SandboxCloseReason | null>()(sb.closeReason);
  exactly<boolean>()(sb.closed);
  sb.close();
  await sb[Symbol.asyncDispose]();
  const engine = new SandboxEngine({ isolation: 'thread' });
  const other: Sandbox = await engine.openSandbox({ memoryLimitMb: 32 });
  exactly<number>()(engine.stats().sandboxes.open);
  void other;
  // @ts-expect-error signal is per run, not the sandbox's
  await createSandbox({ signal: new AbortController().signal });
  // @ts-expect-error memory is the sandbox's, not a run's
  await sb.run('1', { memoryLimitMb: 8 });
}
