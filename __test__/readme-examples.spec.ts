// Every fenced example of README.md and docs/*.md, as written, in a fresh project: each
// TypeScript block is type-checked against the package's own types and run, each
// JavaScript block is run, each shell block is run with sh, and every `// result:` comment
// is checked, so the documentation cannot drift from the package.
//
// The convention (docs/README.md says it for writers of the docs):
//
// - ```ts / ```typescript and ```js / ```javascript blocks are programs: each is run, the
//   TypeScript ones type-checked first (strict, against index.d.ts). A `js` block that uses
//   `require` and no `import` runs as CommonJS.
// - `expression; // result: <value>` states what the expression evaluates to, and the test
//   asserts it (deep equality of plain data; a trailing `...` in an object or array literal
//   means "and more properties / elements"). On `console.log(x); // result: <value>` the
//   comment is about `x`. The comment must follow an expression statement on its line.
// - ```sh blocks run in the project's directory; `# text` after a command, or comment lines
//   after it, is text its output must contain. A block of `npm install <pkg>` lines only
//   checks the package is installed.
// - A block that is not a program (a signature, a fragment, the "before" side of a
//   migration, commands for a checkout of isolet) says `no-run` after its language:
//   ```ts no-run. A ```sh no-run block holds npm scripts and `npx vitest` only. Other
//   languages (json, jsonc, console, text, none) never run.
// - ```json file=isolet.json writes the block to that file in the project before anything
//   runs (the examples that read a config file find it).
// - The examples of one page run in order as the modules of one Node process (a page's
//   examples share isolet's default engines, as the modules of one program do), which must
//   then exit on its own; an example whose first line names Node flags
//   (`// Run with: node --import ...`), and a CommonJS one, runs in a process of its own.
//
// Local stand-ins replace only what needs the network or a model: api.example.com is a
// local HTTP server, the chat model is a local chat-completions stub (OPENAI_BASE_URL),
// `isolet mcp --http` is started on a free port (ISOLET_MCP_URL), and the optional peers
// the examples import are linked from this checkout instead of downloaded. The project holds
// the package as `npm install isolet` leaves it: by default this checkout; with
// ISOLET_README_PROJECT (the release step), the packed tarball installed into that project.
// ISOLET_EXAMPLES_PAGES=README.md,docs/engine.md runs only those pages (while writing them).

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawn } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import * as acorn from 'acorn';
import { startChatServer, type ChatServer } from './support/chat-server';
import { runToEnd, type Ran } from './support/spawn';

const ROOT = path.resolve(__dirname, '..');
const RUNNER = path.join(__dirname, 'support', 'run-examples.mjs');
const TYPECHECK = path.join(__dirname, 'support', 'typecheck-examples.mjs');
const ONLY = process.env.ISOLET_EXAMPLES_PAGES?.split(',').filter(Boolean);
const PAGES = ['README.md', ...fs.readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)].filter(
  (p) => !ONLY || ONLY.includes(p),
);

interface Block {
  page: string;
  lang: string;
  /** Words of the info string after the language (`no-run`, `file=isolet.json`). */
  flags: string[];
  code: string;
  /** 1-based line of the opening fence. */
  line: number;
  heading: string;
  /** `docs-engine-120`: names the files written for it. */
  name: string;
}

const FLAGS = /^(no-run|file=[\w.-]+)$/;
/** The guides that must each show TypeScript that runs. */
const GUIDES = [
  'getting-started', 'security', 'limitations', 'capabilities', 'engine', 'sandboxes', 'agents', 'cli', 'autofix', 'errors',
  'platforms', 'performance', 'architecture', 'migrate-from-isolated-vm', 'migrate-from-vm2', 'migrate-from-azmr-ai', 'migrate-from-coda-sandbox',
].map((g) => `docs/${g}.md`);
const PROGRAMS = ['ts', 'typescript', 'js', 'javascript'];

