// Every fenced TypeScript and shell example of README.md, as written, in a fresh project:
// each TypeScript block is type-checked against the package's own types and run, each
// shell block is run with sh, so the README cannot drift from the package.
//
// Local stand-ins replace only what needs the network or a model: api.example.com is a
// local HTTP server, the chat model is a local chat-completions stub (OPENAI_BASE_URL),
// and the optional peers the examples import are linked from this checkout instead of
// downloaded. The project holds the package as `npm install isolet` leaves it: by default
// this checkout; with ISOLET_README_PROJECT (the release step), the packed tarball
// installed into that project.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawn } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { startChatServer, type ChatServer } from './support/chat-server';
import { runToEnd, type Ran } from './support/spawn';

const ROOT = path.resolve(__dirname, '..');
const README = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');

interface Block {
  lang: string;
  code: string;
  /** 1-based line of the opening fence. */
  line: number;
  heading: string;
  /** The last non-empty line before the fence. */
  before: string;
}

function blocks(markdown: string): Block[] {
  const out: Block[] = [];
  const lines = markdown.split('\n');
  let heading = '';
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)```(\w*)\s*$/.exec(lines[i]);
    if (!open) {
      if (/^#+ /.test(lines[i])) heading = lines[i].replace(/^#+ /, '');
      continue;
    }
    const indent = open[1].length;
    const body: string[] = [];
    let j = i + 1;
    while (!/^\s*```\s*$/.test(lines[j])) body.push(lines[j++].slice(indent));
    let k = i - 1;
    while (k >= 0 && lines[k].trim() === '') k--;
    out.push({ lang: open[2], code: body.join('\n') + '\n', line: i + 1, heading, before: k >= 0 ? lines[k] : '' });
    i = j;
  }
  return out;
}

const ALL = blocks(README);
// Commands for a checkout of this repository (set-up, tests, benchmarks), not for a project
// that uses the package: named as such by the README around them.
const isCheckout = (b: Block) => b.heading === 'Development' || /In a checkout of this repository/.test(b.before);
const TS_BLOCKS = ALL.filter((b) => b.lang === 'ts');
const SH_BLOCKS = ALL.filter((b) => b.lang === 'sh' && !isCheckout(b));
// The README's one JSON block: the isolet.json that `--config isolet.json` reads.
const CONFIG = ALL.find((b) => b.lang === 'json');

const given = process.env.ISOLET_README_PROJECT;
let project: string;
let work: string;
let chat: ChatServer;
let api: http.Server;
let apiOrigin: string;
// The Streamable HTTP example's server: `isolet mcp --http`, as the README starts it, on a
// free port (its client example reads ISOLET_MCP_URL).
const MCP_TOKEN = 'readme-test-token';
let mcpServer: ReturnType<typeof spawn> | undefined;
let mcpUrl: string;

function link(target: string, at: string) {
  fs.mkdirSync(path.dirname(at), { recursive: true });
  fs.symlinkSync(target, at);
}

beforeAll(async () => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'isolet-readme-'));
  project = path.join(work, 'my-app');
  fs.mkdirSync(project);
  fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'my-app', version: '1.0.0', private: true, type: 'module' }) + '\n');
  if (given) {
    // The install as npm left it (isolet, its dependencies, .bin), copied so that the peers
    // linked below are its siblings, as they would be after `npm install <peer>`.
    fs.cpSync(path.join(given, 'node_modules'), path.join(project, 'node_modules'), { recursive: true, verbatimSymlinks: true });
  } else {
    link(ROOT, path.join(project, 'node_modules', 'isolet'));
    // As npm links a dependency's bin, for `npx isolet`.
    link(path.join('..', 'isolet', 'bin', 'isolet.js'), path.join(project, 'node_modules', '.bin', 'isolet'));
  }
  for (const peer of ['@cloudflare/codemode', '@modelcontextprotocol/sdk', 'ai', 'zod', 'openai']) {
    link(path.join(ROOT, 'node_modules', peer), path.join(project, 'node_modules', peer));
  }
  // The file autoFix's example is about: the user's own, with the bug its instruction names.
  fs.mkdirSync(path.join(project, 'src'));
  fs.writeFileSync(path.join(project, 'src', 'sum.js'), SUM_BUGGY);
  if (CONFIG) fs.writeFileSync(path.join(project, 'isolet.json'), CONFIG.code);

  chat = await startChatServer();
  chat.setDefault({ answer: '```js\n' + SUM_FIXED + '```' });
  api = http.createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(req.url === '/v1/items' ? '[{"id":1},{"id":2},{"id":3}]' : '{}');
  });
  await new Promise<void>((r) => api.listen(0, '127.0.0.1', r));
  apiOrigin = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;

  const bin = path.join(project, 'node_modules', '.bin', 'isolet');
  mcpServer = spawn(process.execPath, [bin, 'mcp', '--http', '127.0.0.1:0', '--token-env', 'ISOLET_MCP_TOKEN', '--timeout-ms', '5000', '--memory-mb', '64'], {
    cwd: project,
    env: { ...process.env, ISOLET_MCP_TOKEN: MCP_TOKEN },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  mcpUrl = await new Promise<string>((resolve, reject) => {
    let said = '';
    mcpServer!.stderr!.on('data', (d) => {
      said += d;
      const url = /serving run_code on (http:\/\/\S+)/.exec(said)?.[1];
      if (url) resolve(url);
    });
    mcpServer!.on('exit', (code) => reject(new Error(`isolet mcp --http exited ${code}: ${said}`)));
  });
}, 60_000);

