// autoFix against a real chat-completions server on 127.0.0.1, through the real `openai`
// client, with real temp directories and the real sandbox. See docs/autofix.md.

import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import * as crypto from 'node:crypto';
import { execFile } from 'node:child_process';

import {
  autoFix,
  unifiedDiff,
  extractCode,
  type AuditEntry,
  type AutoFixOptions,
  type AutoFixResult,
  type AutoFixReview,
  type ChatProvider,
} from '../lib/autofix';
import { startChatServer, type ChatServer } from './support/chat-server';
import { RUN_SANDBOX_DEFAULTS } from '..';

const API_KEY = 'sk-test-SECRET-do-not-log-4f1c9e27';
const BUGGY_MARKER = 'BUGGY_MARKER_7f3a';
const FIXED_MARKER = 'FIXED_MARKER_91c2';
const INSTRUCTION_MARKER = 'INSTRUCTION_MARKER_55d0';
const BUGGY = `'use strict'\nfunction add(a, b) {\n  return a - b // ${BUGGY_MARKER}\n}\nmodule.exports = { add }\n`;
const FIXED = `'use strict'\nfunction add(a, b) {\n  return a + b // ${FIXED_MARKER}\n}\nmodule.exports = { add }\n`;
const FIXED_ALT = `'use strict'\nfunction add(a, b) {\n  return b + a // ${FIXED_MARKER} alt\n}\nmodule.exports = { add }\n`;
const STILL_WRONG = `'use strict'\nfunction add(a, b) {\n  return a * b // ${FIXED_MARKER}\n}\nmodule.exports = { add }\n`;
const TEST = [
  "if (add(2, 3) !== 5) throw new Error('add(2, 3) should be 5')",
  "if (module.exports.add(-1, 1) !== 0) throw new Error('module.exports.add(-1, 1) should be 0')",
].join('\n');
const INSTRUCTION = `add(2, 3) returns -1 instead of 5 (${INSTRUCTION_MARKER})`;

function fenced(code: string, lang = 'js') {
  return `Here is the corrected file:\n\n\`\`\`${lang}\n${code}\`\`\`\n\nThe operator was wrong.`;
}

const sha = (data: string | Buffer) => crypto.createHash('sha256').update(data).digest('hex');

let server: ChatServer;
let root: string;
let outside: string;
let file: string;
let auditPath: string;
const savedEnv: Record<string, string | undefined> = {};

beforeAll(async () => {
  for (const k of ['OPENAI_API_KEY', 'OPENAI_BASE_URL', 'OPENAI_MODEL']) {
    savedEnv[k] = process.env[k];
    delete process.env[k];
  }
  server = await startChatServer();
});

afterAll(async () => {
  await server.close();
  for (const [k, v] of Object.entries(savedEnv)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});

beforeEach(async () => {
  server.reset();
  const base = await fsp.mkdtemp(path.join(os.tmpdir(), 'isolet-autofix-'));
  root = path.join(base, 'project');
  outside = path.join(base, 'outside');
  await fsp.mkdir(path.join(root, 'src'), { recursive: true });
  await fsp.mkdir(outside);
  file = path.join(root, 'src', 'math.js');
  await fsp.writeFile(file, BUGGY);
  auditPath = path.join(root, '.isolet-audit.jsonl');
});

afterEach(async () => {
  // Whatever a test did: the audit log never holds the key, the file, the suggestion or the instruction.
  const text = await fsp.readFile(auditPath, 'utf8').catch(() => '');
  for (const secret of [API_KEY, BUGGY_MARKER, FIXED_MARKER, INSTRUCTION_MARKER, 'sk-test']) {
    expect(text).not.toContain(secret);
  }
  // No temp files left next to the target.
  const leftovers = (await fsp.readdir(path.join(root, 'src')).catch(() => [])).filter((n) => n.includes('.isolet-'));
  expect(leftovers).toEqual([]);
  await fsp.rm(path.dirname(root), { recursive: true, force: true });
});

function fix(extra: Partial<AutoFixOptions> = {}): Promise<AutoFixResult> {
  return autoFix({
    filePath: 'src/math.js',
    root,
    instruction: INSTRUCTION,
    apiKey: API_KEY,
    baseURL: server.baseURL,
    model: 'stub-model',
    ...extra,
  });
}

async function auditEntries(p = auditPath): Promise<AuditEntry[]> {
  const text = await fsp.readFile(p, 'utf8');
  expect(text.endsWith('\n')).toBe(true);
  return text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as AuditEntry);
}

async function onlyAuditEntry(p = auditPath): Promise<AuditEntry> {
  const entries = await auditEntries(p);
  expect(entries).toHaveLength(1);
  const e = entries[0];
  expect(e.v).toBe(1);
  expect(new Date(e.time).toISOString()).toBe(e.time);
  expect(typeof e.message).toBe('string');
  expect(typeof e.durations.total).toBe('number');
  expect(e.model).toBe('stub-model');
  return e;
}

async function expectUntouched(before = BUGGY) {
  const bytes = await fsp.readFile(file);
  expect(bytes.equals(Buffer.from(before))).toBe(true);
}

function expectFailed(r: AutoFixResult, reason: string) {
  expect(r.status).toBe('failed');
  if (r.status !== 'failed') throw new Error('unreachable');
  expect(r.reason).toBe(reason);
  expect(r.message.length).toBeGreaterThan(0);
  return r;
}

