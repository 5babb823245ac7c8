'use strict';
// An MCP server (the official v2 SDK, @modelcontextprotocol/server: an optional peer) with
// one tool, `run_code`, that runs JavaScript or TypeScript in a fresh isolate of a
// SandboxEngine under the configured limits and answers with the result, the console
// output and typed errors as MCP content. A failing run is a tool result with
// `isError: true`, never a protocol error, so the server keeps serving whatever the code
// does; an unknown tool is a JSON-RPC error (-32602), and so are arguments that do not fit
// the tool's schema under the revisions that say so (2025-06-18 and older; from 2025-11-25
// on they are tool errors the model can correct, SEP-1303).
//
// Both protocol eras are served from one definition (the SDK's server factory):
//   - 2025 (2025-11-25 and the older revisions the SDK negotiates): `initialize`, then a
//     session (stdio: the connection; HTTP: Mcp-Session-Id), logging/setLevel, ping;
//   - 2026-07-28: no session, every request carries its protocol version, client
//     capabilities and log level in `_meta`; server/discover; results carry resultType and
//     tools/list carries caching hints.
// Console output also goes to the client as it happens, as log notifications at the level
// the client set (2025: logging/setLevel; 2026-07-28: the request's own log level, none
// when it sets none); a call that carries a progress token gets progress notifications.
//
// Stateful mode keeps a persistent sandbox per client: under 2025 one per session; under
// 2026-07-28 a server-issued handle that the client passes back as the `sandbox` argument,
// owned by the client that opened it (checked on every call) and expiring when idle.
// Transports: stdio (serveStdio, here) and Streamable HTTP (lib/mcp-http.js); lib/mcp.js is
// the package's face (`isolet/mcp`) over both.
const crypto = require('node:crypto');
const native = require('./native');
const { SandboxEngine } = require('./engine');
const { describeTools } = require('./tools');
const { toJson } = require('./cli/json');
const { SandboxValidationError, SandboxAbortedError, errorFromThrown, errorOfKind, ERROR_KINDS } = require('./errors');
const { requirePeer } = require('./peer');
const { ownCopy } = require('./read-options');
const { remapError } = require('./last-expression');
const { prepareCode } = require('./source');
const { remapLogs, remapText } = require('./positions');

const TOOL_NAME = 'run_code';
const SERVER_PACKAGE = '@modelcontextprotocol/server';
/** The modern revision; the 2025-era ones come from the SDK (SUPPORTED_PROTOCOL_VERSIONS). */
const MODERN_REVISION = '2026-07-28';
/** Revisions under which arguments that do not fit the schema are a JSON-RPC error rather than a tool error (SEP-1303 changed it in 2025-11-25). */
const ARGUMENT_ERRORS_ARE_PROTOCOL_ERRORS_BEFORE = '2025-11-25';
/** Where a result names its sandbox handle for programs (the text names it for models). */
const SANDBOX_META_KEY = 'isolet/sandbox';
/** The Mcp-Param-* header a 2026-07-28 client mirrors the handle into (SEP-2243), so a proxy can route a sandbox's calls. */
const SANDBOX_HEADER = 'Sandbox';
/** How long a client may cache tools/list (2026-07-28): the list is fixed for the server's life. */
const TOOLS_LIST_TTL_MS = 300_000;

function sdk(feature) {
  return requirePeer(SERVER_PACKAGE, feature);
}

/** `mode`: as toolDescription's. */
function inputSchema(mode) {
  const handles = mode === 'handles';
  const properties = {
    code: {
      type: 'string',
      description: mode !== 'stateless'
        ? 'A script: use top-level await; the result is the value of its last expression statement.'
        : 'The body of an async function: use await; the result is what `return` gives, else the value of the last expression statement.',
    },
    language: { type: 'string', enum: native.entryDefaults().languages, description: 'Default: javascript.' },
  };
  if (handles) {
    properties.sandbox = {
      type: 'string',
      description: 'The sandbox handle an earlier call answered with: the code runs in that sandbox, with what earlier calls left there. Omit it to start a new sandbox.',
      'x-mcp-header': SANDBOX_HEADER,
    };
  }
  return { type: 'object', properties, required: ['code'], additionalProperties: false };
}