afterAll(async () => {
  mcpServer?.kill('SIGTERM');
  await chat?.close();
  api?.close();
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

const SUM_BUGGY = `/** Sum of the numbers in a list. */
function sum(list) {
  let total = 0;
  for (let i = 1; i < list.length; i++) total += list[i];
  return total;
}
`;
const SUM_FIXED = SUM_BUGGY.replace('let i = 1;', 'let i = 0;');

function spawnIn(command: string, args: string[], env: NodeJS.ProcessEnv, stdin = ''): Promise<Ran> {
  return runToEnd(command, args, { cwd: project, env, stdin });
}

function env(): NodeJS.ProcessEnv {
  const { NODE_OPTIONS: _n, NODE_PATH: _p, ...rest } = process.env;
  return {
    ...rest,
    // The node running this test first, then what the caller's PATH has (npx, sh).
    PATH: `${path.dirname(process.execPath)}${path.delimiter}${process.env.PATH ?? ''}`,
    OPENAI_API_KEY: 'sk-readme-test',
    OPENAI_BASE_URL: chat.baseURL,
    ISOLET_MCP_URL: mcpUrl,
    ISOLET_MCP_TOKEN: MCP_TOKEN,
    npm_config_update_notifier: 'false',
    NO_COLOR: '1',
  };
}

describe('README.md examples', () => {
  it('has the examples this test runs, and the config file the MCP example names', () => {
    expect(TS_BLOCKS.length).toBeGreaterThanOrEqual(10);
    expect(SH_BLOCKS.length).toBeGreaterThanOrEqual(3);
    expect(CONFIG, 'a ```json block with the isolet.json of `--config isolet.json`').toBeDefined();
    expect(README).toContain("'--config', 'isolet.json'");
    // A checkout's commands are npm scripts and tools of this repository only.
    for (const b of ALL.filter((x) => x.lang === 'sh' && isCheckout(x))) {
      for (const line of b.code.split('\n').filter((l) => l.trim() !== '')) expect(line, `README.md:${b.line}`).toMatch(/^(npm|npx vitest) /);
    }
  });

  it('type-checks every TypeScript example against the package types', async () => {
    const ts = (await import('typescript')).default;
    const files = TS_BLOCKS.map((b) => {
      const file = path.join(project, `readme-${b.line}.mts`);
      fs.writeFileSync(file, b.code);
      return file;
    });
    const program = ts.createProgram(files, {
      strict: true,
      noEmit: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      // Third-party declarations (codemode's need the Workers globals) are not ours to check.
      skipLibCheck: true,
      types: ['node'],
      typeRoots: [path.join(ROOT, 'node_modules', '@types')],
    });
    const problems = ts
      .getPreEmitDiagnostics(program)
      .filter((d) => d.file && files.includes(d.file.fileName))
      .map((d) => {
        const { line } = d.file!.getLineAndCharacterOfPosition(d.start ?? 0);
        const block = TS_BLOCKS[files.indexOf(d.file!.fileName)];
        return `README.md:${block.line + 1 + line}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
      });
    expect(problems).toEqual([]);
  }, 120_000);

  for (const block of TS_BLOCKS) {
    it(`runs the TypeScript example at README.md:${block.line} (${block.heading})`, async () => {
      const amaro = createRequire(__filename)('amaro');
      // The network stand-in: the fetch example's origin is a local server.
      const js = amaro.transformSync(block.code.replaceAll('https://api.example.com', apiOrigin), { mode: 'strip-only' }).code;
      const file = path.join(project, `readme-${block.line}.mjs`);
      fs.writeFileSync(file, js);
      // An example that needs a flag says so in its first line (`node --import ...`).
      const flags = /^\/\/.*\bnode (--import \S+)/.exec(block.code)?.[1].split(' ') ?? [];
      const r = await spawnIn(process.execPath, [...flags, file], env());
      expect(r.stderr, `README.md:${block.line}`).not.toMatch(/Error|Warning/);
      expect(r.code, `README.md:${block.line}\n${r.stdout}\n${r.stderr}`).toBe(0);
    }, 60_000);
  }

  for (const block of SH_BLOCKS) {
    it(`runs the shell example at README.md:${block.line} (${block.heading})`, async () => {
      const lines = block.code.split('\n').filter((l) => l.trim() !== '');
      if (lines.every((l) => /^npm install \S+$/.test(l))) {
        // `npm install isolet` (and optional peers): the project already holds the package.
        for (const l of lines) expect(fs.existsSync(path.join(project, 'node_modules', l.split(' ')[2], 'package.json')), l).toBe(true);
        return;
      }
      const r = await spawnIn('sh', ['-c', block.code], env());
      const output = r.stdout + r.stderr;
      expect(r.code, `README.md:${block.line}\n${output}`).toBe(0);
      expect(output).not.toMatch(/not found|npm ERR|npm error/);
      // What a command's comment says it prints (`# 6`, `# "my-app", exit 0`), and lines of
      // comment after a command (its whole output), are in the output.
      for (const line of lines) {
        const whole = /^# (.*)$/.exec(line);
        const trailing = /\s#\s+(.*)$/.exec(line);
        const expected = whole ? [whole[1]] : trailing ? trailing[1].split(', ') : [];
        for (const text of expected) expect(output, `README.md:${block.line}: ${line}`).toContain(text);
      }
    }, 60_000);
  }
});
