'use strict';
// `isolet mcp --http`: the run_code server over Streamable HTTP on the official v2 SDK, both
// protocol eras on one endpoint and one SandboxEngine for all clients:
//   - 2025 (initialize, Mcp-Session-Id): the SDK's NodeStreamableHTTPServerTransport, one
//     SDK server per session;
//   - 2026-07-28 (no session, `_meta` on every request): the SDK's createMcpHandler, one
//     SDK server per request; the SDK answers the revision's errors (missing or mismatched
//     `_meta` and headers, unsupported versions, removed methods) with their HTTP statuses.
// The SDK's isLegacyRequest decides which. This file owns only what sits in front of the
// SDK, and bounds what a client can make the server hold:
//   - Host and Origin are checked first (DNS rebinding: a web page whose name resolves to
//     127.0.0.1 must not reach the server); then the bearer token, if one is configured;
//   - a request body is read up to maxBodyBytes (413 past it), headers and body within
//     fixed timeouts;
//   - a socket is unauthenticated until a request on it passes those checks: such sockets
//     are capped per remote address and in total (past either cap the oldest one goes, so
//     a newcomer always gets its turn) and each has UNAUTHENTICATED_MS to pass; the
//     authenticated ones are capped by the sessions they can serve (503 past it). Nobody
//     who lacks the token can take a place a client with the token needs;
//   - what a client holds (2025 sessions and, stateful under 2026-07-28, sandbox handles)
//     is bounded per client (one token from one remote address: maxSessionsPerClient) and
//     in all (maxSessions): a client at its bound gives up its own least recently used
//     idle session for a new one, a full server gives up one whose client has gone quiet
//     (no request in flight, no stream open), else it answers 503 with Retry-After. A
//     session without an open request or stream, and a handle without a call, expire after
//     sessionIdleMs. So clients that vanish without a DELETE cannot lock anyone out;
//   - each session (2025) or client (2026-07-28) holds at most maxRunsPerSession tool calls
//     in flight (lib/mcp.js);
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
const { createMcpService, initOnce, SlotRefused } = require('./mcp-service');

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

function reply(res, status, code, message, headers = {}, { id = null, data } = {}) {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message, ...(data === undefined ? {} : { data }) }, id }));
}