function blocks(page: string): Block[] {
  const out: Block[] = [];
  const lines = fs.readFileSync(path.join(ROOT, page), 'utf8').split('\n');
  const slug = page.replace(/\.md$/, '').replace(/[^\w]+/g, '-').toLowerCase();
  let heading = '';
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)```([\w-]*)((?:[ \t]+\S+)*)\s*$/.exec(lines[i]);
    if (!open) {
      if (/^#+ /.test(lines[i])) heading = lines[i].replace(/^#+ /, '');
      continue;
    }
    const indent = open[1].length;
    const body: string[] = [];
    let j = i + 1;
    while (j < lines.length && !/^\s*```\s*$/.test(lines[j])) body.push(lines[j++].slice(indent));
    out.push({ page, lang: open[2], flags: open[3].trim().split(/\s+/).filter(Boolean), code: body.join('\n') + '\n', line: i + 1, heading, name: `${slug}-${i + 1}` });
    i = j;
  }
  return out;
}

const ALL = PAGES.flatMap(blocks);
const runs = (b: Block) => !b.flags.includes('no-run');
const isTs = (b: Block) => b.lang === 'ts' || b.lang === 'typescript';
const PROGRAM_BLOCKS = ALL.filter((b) => PROGRAMS.includes(b.lang) && runs(b));
const TS_BLOCKS = PROGRAM_BLOCKS.filter(isTs);
const SH_BLOCKS = ALL.filter((b) => b.lang === 'sh' && runs(b));
const FILE_BLOCKS = ALL.filter((b) => b.flags.some((f) => f.startsWith('file=')));
const where = (b: Block, lineInBlock = 0) => `${b.page}:${b.line + lineInBlock}`;

/** Node flags an example names in its first line (`// Run with: node --import x`). */
const nodeFlags = (b: Block) => /^\/\/.*\bnode (--import \S+)/.exec(b.code)?.[1].split(' ') ?? [];
const isCommonJs = (b: Block) => !isTs(b) && /\brequire\(/.test(b.code) && !/^\s*import\b/m.test(b.code);

const given = process.env.ISOLET_README_PROJECT;
let work: string;
let project: string;
let chat: ChatServer;
let api: http.Server;
let apiOrigin: string;
// The Streamable HTTP example's server: `isolet mcp --http`, as the docs start it, on a
// free port (its client example reads ISOLET_MCP_URL).
const MCP_TOKEN = 'readme-test-token';
let mcpServer: ReturnType<typeof spawn> | undefined;
let mcpUrl: string;

function link(target: string, at: string) {
  fs.mkdirSync(path.dirname(at), { recursive: true });
  fs.symlinkSync(target, at);
}

const SUM_BUGGY = `/** Sum of the numbers in a list. */
function sum(list) {
  let total = 0;
  for (let i = 1; i < list.length; i++) total += list[i];
  return total;
}
`;
const SUM_FIXED = SUM_BUGGY.replace('let i = 1;', 'let i = 0;');

/**
 * A project directory: the user's `my-app`, with the files the examples are about (a
 * `src/sum.js` with the bug autoFix's examples name, the `file=` blocks). Each page runs in
 * one of its own, so pages that change files (autoFix applies its fix) do not meet.
 */
function makeProject(dir: string, nodeModules: string | undefined) {
  fs.mkdirSync(path.join(dir, 'src'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'my-app', version: '1.0.0', private: true, type: 'module' }) + '\n');
  fs.writeFileSync(path.join(dir, 'src', 'sum.js'), SUM_BUGGY);
  for (const b of FILE_BLOCKS) fs.writeFileSync(path.join(dir, b.flags.find((f) => f.startsWith('file='))!.slice(5)), b.code);
  if (nodeModules) fs.symlinkSync(nodeModules, path.join(dir, 'node_modules'));
}

const pageDir = (page: string) => path.join(work, 'pages', page.replace(/[^\w]+/g, '-'));

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

