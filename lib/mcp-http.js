'use strict';
// `isolet mcp --http`: the run_code server over Streamable HTTP, through the SDK's own
// StreamableHTTPServerTransport, one SDK server per MCP session and one SandboxEngine for
// all of them. This file owns only what sits in front of the transport, and bounds what a
// client that has not proved anything can make the server hold:
//   - Host and Origin are checked first (DNS rebinding: a web page whose name resolves to
//     127.0.0.1 must not reach the server); then the bearer token, if one is configured;
//   - a request body is read up to maxBodyBytes (413 past it), headers and body within
//     fixed timeouts;
//   - a socket is unauthenticated until a request on it passes those checks: such sockets
//     are capped per remote address and in total (past either cap the oldest one goes, so
//     a newcomer always gets its turn) and each has UNAUTHENTICATED_MS to pass; the
//     authenticated ones are capped by the sessions they can serve (503 past it). Nobody
//     who lacks the token can take a place a client with the token needs;
//   - sessions are capped (maxSessions, 503 past it) and closed after sessionIdleMs
//     without a request; each holds at most maxRunsPerSession tool calls (lib/mcp.js);
//   - answers are written with backpressure: a big result's text is escaped and written
//     piece by piece as the client reads (never built whole), and a session whose client
//     reads nothing for READ_STALL_MS while the server has bytes for it is ended.
// Shutdown (close(), or SIGTERM/SIGINT in the CLI) refuses new requests, lets the runs in
// flight settle and answer, then closes every session and the engine.
const http = require('node:http');
const fs = require('node:fs');
const crypto = require('node:crypto');
const { SandboxEngine } = require('./engine');
const { SandboxValidationError } = require('./errors');
const { requirePeer } = require('./peer');
const { createMcpServer, initOnce } = require('./mcp');

/** The one path the server answers on. */
const MCP_PATH = '/mcp';
/** Time a client has to send its request headers, and its whole request. */
const HEADERS_TIMEOUT_MS = 10_000;
const REQUEST_TIMEOUT_MS = 30_000;
/** How long shutdown waits for answers to be written once every run has settled. */
const DRAIN_MS = 5_000;
/**
 * Sockets that have not passed the Host/Origin/token checks yet: at most this many per
 * remote address and in all, each for at most UNAUTHENTICATED_MS. A client that has the
 * token sends it in its first request, so it leaves this state within a round trip.
 */
const UNAUTHENTICATED_PER_ADDRESS = 32;
const UNAUTHENTICATED_TOTAL = 256;
const UNAUTHENTICATED_MS = 5_000;
/** A session whose client takes none of the bytes written to it for this long is ended. */
const READ_STALL_MS = 10_000;

const LOOPBACK_NAMES = ['localhost', '127.0.0.1', '[::1]'];

/** The bearer token the settings name, read now (from the environment or a file). */
function readToken(http) {
  let token;
  let from;
  if (http.token !== undefined) {
    token = http.token;
    from = 'token';
  } else if (http.tokenEnv !== undefined) {
    token = process.env[http.tokenEnv];
    from = `the environment variable ${http.tokenEnv}`;
    if (token === undefined) throw new SandboxValidationError(`${from} (the bearer token) is not set`);
  } else if (http.tokenFile !== undefined) {
    from = `the token file ${http.tokenFile}`;
    try {
      token = fs.readFileSync(http.tokenFile, 'utf8');
    } catch (err) {
      throw new SandboxValidationError(`cannot read ${from}: ${err.code || err.message}`);
    }
  } else {
    return null;
  }
  token = token.trim();
  if (token.length === 0) throw new SandboxValidationError(`${from} holds no bearer token (it is empty)`);
  return token;
}

function hostOf(host) {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
}

/** The Host values accepted: the loopback names (and the bound address) at the bound port, and the given ones. */
function allowedHostsFor(boundHost, port, given) {
  const names = new Set(LOOPBACK_NAMES);
  if (boundHost !== '0.0.0.0' && boundHost !== '::') names.add(hostOf(boundHost).toLowerCase());
  const exact = new Set([...names].map((n) => `${n}:${port}`));
  for (const h of given) exact.add(h.toLowerCase());
  return exact;
}

function hostAllowed(allowed, host) {
  if (typeof host !== 'string' || host.length === 0) return false;
  const h = host.toLowerCase();
  if (allowed.has(h)) return true;
  // A given entry without a port ("mcp.example.com") accepts that name at any port.
  const name = h.startsWith('[') ? h.slice(0, h.indexOf(']') + 1) : h.split(':')[0];
  return allowed.has(name);
}

