'use strict';
// `isolet/mcp`: the MCP service and its stdio transport (lib/mcp-service.js) and the
// Streamable HTTP transport (lib/mcp-http.js, loaded when first served: its SDK packages
// are optional peers).
const native = require('./native');
const { errorFromThrown } = require('./errors');
const { ownCopy } = require('./read-options');
// Named one by one: Node finds an ES module's named imports of this file in that list.
const { createMcpServer, createMcpService, serveStdio, mcpSettings, initOnce, SlotRefused, MCP_TOOL_NAME, MCP_SANDBOX_META_KEY } = require('./mcp-service');

/**
 * Serves MCP over Streamable HTTP (see lib/mcp-http.js); `options` are checked by
 * isolet-core (`MCP_HTTP`): listen, allowedHosts, allowedOrigins, token | tokenEnv |
 * tokenFile, maxSessions, maxSessionsPerClient, sessionIdleMs, maxBodyBytes,
 * maxRunsPerSession.
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

module.exports = {
  createMcpServer,
  createMcpService,
  serveStdio,
  serveHttp,
  mcpSettings,
  initOnce,
  SlotRefused,
  MCP_TOOL_NAME,
  MCP_SANDBOX_META_KEY,
};