/** `mode`: 'stateless', 'session' (2025 stateful: the session keeps the sandbox) or 'handles' (2026-07-28 stateful). */
function toolDescription(capabilities, limits, mode, idleMs) {
  let lines;
  if (mode === 'session') {
    lines = [
      'Runs JavaScript or TypeScript in an isolated V8 sandbox that this session keeps: what one call declares at top level (var, let, const, function, class) or puts on globalThis, later calls can use. Returns the result (as JSON) and the console output.',
      'The code is a script: top-level `await` works; the result is the value of its last expression statement (`const x = 20; x + 22` gives 42). Redeclaring a let or const of an earlier call is an error: assign to it instead.',
    ];
  } else if (mode === 'handles') {
    lines = [
      'Runs JavaScript or TypeScript in an isolated V8 sandbox that persists across calls. A call without `sandbox` starts a new sandbox and answers with its handle; pass that handle as `sandbox` to later calls and they can use what earlier calls declared at top level (var, let, const, function, class) or put on globalThis. Returns the result (as JSON), the console output and the handle.',
      'The code is a script: top-level `await` works; the result is the value of its last expression statement (`const x = 20; x + 22` gives 42). Redeclaring a let or const of an earlier call is an error: assign to it instead.',
      `A handle works only for the client that opened it, and expires after ${idleMs === undefined ? 'a while' : `${idleMs} ms`} without a call (start a new sandbox then).`,
    ];
  } else {
    lines = [
      'Runs JavaScript or TypeScript in a fresh, isolated V8 sandbox and returns what it returns (as JSON) and its console output.',
      'The code is the body of an async function: use `await`. The result is what a `return` gives, or else the value of the last top-level expression statement (`const x = 20; x + 22` gives 42).',
    ];
  }
  lines.push(
    'Only standard ECMAScript built-ins exist: no require, process, timers, file system or network' +
      (Object.keys(capabilities).length > 0 ? ', except these functions:' : '.'),
  );
  if (Object.keys(capabilities).length > 0) lines.push('', describeTools(capabilities).trimEnd(), '');
  lines.push(`Limits per run: ${limits.wallTimeMs} ms wall-clock, ${limits.cpuTimeMs} ms CPU, ${limits.memoryMb} MB heap.`);
  return lines.join('\n');
}

// Console methods as MCP log levels (RFC 5424 names).
const LOG_LEVELS = Object.freeze({ log: 'info', info: 'info', warn: 'warning', error: 'error', debug: 'debug' });
const SESSION_ENDED = 'The MCP session ended, so nothing ran';
/** Past this many characters a result's JSON text is compact, and over HTTP written in pieces of PIECE_CHARS. */
const BIG_RESULT_CHARS = 1 << 16;
const PIECE_CHARS = 1 << 16;
/** How often a call with a progress token hears from a run in progress. */
const PROGRESS_INTERVAL_MS = 1000;

// One init per engine, however many calls (and servers) arrive while it warms up.
const initialized = new WeakMap();
function initOnce(engine) {
  let ready = initialized.get(engine);
  if (ready === undefined) {
    ready = engine.init();
    initialized.set(engine, ready);
  }
  return ready;
}

/** A refusal the transport turns into its own answer: 503 with Retry-After over HTTP. */
class SlotRefused extends Error {
  constructor(message, retryAfterMs) {
    super(message);
    this.retryAfterMs = retryAfterMs;
  }
}

/**
 * What every MCP server instance of one process (or one serveHttp) shares: the engine, the
 * runs in flight and, in stateful mode under 2026-07-28, the sandbox handles. Its
 * `newServer({ era, session })` builds the SDK server for one 2025 session (`session`: a
 * scope from `newSession()`) or for 2026-07-28 requests (no session).
 *
 * @param {object} settings from lib/cli/options `settingsFrom`
 * @param {{ engine?: SandboxEngine, maxRuns?: number, runs?: Set<Promise<void>>,
 *   slots?: { claim(slot: object): void, release(slot: object): void, touch(slot: object): void },
 *   handleIdleMs?: number }} [shared]
 *   engine: one engine for many servers, not shut down by close(); maxRuns: tool calls in
 *   flight at once per session (2025) or per client (2026-07-28); runs: where each call in
 *   flight is tracked (HTTP shutdown waits for them); slots: the HTTP server's bound on
 *   what one client and all clients hold (a sandbox handle takes one); handleIdleMs: a
 *   handle without a call for this long expires
 */