describe('autoFix: applied', () => {
  it('applies a fix that passes suggestion + test when autoApprove is true, atomically, keeping the mode', async () => {
    await fsp.chmod(file, 0o640);
    const inoBefore = (await fsp.stat(file)).ino;
    server.enqueue({ answer: fenced(FIXED) });

    const r = await fix({ test: TEST, autoApprove: true });

    expect(r.status).toBe('applied');
    if (r.status !== 'applied') throw new Error('unreachable');
    expect(await fsp.readFile(file, 'utf8')).toBe(FIXED);
    const st = await fsp.stat(file);
    expect(st.mode & 0o7777).toBe(0o640);
    expect(st.ino).not.toBe(inoBefore); // replaced by rename, not rewritten in place
    expect(r.suggestion).toBe(FIXED);
    expect(r.diff).toContain('--- a/src/math.js\n+++ b/src/math.js\n');
    expect(r.diff).toContain(`-  return a - b // ${BUGGY_MARKER}\n+  return a + b // ${FIXED_MARKER}\n`);
    expect(r.sandbox.success).toBe(true);
    expect(r.sha256Before).toBe(sha(BUGGY));
    expect(r.sha256After).toBe(sha(FIXED));
    expect(r.file).toBe('src/math.js');
    expect(r.filePath).toBe(await fsp.realpath(file));
    expect(r.auditLog).toBe(auditPath);
    expect(r.durations.provider).toEqual(expect.any(Number));
    expect(r.durations.sandbox).toEqual(expect.any(Number));

    // What went over the wire, through the real openai client.
    expect(server.requests).toHaveLength(1);
    const req = server.requests[0];
    expect(req.method).toBe('POST');
    expect(req.url).toBe('/v1/chat/completions');
    expect(req.headers.authorization).toBe(`Bearer ${API_KEY}`);
    expect(req.body.model).toBe('stub-model');
    const [system, user] = req.body.messages;
    expect(system.role).toBe('system');
    expect(user.role).toBe('user');
    expect(user.content).toContain(INSTRUCTION);
    expect(user.content).toContain(BUGGY.trimEnd());
    expect(user.content).toContain(TEST);

    const e = await onlyAuditEntry();
    expect(e).toMatchObject({
      file: 'src/math.js',
      status: 'applied',
      reason: null,
      sha256Before: sha(BUGGY),
      sha256After: sha(FIXED),
      provider: 'openai',
      approval: 'auto',
      error: null,
    });
    expect(e.durations.provider).toEqual(expect.any(Number));
    expect(e.durations.sandbox).toEqual(expect.any(Number));
  });

  it('calls approve() with the review and applies when it resolves true', async () => {
    server.enqueue({ answer: fenced(FIXED) });
    const reviews: AutoFixReview[] = [];
    const r = await fix({
      test: TEST,
      approve: async (review) => {
        reviews.push(review);
        // The file is not written before approval.
        expect(await fsp.readFile(file, 'utf8')).toBe(BUGGY);
        return true;
      },
    });
    expect(r.status).toBe('applied');
    expect(await fsp.readFile(file, 'utf8')).toBe(FIXED);
    expect(reviews).toHaveLength(1);
    const review = reviews[0];
    expect(review.file).toBe('src/math.js');
    expect(review.filePath).toBe(await fsp.realpath(file));
    expect(review.original).toBe(BUGGY);
    expect(review.suggestion).toBe(FIXED);
    expect(review.diff).toBe(unifiedDiff(BUGGY, FIXED, 'src/math.js'));
    expect(review.instruction).toBe(INSTRUCTION);
    expect(review.model).toBe('stub-model');
    expect((await onlyAuditEntry()).approval).toBe('approved');
  });

  it('accepts an answer that is bare code without a fence', async () => {
    server.enqueue({ answer: FIXED });
    const r = await fix({ test: TEST, autoApprove: true });
    expect(r.status).toBe('applied');
    expect(await fsp.readFile(file, 'utf8')).toBe(FIXED);
    await onlyAuditEntry();
  });

  it('takes the first JavaScript block, skipping blocks in other languages', async () => {
    server.enqueue({ answer: 'Run this first:\n```bash\nnpm test\n```\nThen:\n```javascript\n' + FIXED + '```\n' });
    const r = await fix({ test: TEST, autoApprove: true });
    expect(r.status).toBe('applied');
    expect(await fsp.readFile(file, 'utf8')).toBe(FIXED);
    await onlyAuditEntry();
  });

  it('fixes the target of a symlink that stays inside root and keeps the link', async () => {
    await fsp.symlink('math.js', path.join(root, 'src', 'alias.js'));
    server.enqueue({ answer: fenced(FIXED) });
    const r = await fix({ filePath: 'src/alias.js', test: TEST, autoApprove: true });
    expect(r.status).toBe('applied');
    expect(r.file).toBe('src/math.js');
    expect((await fsp.lstat(path.join(root, 'src', 'alias.js'))).isSymbolicLink()).toBe(true);
    expect(await fsp.readFile(file, 'utf8')).toBe(FIXED);
    expect((await onlyAuditEntry()).file).toBe('src/math.js');
  });

  it('keeps CRLF line endings of the original file', async () => {
    const crlf = BUGGY.replace(/\n/g, '\r\n');
    await fsp.writeFile(file, crlf);
    server.enqueue({ answer: fenced(FIXED) });
    const r = await fix({ test: TEST, autoApprove: true });
    expect(r.status).toBe('applied');
    expect(await fsp.readFile(file, 'utf8')).toBe(FIXED.replace(/\n/g, '\r\n'));
    await onlyAuditEntry();
  });

  it('uses a custom provider object and passes it system, prompt, model and a signal', async () => {
    const calls: Array<{ system: string; prompt: string; model: string; aborted: boolean }> = [];
    const provider: ChatProvider = {
      name: 'in-process',
      async complete({ system, prompt, model, signal }) {
        calls.push({ system, prompt, model, aborted: signal.aborted });
        return fenced(FIXED);
      },
    };
    const r = await fix({ provider, apiKey: undefined, test: TEST, autoApprove: true });
    expect(r.status).toBe('applied');
    expect(calls).toHaveLength(1);
    expect(calls[0].model).toBe('stub-model');
    expect(calls[0].prompt).toContain(INSTRUCTION);
    expect(calls[0].aborted).toBe(false);
    expect(server.requests).toHaveLength(0);
    expect((await onlyAuditEntry()).provider).toBe('in-process');
  });

  it('reads apiKey, baseURL and model from OPENAI_* environment variables', async () => {
    process.env.OPENAI_API_KEY = API_KEY;
    process.env.OPENAI_BASE_URL = server.baseURL;
    process.env.OPENAI_MODEL = 'stub-model';
    try {
      server.enqueue({ answer: fenced(FIXED) });
      const r = await autoFix({
        filePath: 'src/math.js',
        root,
        instruction: INSTRUCTION,
        test: TEST,
        autoApprove: true,
      });
      expect(r.status).toBe('applied');
      expect(r.model).toBe('stub-model');
      expect(server.requests[0].headers.authorization).toBe(`Bearer ${API_KEY}`);
      await onlyAuditEntry();
    } finally {
      delete process.env.OPENAI_API_KEY;
      delete process.env.OPENAI_BASE_URL;
      delete process.env.OPENAI_MODEL;
    }
  });
});

