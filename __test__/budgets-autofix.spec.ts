// `isolet autofix` prints what a chat model suggested; that text must never reach the
// terminal raw. Control characters (ESC/CSI sequences, BEL, backspace, CR, C1, bidi
// overrides) are shown as visible escapes in the diff, the failure message and the
// sandbox logs. A real chat server on 127.0.0.1 and the real CLI in a child process.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { execFile } from 'node:child_process';
import { startChatServer, type ChatServer } from './support/chat-server';

const API_KEY = 'sk-test-budgets-0000';
const BUGGY = `'use strict'\nfunction add(a, b) {\n  return a - b\n}\nmodule.exports = { add }\n`;
const cli = path.join(__dirname, '..', 'bin', 'isolet.js');

// Raw terminal controls: OSC title set, clear screen, cursor up + erase line, BEL,
// backspaces, a lone CR, a C1 CSI, and a right-to-left override.
const HOSTILE_LINE = "  return a + b /* \x1b]0;pwned\x07\x1b[2J\x1b[1A\x1b[2K\b\b\rok \x9b31m \u202eevil */";
const FIXED = `'use strict'\nfunction add(a, b) {\n${HOSTILE_LINE}\n}\nmodule.exports = { add }\n`;
// What may never appear in the CLI's output.
const RAW_CONTROLS = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]/;

let server: ChatServer;
let root: string;
let file: string;

beforeAll(async () => {
  server = await startChatServer();
});
afterAll(async () => {
  await server.close();
});
beforeEach(async () => {
  server.reset();
  const base = await fsp.mkdtemp(path.join(os.tmpdir(), 'isolet-budgets-autofix-'));
  root = path.join(base, 'project');
  await fsp.mkdir(root, { recursive: true });
  file = path.join(root, 'math.js');
  await fsp.writeFile(file, BUGGY);
});

function run(args: string[]) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    const child = execFile(
      process.execPath,
      [cli, ...args],
      { env: { ...process.env, OPENAI_API_KEY: API_KEY, OPENAI_BASE_URL: server.baseURL, NO_COLOR: '1' }, timeout: 30_000 },
      (err, stdout, stderr) => {
        const failure = err as (Error & { code?: number | string }) | null;
        resolve({ code: failure ? (typeof failure.code === 'number' ? failure.code : -1) : 0, stdout, stderr });
      },
    );
    child.stdin?.end();
  });
}

const fenced = (code: string) => `Here you go:\n\n\`\`\`js\n${code}\`\`\`\n`;

describe('isolet autofix: control characters from a suggestion are escaped', () => {
  it('shows them as visible escapes in the diff and never writes them raw', async () => {
    server.enqueue({ answer: fenced(FIXED) });
    const r = await run(['autofix', file, '--root', root, '--model', 'stub-model']);
    expect(r.code, r.stderr).toBe(3); // needs approval: diff shown, file untouched
    expect(r.stdout).not.toMatch(RAW_CONTROLS);
    expect(r.stderr).not.toMatch(RAW_CONTROLS);
    expect(r.stdout).toContain(
      '+  return a + b /* \\x1b]0;pwned\\x07\\x1b[2J\\x1b[1A\\x1b[2K\\b\\b\\rok \\x9b31m \\u202eevil */',
    );
    // Tabs and newlines are text, not controls.
    expect(r.stdout).toContain('-  return a - b\n');
    expect(await fsp.readFile(file, 'utf8')).toBe(BUGGY);
  });

  it('escapes the failure message and sandbox logs of a suggestion that fails in the sandbox', async () => {
    const failing = `console.log('\\x1b[2J\\x07log');\nthrow new Error('\\x1b]0;owned\\x07 boom')\n`;
    server.enqueue({ answer: fenced(failing) });
    const r = await run(['autofix', file, '--root', root, '--yes', '--model', 'stub-model']);
    expect(r.code).toBe(1);
    expect(r.stderr).not.toMatch(RAW_CONTROLS);
    expect(r.stdout).not.toMatch(RAW_CONTROLS);
    expect(r.stderr).toContain('\\x1b]0;owned\\x07 boom');
    expect(await fsp.readFile(file, 'utf8')).toBe(BUGGY);
  });
});
