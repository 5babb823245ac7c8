'use strict';
// An MCP server (official @modelcontextprotocol/sdk, an optional peer) with one tool,
// `run_code`, that runs JavaScript or TypeScript in a fresh isolate of a SandboxEngine
// under the configured limits and answers with the result, the console output and typed
// errors as MCP content. A failing run is a tool result with `isError: true`, never a
// protocol error, so the server keeps serving whatever the code does. Console output also
// goes to the client as it happens, as log notifications at the level the client set;
// a call that carries a progress token gets progress notifications while it runs.
// Transports: stdio (serveStdio) and Streamable HTTP (serveHttp, lib/mcp-http.js).
const native = require('./native');
const { SandboxEngine } = require('./engine');
const { describeTools } = require('./tools');
const { toJson } = require('./cli/json');
const { SandboxValidationError, SandboxAbortedError, errorFromThrown, errorOfKind, ERROR_KINDS } = require('./errors');
const { requirePeer } = require('./peer');
const { ownCopy } = require('./own');
const { prepareCode, remapError } = require('./last-expression');

const TOOL_NAME = 'run_code';

const INPUT_SCHEMA = Object.freeze({
  type: 'object',
  properties: {
    code: { type: 'string', description: 'The body of an async function: use await; the result is what `return` gives, else the value of the last expression statement.' },
    language: { type: 'string', enum: native.entryDefaults().languages, description: 'Default: javascript.' },
  },
  required: ['code'],
  additionalProperties: false,
});