describe('autoFix: not approved', () => {
  it('rejected: approve() returns false, the file is untouched', async () => {
    server.enqueue({ answer: fenced(FIXED) });
    let calls = 0;
    const r = await fix({
      test: TEST,
      approve: (review) => {
        calls++;
        expect(review.diff).toContain('+  return a + b');
        return false;
      },
    });
    expect(r.status).toBe('rejected');
    if (r.status !== 'rejected') throw new Error('unreachable');
    expect(calls).toBe(1);
    expect(r.suggestion).toBe(FIXED);
    expect(r.sha256After).toBe(sha(BUGGY));
    await expectUntouched();
    const e = await onlyAuditEntry();
    expect(e).toMatchObject({ status: 'rejected', reason: null, approval: 'denied', sha256After: sha(BUGGY) });
  });

  it('rejected: approve() throwing counts as not approved', async () => {
    server.enqueue({ answer: fenced(FIXED) });
    const r = await fix({
      approve: () => {
        throw new Error('reviewer went home');
      },
    });
    expect(r.status).toBe('rejected');
    await expectUntouched();
    expect((await onlyAuditEntry()).status).toBe('rejected');
  });

  it('rejected: only a literal true approves', async () => {
    server.enqueue({ answer: fenced(FIXED) });
    const r = await fix({ approve: (() => 'yes') as unknown as () => boolean });
    expect(r.status).toBe('rejected');
    await expectUntouched();
    await onlyAuditEntry();
  });

  it('needs-approval: autoApprove false and no approve callback; returns the diff', async () => {
    server.enqueue({ answer: fenced(FIXED) });
    const r = await fix({ test: TEST });
    expect(r.status).toBe('needs-approval');
    if (r.status !== 'needs-approval') throw new Error('unreachable');
    expect(r.diff).toBe(unifiedDiff(BUGGY, FIXED, 'src/math.js'));
    expect(r.suggestion).toBe(FIXED);
    await expectUntouched();
    const e = await onlyAuditEntry();
    expect(e).toMatchObject({ status: 'needs-approval', reason: null, approval: 'none' });
  });
});

