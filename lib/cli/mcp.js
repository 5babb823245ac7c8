'use strict';
// `isolet mcp`: an MCP server whose `run_code` tool runs JavaScript/TypeScript in isolet
// under the limits given by flags or --config, over stdio (the default) or, with --http,
// Streamable HTTP. On stdio, stdout carries the protocol, so everything else goes to stderr.
const native = require('../native');
const { UsageError, commandFlags, limitsHelp, parse, readConfig, settingsFrom, usageText } = require('./options');

const HTTP = native.entryDefaults().cli;

const MCP_FLAGS = commandFlags('mcp', { config: { type: 'string' }, help: { type: 'boolean', short: 'h' } });

const MCP_USAGE = `usage: isolet mcp [options]

Starts a Model Context Protocol server with one tool, run_code ({ code, language? }),
which runs the code in a fresh V8 isolate under these limits and answers with the result
(JSON), console output and typed errors. The result is what a return gives, or else the
value of the last top-level expression statement. Serves on stdin/stdout unless --http
is given, MCP revisions 2025-11-25 (and older ones a client asks for: 2025-06-18,
2025-03-26, 2024-11-05) and 2026-07-28, the one each client opens with. Needs the
@modelcontextprotocol/server package (and @modelcontextprotocol/node for --http).

options:
${limitsHelp("  --language <lang>        the language of run_code calls that name none: javascript\n                           (default) or typescript; a call's own language wins")}
  --stateful               a persistent sandbox per client (per MCP session under 2025
                           revisions, per sandbox handle under 2026-07-28)
  --idle-timeout-ms <ms>   with --stateful: close a sandbox after this long without a
                           call (config: "stateful", "idleTimeoutMs")
  -h, --help               show this help

Streamable HTTP:
  --http [host:]port       serve on http://host:port/mcp instead of stdio; the host is
                           127.0.0.1 unless given (0 for a free port)
  --http-allowed-hosts <host>
                           also accept this Host header (repeatable; the loopback names
                           at the bound port are always accepted)
  --http-allowed-origins <origin>
                           also accept this Origin header (repeatable)
  --token-env <NAME>       require "Authorization: Bearer <token>", the token being the
                           value of this environment variable
  --token-file <file>      the same, the token read from this file
  --max-sessions <n>       MCP sessions (and stateful sandbox handles) open at once
                           (default ${HTTP.maxSessions}); past it 503 with Retry-After
  --max-sessions-per-client <n>
                           of those, what one client (token and address) holds
                           (default ${HTTP.maxSessionsPerClient}); past it the client's own
                           least recently used idle one is closed
  --session-idle-ms <ms>   close a session after this long with no request or stream
                           open, and a sandbox handle after this long without a call
                           (default ${HTTP.sessionIdleMs})
  --max-body-bytes <n>     largest request body (default ${HTTP.maxBodyBytes})
  --max-runs-per-session <n>
                           run_code calls in flight per session, or per client
                           under 2026-07-28 (default ${HTTP.maxRunsPerSession})
  The same settings go in --config as "http": { "listen", "allowedHosts",
  "allowedOrigins", "tokenEnv", "tokenFile", "maxSessions", "maxSessionsPerClient",
  "sessionIdleMs", "maxBodyBytes", "maxRunsPerSession" }. Renamed (the old spellings still
  work, with a warning): --http-allow-host, --http-allow-origin. SIGTERM or SIGINT stops
  the server: runs in flight finish and answer, then sessions close.`;

async function mcpCommand(argv, io = { stdout: process.stdout, stderr: process.stderr }) {
  let settings;
  let httpSettings;
  try {
    const { values, positionals } = parse(argv, 'isolet mcp', MCP_FLAGS);
    if (values.help) {
      io.stdout.write(MCP_USAGE + '\n');
      return 0;
    }
    if (positionals.length > 0) throw new UsageError(`mcp takes no arguments, got ${JSON.stringify(positionals[0])}`);
    settings = settingsFrom(values);
    try {
      httpSettings = native.mcpHttpSettings(values, readConfig(values.config), values.config) ?? undefined;
    } catch (err) {
      throw new UsageError(err.message);
    }
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    io.stderr.write(usageText('isolet mcp', err.message));
    return 2;
  }
  const mcp = require('../mcp');
  let served;
  try {
    if (httpSettings === undefined) {
      served = await mcp.serveStdio(settings);
    } else {
      const { listenHttp } = require('../mcp-http');
      served = await listenHttp(settings, { ...httpSettings }, { log: (m) => io.stderr.write(`isolet mcp: ${m}\n`) });
    }
  } catch (err) {
    io.stderr.write(`isolet mcp: ${err.message}\n`);
    return err.code === 'ERR_ISOLET_MISSING_PEER' || err.code === 'ERR_ISOLET_VALIDATION' ? 2 : 1;
  }
  io.stderr.write(`isolet mcp: serving run_code on ${httpSettings === undefined ? 'stdio' : served.url}\n`);
  const loopback = httpSettings !== undefined && ['127.0.0.1', 'localhost', '::1'].includes(httpSettings.host);
  if (httpSettings !== undefined && !loopback && httpSettings.token === undefined && httpSettings.tokenEnv === undefined && httpSettings.tokenFile === undefined) {
    io.stderr.write(`isolet mcp: warning: listening on ${httpSettings.host} without a token (--token-env, --token-file): whoever reaches the port under an allowed Host can run code\n`);
  }
  // Serve until a signal (or, on stdio, until the client closes stdin).
  const signal = await new Promise((resolve) => {
    if (httpSettings === undefined) {
      process.stdin.once('end', () => resolve(null));
      process.stdin.once('close', () => resolve(null));
    }
    process.once('SIGINT', () => resolve('SIGINT'));
    process.once('SIGTERM', () => resolve('SIGTERM'));
  });
  if (httpSettings !== undefined) {
    io.stderr.write(`isolet mcp: ${signal}: shutting down (${served.runsInFlight()} runs in flight, ${served.sessionCount()} sessions)\n`);
    // A second signal does not wait.
    const now = () => process.exit(1);
    process.once('SIGINT', now);
    process.once('SIGTERM', now);
  }
  await served.close();
  if (httpSettings !== undefined) io.stderr.write('isolet mcp: stopped\n');
  return 0;
}

module.exports = { mcpCommand, MCP_USAGE };
