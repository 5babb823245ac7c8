// `isolet mcp`: a real stdio child process driven by the official SDK's own Client.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { runChild } from './support/spawn';

const ROOT = path.resolve(__dirname, '..');
const BIN = path.join(ROOT, 'bin', 'isolet.js');

type Content = Array<{ type: string; text: string }>;

let dir: string;
let client: Client;
let stderr = '';

async function call(args: Record<string, unknown>): Promise<{ isError?: boolean; content: Content }> {
  return (await client.callTool({ name: 'run_code', arguments: args })) as any;
}

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'isolet-mcp-'));
  fs.mkdirSync(path.join(dir, 'docs'));
  fs.writeFileSync(path.join(dir, 'docs', 'readme.txt'), 'read me');
  fs.writeFileSync(path.join(dir, 'secret.txt'), 'not for the sandbox');
  const config = path.join(dir, 'config.json');
  fs.writeFileSync(config, JSON.stringify({ timeoutMs: 10000, memoryLimitMb: 32, engine: { maxConcurrentIsolates: 2 } }));
  // 3 s, not less: a loaded machine (CI, three suites at once) took more than 500 ms to
  // copy out the 20 MB result the output-limit case returns.
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [BIN, 'mcp', '--config', config, '--timeout-ms', '5000', '--read-dir', path.join(dir, 'docs')],
    stderr: 'pipe',
  });
  transport.stderr?.on('data', (d) => (stderr += d));
  client = new Client({ name: 'isolet-test', version: '1.0.0' });
  await client.connect(transport);
});