function createMcpService(settings, shared = {}) {
  const { McpServer, ProtocolError, ProtocolErrorCode, fromJsonSchema, SUPPORTED_PROTOCOL_VERSIONS } = sdk('isolet mcp');
  const ownsEngine = shared.engine === undefined;
  const engine = ownsEngine ? new SandboxEngine(settings.engineConfig) : shared.engine;
  const maxRuns = shared.maxRuns ?? Infinity;
  const tracked = shared.runs ?? new Set();
  const stateful = settings.stateful === true;
  const version = require('../package.json').version;
  // A handle expires after this long without a call (HTTP: sessionIdleMs; stdio: the same default).
  const handleIdleMs = shared.handleIdleMs ?? settings.idleTimeoutMs ?? native.entryDefaults().cli.sessionIdleMs;
  const schemas = new Map(); // mode -> { json, standard }
  const handles = new Map(); // handle -> entry
  const runsByClient = new Map(); // client -> calls in flight (2026-07-28)
  let closed = false;
  let runs = 0;

  const schemaFor = (mode) => {
    let s = schemas.get(mode);
    if (s === undefined) {
      const json = inputSchema(mode);
      s = { json, standard: fromJsonSchema(json) };
      schemas.set(mode, s);
    }
    return s;
  };

  /** A 2025 session's scope: its calls in flight and, stateful, its one sandbox. */
  function newSession() {
    return { sandbox: null, opening: null, ended: false, inFlight: 0, answers: null };
  }

  function endSession(scope) {
    scope.ended = true;
    if (scope.sandbox !== null) scope.sandbox.close();
  }

  /** Opens a sandbox; refused (the engine's maxOpenSandboxes reached), a tool error that says why and what frees one. */
  async function openSandbox(holder, each) {
    try {
      return await engine.openSandbox({
        capabilities: settings.capabilities,
        memoryLimitMb: settings.limits.memoryMb,
        timeoutMs: settings.limits.wallTimeMs,
        cpuTimeMs: settings.limits.cpuTimeMs,
        idleTimeoutMs: settings.idleTimeoutMs,
        web: settings.web,
      });
    } catch (err) {
      const error = errorFromThrown(err);
      if (error.code !== ERROR_KINDS.Overloaded.code) throw error;
      const idle = settings.idleTimeoutMs === undefined ? '' : ` or has been idle for ${settings.idleTimeoutMs} ms (idleTimeoutMs)`;
      throw errorOfKind(
        'Overloaded',
        `No sandbox could be opened for this ${holder}, so nothing ran: ${error.message}. ` +
          `Each stateful ${each} keeps a sandbox of its own, and the server's engine keeps at most maxOpenSandboxes open; ` +
          `one is freed when another ${each} ends${idle}. Try the call again later.`,
      );
    }
  }

  /** A session's one sandbox: the open one, else the one being opened, else a new one. */
  function sessionSandbox(scope) {
    if (scope.ended) throw new SandboxAbortedError(SESSION_ENDED);
    if (scope.sandbox !== null && !scope.sandbox.closed) return scope.sandbox;
    if (scope.opening === null) {
      const attempt = openSandbox('MCP session', 'session').then((opened) => {
        // The session ended while its sandbox was opening: nobody else will close it.
        if (scope.ended) {
          opened.close();
          throw new SandboxAbortedError(SESSION_ENDED);
        }
        scope.sandbox = opened;
        return opened;
      });
      // Settled either way, the next call looks again (a refused open is tried anew).
      const clear = () => {
        if (scope.opening === attempt) scope.opening = null;
      };
      attempt.then(clear, clear);
      scope.opening = attempt;
    }
    return scope.opening;
  }

  const unknownHandle = (handle) =>
    new SandboxValidationError(
      `sandbox ${JSON.stringify(handle)} is not an open sandbox of this client: it was never opened, has expired ` +
        `(${handleIdleMs === undefined ? 'idle' : `${handleIdleMs} ms without a call`}) or belongs to another client. ` +
        `Call ${TOOL_NAME} without sandbox to start a new one.`,
    );

  function dropHandle(entry) {
    if (entry.dropped) return;
    entry.dropped = true;
    clearTimeout(entry.timer);
    handles.delete(entry.handle);
    if (shared.slots && entry.slot) shared.slots.release(entry.slot);
    if (entry.sandbox !== null) entry.sandbox.close();
  }

  function idleHandle(entry) {
    clearTimeout(entry.timer);
    if (entry.busy > 0 || handleIdleMs === undefined || entry.dropped) return;
    entry.timer = setTimeout(() => dropHandle(entry), handleIdleMs);
    entry.timer.unref();
  }

  /** The sandbox a 2026-07-28 call runs in: a new one (and its handle) when it names none, else its own one. */
  async function handleSandbox(handle, client) {
    if (closed) throw new SandboxAbortedError('The MCP server is closing, so nothing ran');
    if (handle !== undefined) {
      const entry = handles.get(handle);
      // The owner is compared in constant time; a stolen handle is answered like an unknown one.
      if (entry === undefined || entry.dropped || !sameText(entry.client, client)) throw unknownHandle(handle);
      if (entry.sandbox !== null && entry.sandbox.closed) {
        dropHandle(entry);
        throw unknownHandle(handle);
      }
      return entry;
    }
    const entry = { handle: `sbx_${crypto.randomBytes(18).toString('base64url')}`, client, sandbox: null, busy: 0, timer: null, dropped: false, slot: null, lastUsed: Date.now() };
    if (shared.slots) {
      entry.slot = {
        client,
        kind: 'sandbox handle',
        lastActive: () => entry.lastUsed,
        isBusy: () => entry.busy > 0,
        isConnected: () => false,
        evict: () => dropHandle(entry),
      };
      shared.slots.claim(entry.slot); // throws SlotRefused
    }
    handles.set(entry.handle, entry);
    try {
      entry.sandbox = await openSandbox('client', 'sandbox handle');
    } catch (err) {
      dropHandle(entry);
      throw err;
    }
    if (entry.dropped) {
      entry.sandbox.close();
      throw new SandboxAbortedError('The sandbox was closed while it opened, so nothing ran');
    }
    return entry;
  }

  /**
   * A result's content text: its JSON, indented unless big (indenting a big array would
   * triple it). A big one is handed to `defer` when there is one (HTTP), which writes it
   * piece by piece in place of the placeholder it returns.
   */
  function resultText(value, defer) {
    if (typeof value === 'string') {
      if (value.length <= BIG_RESULT_CHARS) return JSON.stringify(value);
      return defer?.(stringPieces(value)) ?? JSON.stringify(value);
    }
    const compact = toJson(value) ?? 'null';
    if (compact.length <= BIG_RESULT_CHARS) return toJson(value, 2) ?? 'null';
    return defer?.(slices(compact)) ?? compact;
  }

  /** Where a big answer's text goes: the session's routing (2025 HTTP), the request's (2026-07-28 HTTP), else nowhere. */
  function deferFor(ctx, session) {
    if (session?.answers) return (pieces) => session.answers(ctx.mcpReq.id, pieces);
    const defer = ctx.http?.authInfo?.extra?.isoletDefer;
    return typeof defer === 'function' ? defer : null;
  }

  function newServer({ era, session = null }) {
    const modern = era === 'modern';
    const mode = !stateful ? 'stateless' : modern ? 'handles' : 'session';
    const schema = schemaFor(mode);
    const mcp = new McpServer(
      { name: 'isolet', version },
      {
        // The one tool never changes: no list_changed notifications to listen for.
        capabilities: { tools: { listChanged: false }, logging: {} },
        cacheHints: { 'tools/list': { ttlMs: TOOLS_LIST_TTL_MS, cacheScope: 'private' } },
      },
    );
    const description = toolDescription(settings.capabilities, settings.limits, mode, handleIdleMs);
    // The callback is never called: tools/call is answered below, so that an unknown tool
    // and (per revision) bad arguments get the JSON-RPC error the spec names. Registering
    // the tool gives tools/list, and the schema the SDK checks Mcp-Param-* headers against.
    mcp.registerTool(TOOL_NAME, { description, inputSchema: schema.standard }, () => ({ content: [] }));
    mcp.server.setRequestHandler('tools/call', async (request, ctx) => {
      const { name, arguments: args } = request.params;
      if (name !== TOOL_NAME) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown tool: ${name} (this server has one tool, ${TOOL_NAME})`);
      const revision = modern ? (ctx.mcpReq.envelope?.['io.modelcontextprotocol/protocolVersion'] ?? MODERN_REVISION) : mcp.server.getNegotiatedProtocolVersion();
      let input;
      try {
        input = ownCopy(native.runCodeArguments(args ?? {}));
        if (input.sandbox !== undefined && mode !== 'handles') {
          throw new SandboxValidationError(
            mode === 'session'
              ? 'sandbox is not an argument of run_code in this protocol revision: the session keeps the sandbox'
              : 'sandbox is not an argument of run_code on this server: it is stateless, each call runs in a fresh sandbox',
          );
        }
      } catch (err) {
        const error = errorFromThrown(err);
        if (typeof revision === 'string' && revision < ARGUMENT_ERRORS_ARE_PROTOCOL_ERRORS_BEFORE) {
          throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Invalid arguments for tool ${TOOL_NAME}: ${error.message}`);
        }
        return errorResult(error, []);
      }
      const client = modern ? (ctx.http?.authInfo?.clientId ?? 'local') : null;
      const counter = modern ? runsByClient : null;
      const inFlight = modern ? (runsByClient.get(client) ?? 0) : session.inFlight;
      if (inFlight >= maxRuns) {
        const who = modern ? 'client' : 'session';
        return errorResult(new SandboxValidationError(`this ${who} already has ${maxRuns} run_code calls in flight (maxRunsPerSession); wait for one to finish`), []);
      }
      if (modern) counter.set(client, inFlight + 1);
      else session.inFlight++;
      const call = mode === 'stateless' ? runFresh(request, ctx, input, session) : mode === 'session' ? runInSession(ctx, input, session) : runWithHandle(ctx, input, client);
      const settled = call.then(
        () => {},
        () => {},
      );
      tracked.add(settled);
      try {
        return await call;
      } finally {
        if (modern) {
          const left = runsByClient.get(client) - 1;
          if (left === 0) runsByClient.delete(client);
          else runsByClient.set(client, left);
        } else {
          session.inFlight--;
        }
        tracked.delete(settled);
      }
    });
    return mcp;
  }

  async function runInSession(ctx, input, session) {
    let box;
    try {
      await initOnce(engine);
      box = await sessionSandbox(session);
    } catch (err) {
      return errorResult(errorFromThrown(err), []);
    }
    // A cancelled call (notifications/cancelled, or its HTTP stream gone) ends its run.
    const r = await box.run(input.code, { language: input.language ?? settings.language ?? 'javascript', signal: ctx.mcpReq.signal });
    if (r.success) return { content: [{ type: 'text', text: resultText(r.output, deferFor(ctx, session)) }, ...logContent(r.logs)] };
    return errorResult(r.error, r.logs);
  }

  async function runWithHandle(ctx, input, client) {
    let entry;
    try {
      await initOnce(engine);
      entry = await handleSandbox(input.sandbox, client);
    } catch (err) {
      if (err instanceof SlotRefused) {
        return errorResult(errorOfKind('Overloaded', `${err.message}; retry in ${Math.ceil(err.retryAfterMs / 1000)} s`), []);
      }
      return errorResult(errorFromThrown(err), []);
    }
    entry.busy++;
    entry.lastUsed = Date.now();
    clearTimeout(entry.timer);
    try {
      const r = await entry.sandbox.run(input.code, { language: input.language ?? settings.language ?? 'javascript', signal: ctx.mcpReq.signal });
      const handleBlock = {
        type: 'text',
        text: `sandbox: ${entry.handle} (pass it as the sandbox argument of later calls to use this sandbox again)`,
      };
      const meta = { [SANDBOX_META_KEY]: entry.handle };
      if (r.success) return { content: [{ type: 'text', text: resultText(r.output, deferFor(ctx, null)) }, ...logContent(r.logs), handleBlock], _meta: meta };
      return { ...errorResult(r.error, r.logs, [handleBlock]), _meta: meta };
    } finally {
      entry.busy--;
      entry.lastUsed = Date.now();
      idleHandle(entry);
    }
  }

  async function runFresh(request, ctx, input, session) {
    let prepared;
    try {
      prepared = await prepareCode(input.code, input.language ?? settings.language, settings.limits.wallTimeMs);
    } catch (err) {
      return errorResult(errorFromThrown(err), []);
    }
    await initOnce(engine);
    const run = engine.submit({
      requestId: `mcp_${++runs}`,
      code: prepared.code,
      language: prepared.language,
      toolPolicy: { allowedTools: settings.toolNames },
      web: settings.web,
    });
    // A cancelled call (notifications/cancelled, or its HTTP stream gone) ends its run.
    const signal = ctx.mcpReq.signal;
    const onAbort = () => run.abort();
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    const progressToken = request.params._meta?.progressToken;
    const quietly = (promise) => promise.catch(() => {});
    let timer = null;
    let startedAt = 0;
    let lastProgress = -1;
    const progress = (message) => {
      // Wall-clock milliseconds of the run, out of its limit: a run ends by then.
      const value = Math.max(lastProgress + 1, Math.round(performance.now() - startedAt));
      lastProgress = value;
      quietly(ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken, progress: value, total: settings.limits.wallTimeMs, message } }));
    };
    try {
      for await (const ev of run) {
        if (ev.type !== 'status') continue;
        if (ev.status === 'console') {
          // At or above the level the client set (2025) or its request names (2026-07-28).
          quietly(ctx.mcpReq.log(LOG_LEVELS[ev.level] ?? 'info', remapText(ev.message, prepared.edits), TOOL_NAME));
        } else if (ev.status === 'started' && progressToken !== undefined) {
          startedAt = performance.now();
          progress('running');
          timer = setInterval(() => progress(`running, ${Math.round((performance.now() - startedAt) / 1000)} s`), PROGRESS_INTERVAL_MS);
          timer.unref();
        }
      }
    } finally {
      if (timer !== null) clearInterval(timer);
      signal.removeEventListener('abort', onAbort);
    }
    const end = await run.done;
    // At the user's positions, as its errors are (a logged stack).
    const logs = remapLogs(end.logs || [], prepared.edits);
    if (end.type === 'result') {
      return { content: [{ type: 'text', text: resultText(end.data, deferFor(ctx, session)) }, ...logContent(logs)] };
    }
    return errorResult(remapError(end.error, prepared.edits), logs);
  }

  return {
    engine,
    newSession,
    endSession,
    newServer,
    /** The revisions served: the SDK's 2025-era ones (by initialize) and 2026-07-28 (per request). */
    protocolVersions: [...SUPPORTED_PROTOCOL_VERSIONS.filter((v) => v < MODERN_REVISION), MODERN_REVISION],
    /** Sandbox handles open now (stateful, 2026-07-28). */
    handleCount: () => handles.size,
    async close() {
      closed = true;
      for (const entry of [...handles.values()]) dropHandle(entry);
      if (ownsEngine) await engine.shutdown();
    },
  };
}