describe('autoFix: sandbox and test failures leave the file byte for byte', () => {
  it('sandbox-failure: the suggestion throws', async () => {
    const original = Buffer.concat([Buffer.from(BUGGY), Buffer.from('// ünïcödé ✓\n')]);
    await fsp.writeFile(file, original);
    const ino = (await fsp.stat(file)).ino;
    server.enqueue({ answer: fenced(`${FIXED}throw new TypeError('boom at load')\n`) });
    const r = expectFailed(await fix({ test: TEST, autoApprove: true }), 'sandbox-failure');
    expect(r.error?.name).toBe('SandboxRuntimeError');
    expect(r.message).toContain('boom at load');
    expect(r.sandbox?.success).toBe(false);
    expect((await fsp.readFile(file)).equals(original)).toBe(true);
    expect((await fsp.stat(file)).ino).toBe(ino);
    const e = await onlyAuditEntry();
    expect(e).toMatchObject({
      status: 'failed',
      reason: 'sandbox-failure',
      error: 'SandboxRuntimeError',
      approval: null,
    });
    expect(e.message).not.toContain('boom at load');
    expect(e.sha256After).toBe(e.sha256Before);
  });

  it('sandbox-failure: a syntax error is a SandboxValidationError', async () => {
    server.enqueue({ answer: fenced('function add(a, b) {\n  return a + \n}\n') });
    const r = expectFailed(await fix({ autoApprove: true }), 'sandbox-failure');
    expect(r.error?.name).toBe('SandboxValidationError');
    await expectUntouched();
    await onlyAuditEntry();
  });

  it('sandbox-failure: ES module syntax is refused with a clear message', async () => {
    server.enqueue({ answer: fenced('export function add(a, b) {\n  return a + b\n}\n') });
    const r = expectFailed(await fix({ autoApprove: true }), 'sandbox-failure');
    expect(r.message).toMatch(/ES module syntax .*not supported/);
    await expectUntouched();
    expect((await onlyAuditEntry()).message).toMatch(/ES module syntax/);
  });

  it('sandbox-failure: an endless loop hits timeoutMs', async () => {
    server.enqueue({ answer: fenced('while (true) {}\n') });
    const started = Date.now();
    const r = expectFailed(await fix({ autoApprove: true, timeoutMs: 200 }), 'sandbox-failure');
    expect(r.error?.name).toBe('SandboxTimeoutError');
    expect(Date.now() - started).toBeLessThan(5000);
    await expectUntouched();
    expect((await onlyAuditEntry()).error).toBe('SandboxTimeoutError');
  });

  it('sandbox-failure: require() is not available inside the sandbox', async () => {
    server.enqueue({ answer: fenced("const fs = require('fs')\n" + FIXED) });
    const r = expectFailed(await fix({ autoApprove: true }), 'sandbox-failure');
    expect(r.message).toContain('require("fs") is not available');
    await expectUntouched();
    await onlyAuditEntry();
  });

  it('test-failure: the suggestion runs but the test throws', async () => {
    server.enqueue({ answer: fenced(STILL_WRONG) });
    const approve = () => {
      throw new Error('approve must not be called for a failing suggestion');
    };
    const r = expectFailed(await fix({ test: TEST, approve }), 'test-failure');
    expect(r.error?.name).toBe('SandboxRuntimeError');
    expect(r.message).toContain('add(2, 3) should be 5');
    await expectUntouched();
    const e = await onlyAuditEntry();
    expect(e).toMatchObject({ status: 'failed', reason: 'test-failure' });
    expect(e.message).not.toContain('should be 5');
  });

  it('test-failure: the test runs in the same isolate, after the suggestion', async () => {
    // The test sees the suggestion's globals; a passing test proves it ran after it.
    server.enqueue({ answer: fenced(FIXED + 'globalThis.loadedBySuggestion = 42\n') });
    const r = await fix({
      test: "if (loadedBySuggestion !== 42) throw new Error('not the same isolate')",
      autoApprove: true,
    });
    expect(r.status).toBe('applied');
    await onlyAuditEntry();
  });
});

describe('autoFix: unsafe paths are refused before anything is sent', () => {
  async function expectRefused(filePath: string, loggedAs = filePath) {
    server.enqueue({ answer: fenced(FIXED) });
    const r = expectFailed(await fix({ filePath, autoApprove: true }), 'unsafe-path');
    expect(server.requests).toHaveLength(0);
    expect(r.sha256Before).toBeNull();
    await expectUntouched();
    const e = await onlyAuditEntry();
    expect(e).toMatchObject({
      status: 'failed',
      reason: 'unsafe-path',
      file: loggedAs,
      sha256Before: null,
      sha256After: null,
    });
    expect(e.durations.provider).toBeNull();
    expect(e.durations.sandbox).toBeNull();
    return r;
  }

  it('a relative path that climbs out of root', async () => {
    await fsp.writeFile(path.join(outside, 'victim.js'), BUGGY);
    await expectRefused('../outside/victim.js');
    expect(await fsp.readFile(path.join(outside, 'victim.js'), 'utf8')).toBe(BUGGY);
  });

  it('an absolute path outside root', async () => {
    const victim = path.join(outside, 'victim.js');
    await fsp.writeFile(victim, BUGGY);
    await expectRefused(victim);
    expect(await fsp.readFile(victim, 'utf8')).toBe(BUGGY);
  });

  it('a sibling directory whose name starts with root (no string-prefix checks)', async () => {
    const sibling = root + '-evil';
    await fsp.mkdir(sibling);
    await fsp.writeFile(path.join(sibling, 'x.js'), BUGGY);
    await expectRefused(path.join(sibling, 'x.js'));
  });

  it('a symlink inside root that leads out', async () => {
    const victim = path.join(outside, 'victim.js');
    await fsp.writeFile(victim, BUGGY);
    await fsp.symlink(victim, path.join(root, 'src', 'link.js'));
    const r = await expectRefused('src/link.js');
    expect(r.message).toMatch(/symbolic link/);
    expect(await fsp.readFile(victim, 'utf8')).toBe(BUGGY);
  });

  it('a directory symlink inside root that leads out', async () => {
    await fsp.writeFile(path.join(outside, 'victim.js'), BUGGY);
    await fsp.symlink(outside, path.join(root, 'out'));
    await expectRefused('out/victim.js');
  });

  it('a directory', async () => {
    const r = await expectRefused('src');
    expect(r.message).toMatch(/not a regular file/);
  });

  it('root itself', async () => {
    await expectRefused('.');
  });

  it('a NUL byte in the path', async () => {
    await expectRefused('src/math.js\0.txt');
  });

  it('a file that does not exist', async () => {
    await expectRefused('src/missing.js');
  });

  it('a FIFO', async () => {
    const { execFileSync } = await import('node:child_process');
    execFileSync('mkfifo', [path.join(root, 'src', 'pipe.js')]);
    await expectRefused('src/pipe.js');
  });

  it('a hard link (the same bytes may have a name outside root)', async () => {
    const victim = path.join(outside, 'victim.js');
    await fsp.writeFile(victim, BUGGY);
    await fsp.link(victim, path.join(root, 'src', 'hard.js'));
    const r = await expectRefused('src/hard.js');
    expect(r.message).toMatch(/hard link/);
  });

  it('the audit log itself', async () => {
    await fsp.writeFile(auditPath, '');
    await expectRefused('.isolet-audit.jsonl');
  });

  it('a root that does not exist (with an explicit audit log)', async () => {
    const log = path.join(outside, 'audit.jsonl');
    const r = expectFailed(await fix({ root: path.join(root, 'nope'), auditLog: log }), 'unsafe-path');
    expect(server.requests).toHaveLength(0);
    expect(r.auditLog).toBe(log);
    expect((await onlyAuditEntry(log)).reason).toBe('unsafe-path');
  });
});