function toolDescription(capabilities, limits, stateful) {
  const lines = stateful
    ? [
        'Runs JavaScript or TypeScript in an isolated V8 sandbox that this session keeps: what one call declares at top level (var, let, const, function, class) or puts on globalThis, later calls can use. Returns the result (as JSON) and the console output.',
        'The code is a script: top-level `await` works; the result is the value of its last expression statement (`const x = 20; x + 22` gives 42). Redeclaring a let or const of an earlier call is an error: assign to it instead.',
      ]
    : [
        'Runs JavaScript or TypeScript in a fresh, isolated V8 sandbox and returns what it returns (as JSON) and its console output.',
        'The code is the body of an async function: use `await`. The result is what a `return` gives, or else the value of the last top-level expression statement (`const x = 20; x + 22` gives 42).',
      ];
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

/**
 * Creates the MCP server (not yet connected).
 *
 * @param {object} settings from lib/cli/options `settingsFrom`: engineConfig, limits,
 *   language (default language of the tool), capabilities, toolNames
 * @param {{ engine?: SandboxEngine, maxRuns?: number, runs?: Set<Promise<void>>, deferText?: (requestId: string | number, pieces: Iterable<string>) => string | null }} [shared]
 *   engine: one engine for many servers (HTTP: one server per session), not shut down by
 *   close(); maxRuns: tool calls in flight at once (past it a call is an error result);
 *   runs: where each call in flight is tracked (HTTP shutdown waits for them); deferText:
 *   takes a big result's text as pieces (JSON text, in order) for the answer to request
 *   `requestId` and returns the placeholder to put in its place, or null to take the text
 * @returns {{ server: object, engine: SandboxEngine, close: () => Promise<void> }}
 */
function createMcpServer(settings, shared = {}) {
  const { Server } = requirePeer('@modelcontextprotocol/sdk/server/index.js', 'isolet mcp');
  const { ListToolsRequestSchema, CallToolRequestSchema } = requirePeer('@modelcontextprotocol/sdk/types.js', 'isolet mcp');
  const ownsEngine = shared.engine === undefined;
  const engine = ownsEngine ? new SandboxEngine(settings.engineConfig) : shared.engine;
  const maxRuns = shared.maxRuns ?? Infinity;
  const tracked = shared.runs ?? new Set();
  const version = require('../package.json').version;
  const server = new Server({ name: 'isolet', version }, { capabilities: { tools: {}, logging: {} } });
  const description = toolDescription(settings.capabilities, settings.limits, settings.stateful === true);
  // Stateful: this server's (this MCP session's) persistent sandbox, opened at its first
  // call; a closed one (idle, out of memory) is replaced by a new, empty one. `opening` is
  // the one open in progress, which concurrent calls share: a session never holds two.
  let sandbox = null;
  let opening = null;
  let ended = false;
  let runs = 0;
  let inFlight = 0;

  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [{ name: TOOL_NAME, description, inputSchema: INPUT_SCHEMA }],
  }));

  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const { name, arguments: args } = request.params;
    if (name !== TOOL_NAME) return errorResult(new SandboxValidationError(`unknown tool "${name}" (this server has ${TOOL_NAME})`), []);
    if (inFlight >= maxRuns) {
      return errorResult(new SandboxValidationError(`this session already has ${maxRuns} run_code calls in flight (maxRunsPerSession); wait for one to finish`), []);
    }
    inFlight++;
    const call = runCall(request, extra, args);
    const settled = call.then(
      () => {},
      () => {},
    );
    tracked.add(settled);
    try {
      return await call;
    } finally {
      inFlight--;
      tracked.delete(settled);
    }
  });

  /** Opens a sandbox for this session; refused (the engine's maxOpenSandboxes reached), a tool error that says why and what frees one. */
  async function openSessionSandbox() {
    try {
      return await engine.openSandbox({
        capabilities: settings.capabilities,
        memoryLimitMb: settings.limits.memoryMb,
        timeoutMs: settings.limits.wallTimeMs,
        cpuTimeMs: settings.limits.cpuTimeMs,
        idleTimeoutMs: settings.statefulIdleMs,
      });
    } catch (err) {
      const error = errorFromThrown(err);
      if (error.code !== ERROR_KINDS.Overloaded.code) throw error;
      const idle = settings.statefulIdleMs === undefined ? '' : ` or has been idle for ${settings.statefulIdleMs} ms (statefulIdleMs)`;
      throw errorOfKind(
        'Overloaded',
        `No sandbox could be opened for this MCP session, so nothing ran: ${error.message}. ` +
          `Each stateful session keeps a sandbox of its own, and the server's engine keeps at most maxOpenSandboxes open; ` +
          `one is freed when another session ends${idle}. Try the call again later.`,
      );
    }
  }

  /** This session's one sandbox: the open one, else the one being opened, else a new one. */
  function sessionSandbox() {
    if (ended) throw new SandboxAbortedError(SESSION_ENDED);
    if (sandbox !== null && !sandbox.closed) return sandbox;
    if (opening === null) {
      const attempt = openSessionSandbox().then((opened) => {
        // The session ended while its sandbox was opening: nobody else will close it.
        if (ended) {
          opened.close();
          throw new SandboxAbortedError(SESSION_ENDED);
        }
        sandbox = opened;
        return opened;
      });
      // Settled either way, the next call looks again (a refused open is tried anew).
      const clear = () => {
        if (opening === attempt) opening = null;
      };
      attempt.then(clear, clear);
      opening = attempt;
    }
    return opening;
  }

  /**
   * A result's content text: its JSON, indented unless big (indenting a big array would
   * triple it). A big one is handed to `shared.deferText` when there is one (HTTP), which
   * writes it piece by piece in place of the placeholder it returns.
   */
  function resultText(value, extra) {
    const defer = shared.deferText === undefined ? () => null : (pieces) => shared.deferText(extra.requestId, pieces);
    if (typeof value === 'string') {
      if (value.length <= BIG_RESULT_CHARS) return JSON.stringify(value);
      return defer(stringPieces(value)) ?? JSON.stringify(value);
    }
    const compact = toJson(value) ?? 'null';
    if (compact.length <= BIG_RESULT_CHARS) return toJson(value, 2) ?? 'null';
    return defer(slices(compact)) ?? compact;
  }

  async function runInSandbox(extra, args) {
    let input;
    let box;
    try {
      input = ownCopy(native.runCodeArguments(args ?? {}));
      await initOnce(engine);
      box = await sessionSandbox();
    } catch (err) {
      return errorResult(errorFromThrown(err), []);
    }
    // A cancelled call (notifications/cancelled, or its HTTP stream gone) ends its run.
    const r = await box.run(input.code, { language: input.language ?? settings.language ?? 'javascript', signal: extra.signal });
    if (r.success) return { content: [{ type: 'text', text: resultText(r.output, extra) }, ...logContent(r.logs)] };
    return errorResult(r.error, r.logs);
  }

  async function runCall(request, extra, args) {
    if (settings.stateful === true) return runInSandbox(extra, args);
    let input;
    let prepared;
    try {
      input = ownCopy(native.runCodeArguments(args ?? {}));
      prepared = await prepareCode(input.code, input.language ?? settings.language, settings.limits.wallTimeMs);
    } catch (err) {
      return errorResult(errorFromThrown(err), []);
    }
    await initOnce(engine);
    const session = engine.submit({
      requestId: `mcp_${++runs}`,
      code: prepared.code,
      language: prepared.language,
      toolPolicy: { allowedTools: settings.toolNames },
    });
    // A cancelled call (notifications/cancelled, or its HTTP stream gone) ends its run.
    const onAbort = () => session.abort();
    if (extra.signal.aborted) onAbort();
    else extra.signal.addEventListener('abort', onAbort, { once: true });
    const progressToken = request.params._meta?.progressToken;
    const notify = (notification) => extra.sendNotification(notification).catch(() => {});
    let timer = null;
    let startedAt = 0;
    let lastProgress = -1;
    const progress = (message) => {
      // Wall-clock milliseconds of the run, out of its limit: a run ends by then.
      const value = Math.max(lastProgress + 1, Math.round(performance.now() - startedAt));
      lastProgress = value;
      notify({ method: 'notifications/progress', params: { progressToken, progress: value, total: settings.limits.wallTimeMs, message } });
    };
    try {
      for await (const ev of session) {
        if (ev.type !== 'status') continue;
        if (ev.status === 'console') {
          const level = LOG_LEVELS[ev.level] ?? 'info';
          if (!server.isMessageIgnored(level, extra.sessionId)) {
            notify({ method: 'notifications/message', params: { level, logger: TOOL_NAME, data: ev.message } });
          }
        } else if (ev.status === 'started' && progressToken !== undefined) {
          startedAt = performance.now();
          progress('running');
          timer = setInterval(() => progress(`running, ${Math.round((performance.now() - startedAt) / 1000)} s`), PROGRESS_INTERVAL_MS);
          timer.unref();
        }
      }
    } finally {
      if (timer !== null) clearInterval(timer);
      extra.signal.removeEventListener('abort', onAbort);
    }
    const end = await session.done;
    const logs = end.logs || [];
    if (end.type === 'result') {
      return { content: [{ type: 'text', text: resultText(end.data, extra) }, ...logContent(logs)] };
    }
    return errorResult(remapError(end.error, prepared.edits), logs);
  }

  return {
    server,
    engine,
    async close() {
      ended = true;
      if (sandbox !== null) sandbox.close();
      await server.close();
      if (ownsEngine) await engine.shutdown();
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

function errorResult(error, logs) {
  const where = error.line !== undefined && !/at line \d+/.test(error.message) ? `\nat line ${error.line}, column ${error.column}` : '';
  const thrown = error.thrown && error.thrown.stack ? `\n${error.thrown.stack}` : '';
  return {
    isError: true,
    content: [{ type: 'text', text: `${error.name} [${error.code}]: ${error.message}${where}${thrown}` }, ...logContent(logs)],
  };
}

/** Serves MCP over this process's stdin/stdout until stdin closes. */
async function serveStdio(settings) {
  const { StdioServerTransport } = requirePeer('@modelcontextprotocol/sdk/server/stdio.js', 'isolet mcp');
  const mcp = createMcpServer(settings);
  const transport = new StdioServerTransport();
  await mcp.server.connect(transport);
  return mcp;
}

/**
 * Serves MCP over Streamable HTTP (see lib/mcp-http.js); `options` are checked by
 * isolet-core (`MCP_HTTP`): listen, allowedHosts, allowedOrigins, token | tokenEnv |
 * tokenFile, maxSessions, sessionIdleMs, maxBodyBytes, maxRunsPerSession.
 */
async function serveHttp(settings, options = {}) {
  let checked;
  try {
    checked = ownCopy(native.mcpHttpOptions(options));
  } catch (err) {
    throw errorFromThrown(err);
  }
  return require('./mcp-http').listenHttp(settings, checked);
}

/**
 * Settings for createMcpServer/serveStdio/serveHttp from a config object: the keys of
 * `isolet mcp --config` (timeoutMs, cpuTimeMs, memoryMb, language, isolation, readDir,
 * allowOrigins, engine), checked the same way.
 */
function mcpSettings(config = {}) {
  const { settingsFrom, UsageError } = require('./cli/options');
  try {
    return settingsFrom({}, undefined, config);
  } catch (err) {
    throw err instanceof UsageError ? new SandboxValidationError(err.message) : err;
  }
}

module.exports = { createMcpServer, serveStdio, serveHttp, mcpSettings, initOnce, MCP_TOOL_NAME: TOOL_NAME };