/** The id of a JSON-RPC request body, to echo in an error answer (null otherwise). */
function echoableId(body) {
  if (body === null || typeof body !== 'object' || Array.isArray(body) || typeof body.method !== 'string') return null;
  return typeof body.id === 'string' || typeof body.id === 'number' ? body.id : null;
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
    // An answer handed over whole to end() goes through write(), where placeholders are found.
    const [chunk, encoding] = args;
    if (deferred.size > 0 && (typeof chunk === 'string' || chunk instanceof Uint8Array)) {
      res.write(chunk, typeof encoding === 'string' ? encoding : undefined);
      return res.end(...args.filter((a) => typeof a === 'function'));
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
 * The places clients hold: each 2025 session and each 2026-07-28 sandbox handle is a slot
 * of one client (`slot.client`: its token and remote address). At most `total` in all and
 * `perClient` per client. A client at its bound that claims another gives up its least
 * recently active slot with no request in flight (one without an open stream first); a
 * full server gives up the least recently active slot that has neither (its client has
 * gone quiet); else the claim is refused (SlotRefused) with the time after which to retry.
 * A slot: { client, kind, lastActive(), isBusy(), isConnected(), evict() }.
 */
function createSlots({ total, perClient, idleMs, log }) {
  const all = new Set();
  const byClient = new Map();
  const remove = (slot) => {
    if (!all.delete(slot)) return false;
    const mine = byClient.get(slot.client);
    mine.delete(slot);
    if (mine.size === 0) byClient.delete(slot.client);
    return true;
  };
  /** The slot to give up: idle, unconnected before connected, least recently active first. */
  const pick = (slots, connectedToo) => {
    let best = null;
    for (const slot of slots) {
      if (slot.isBusy()) continue;
      const connected = slot.isConnected();
      if (connected && !connectedToo) continue;
      const key = [connected ? 1 : 0, slot.lastActive()];
      if (best === null || key[0] < best.key[0] || (key[0] === best.key[0] && key[1] < best.key[1])) best = { slot, key };
    }
    return best === null ? null : best.slot;
  };
  const evict = (slot, why) => {
    remove(slot);
    log(`${slot.kind} of ${slot.client} given up: ${why}`);
    slot.evict();
  };
  /** When a place may free itself: the soonest idle expiry of a quiet slot, else one idle period. */
  const retryAfterMs = () => {
    const now = Date.now();
    let soonest = idleMs;
    for (const slot of all) {
      if (!slot.isBusy() && !slot.isConnected()) soonest = Math.min(soonest, slot.lastActive() + idleMs - now);
    }
    return Math.max(1000, soonest);
  };
  return {
    claim(slot) {
      const mine = byClient.get(slot.client);
      if (mine !== undefined && mine.size >= perClient) {
        const victim = pick(mine, true);
        if (victim === null) {
          throw new SlotRefused(`Server busy: this client holds ${perClient} sessions or sandboxes (maxSessionsPerClient), each with a request in flight`, retryAfterMs());
        }
        evict(victim, `the client opened another past maxSessionsPerClient (${perClient})`);
      }
      if (all.size >= total) {
        const victim = pick(all, false);
        if (victim === null) throw new SlotRefused(`Server busy: ${total} sessions or sandboxes open (maxSessions), none of them quiet`, retryAfterMs());
        evict(victim, `the server holds maxSessions (${total}) and this one was the least recently used with no request in flight and no stream open`);
      }
      all.add(slot);
      let mineNow = byClient.get(slot.client);
      if (mineNow === undefined) byClient.set(slot.client, (mineNow = new Set()));
      mineNow.add(slot);
    },
    release(slot) {
      remove(slot);
    },
    size: () => all.size,
  };
}

/**
 * Binds the server and starts serving. `http` is checked (isolet-core `MCP_HTTP`).
 * Resolves with `{ url, host, port, engine, sessionCount(), handleCount(), runsInFlight(), close() }`.
 */
async function listenHttp(settings, httpSettings, hooks = {}) {
  const sdk = requirePeer('@modelcontextprotocol/server', 'isolet mcp --http');
  const node = requirePeer('@modelcontextprotocol/node', 'isolet mcp --http');
  const log = hooks.log ?? (() => {});
  const token = readToken(httpSettings);
  const engine = new SandboxEngine(settings.engineConfig);
  // Fails here, before the port is bound, if the engine cannot start (process hosts).
  await initOnce(engine);

  const idleMs = httpSettings.sessionIdleMs;
  const perClient = Math.min(httpSettings.maxSessionsPerClient, httpSettings.maxSessions);
  const slots = createSlots({ total: httpSettings.maxSessions, perClient, idleMs, log });
  const sessions = new Map(); // session id -> record
  const starting = new Set(); // records whose initialize is being answered
  const runs = new Set(); // tool calls in flight, every session and client
  const service = createMcpService(settings, { engine, maxRuns: httpSettings.maxRunsPerSession, runs, slots, handleIdleMs: idleMs });
  // 2026-07-28: one SDK server per request, from the same definition as the sessions'.
  const modernHandler = sdk.createMcpHandler(() => service.newServer({ era: 'modern' }), {
    legacy: 'reject',
    maxRequestBodySize: httpSettings.maxBodyBytes,
    // A subscriptions/listen stream may stay open (holding an authenticated socket) as long
    // as its client likes; isolet's tool list never changes, so the SDK ends each at once
    // (nothing to deliver), and this bound only guards against that changing.
    maxSubscriptions: httpSettings.maxSessions,
    onerror: (err) => {
      // The revision's rejections are answers, not faults; anything else is worth a line.
      if (!/^Rejected |^Unsupported protocol version|^Missing required client capabilit/.test(err.message)) log(`request failed: ${err.message}`);
    },
  });
  const modern = node.toNodeHandler(modernHandler, { maxRequestBodySize: httpSettings.maxBodyBytes });
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
    slots.release(rec.slot);
    if (why) log(`session ${rec.id} closed: ${why}`);
    // Set before closing: the SDK server's close closes the transport, whose onclose
    // comes back here. Closing aborts the session's calls in flight, and so their runs.
    let done;
    rec.closed = new Promise((resolve) => (done = resolve));
    service.endSession(rec.scope);
    rec.mcp.close().catch(() => {}).then(done);
    return rec.closed;
  };

  /** A new 2025 session for `client`; throws SlotRefused when the client or the server has no place for it. */
  const newSession = (client) => {
    // answers: request id -> the defer of the response its answer goes to (null: an id
    // sent twice at once, whose answer is not deferred); responses: every open one.
    const rec = { id: undefined, client, transport: null, mcp: null, scope: null, busy: 0, timer: null, closed: null, answers: new Map(), responses: new Set(), lastActive: Date.now(), slot: null };
    rec.slot = {
      client,
      kind: 'session',
      lastActive: () => rec.lastActive,
      isBusy: () => rec.busy > 0,
      isConnected: () => rec.responses.size > 0,
      evict: () => {
        closeSession(rec, 'given up for a newer one (maxSessionsPerClient or maxSessions)');
        for (const open of rec.responses) open.destroy();
      },
    };
    slots.claim(rec.slot);
    rec.scope = service.newSession();
    rec.scope.answers = (requestId, pieces) => rec.answers.get(requestId)?.(pieces) ?? null;
    rec.mcp = service.newServer({ era: 'legacy', session: rec.scope });
    rec.transport = new node.NodeStreamableHTTPServerTransport({
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

  /** Shutdown waits for the POSTs open now to be answered. */
  const countPost = (res) => {
    openPosts++;
    res.once('close', () => {
      openPosts--;
      if (openPosts === 0 && postsDrained) postsDrained();
    });
  };

  // Activity: a session is busy while one of its POSTs is open, and connected while any of
  // its responses (a POST's, or a GET stream) is open; once none is, its idle clock runs.
  const track = (rec, res, isPost) => {
    rec.responses.add(res);
    rec.lastActive = Date.now();
    clearTimeout(rec.timer);
    if (isPost) {
      countPost(res);
      rec.busy++;
    }
    res.once('close', () => {
      rec.responses.delete(res);
      rec.lastActive = Date.now();
      if (isPost) rec.busy--;
      if (rec.responses.size === 0 && !rec.closed && !stopping) {
        rec.timer = setTimeout(() => closeSession(rec, `idle for ${idleMs} ms`), idleMs);
        rec.timer.unref();
      }
    });
  };

  const busyReply = (res, err, id) =>
    reply(res, 503, -32000, `${err.message}; retry in ${Math.ceil(err.retryAfterMs / 1000)} s`, { 'retry-after': String(Math.ceil(err.retryAfterMs / 1000)) }, { id, data: { retryAfterMs: err.retryAfterMs } });

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
    // Who holds what: one token from one remote address is one client.
    const client = `${token === null ? 'anyone' : 'token'}@${req.socket.remoteAddress ?? ''}`;
    const sessionId = req.headers['mcp-session-id'];
    const isPost = req.method === 'POST';
    if (sessionId !== undefined) {
      const rec = typeof sessionId === 'string' ? sessions.get(sessionId) : undefined;
      // A session serves the client that opened it.
      if (rec === undefined || rec.client !== client) return reply(res, 404, -32001, 'Session not found');
      track(rec, res, isPost);
      const body = isPost ? await readJsonBody(req, res, httpSettings.maxBodyBytes) : undefined;
      if (isPost && body === undefined) return;
      if (isPost) routeAnswers(rec, res, body);
      return rec.transport.handleRequest(req, res, body);
    }
    if (!isPost) return reply(res, 400, -32000, 'Bad Request: no session ID (mcp-session-id) given');
    const body = await readJsonBody(req, res, httpSettings.maxBodyBytes);
    if (body === undefined) return;
    if (stopping) return reply(res, 503, -32000, 'Server shutting down', { connection: 'close' });
    const headers = new Headers();
    for (const [name, value] of Object.entries(req.headers)) {
      if (value === undefined || name === 'content-length' || name === 'transfer-encoding') continue;
      for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
    }
    const legacy = await sdk.isLegacyRequest(new Request(`http://x${MCP_PATH}`, { method: 'POST', headers }), body, { maxRequestBodySize: httpSettings.maxBodyBytes });
    if (!legacy) {
      // 2026-07-28: the SDK answers it (or the revision's error); a big result's text is
      // written with backpressure through this response's answerWriter.
      countPost(res);
      const defer = answerWriter(res, () => {
        log(`a client read nothing of its answer for ${READ_STALL_MS} ms: its response is closed`);
        res.destroy();
      });
      req.auth = { token: 'isolet', clientId: client, scopes: [], extra: { isoletDefer: defer } };
      return modern(req, res, body);
    }
    if (!sdk.isInitializeRequest(body)) {
      return reply(res, 400, -32000, 'Bad Request: no valid session ID given, and this is not an initialize request', {}, { id: echoableId(body) });
    }
    let rec;
    try {
      rec = newSession(client);
    } catch (err) {
      if (err instanceof SlotRefused) return busyReply(res, err, echoableId(body));
      throw err;
    }
    track(rec, res, true);
    try {
      await rec.mcp.connect(rec.transport);
      routeAnswers(rec, res, body);
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
    await service.close();
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
      await modernHandler.close().catch(() => {});
      await service.close();
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
    /** The MCP revisions served. */
    protocolVersions: service.protocolVersions,
    /** Sessions open now (initialized and not closed). */
    sessionCount: () => sessions.size,
    /** Sandbox handles open now (stateful, 2026-07-28). */
    handleCount: () => service.handleCount(),
    /** Runs in flight now, every session. */
    runsInFlight: () => runs.size,
    close,
  };
}

module.exports = { listenHttp, MCP_PATH, UNAUTHENTICATED_PER_ADDRESS, UNAUTHENTICATED_TOTAL, UNAUTHENTICATED_MS, READ_STALL_MS };