// ---------------------------------------------------------------------------
// `// result:` comments
// ---------------------------------------------------------------------------

interface Instrumented {
  js: string;
  /** `page:line` of each `// result:` comment. */
  checks: string[];
}

/** A `// result:` value as an expression: a trailing `...` becomes the runner's marker. */
function expectedExpression(text: string): string {
  return text
    .replace(/(,|\{)\s*(?:\.\.\.|…)\s*\}/g, (_m, before) => `${before === ',' ? ',' : '{'} [__isoletPartial]: true }`)
    .replace(/(,|\[)\s*(?:\.\.\.|…)\s*\]/g, (_m, before) => `${before === ',' ? ',' : '['} __isoletPartial]`);
}

function walk(node: unknown, visit: (n: acorn.Node) => void) {
  if (!node || typeof node !== 'object') return;
  if (Array.isArray(node)) return node.forEach((n) => walk(n, visit));
  if (typeof (node as acorn.Node).type === 'string') visit(node as acorn.Node);
  for (const [key, value] of Object.entries(node as object)) if (key !== 'loc') walk(value, visit);
}

/** The block's JavaScript with each `expr; // result: value` turned into a check of `expr`. */
function instrument(b: Block, js: string, file: string, sourceType: 'module' | 'script'): Instrumented {
  const comments: acorn.Comment[] = [];
  const ast = acorn.parse(js, { ecmaVersion: 'latest', sourceType, allowAwaitOutsideFunction: true, locations: true, onComment: comments });
  const statements: acorn.ExpressionStatement[] = [];
  walk(ast, (n) => n.type === 'ExpressionStatement' && statements.push(n as acorn.ExpressionStatement));
  const edits: { start: number; end: number; text: string }[] = [];
  const checks: string[] = [];
  for (const c of comments) {
    const m = /^\s*result:\s*(.*?)\s*$/.exec(c.value);
    if (c.type !== 'Line' || !m) continue;
    const at = where(b, c.loc!.start.line);
    const statement = statements.find((s) => s.loc!.end.line === c.loc!.start.line && s.end <= c.start && js.slice(s.end, c.start).trim() === '');
    if (!statement) throw new Error(`${at}: a // result: comment must follow an expression statement on its line`);
    const expected = expectedExpression(m[1]);
    try {
      acorn.parse(`(${expected.replaceAll('__isoletPartial', 'p')})`, { ecmaVersion: 'latest' });
    } catch (e) {
      throw new Error(`${at}: // result: ${m[1]} is not a JavaScript value (${(e as Error).message})`);
    }
    let expr: acorn.Expression = statement.expression;
    const call = expr.type === 'CallExpression' ? expr : undefined;
    if (
      call?.callee.type === 'MemberExpression' &&
      call.callee.object.type === 'Identifier' &&
      call.callee.object.name === 'console' &&
      call.callee.property.type === 'Identifier' &&
      call.callee.property.name === 'log' &&
      call.arguments.length === 1 &&
      call.arguments[0].type !== 'SpreadElement'
    ) {
      expr = call.arguments[0];
    }
    const source = js.slice(expr.start, expr.end);
    edits.push({
      start: expr.start,
      end: expr.end,
      text: `__isoletResult(${JSON.stringify(file)}, ${JSON.stringify(at)}, (${source}), () => (${expected}), ${JSON.stringify(m[1])})`,
    });
    checks.push(at);
  }
  let out = js;
  for (const e of edits.sort((x, y) => y.start - x.start)) out = out.slice(0, e.start) + e.text + out.slice(e.end);
  return { js: out, checks };
}

// ---------------------------------------------------------------------------
// Runs: a page's examples in one process; solo ones and shell blocks on their own
// ---------------------------------------------------------------------------

