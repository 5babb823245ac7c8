'use strict';
// An MCP server (official @modelcontextprotocol/sdk, an optional peer) with one tool,
// `run_code`, that runs JavaScript or TypeScript in a fresh isolate of a SandboxEngine
// under the configured limits and answers with the result, the console output and typed
// errors as MCP content. A failing run is a tool result with `isError: true`, never a
// protocol error, so the server keeps serving whatever the code does.
const native = require('./native');
const { SandboxEngine } = require('./engine');
const { describeTools } = require('./tools');
const { toJson } = require('./cli/json');
const { SandboxValidationError, errorFromThrown } = require('./errors');
const { requirePeer } = require('./peer');

const TOOL_NAME = 'run_code';

const INPUT_SCHEMA = Object.freeze({
  type: 'object',
  properties: {
    code: { type: 'string', description: 'The body of an async function: use await, and return the result.' },
    language: { type: 'string', enum: native.entryDefaults().languages, description: 'Default: javascript.' },
  },
  required: ['code'],
  additionalProperties: false,
});

function toolDescription(capabilities, limits) {
  const lines = [
    'Runs JavaScript or TypeScript in a fresh, isolated V8 sandbox and returns what it returns (as JSON) and its console output.',
    'The code is the body of an async function: use `await`, and `return` the result.',
    'Only standard ECMAScript built-ins exist: no require, process, timers, file system or network' +
      (Object.keys(capabilities).length > 0 ? ', except these functions:' : '.'),
  ];
  if (Object.keys(capabilities).length > 0) lines.push('', describeTools(capabilities).trimEnd(), '');
  lines.push(`Limits per run: ${limits.wallTimeMs} ms wall-clock, ${limits.cpuTimeMs} ms CPU, ${limits.memoryMb} MB heap.`);
  return lines.join('\n');
}

/**
 * Creates the MCP server (not yet connected).
 *
 * @param {object} settings from lib/cli/options `settingsFrom`: engineConfig, limits,
 *   language (default language of the tool), capabilities, toolNames
 * @returns {{ server: object, engine: SandboxEngine, close: () => Promise<void> }}
 */
function createMcpServer(settings) {
  const { Server } = requirePeer('@modelcontextprotocol/sdk/server/index.js', 'isolet mcp');
  const { ListToolsRequestSchema, CallToolRequestSchema } = requirePeer('@modelcontextprotocol/sdk/types.js', 'isolet mcp');
  const engine = new SandboxEngine(settings.engineConfig);
  let ready = null;
  const version = require('../package.json').version;
  const server = new Server({ name: 'isolet', version }, { capabilities: { tools: {} } });
  const description = toolDescription(settings.capabilities, settings.limits);
  let runs = 0;

  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [{ name: TOOL_NAME, description, inputSchema: INPUT_SCHEMA }],
  }));

  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const { name, arguments: args } = request.params;
    if (name !== TOOL_NAME) return errorResult(new SandboxValidationError(`unknown tool "${name}" (this server has ${TOOL_NAME})`), []);
    let input;
    try {
      input = native.runCodeArguments(args ?? {});
    } catch (err) {
      return errorResult(errorFromThrown(err), []);
    }
    if (ready === null) ready = engine.init();
    await ready;
    const session = engine.submit({
      requestId: `mcp_${++runs}`,
      code: input.code,
      language: input.language ?? settings.language,
      toolPolicy: { allowedTools: settings.toolNames },
    });
    const end = await session.done;
    const logs = end.logs || [];
    if (end.type === 'result') {
      return { content: [{ type: 'text', text: toJson(end.data, 2) ?? 'null' }, ...logContent(logs)] };
    }
    return errorResult(end.error, logs);
  });

  return {
    server,
    engine,
    async close() {
      await server.close();
      await engine.shutdown();
    },
  };
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

module.exports = { createMcpServer, serveStdio, MCP_TOOL_NAME: TOOL_NAME };