afterAll(async () => {
  await client?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('isolet mcp over stdio', () => {
  it('lists the run_code tool with its input schema, limits and the capability types', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual(['run_code']);
    const tool = tools[0];
    expect(tool.inputSchema).toMatchObject({ type: 'object', required: ['code'], properties: { code: { type: 'string' }, language: { enum: ['javascript', 'typescript'] } } });
    // Flags win over the config file (timeout), the file gives the rest (memory).
    expect(tool.description).toContain('Limits per run: 5000 ms wall-clock, 5000 ms CPU, 32 MB heap.');
    expect(tool.description).toContain('declare function readFile(input: {');
  });

  it('runs good JavaScript and TypeScript: the result as JSON text, console output as a second block', async () => {
    const js = await call({ code: 'console.log("working"); console.error("oops"); return { sum: 1 + 2 }' });
    expect(js.isError).toBeFalsy();
    expect(JSON.parse(js.content[0].text)).toEqual({ sum: 3 });
    expect(js.content[1].text).toBe('console:\nworking\n[error] oops');
    const ts = await call({ code: 'const xs: number[] = [1, 2];\nreturn xs.map((x: number): number => x * 10);', language: 'typescript' });
    expect(JSON.parse(ts.content[0].text)).toEqual([10, 20]);
    expect(ts.content).toHaveLength(1);
  });

  it('bad code is a typed error result with line and column', async () => {
    const syntax = await call({ code: 'const a = 1;\nreturn a +;' });
    expect(syntax.isError).toBe(true);
    expect(syntax.content[0].text).toMatch(/^SandboxValidationError \[ERR_ISOLET_VALIDATION\]: SyntaxError: .*\nat line 2, column \d+/);
    const ts = await call({ code: 'import x = require("x");', language: 'typescript' });
    expect(ts.content[0].text).toMatch(/^SandboxValidationError \[ERR_ISOLET_VALIDATION\]: UnsupportedSyntax: import x = require\(\.\.\.\) is not supported.* at line 1, column 1/);
    const thrown = await call({ code: 'console.log("before");\nthrow new TypeError("bad input")' });
    expect(thrown.isError).toBe(true);
    expect(thrown.content[0].text).toMatch(/^SandboxRuntimeError \[ERR_ISOLET_RUNTIME\]: .*\nTypeError: bad input\n\s+at sandbox\.js:2:7/s);
    expect(thrown.content[1].text).toBe('console:\nbefore');
    const wrongArgs = await call({ code: 5 });
    expect(wrongArgs.content[0].text).toBe('SandboxValidationError [ERR_ISOLET_VALIDATION]: code must be a string, got 5');
    const lang = await call({ code: 'return 1', language: 'rust' });
    expect(lang.content[0].text).toBe("SandboxValidationError [ERR_ISOLET_VALIDATION]: language must be 'javascript' or 'typescript', got 'rust'");
    const typo = await call({ code: 'return 1', lang: 'typescript' });
    expect(typo.content[0].text).toBe('SandboxValidationError [ERR_ISOLET_VALIDATION]: lang is not a known option of run_code arguments; did you mean language?');
  });

  it('a timeout and a heap bomb are error results, and the server keeps serving', async () => {
    const slow = await call({ code: 'while (true) {}' });
    expect(slow.isError).toBe(true);
    expect(slow.content[0].text).toMatch(/^SandboxTimeoutError \[ERR_ISOLET_TIMEOUT\]: .*5000 ms/);
    const bomb = await call({ code: 'const a = []; while (true) a.push(new Array(2 ** 16).fill(a.length + 0.5));' });
    expect(bomb.isError).toBe(true);
    expect(bomb.content[0].text).toMatch(/^SandboxOOMError \[ERR_ISOLET_OOM\]: .*32 MB/);
    const after = await call({ code: 'return "still here"' });
    expect(after.content[0].text).toBe('"still here"');
  });

  it('answers with the last expression, and sends console output as log notifications at the level set', async () => {
    const logs: Array<{ level: string; data: unknown }> = [];
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void logs.push(n.params as any));
    await client.setLoggingLevel('warning');
    const out = await call({ code: 'console.log("quiet"); console.warn("loud");\nconst x = 20;\nx + 22' });
    expect(out.content.map((c) => c.text)).toEqual(['42', 'console:\nquiet\n[warn] loud']);
    expect(logs).toEqual([{ level: 'warning', logger: 'run_code', data: 'loud' }]);
    expect((await call({ code: 'if (1) return "returned"\n"last"' })).content[0].text).toBe('"returned"');
    await client.setLoggingLevel('debug');
  });

  it("logs a stack at the code's own positions, in the result and in the notification", async () => {
    const logs: Array<{ level: string; data: unknown }> = [];
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void logs.push(n.params as any));
    // The last expression is made the result (\`return (\` goes before it): column 13 is
    // where \`new Error\` is in the code as sent.
    const out = await call({ code: "const a = 1;\nconsole.log(new Error('here').stack)" });
    expect(out.content[1].text).toMatch(/^console:\nError: here\n\s+at sandbox\.js:2:13(\n|$)/);
    expect(String(logs[0]?.data)).toMatch(/^Error: here\n\s+at sandbox\.js:2:13(\n|$)/);
  });

  it('gives read-only access to --read-dir only', async () => {
    const ok = await call({ code: 'return (await readFile({ path: "readme.txt" })).content' });
    expect(ok.content[0].text).toBe('"read me"');
    const out = await call({ code: 'try { await readFile({ path: "../secret.txt" }); return "leaked" } catch (e) { return e.name }' });
    expect(out.content[0].text).not.toContain('leaked');
    const schema = await call({ code: 'try { await readFile({ file: "readme.txt" }) } catch (e) { return e.message }' });
    expect(schema.content[0].text).toBe('"readFile: input.path is required"');
    expect(await call({ code: 'return typeof fetch' })).toMatchObject({ content: [{ text: '"undefined"' }] });
  });

  it('refuses an oversize result with an error, and serves concurrent calls', async () => {
    const big = await call({ code: 'return "x".repeat(20 * 1024 * 1024)' });
    expect(big.isError).toBe(true);
    expect(big.content[0].text).toBe('SandboxRuntimeError [ERR_ISOLET_RUNTIME]: The result exceeds the output limit of 16777216 bytes (maxOutputBytes)');
    const results = await Promise.all([1, 2, 3, 4].map((n) => call({ code: `return ${n} * 2` })));
    expect(results.map((r) => r.content[0].text)).toEqual(['2', '4', '6', '8']);
    expect(stderr).toContain('isolet mcp: serving run_code on stdio');
  });
});