function allowedOriginsFor(port, given) {
  const origins = new Set(LOOPBACK_NAMES.map((n) => `http://${n}:${port}`));
  for (const o of given) origins.add(o.toLowerCase().replace(/\/$/, ''));
  return origins;
}

function sameSecret(given, token) {
  // Digests have one length: the comparison takes the same time whatever was sent.
  const a = crypto.createHash('sha256').update(given).digest();
  const b = crypto.createHash('sha256').update(token).digest();
  return crypto.timingSafeEqual(a, b);
}

function reply(res, status, code, message, headers = {}) {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}

/**
 * Takes over `res.write`/`end`/`writeHead` of a session's POST response, whose bytes the
 * SDK transport writes: where the placeholder of a deferred answer shows up, the answer's
 * text is written instead, piece by piece, each piece escaped as a JSON string's content
 * and written once the previous one has drained; writes made meanwhile wait their turn.
 * When the reader takes nothing for READ_STALL_MS while bytes wait, `onStall` runs.
 * Returns `defer(pieces)`, which gives the placeholder for a text.
 */
function answerWriter(res, onStall) {
  const write = res.write.bind(res);
  const end = res.end.bind(res);
  const writeHead = res.writeHead.bind(res);
  const deferred = new Map(); // placeholder -> the pieces of its text
  let held = null; // calls made while an answer is being written, replayed after it
  let stall = null;
  const disarm = () => {
    clearTimeout(stall);
    stall = null;
  };
  res.on('drain', disarm);
  res.once('close', disarm);
  const send = (chunk, encoding, callback) => {
    const ok = write(chunk, encoding, callback);
    if (!ok && stall === null && !res.destroyed) {
      stall = setTimeout(onStall, READ_STALL_MS);
      stall.unref();
    }
    return ok;
  };
  const drained = () =>
    new Promise((resolve) => {
      const done = () => {
        res.off('drain', done);
        res.off('close', done);
        resolve();
      };
      res.on('drain', done);
      res.on('close', done);
    });
  const find = (bytes) => {
    let found = null;
    for (const key of deferred.keys()) {
      const at = bytes.indexOf(key);
      if (at >= 0 && (found === null || at < found.at)) found = { at, key };
    }
    return found;
  };
  const expand = async (bytes) => {
    for (let found = find(bytes); found !== null; found = find(bytes)) {
      const pieces = deferred.get(found.key);
      deferred.delete(found.key);
      send(bytes.subarray(0, found.at));
      for (const piece of pieces) {
        if (res.destroyed) return;
        // The SDK put the placeholder inside a JSON string: the text goes there escaped.
        if (!send(JSON.stringify(piece).slice(1, -1))) await drained();
      }
      bytes = bytes.subarray(found.at + found.key.length);
    }
    send(bytes);
  };
  const release = () => {
    const calls = held;
    held = null;
    if (res.destroyed) return;
    // A replayed write may start another answer: the calls after it are held again.
    for (const replay of calls) replay();
    // The writer told "false" waits for a drain that Node will not emit if nothing is buffered.
    if (held === null && !res.destroyed && !res.writableNeedDrain) res.emit('drain');
  };
  res.writeHead = (status, ...rest) => {
    // The answer will be longer than the bytes the SDK counted: let Node send it chunked.
    const headers = rest[rest.length - 1];
    if (deferred.size > 0 && headers !== null && typeof headers === 'object' && !Array.isArray(headers)) {
      rest[rest.length - 1] = Object.fromEntries(Object.entries(headers).filter(([name]) => name.toLowerCase() !== 'content-length'));
    }
    return writeHead(status, ...rest);
  };
  res.write = (chunk, encoding, callback) => {
    if (held !== null) {
      held.push(() => res.write(chunk, encoding, callback));
      return false;
    }
    if (deferred.size === 0) return send(chunk, encoding, callback);
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk, typeof encoding === 'string' ? encoding : 'utf8') : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    if (find(bytes) === null) return send(chunk, encoding, callback);
    held = [];
    expand(bytes).then(
      () => {
        if (typeof callback === 'function') callback();
        release();
      },
      () => res.destroy(),
    );
    return false;
  };
  res.end = (...args) => {
    if (held !== null) {
      held.push(() => res.end(...args));
      return res;
    }
    return end(...args);
  };
  return (pieces) => {
    const placeholder = `isolet-answer:${crypto.randomUUID()}`;
    deferred.set(placeholder, pieces);
    return placeholder;
  };
}