describe('autoFix: provider failures', () => {
  it('provider-error: HTTP 500', async () => {
    server.enqueue({ status: 500, message: 'the stub is on fire' });
    const r = expectFailed(await fix({ autoApprove: true }), 'provider-error');
    expect(r.error?.status).toBe(500);
    expect(r.message).toContain('500');
    expect(r.durations.sandbox).toBeNull();
    await expectUntouched();
    const e = await onlyAuditEntry();
    expect(e).toMatchObject({ reason: 'provider-error', sha256Before: sha(BUGGY), sha256After: sha(BUGGY) });
    expect(e.message).not.toContain('on fire');
  });

  it('provider-error: the server hangs past providerTimeoutMs', async () => {
    server.enqueue({ hang: true });
    const started = Date.now();
    const r = expectFailed(await fix({ autoApprove: true, providerTimeoutMs: 300 }), 'provider-error');
    expect(Date.now() - started).toBeLessThan(3000);
    expect(r.message).toMatch(/timed out/);
    await expectUntouched();
    expect((await onlyAuditEntry()).message).toMatch(/timed out/);
  });

  it('provider-error: a custom provider that never answers is abandoned and aborted', async () => {
    let signal: AbortSignal | undefined;
    const provider: ChatProvider = {
      complete: (req) => {
        signal = req.signal;
        return new Promise<string>(() => {});
      },
    };
    const r = expectFailed(await fix({ provider, autoApprove: true, providerTimeoutMs: 150 }), 'provider-error');
    expect(signal?.aborted).toBe(true);
    expect(r.message).toMatch(/timed out/);
    await expectUntouched();
    expect((await onlyAuditEntry()).provider).toBe('custom');
  });

  it('provider-error: malformed JSON', async () => {
    server.enqueue({ malformed: true });
    const r = expectFailed(await fix({ autoApprove: true }), 'provider-error');
    expect(r.message).toMatch(/JSON/);
    await expectUntouched();
    await onlyAuditEntry();
  });

  it('provider-error: JSON that is not a chat completion', async () => {
    server.enqueue({ json: { hello: 'world' } });
    expectFailed(await fix({ autoApprove: true }), 'provider-error');
    await expectUntouched();
    await onlyAuditEntry();
  });

  it('provider-error: an answer cut off at the length limit', async () => {
    server.enqueue({ answer: '```js\nfunction add(a, b) {', finishReason: 'length' });
    expectFailed(await fix({ autoApprove: true }), 'provider-error');
    await expectUntouched();
    await onlyAuditEntry();
  });

  it('provider-error: no API key anywhere, nothing is sent', async () => {
    const r = expectFailed(await fix({ apiKey: undefined, autoApprove: true }), 'provider-error');
    expect(r.message).toMatch(/API key/);
    expect(server.requests).toHaveLength(0);
    await onlyAuditEntry();
  });

  it('provider-error: an error that echoes the key is redacted everywhere', async () => {
    server.enqueue({ status: 401, message: `Incorrect API key provided: ${API_KEY}.` });
    const r = expectFailed(await fix({ autoApprove: true }), 'provider-error');
    expect(r.error?.status).toBe(401);
    expect(JSON.stringify(r)).not.toContain(API_KEY);
    expect(JSON.stringify(r)).not.toContain('sk-test');
    await onlyAuditEntry();
  });
});