interface BlockReport {
  finished: boolean;
  errors: string[];
  stderr: string;
  checks: Record<string, { ran: number }>;
}
interface Report {
  blocks: Record<string, BlockReport>;
  done: boolean;
  leftOpen: boolean;
}
interface RunOutcome {
  ran: Ran;
  report?: Report;
}

const prepared = new Map<Block, { file: string; checks: string[] }>();
let typecheck: Promise<Ran>;
const typecheckFiles = new Map<string, Block>();

/** The block as it is written, for the type check (which runs in a process of its own). */
function writeForTypecheck(b: Block): string {
  const file = path.join(project, `${b.name}.mts`);
  fs.writeFileSync(file, b.code);
  typecheckFiles.set(file, b);
  return file;
}
const outcomes = new Map<Block, Promise<RunOutcome>>();
const groups: { label: string; blocks: Block[]; outcome: Promise<RunOutcome> }[] = [];
const shOutcomes = new Map<Block, Promise<Ran>>();

/** At most `limit` child processes at once: the machine has few cores. */
function pool(limit: number) {
  let active = 0;
  const waiting: (() => void)[] = [];
  return async <T>(task: () => Promise<T>): Promise<T> => {
    while (active >= limit) await new Promise<void>((r) => waiting.push(r));
    active++;
    try {
      return await task();
    } finally {
      active--;
      waiting.shift()?.();
    }
  };
}

function prepare(b: Block) {
  const amaro = createRequire(__filename)('amaro');
  // The network stand-in: the fetch examples' origin is a local server.
  const code = b.code.replaceAll('https://api.example.com', apiOrigin);
  const js = isTs(b) ? amaro.transformSync(code, { mode: 'strip-only' }).code : code;
  const cjs = isCommonJs(b);
  const file = path.join(pageDir(b.page), `${b.name}.${cjs ? 'cjs' : 'mjs'}`);
  const { js: instrumented, checks } = instrument(b, js, file, cjs ? 'script' : 'module');
  fs.writeFileSync(file, instrumented);
  prepared.set(b, { file, checks });
}

function startRuns() {
  const limit = pool(3);
  const byPage = new Map<string, Block[]>();
  const solo: Block[] = [];
  for (const b of PROGRAM_BLOCKS) {
    prepare(b);
    if (nodeFlags(b).length > 0 || isCommonJs(b)) solo.push(b);
    else byPage.set(b.page, [...(byPage.get(b.page) ?? []), b]);
  }
  const run = (label: string, list: Block[], flags: string[]) => {
    const cwd = pageDir(list[0].page);
    const report = path.join(cwd, `report-${list[0].name}.json`);
    const outcome = limit(async () => {
      const ran = await runToEnd(process.execPath, [...flags, RUNNER, report, ...list.map((b) => prepared.get(b)!.file)], { cwd, env: env() });
      let parsed: Report | undefined;
      try {
        parsed = JSON.parse(fs.readFileSync(report, 'utf8'));
      } catch {
        // No report: the process died before its exit handler (the output says why).
      }
      return { ran, report: parsed };
    });
    groups.push({ label, blocks: list, outcome });
    for (const b of list) outcomes.set(b, outcome);
  };
  // The slowest first (shell blocks start npx; solo runs a process each), so that the
  // pool ends together.
  for (const b of SH_BLOCKS) {
    if (!isInstallOnly(b)) shOutcomes.set(b, limit(() => runToEnd('sh', ['-c', b.code], { cwd: pageDir(b.page), env: env() })));
  }
  for (const b of solo) run(where(b), [b], nodeFlags(b));
  for (const [page, list] of [...byPage].sort((x, y) => y[1].length - x[1].length)) run(page, list, []);
  // Settled outcomes are awaited by the tests; none may go unhandled meanwhile.
  for (const o of [...outcomes.values(), ...shOutcomes.values()]) (o as Promise<unknown>).catch(() => {});
}

const isInstallOnly = (b: Block) =>
  b.code
    .split('\n')
    .filter((l) => l.trim() !== '')
    .every((l) => /^npm install \S+$/.test(l));