describe('isolet mcp without the SDK installed', () => {
  it('exits 2 naming the package to install', async () => {
    // A copy of the package with no node_modules at all: what a plain runSandbox user has.
    const copy = fs.mkdtempSync(path.join(os.tmpdir(), 'isolet-nosdk-'));
    try {
      // The addon is in build/ after a source build, in prebuilds/ after `npm run prebuild`.
      for (const entry of ['bin', 'lib', 'build', 'prebuilds', 'index.js', 'package.json']) {
        if (fs.existsSync(path.join(ROOT, entry))) fs.cpSync(path.join(ROOT, entry), path.join(copy, entry), { recursive: true });
      }
      const r = await runChild(process.execPath, [path.join(copy, 'bin', 'isolet.js'), 'mcp'], { timeout: 20000, input: '' });
      expect(r.status).toBe(2);
      expect(r.stderr).toContain('isolet mcp needs the optional package @modelcontextprotocol/server, which is not installed: npm install @modelcontextprotocol/server');
      // ...while plain runSandbox works in that copy.
      const plain = await runChild(process.execPath, ['-e', `require(${JSON.stringify(copy)}).runSandbox('6 * 7').then((r) => { console.log(r.output); process.exit(0) })`], { timeout: 20000 });
      expect(plain.stdout.trim()).toBe('42');
    } finally {
      fs.rmSync(copy, { recursive: true, force: true });
    }
  });
});

describe('isolet mcp with stateful: true (one sandbox per session)', () => {
  it("keeps what a call declares for the session's later calls, with the SDK's own client", async () => {
    const config = path.join(dir, 'stateful.json');
    fs.writeFileSync(config, JSON.stringify({ stateful: true, idleTimeoutMs: 60_000, timeoutMs: 1000, memoryLimitMb: 32, isolation: 'thread' }));
    const transport = new StdioClientTransport({ command: process.execPath, args: [BIN, 'mcp', '--config', config], stderr: 'pipe' });
    const session = new Client({ name: 'isolet-test-stateful', version: '1.0.0' });
    await session.connect(transport);
    try {
      const run = async (code: string) => (await session.callTool({ name: 'run_code', arguments: { code } })) as { isError?: boolean; content: Content };
      const { tools } = await session.listTools();
      expect(tools[0].description).toContain('that this session keeps');
      expect((await run('var total = 40; function add(n) { total += n; return total }; console.log("set"); total')).content.map((c) => c.text)).toEqual(['40', 'console:\nset']);
      expect((await run('const step = await Promise.resolve(2); add(step)')).content[0].text).toBe('42');
      expect((await run('[total, step, typeof add]')).content[0].text).toBe(JSON.stringify([42, 2, 'function'], null, 2));
      // An error or a timeout ends that call only.
      const thrown = await run('throw new RangeError("nope")');
      expect(thrown.isError).toBe(true);
      expect(thrown.content[0].text).toMatch(/^SandboxRuntimeError \[ERR_ISOLET_RUNTIME\]: RangeError: nope/);
      const stuck = await run('while (true) {}');
      expect(stuck.isError).toBe(true);
      expect(stuck.content[0].text).toMatch(/ERR_ISOLET_TIMEOUT/);
      expect((await run('total')).content[0].text).toBe('42');
      // TypeScript, declared into the same context.
      const ts = (await session.callTool({ name: 'run_code', arguments: { code: 'const typed: number = total + 1; typed', language: 'typescript' } })) as { content: Content };
      expect(ts.content[0].text).toBe('43');
    } finally {
      await session.close();
    }
    // A new session starts empty.
    const transport2 = new StdioClientTransport({ command: process.execPath, args: [BIN, 'mcp', '--config', config], stderr: 'pipe' });
    const fresh = new Client({ name: 'isolet-test-stateful-2', version: '1.0.0' });
    await fresh.connect(transport2);
    try {
      const r = (await fresh.callTool({ name: 'run_code', arguments: { code: 'typeof total' } })) as { content: Content };
      expect(r.content[0].text).toBe('"undefined"');
    } finally {
      await fresh.close();
    }
  });

  it('refuses idleTimeoutMs without stateful, naming the key', async () => {
    const config = path.join(dir, 'bad-stateful.json');
    fs.writeFileSync(config, JSON.stringify({ idleTimeoutMs: 1000 }));
    const r = await runChild(process.execPath, [BIN, 'mcp', '--config', config], { timeout: 20_000 });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain('idleTimeoutMs applies to a stateful server only');
  });
});