/** Constant-time comparison of two strings (their digests have one length). */
function sameText(a, b) {
  const x = crypto.createHash('sha256').update(String(a)).digest();
  const y = crypto.createHash('sha256').update(String(b)).digest();
  return crypto.timingSafeEqual(x, y);
}

/**
 * Creates an MCP server for one connection (not yet connected): an SDK `McpServer` with
 * the run_code tool, serving the 2025 protocol (initialize) on whatever transport it is
 * connected to; in stateful mode the connection keeps one sandbox.
 *
 * @param {object} settings from `mcpSettings` (lib/cli/options `settingsFrom`)
 * @param {{ engine?: SandboxEngine }} [shared] engine: one engine for many servers, not shut down by close()
 * @returns {{ server: object, engine: SandboxEngine, close: () => Promise<void> }}
 */
function createMcpServer(settings, shared = {}) {
  const service = createMcpService(settings, shared);
  const session = service.newSession();
  const server = service.newServer({ era: 'legacy', session });
  return {
    server,
    engine: service.engine,
    async close() {
      service.endSession(session);
      await server.close();
      await service.close();
    },
  };
}

/** `text` in slices of about PIECE_CHARS, none splitting a surrogate pair. */
function* slices(text) {
  for (let start = 0; start < text.length; ) {
    let end = Math.min(start + PIECE_CHARS, text.length);
    const last = text.charCodeAt(end - 1);
    if (end < text.length && last >= 0xd800 && last <= 0xdbff) end++;
    yield text.slice(start, end);
    start = end;
  }
}