/** Ids of the JSON-RPC requests in a POST body (one message or a batch). */
function requestIds(body) {
  const ids = [];
  for (const message of Array.isArray(body) ? body : [body]) {
    if (message !== null && typeof message === 'object' && typeof message.method === 'string' && (typeof message.id === 'string' || typeof message.id === 'number')) {
      ids.push(message.id);
    }
  }
  return ids;
}

/** The body as parsed JSON, or an HTTP error already sent (resolves with undefined). */
function readJsonBody(req, res, maxBytes) {
  return new Promise((resolve) => {
    const declared = Number(req.headers['content-length']);
    const tooLarge = () => {
      reply(res, 413, -32000, `Request body over ${maxBytes} bytes (maxBodyBytes)`, { connection: 'close' });
      req.destroy();
      resolve(undefined);
    };
    if (Number.isFinite(declared) && declared > maxBytes) return tooLarge();
    const chunks = [];
    let size = 0;
    let done = false;
    req.on('data', (chunk) => {
      if (done) return;
      size += chunk.length;
      if (size > maxBytes) {
        done = true;
        tooLarge();
        return;
      }
      chunks.push(chunk);
    });
    req.on('error', () => {
      if (!done) resolve(undefined);
      done = true;
    });
    req.on('end', () => {
      if (done) return;
      done = true;
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      } catch {
        reply(res, 400, -32700, 'Parse error: the body is not JSON');
        resolve(undefined);
      }
    });
  });
}

/**
 * Binds the server and starts serving. `http` is checked (isolet-core `MCP_HTTP`).
 * Resolves with `{ url, host, port, engine, sessionCount(), close() }`.
 */
