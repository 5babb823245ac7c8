'use strict';
// `isolet mcp`: an MCP server over stdio whose `run_code` tool runs JavaScript/TypeScript
// in isolet under the limits given by flags or --config. stdout carries the protocol, so
// everything else goes to stderr.
const { UsageError, limitsHelp, parse, settingsFrom, usageText } = require('./options');

const MCP_USAGE = `usage: isolet mcp [options]

Starts a Model Context Protocol server on stdin/stdout with one tool, run_code
({ code, language? }), which runs the code in a fresh V8 isolate under these limits and
answers with the result (JSON), console output and typed errors. Needs the
@modelcontextprotocol/sdk package.

options:
${limitsHelp("  --language <lang>        the language of run_code calls that name none: javascript\n                           (default) or typescript; a call's own language wins")}
  -h, --help               show this help`;

async function mcpCommand(argv, io = { stdout: process.stdout, stderr: process.stderr }) {
  let settings;
  try {
    const { values, positionals } = parse(argv, 'isolet mcp');
    if (values.help) {
      io.stdout.write(MCP_USAGE + '\n');
      return 0;
    }
    if (positionals.length > 0) throw new UsageError(`mcp takes no arguments, got ${JSON.stringify(positionals[0])}`);
    settings = settingsFrom(values);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    io.stderr.write(usageText('isolet mcp', err.message));
    return 2;
  }
  const { serveStdio } = require('../mcp');
  let mcp;
  try {
    mcp = await serveStdio(settings);
  } catch (err) {
    io.stderr.write(`isolet mcp: ${err.message}\n`);
    return err.code === 'ERR_ISOLET_MISSING_PEER' ? 2 : 1;
  }
  io.stderr.write('isolet mcp: serving run_code on stdio\n');
  // Serve until the client closes stdin (or a signal), then stop the engine.
  await new Promise((resolve) => {
    process.stdin.once('end', resolve);
    process.stdin.once('close', resolve);
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await mcp.close();
  return 0;
}

module.exports = { mcpCommand, MCP_USAGE };