beforeAll(async () => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'isolet-readme-'));
  project = path.join(work, 'my-app');
  fs.mkdirSync(project);
  if (given) {
    // The install as npm left it (isolet, its dependencies, .bin), copied so that the peers
    // linked below are its siblings, as they would be after `npm install <peer>`.
    fs.cpSync(path.join(given, 'node_modules'), path.join(project, 'node_modules'), { recursive: true, verbatimSymlinks: true });
  } else {
    link(ROOT, path.join(project, 'node_modules', 'isolet'));
    // As npm links a dependency's bin, for `npx isolet`.
    link(path.join('..', 'isolet', 'bin', 'isolet.js'), path.join(project, 'node_modules', '.bin', 'isolet'));
  }
  for (const peer of ['@cloudflare/codemode', '@modelcontextprotocol/sdk', '@modelcontextprotocol/server', '@modelcontextprotocol/node', '@modelcontextprotocol/client', 'ai', 'zod', 'openai']) {
    link(path.join(ROOT, 'node_modules', peer), path.join(project, 'node_modules', peer));
  }
  makeProject(project, undefined);
  for (const page of PAGES) makeProject(pageDir(page), path.join(project, 'node_modules'));
  // The type check first: the longest task, in a process of its own, awaited by its test.
  typecheck = runToEnd(process.execPath, [TYPECHECK, path.join(ROOT, 'node_modules', '@types'), ...TS_BLOCKS.map(writeForTypecheck)], { cwd: project });
  typecheck.catch(() => {});

  chat = await startChatServer();
  chat.setDefault({ answer: '```js\n' + SUM_FIXED + '```' });
  api = http.createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(req.url === '/v1/items' ? '[{"id":1},{"id":2},{"id":3}]' : '{}');
  });
  await new Promise<void>((r) => api.listen(0, '127.0.0.1', r));
  apiOrigin = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;

  const bin = path.join(project, 'node_modules', '.bin', 'isolet');
  mcpServer = spawn(process.execPath, [bin, 'mcp', '--http', '127.0.0.1:0', '--token-env', 'ISOLET_MCP_TOKEN', '--timeout-ms', '5000', '--memory-limit-mb', '64'], {
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
  // Started now, awaited by the tests below.
  startRuns();
}, 60_000);

afterAll(async () => {
  await Promise.allSettled([...outcomes.values(), ...shOutcomes.values(), typecheck]);
  mcpServer?.kill('SIGTERM');
  await chat?.close();
  api?.close();
  if (work) fs.rmSync(work, { recursive: true, force: true });
}, 120_000);