async function listenHttp(settings, httpSettings, hooks = {}) {
  const { StreamableHTTPServerTransport } = requirePeer('@modelcontextprotocol/sdk/server/streamableHttp.js', 'isolet mcp --http');
  const { isInitializeRequest } = requirePeer('@modelcontextprotocol/sdk/types.js', 'isolet mcp --http');
  const log = hooks.log ?? (() => {});
  const token = readToken(httpSettings);
  const engine = new SandboxEngine(settings.engineConfig);
  // Fails here, before the port is bound, if the engine cannot start (process hosts).
  await initOnce(engine);

  const sessions = new Map(); // session id -> record
  const starting = new Set(); // records whose initialize is being answered
  const runs = new Set(); // tool calls in flight, every session
  let openPosts = 0;
  let postsDrained = null;
  // Each session may hold its runs' streams, a GET stream and a request or two.
  const maxAuthenticated = httpSettings.maxSessions * (httpSettings.maxRunsPerSession + 2) + 16;
  const unauthenticated = new Map(); // socket -> { timer (its deadline), address }, oldest first
  const unauthenticatedBy = new Map(); // remote address -> its unauthenticated sockets, oldest first
  const authenticated = new Set();
  let stopping = false;
  let allowedHosts;
  let allowedOrigins;

  /** Takes a socket out of the unauthenticated ones (it passed, or it is gone). */
  const forget = (socket) => {
    const entry = unauthenticated.get(socket);
    if (entry === undefined) return;
    clearTimeout(entry.timer);
    unauthenticated.delete(socket);
    const mine = unauthenticatedBy.get(entry.address);
    mine.delete(socket);
    if (mine.size === 0) unauthenticatedBy.delete(entry.address);
  };
  const evictOldest = (sockets) => {
    const oldest = sockets.keys().next().value;
    forget(oldest);
    oldest.destroy();
  };
  const onConnection = (socket) => {
    const address = socket.remoteAddress ?? '';
    let mine = unauthenticatedBy.get(address);
    if (mine === undefined) unauthenticatedBy.set(address, (mine = new Set()));
    mine.add(socket);
    const timer = setTimeout(() => {
      forget(socket);
      socket.destroy();
    }, UNAUTHENTICATED_MS);
    timer.unref();
    unauthenticated.set(socket, { timer, address });
    if (mine.size > UNAUTHENTICATED_PER_ADDRESS) evictOldest(mine);
    if (unauthenticated.size > UNAUTHENTICATED_TOTAL) evictOldest(unauthenticated);
    socket.once('close', () => {
      forget(socket);
      authenticated.delete(socket);
    });
  };
  /** Counts the socket of a request that passed every check; false once the authenticated ones are at their cap. */
  const admit = (socket) => {
    if (authenticated.has(socket)) return true;
    if (authenticated.size >= maxAuthenticated) return false;
    forget(socket);
    authenticated.add(socket);
    return true;
  };

  const closeSession = (rec, why) => {
    if (rec.closed) return rec.closed;
    clearTimeout(rec.timer);
    if (rec.id !== undefined) sessions.delete(rec.id);
    starting.delete(rec);
    if (why) log(`session ${rec.id} closed: ${why}`);
    // Set before closing: the SDK server's close closes the transport, whose onclose
    // comes back here. Closing aborts the session's calls in flight, and so their runs.
    let done;
    rec.closed = new Promise((resolve) => (done = resolve));
    rec.mcp.close().catch(() => {}).then(done);
    return rec.closed;
  };

  const newSession = () => {
    // answers: request id -> the defer of the response its answer goes to (null: an id
    // sent twice at once, whose answer is not deferred); responses: every open one.
    const rec = { id: undefined, transport: null, mcp: null, busy: 0, timer: null, closed: null, answers: new Map(), responses: new Set() };
    const deferText = (requestId, pieces) => rec.answers.get(requestId)?.(pieces) ?? null;
    rec.mcp = createMcpServer(settings, { engine, maxRuns: httpSettings.maxRunsPerSession, runs, deferText });
    rec.transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => crypto.randomUUID(),
      onsessioninitialized: (id) => {
        rec.id = id;
        starting.delete(rec);
        sessions.set(id, rec);
      },
    });
    rec.transport.onclose = () => closeSession(rec);
    rec.transport.onerror = (err) => log(`session ${rec.id ?? '(new)'}: ${err.message}`);
    starting.add(rec);
    return rec;
  };

  /** The answers to the requests in `body` go to `res`, through an answerWriter. */
  const routeAnswers = (rec, res, body) => {
    const ids = requestIds(body);
    if (ids.length === 0) return;
    const defer = answerWriter(res, () => {
      closeSession(rec, `its client read nothing of its answers for ${READ_STALL_MS} ms`);
      for (const open of rec.responses) open.destroy();
    });
    for (const id of ids) rec.answers.set(id, rec.answers.has(id) ? null : defer);
    res.once('close', () => {
      for (const id of ids) {
        const routed = rec.answers.get(id);
        if (routed === defer || routed === null) rec.answers.delete(id);
      }
    });
  };

  // Activity: a session is idle when none of its POSTs is open (a GET stream that only
  // listens does not keep it). Each response's end may start the idle clock.
  const track = (rec, res, isPost) => {
    rec.responses.add(res);
    res.once('close', () => rec.responses.delete(res));
    if (isPost) {
      openPosts++;
      rec.busy++;
      clearTimeout(rec.timer);
    }
    res.once('close', () => {
      if (!isPost) return;
      openPosts--;
      if (openPosts === 0 && postsDrained) postsDrained();
      rec.busy--;
      if (rec.busy === 0 && !rec.closed && !stopping) {
        rec.timer = setTimeout(() => closeSession(rec, `idle for ${httpSettings.sessionIdleMs} ms`), httpSettings.sessionIdleMs);
        rec.timer.unref();
      }
    });
  };

  const handle = async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    if (stopping) return reply(res, 503, -32000, 'Server shutting down', { connection: 'close' });
    if (!hostAllowed(allowedHosts, req.headers.host)) return reply(res, 403, -32000, `Forbidden: Host ${JSON.stringify(req.headers.host ?? '')} is not allowed`);
    const origin = req.headers.origin;
    if (origin !== undefined && !allowedOrigins.has(origin.toLowerCase())) return reply(res, 403, -32000, `Forbidden: Origin ${JSON.stringify(origin)} is not allowed`);
    if (token !== null) {
      const auth = req.headers.authorization;
      const m = typeof auth === 'string' ? /^Bearer\s+(\S+)\s*$/i.exec(auth) : null;
      if (m === null || !sameSecret(m[1], token)) {
        const challenge = m === null ? 'Bearer realm="isolet"' : 'Bearer realm="isolet", error="invalid_token"';
        return reply(res, 401, -32001, m === null ? 'Unauthorized: a bearer token is required' : 'Unauthorized: wrong bearer token', { 'www-authenticate': challenge });
      }
    }
    if (!admit(req.socket)) {
      return reply(res, 503, -32000, `Server busy: ${maxAuthenticated} connections open (maxSessions x (maxRunsPerSession + 2) + 16); retry later`, {
        'retry-after': '5',
        connection: 'close',
      });
    }
    if (url.pathname !== MCP_PATH) return reply(res, 404, -32000, `Not found: the MCP endpoint is ${MCP_PATH}`);
    if (req.method !== 'POST' && req.method !== 'GET' && req.method !== 'DELETE') {
      return reply(res, 405, -32000, 'Method not allowed', { allow: 'GET, POST, DELETE' });
    }
    const sessionId = req.headers['mcp-session-id'];
    const isPost = req.method === 'POST';
    if (sessionId !== undefined) {
      const rec = typeof sessionId === 'string' ? sessions.get(sessionId) : undefined;
      if (rec === undefined) return reply(res, 404, -32001, 'Session not found');
      track(rec, res, isPost);
      const body = isPost ? await readJsonBody(req, res, httpSettings.maxBodyBytes) : undefined;
      if (isPost && body === undefined) return;
      if (isPost) routeAnswers(rec, res, body);
      return rec.transport.handleRequest(req, res, body);
    }
    if (!isPost) return reply(res, 400, -32000, 'Bad Request: no session ID (mcp-session-id) given');
    const body = await readJsonBody(req, res, httpSettings.maxBodyBytes);
    if (body === undefined) return;
    if (!isInitializeRequest(body)) return reply(res, 400, -32000, 'Bad Request: no valid session ID given, and this is not an initialize request');
    if (stopping) return reply(res, 503, -32000, 'Server shutting down', { connection: 'close' });
    if (sessions.size + starting.size >= httpSettings.maxSessions) {
      return reply(res, 503, -32000, `Server busy: ${httpSettings.maxSessions} sessions open (maxSessions); retry later`, { 'retry-after': '5' });
    }
    const rec = newSession();
    track(rec, res, true);
    try {
      await rec.mcp.server.connect(rec.transport);
      await rec.transport.handleRequest(req, res, body);
    } finally {
      // An initialize that did not succeed leaves no session (and holds no place) behind.
      if (rec.id === undefined) closeSession(rec);
    }
  };

  const server = http.createServer((req, res) => {
    handle(req, res).catch((err) => {
      log(`request failed: ${err.message}`);
      reply(res, 500, -32603, 'Internal error');
    });
  });
  server.headersTimeout = HEADERS_TIMEOUT_MS;
  server.requestTimeout = REQUEST_TIMEOUT_MS;
  // Not server.maxConnections: it counts sockets before anyone is authenticated.
  server.on('connection', onConnection);

  try {
    await new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(httpSettings.port, httpSettings.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (err) {
    await engine.shutdown();
    throw new SandboxValidationError(`cannot listen on ${hostOf(httpSettings.host)}:${httpSettings.port}: ${err.code || err.message}`);
  }
  const port = server.address().port;
  allowedHosts = allowedHostsFor(httpSettings.host, port, httpSettings.allowedHosts);
  allowedOrigins = allowedOriginsFor(port, httpSettings.allowedOrigins);
  const shownHost = httpSettings.host === '0.0.0.0' || httpSettings.host === '::' ? '127.0.0.1' : hostOf(httpSettings.host);

  let closing = null;
  const close = () => {
    if (closing) return closing;
    stopping = true;
    closing = (async () => {
      const stopped = new Promise((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      for (const rec of sessions.values()) clearTimeout(rec.timer);
      // Runs in flight settle (each within its own time limit) and answer their callers.
      while (runs.size > 0) await Promise.allSettled([...runs]);
      if (openPosts > 0) {
        await new Promise((resolve) => {
          postsDrained = resolve;
          setTimeout(resolve, DRAIN_MS).unref();
        });
      }
      await Promise.all([...sessions.values(), ...starting].map((rec) => closeSession(rec)));
      server.closeAllConnections();
      await stopped;
      await engine.shutdown();
    })();
    return closing;
  };

  return {
    url: `http://${shownHost}:${port}${MCP_PATH}`,
    host: httpSettings.host,
    port,
    engine,
    /** Sessions open now (initialized and not closed). */
    sessionCount: () => sessions.size,
    /** Runs in flight now, every session. */
    runsInFlight: () => runs.size,
    close,
  };
}

module.exports = { listenHttp, MCP_PATH, UNAUTHENTICATED_PER_ADDRESS, UNAUTHENTICATED_TOTAL, UNAUTHENTICATED_MS, READ_STALL_MS };