describe('autoFix: answers without usable code', () => {
  it('no-code: prose only', async () => {
    server.enqueue({ answer: "I'm sorry, but I can't find anything wrong with this file." });
    const r = expectFailed(await fix({ autoApprove: true }), 'no-code');
    expect(r.durations.sandbox).toBeNull();
    await expectUntouched();
    expect((await onlyAuditEntry()).reason).toBe('no-code');
  });

  it('no-code: only a block in another language', async () => {
    server.enqueue({ answer: 'Try:\n```bash\nrm -rf node_modules\n```\n' });
    expectFailed(await fix({ autoApprove: true }), 'no-code');
    await expectUntouched();
    await onlyAuditEntry();
  });

  it('no-code: larger than maxSuggestionBytes', async () => {
    server.enqueue({ answer: fenced(FIXED + '// padding\n'.repeat(200)) });
    const r = expectFailed(await fix({ autoApprove: true, maxSuggestionBytes: 512 }), 'no-code');
    expect(r.message).toMatch(/maxSuggestionBytes/);
    await expectUntouched();
    await onlyAuditEntry();
  });

  it('no-code: identical to the current file', async () => {
    server.enqueue({ answer: fenced(BUGGY) });
    const r = expectFailed(await fix({ autoApprove: true }), 'no-code');
    expect(r.message).toMatch(/identical/);
    await expectUntouched();
    await onlyAuditEntry();
  });
});

describe('autoFix: writes', () => {
  it('write-failure: the file changed between read and write; the other change wins', async () => {
    server.enqueue({ answer: fenced(FIXED) });
    const external = BUGGY + '// edited by a human meanwhile\n';
    const r = expectFailed(
      await fix({
        test: TEST,
        approve: async () => {
          await fsp.writeFile(file, external);
          return true;
        },
      }),
      'write-failure',
    );
    expect(r.message).toMatch(/changed since it was read/);
    expect(await fsp.readFile(file, 'utf8')).toBe(external);
    expect(r.sha256After).toBe(sha(external));
    const e = await onlyAuditEntry();
    expect(e).toMatchObject({
      reason: 'write-failure',
      sha256Before: sha(BUGGY),
      sha256After: sha(external),
      approval: 'approved',
    });
  });

  it('two concurrent calls on one file never interleave: both complete, the file is one whole suggestion', async () => {
    server.enqueue({ answer: fenced(FIXED), delayMs: 80 }, { answer: fenced(FIXED_ALT) });
    const [a, b] = await Promise.all([
      fix({ test: TEST, autoApprove: true }),
      fix({ filePath: file, test: TEST, autoApprove: true }),
    ]);
    expect(a.status).toBe('applied');
    expect(b.status).toBe('applied');
    const final = await fsp.readFile(file, 'utf8');
    expect([FIXED, FIXED_ALT]).toContain(final);
    // Serialised per file: the second call read what the first one wrote.
    const [first, second] = a.sha256Before === sha(BUGGY) ? [a, b] : [b, a];
    expect(first.sha256Before).toBe(sha(BUGGY));
    expect(second.sha256Before).toBe(first.sha256After);
    expect(final).toBe(second.status === 'applied' ? second.suggestion : '');
    const entries = await auditEntries();
    expect(entries).toHaveLength(2);
    expect(entries.map((e) => e.status)).toEqual(['applied', 'applied']);
  });

  it('many concurrent calls on one file: every result is a whole suggestion, one audit line each', async () => {
    const answers = [FIXED, FIXED_ALT, FIXED, FIXED_ALT, FIXED, FIXED_ALT];
    server.enqueue(...answers.map((a, i) => ({ answer: fenced(a), delayMs: (i * 37) % 50 })));
    const results = await Promise.all(answers.map(() => fix({ test: TEST, autoApprove: true })));
    const final = await fsp.readFile(file, 'utf8');
    expect([FIXED, FIXED_ALT]).toContain(final);
    for (const r of results) expect(['applied', 'failed']).toContain(r.status);
    for (const r of results) if (r.status === 'failed') expect(r.reason).toBe('no-code'); // identical to the previous fix
    expect(results.filter((r) => r.status === 'applied').length).toBeGreaterThan(0);
    expect(await auditEntries()).toHaveLength(answers.length);
  });
});