describe('README.md and docs/*.md examples', () => {
  it('has the examples this test runs, in languages and with flags it knows', () => {
    if (!ONLY) {
      expect(TS_BLOCKS.length).toBeGreaterThanOrEqual(40);
      expect(SH_BLOCKS.length).toBeGreaterThanOrEqual(3);
      // Every guide shows TypeScript that runs.
      for (const page of GUIDES) {
        expect(TS_BLOCKS.some((b) => b.page === page), `${page} has a \`\`\`ts example that runs`).toBe(true);
      }
      // The README's first runnable example is on its first screen.
      const first = TS_BLOCKS.find((b) => b.page === 'README.md');
      expect(first && first.line, 'README.md: the first ```ts example').toBeLessThanOrEqual(60);
    }
    for (const b of ALL) {
      for (const f of b.flags) expect(f, `${where(b)}: an info-string flag this test knows (no-run, file=<name>)`).toMatch(FLAGS);
    }
    // Shell commands that do not run are a checkout's: npm scripts and vitest of this repository.
    for (const b of ALL.filter((x) => x.lang === 'sh' && !runs(x))) {
      for (const line of b.code.split('\n').filter((l) => l.trim() !== '')) expect(line, where(b)).toMatch(/^(npm|npx vitest) /);
    }
    // A `// result:` comment in a block that never runs would claim what nobody checks.
    for (const b of ALL.filter((x) => !runs(x) || !PROGRAMS.includes(x.lang))) {
      expect(b.code, `${where(b)}: a // result: comment in a block that does not run`).not.toMatch(/\/\/\s*result:/);
    }
    // Every `--config <file>` an example passes has its file.
    for (const b of ALL.filter((x) => runs(x))) {
      for (const m of b.code.matchAll(/'--config', '([\w.-]+)'|--config ([\w.-]+\.json)/g)) {
        const name = m[1] ?? m[2];
        expect(
          FILE_BLOCKS.some((f) => f.flags.includes(`file=${name}`)),
          `${where(b)} reads ${name}: a \`\`\`json file=${name} block`,
        ).toBe(true);
      }
    }
  });

  it('type-checks every TypeScript example against the package types (strict)', async () => {
    const ran = await typecheck;
    expect(ran.code, ran.stderr).toBe(0);
    const problems = (JSON.parse(ran.stdout) as { file: string; line: number; message: string }[]).map(
      (p) => `${where(typecheckFiles.get(p.file)!, 1 + p.line)}: ${p.message}`,
    );
    expect(problems).toEqual([]);
  }, 120_000);

  for (const block of PROGRAM_BLOCKS) {
    it(`runs the example at ${where(block)} (${block.heading})`, async () => {
      const { ran, report } = await outcomes.get(block)!;
      const { file, checks } = prepared.get(block)!;
      const entry = report?.blocks[file];
      const output = `${ran.stdout}\n${ran.stderr}`;
      expect(entry, `${where(block)}: its process ended before it ran (exit ${ran.code})\n${output}`).toBeDefined();
      expect(entry!.errors, where(block)).toEqual([]);
      expect(entry!.finished, `${where(block)} did not finish\n${output}`).toBe(true);
      expect(entry!.stderr, where(block)).not.toMatch(/Error|Warning/);
      for (const at of checks) expect(entry!.checks[at]?.ran ?? 0, `${at}: this // result: comment was never reached`).toBeGreaterThan(0);
    }, 120_000);
  }

  it('lets each process of examples exit on its own, with status 0', async () => {
    for (const g of groups) {
      const { ran, report } = await g.outcome;
      expect(report?.leftOpen, `${g.label}: something its examples opened kept the process alive`).toBe(false);
      expect(ran.code, `${g.label}\n${ran.stdout}\n${ran.stderr}`).toBe(0);
      expect(ran.stderr, g.label).not.toMatch(/Error|Warning/);
    }
  }, 120_000);

  for (const block of SH_BLOCKS) {
    it(`runs the shell example at ${where(block)} (${block.heading})`, async () => {
      const lines = block.code.split('\n').filter((l) => l.trim() !== '');
      if (isInstallOnly(block)) {
        // `npm install isolet` (and optional peers): the project already holds the package.
        for (const l of lines) expect(fs.existsSync(path.join(project, 'node_modules', l.split(' ')[2], 'package.json')), l).toBe(true);
        return;
      }
      const r = await shOutcomes.get(block)!;
      const output = r.stdout + r.stderr;
      expect(r.code, `${where(block)}\n${output}`).toBe(0);
      expect(output).not.toMatch(/not found|npm ERR|npm error/);
      // What a command's comment says it prints (`# 6`, `# "my-app", exit 0`), and lines of
      // comment after a command (its whole output), are in the output.
      for (const line of lines) {
        const whole = /^# (.*)$/.exec(line);
        const trailing = /\s#\s+(.*)$/.exec(line);
        const expected = whole ? [whole[1]] : trailing ? trailing[1].split(', ') : [];
        for (const text of expected) expect(output, `${where(block)}: ${line}`).toContain(text);
      }
    }, 120_000);
  }
});