/** JSON.stringify(text) in pieces: each slice is escaped on its own, the whole never at once. */
function* stringPieces(text) {
  yield '"';
  for (const slice of slices(text)) yield JSON.stringify(slice).slice(1, -1);
  yield '"';
}

function logContent(logs) {
  if (logs.length === 0) return [];
  const text = logs.map((l) => `${l.level === 'log' ? '' : `[${l.level}] `}${l.message}`).join('\n');
  return [{ type: 'text', text: `console:\n${text}` }];
}

function errorResult(error, logs, more = []) {
  const where = error.line !== undefined && !/at line \d+/.test(error.message) ? `\nat line ${error.line}, column ${error.column}` : '';
  const thrown = error.thrown && error.thrown.stack ? `\n${error.thrown.stack}` : '';
  return {
    isError: true,
    content: [{ type: 'text', text: `${error.name} [${error.code}]: ${error.message}${where}${thrown}` }, ...logContent(logs), ...more],
  };
}

/**
 * Serves MCP over this process's stdin/stdout until stdin closes, in the era the client
 * opens with: 2025 (initialize; the connection is the session) or 2026-07-28.
 */
async function serveStdio(settings) {
  const { serveStdio: serve } = requirePeer(`${SERVER_PACKAGE}/stdio`, 'isolet mcp');
  const service = createMcpService(settings);
  const sessions = new Set();
  const handle = serve((ctx) => {
    if (ctx.era === 'modern') return service.newServer({ era: 'modern' });
    const session = service.newSession();
    sessions.add(session);
    const server = service.newServer({ era: 'legacy', session });
    const previous = server.server.onclose;
    server.server.onclose = () => {
      service.endSession(session);
      sessions.delete(session);
      previous?.();
    };
    return server;
  });
  return {
    engine: service.engine,
    protocolVersions: service.protocolVersions,
    async close() {
      for (const session of sessions) service.endSession(session);
      await handle.close().catch(() => {});
      await service.close();
    },
  };
}

/**
 * Settings for createMcpServer/serveStdio/serveHttp from a config object: the keys of
 * `isolet mcp --config` (timeoutMs, cpuTimeMs, memoryLimitMb, language, isolation, readDir,
 * allowedOrigins, engine, stateful, idleTimeoutMs; docs/options.md), checked the same way.
 */
function mcpSettings(config = {}) {
  const { settingsFrom, UsageError } = require('./cli/options');
  try {
    return settingsFrom({}, undefined, config);
  } catch (err) {
    throw err instanceof UsageError ? new SandboxValidationError(err.message) : err;
  }
}

module.exports = {
  createMcpServer,
  createMcpService,
  serveStdio,
  mcpSettings,
  initOnce,
  SlotRefused,
  MCP_TOOL_NAME: TOOL_NAME,
  MCP_SANDBOX_META_KEY: SANDBOX_META_KEY,
};