describe('autoFix: options and the audit log', () => {
  it('rejects malformed options without writing anything', async () => {
    await expect(autoFix(undefined as unknown as AutoFixOptions)).rejects.toMatchObject({
      code: 'ERR_ISOLET_AUTOFIX_OPTIONS',
    });
    await expect(fix({ instruction: '' })).rejects.toMatchObject({ name: 'AutoFixOptionsError' });
    await expect(fix({ timeoutMs: -1 })).rejects.toThrow(/timeoutMs/);
    await expect(fix({ provider: {} as ChatProvider })).rejects.toThrow(/provider/);
    await expect(fsp.stat(auditPath)).rejects.toMatchObject({ code: 'ENOENT' });
    expect(server.requests).toHaveLength(0);
  });

  it('refuses a misspelled option with the nearest name, before anything is asked or written', async () => {
    // Silently ignored, these two would resolve needs-approval without ever running the test.
    await expect(fix({ autoApproved: true, tset: 'throw 1' } as Partial<AutoFixOptions>)).rejects.toMatchObject({
      name: 'AutoFixOptionsError',
      message: 'autoFix(options): options.autoApproved is not a known option of autoFix; did you mean options.autoApprove?',
    });
    await expect(fix({ tset: 'throw 1' } as Partial<AutoFixOptions>)).rejects.toThrow(
      'autoFix(options): options.tset is not a known option of autoFix; did you mean options.test?',
    );
    await expect(fix({ timeoutMs: 'fast' as unknown as number })).rejects.toThrow(
      "autoFix(options): options.timeoutMs must be a whole number from 1 to 2147483647, got 'fast'",
    );
    await expect(fix({ autoApprove: 'yes' as unknown as boolean })).rejects.toThrow("options.autoApprove must be a boolean, got 'yes'");
    await expect(fsp.stat(auditPath)).rejects.toMatchObject({ code: 'ENOENT' });
    expect(server.requests).toHaveLength(0);
  });

  it('takes a custom provider whose complete() is a method of its class', async () => {
    class Stub {
      name = 'stub';
      async complete() {
        return fenced(FIXED);
      }
    }
    const r = await fix({ provider: new Stub(), autoApprove: true });
    expect(r.status).toBe('applied');
    expect((await onlyAuditEntry()).provider).toBe('stub');
  });

  it('writes to an explicit audit log outside root and appends, never truncates', async () => {
    const log = path.join(outside, 'audit.jsonl');
    await fsp.writeFile(log, '{"earlier":true}\n');
    server.enqueue({ answer: fenced(FIXED) });
    const r = await fix({ auditLog: log, autoApprove: true, test: TEST });
    expect(r.status).toBe('applied');
    const lines = (await fsp.readFile(log, 'utf8')).trim().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toBe('{"earlier":true}');
    expect(JSON.parse(lines[1]).status).toBe('applied');
    for (const s of [API_KEY, BUGGY_MARKER, FIXED_MARKER, INSTRUCTION_MARKER]) expect(lines[1]).not.toContain(s);
    await expect(fsp.stat(auditPath)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('refuses an audit log that is a symlink (and does not write through it)', async () => {
    const target = path.join(outside, 'not-a-log.txt');
    await fsp.writeFile(target, 'precious\n');
    await fsp.symlink(target, auditPath);
    await expect(fix({ autoApprove: true })).rejects.toMatchObject({ code: 'ERR_ISOLET_AUTOFIX_AUDIT' });
    expect(await fsp.readFile(target, 'utf8')).toBe('precious\n');
    expect(server.requests).toHaveLength(0);
    await fsp.unlink(auditPath);
  });

  it('each audit line has exactly the documented fields', async () => {
    server.enqueue({ answer: fenced(FIXED) });
    await fix({ autoApprove: true, test: TEST });
    const e = await onlyAuditEntry();
    expect(Object.keys(e).sort()).toEqual(
      [
        'approval',
        'durations',
        'error',
        'file',
        'message',
        'model',
        'provider',
        'reason',
        'sha256After',
        'sha256Before',
        'status',
        'time',
        'v',
      ].sort(),
    );
    expect(Object.keys(e.durations).sort()).toEqual(['provider', 'sandbox', 'total']);
  });
});

describe('helpers', () => {
  it('unifiedDiff marks a missing final newline and numbers hunks like diff -u', () => {
    expect(unifiedDiff('a\nb\n', 'a\nb\n', 'x')).toBe('');
    expect(unifiedDiff('a\nb\nc\n', 'a\nB\nc\n', 'x')).toBe('--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n');
    expect(unifiedDiff('a', 'a\n', 'x')).toBe('--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+a\n');
    expect(unifiedDiff('', 'new\n', 'x')).toBe('--- a/x\n+++ b/x\n@@ -0,0 +1 @@\n+new\n');
    const many = Array.from({ length: 30 }, (_, i) => `line ${i}\n`);
    const changed = many.slice();
    changed[2] = 'two\n';
    changed[25] = 'twenty-five\n';
    const d = unifiedDiff(many.join(''), changed.join(''), 'x');
    expect(d.match(/^@@/gm)).toHaveLength(2);
    expect(d).toContain('@@ -1,6 +1,6 @@');
    expect(d).toContain('@@ -23,7 +23,7 @@');
  });

  it('extractCode takes the first JS fence, bare code, or nothing', () => {
    expect(extractCode('x\n```ts\nlet a: number = 1\n```\n```js\nb\n```').code).toBe('let a: number = 1');
    expect(extractCode('```\nconst a = 1;\n```').code).toBe('const a = 1;');
    expect(extractCode('const a = 1;\nfunction f() { return a }').code).toBe('const a = 1;\nfunction f() { return a }');
    expect(extractCode('Sorry, I cannot do that.').code).toBeNull();
    expect(extractCode('```js\nconst a = 1;\n').code).toBeNull();
    expect(extractCode('```js\n\n```').code).toBeNull();
  });
});

describe('isolet autofix (CLI)', () => {
  const cli = path.join(__dirname, '..', 'bin', 'isolet.js');
  function run(args: string[], env: Record<string, string> = {}) {
    return new Promise<{ code: number; stdout: string; stderr: string; signal: string | null }>((resolve) => {
      const child = execFile(
        process.execPath,
        [cli, ...args],
        { env: { ...process.env, OPENAI_API_KEY: API_KEY, OPENAI_BASE_URL: server.baseURL, ...env }, timeout: 30_000 },
        (err, stdout, stderr) => {
          const failure = err as (Error & { code?: number | string; signal?: string | null }) | null;
          const code = failure ? (typeof failure.code === 'number' ? failure.code : -1) : 0;
          resolve({ code, stdout, stderr, signal: failure?.signal ?? null });
        },
      );
      child.stdin?.end();
    });
  }

  it('without --yes and without a TTY: prints the diff, does not write, exits 3', async () => {
    server.enqueue({ answer: fenced(FIXED) });
    const r = await run(['autofix', file, '--root', root, '--instruction', INSTRUCTION, '--model', 'stub-model']);
    expect(r.signal, `the CLI was killed by a signal; stderr:\n${r.stderr}`).toBeNull();
    expect(r.code).toBe(3);
    expect(r.stdout).toContain('+  return a + b');
    expect(r.stderr).toMatch(/needs-approval/);
    await expectUntouched();
    expect((await onlyAuditEntry()).status).toBe('needs-approval');
  });

  it('with --yes and --test: applies and exits 0', async () => {
    const testFile = path.join(outside, 'check.js');
    await fsp.writeFile(testFile, TEST);
    server.enqueue({ answer: fenced(FIXED) });
    const r = await run([
      'autofix',
      file,
      '--root',
      root,
      '--test',
      testFile,
      '--yes',
      '--model',
      'stub-model',
      '--base-url',
      server.baseURL,
    ]);
    expect(r.signal, `the CLI was killed by a signal; stderr:\n${r.stderr}`).toBeNull();
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('--- a/src/math.js');
    expect(await fsp.readFile(file, 'utf8')).toBe(FIXED);
    expect(server.requests[0].body.messages[1].content).toContain(TEST);
    expect((await onlyAuditEntry()).status).toBe('applied');
  });

  it('a failure exits 1 and says why', async () => {
    server.enqueue({ status: 500 });
    const r = await run(['autofix', file, '--root', root, '--yes', '--model', 'stub-model']);
    expect(r.signal, `the CLI was killed by a signal; stderr:\n${r.stderr}`).toBeNull();
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/provider-error/);
    expect(r.stderr).not.toContain(API_KEY);
    await expectUntouched();
    await onlyAuditEntry();
  });

  // util-linux `script` gives the CLI a real pseudo-terminal, so the y/N prompt path runs.
  const hasScript = fs.existsSync('/usr/bin/script') && process.platform === 'linux';
  function runOnTerminal(args: string[], typed: string) {
    const command = [process.execPath, cli, ...args].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
    return new Promise<{ code: number; stdout: string; signal: string | null }>((resolve) => {
      const child = execFile(
        '/usr/bin/script',
        ['-qec', command, '/dev/null'],
        { env: { ...process.env, OPENAI_API_KEY: API_KEY, OPENAI_BASE_URL: server.baseURL, NO_COLOR: '1' }, timeout: 30_000 },
        (err, stdout) => {
          const failure = err as (Error & { code?: number | string; signal?: string | null }) | null;
          resolve({
            code: failure ? (typeof failure.code === 'number' ? failure.code : -1) : 0,
            stdout,
            signal: failure?.signal ?? null,
          });
        },
      );
      child.stdin?.end(typed);
    });
  }

  it.skipIf(!hasScript)('on a terminal: shows the diff, asks y/N, and "n" leaves the file alone (exit 3)', async () => {
    server.enqueue({ answer: fenced(FIXED) });
    const r = await runOnTerminal(['autofix', file, '--root', root, '--model', 'stub-model'], 'n\n');
    expect(r.signal).toBeNull();
    expect(r.code).toBe(3);
    expect(r.stdout).toContain('+  return a + b');
    expect(r.stdout).toContain('Apply this change to src/math.js? [y/N]');
    await expectUntouched();
    expect(await onlyAuditEntry()).toMatchObject({ status: 'rejected', approval: 'denied' });
  });

  it.skipIf(!hasScript)('on a terminal: "y" applies (exit 0)', async () => {
    server.enqueue({ answer: fenced(FIXED) });
    const r = await runOnTerminal(['autofix', file, '--root', root, '--model', 'stub-model'], 'y\n');
    expect(r.signal).toBeNull();
    expect(r.code).toBe(0);
    expect(await fsp.readFile(file, 'utf8')).toBe(FIXED);
    expect(await onlyAuditEntry()).toMatchObject({ status: 'applied', approval: 'approved' });
  });

  it('usage errors exit 2', async () => {
    const r = await run(['autofix']);
    expect(r.signal, `the CLI was killed by a signal; stderr:\n${r.stderr}`).toBeNull();
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('isolet autofix: autofix takes exactly one file\nsee isolet autofix --help\n');
    const cases: Array<[string[], string]> = [
      [['--timeout-ms', 'soon'], "--timeout-ms must be a whole number from 1 to 2147483647, got 'soon'"],
      [['--memory-limit-mb', '4'], '--memory-limit-mb must be a whole number from 8 to 8192, got 4'],
      [['--timout', '5'], '--timout is not a known option of isolet autofix; did you mean --timeout-ms?'],
    ];
    for (const [flags, message] of cases) {
      const bad = await run(['autofix', file, '--root', root, ...flags]);
      expect([bad.code, bad.stderr], flags.join(' ')).toEqual([2, `isolet autofix: ${message}\nsee isolet autofix --help\n`]);
    }
    expect(server.requests).toHaveLength(0);
  });

  it("--help shows isolet-core's defaults", async () => {
    const r = await run(['autofix', '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`sandbox time limit per run (default ${RUN_SANDBOX_DEFAULTS.timeoutMs})`);
    expect(r.stdout).toContain(`sandbox heap limit (default ${RUN_SANDBOX_DEFAULTS.memoryLimitMb})`);
    expect(r.stdout).toContain('how long to wait for the model (default 60000)');
  });
});
