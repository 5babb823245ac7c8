// The unified diff autoFix shows for review, computed by jsdiff: minimal hunks for a large
// file with a few changes, bounded work for an adversarial pair (the suggestion is the
// model's output), and every diff is a patch that applies back (jsdiff's applyPatch, exact
// context, no line-ending conversion) to the new text. The autoFix cases use a real chat
// server on 127.0.0.1, the real `openai` client, real temp files and the real sandbox.

import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { execFile } from 'node:child_process';
import { applyPatch, parsePatch } from 'diff';

import { autoFix, unifiedDiff, AutoFixOptionsError, type AutoFixResult } from '../lib/autofix';
import { startChatServer, type ChatServer } from './support/chat-server';

const API_KEY = 'sk-test-diff-0000';
const REPO = path.join(__dirname, '..');
const AUTOFIX = path.join(REPO, 'lib', 'autofix');

/** Runs `script` in a child `node`, killed after `timeoutMs`: a hang is seen from outside. */
function runChild(script: string, timeoutMs: number) {
  return new Promise<{ code: number | null; timedOut: boolean; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      ['-e', script],
      { cwd: REPO, timeout: timeoutMs, killSignal: 'SIGKILL', maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) => {
        const failure = err as (Error & { code?: number | string; killed?: boolean }) | null;
        resolve({
          code: failure ? (typeof failure.code === 'number' ? failure.code : null) : 0,
          timedOut: failure?.killed === true,
          stdout,
          stderr,
        });
      },
    );
  });
}

/** Applies `patch` to `before` byte for byte: exact context, CRLF never papered over. */
function applyExactly(before: string, patch: string): string | false {
  return applyPatch(before, patch, { fuzzFactor: 0, autoConvertLineEndings: false });
}

function hunkHeaders(diff: string): string[] {
  return diff.split('\n').filter((l) => l.startsWith('@@'));
}

/** `count` numbered lines `${prefix} <i>;` as a script that runs in the sandbox. */
function numberedLines(count: number, prefix = 'var v') {
  return Array.from({ length: count }, (_, i) => `${prefix}${i} = ${i};\n`);
}

/**
 * `count` edits, each after 7 unchanged lines, so the minimal diff has one hunk per edit.
 * `change`: a line replaced by another (2 edited lines; the texts differ in their lines).
 * `swap`: two neighbours trade places (2 edited lines; both texts hold the same lines).
 */
function spacedEdits(count: number, kind: 'change' | 'swap'): [string, string] {
  const before: string[] = [];
  const after: string[] = [];
  for (let i = 0; i < count; i++) {
    for (let g = 0; g < 7; g++) {
      before.push(`same ${i}.${g}\n`);
      after.push(`same ${i}.${g}\n`);
    }
    if (kind === 'change') {
      before.push(`old ${i}\n`);
      after.push(`new ${i}\n`);
    } else {
      before.push(`p ${i}\n`, `q ${i}\n`);
      after.push(`q ${i}\n`, `p ${i}\n`);
    }
  }
  before.push('end\n');
  after.push('end\n');
  return [before.join(''), after.join('')];
}

describe('unifiedDiff (jsdiff)', () => {
  it('a 5,000-line file with 3 changed lines: three 7-line hunks that apply back', () => {
    const lines = numberedLines(5000);
    const fixed = lines.slice();
    fixed[10] = 'var v10 = "ten";\n';
    fixed[2500] = 'var v2500 = "half";\n';
    fixed[4990] = 'var v4990 = "near the end";\n';
    const before = lines.join('');
    const after = fixed.join('');

    const d = unifiedDiff(before, after, 'big.js');

    expect(hunkHeaders(d)).toEqual(['@@ -8,7 +8,7 @@', '@@ -2498,7 +2498,7 @@', '@@ -4988,7 +4988,7 @@']);
    expect(d.split('\n').filter((l) => /^[-+](?![-+]{2} [ab]\/)/.test(l))).toEqual([
      '-var v10 = 10;',
      '+var v10 = "ten";',
      '-var v2500 = 2500;',
      '+var v2500 = "half";',
      '-var v4990 = 4990;',
      '+var v4990 = "near the end";',
    ]);
    // 2 file headers + 3 x (hunk header, 3 + 3 context lines, - and +): the old LCS replaced
    // ~4,980 lines as one block here (its table would have needed 24.8M cells, over its 4M cap).
    expect(d.split('\n').length - 1).toBe(2 + 3 * 9);
    expect(applyExactly(before, d)).toBe(after);
    expect(parsePatch(d)[0].hunks).toHaveLength(3);
  });

  it('the edit bound is 1,000 edited lines: at it the diff is minimal, past it one block-replace hunk; all apply back', () => {
    for (const kind of ['change', 'swap'] as const) {
      const linesPerEdit = kind === 'change' ? 8 : 9;
      // 500 edits of 2 lines (one removed, one added) = 1,000 edited lines: one hunk per edit.
      const [atBefore, atAfter] = spacedEdits(500, kind);
      const at = unifiedDiff(atBefore, atAfter, 'x');
      expect(hunkHeaders(at), kind).toHaveLength(500);
      expect(hunkHeaders(at)[0], kind).toBe(kind === 'change' ? '@@ -5,7 +5,7 @@' : '@@ -5,8 +5,8 @@');
      expect(applyExactly(atBefore, at), kind).toBe(atAfter);

      // 501 edits = 1,002 edited lines: the whole differing block is replaced. (Changed lines
      // are caught by counting them up front; swapped ones only by jsdiff's maxEditLength.)
      const [pastBefore, pastAfter] = spacedEdits(501, kind);
      const past = unifiedDiff(pastBefore, pastAfter, 'x');
      const total = 501 * linesPerEdit + 1;
      // Common first 7 lines and last line: 3 lines of context before, 1 after; old lines 8..total-1 replaced.
      expect(hunkHeaders(past), kind).toEqual([`@@ -5,${total - 4} +5,${total - 4} @@`]);
      expect(past.split('\n').filter((l) => l.startsWith('-') && !l.startsWith('---')), kind).toHaveLength(total - 8);
      expect(applyExactly(pastBefore, past), kind).toBe(pastAfter);
    }
  });

  it('adversarial pairs of 100,000 lines finish, each with one block-replace hunk that applies back', async () => {
    // Unbounded, Myers on the first pair alone explores ~(200,000^2)/2 diagonals: hours of
    // synchronous work, so the pairs run in a child process judged from outside.
    const out = await runChild(
      `
      const { unifiedDiff } = require(${JSON.stringify(AUTOFIX)});
      const { applyPatch } = require(require.resolve('diff', { paths: [${JSON.stringify(REPO)}] }));
      const n = 100000;
      const seq = (p) => Array.from({ length: n }, (_, i) => p + i + '\\n').join('');
      const pairs = [
        [seq('a'), seq('b')],
        // Long runs of equal lines on many diagonals at once.
        [('x\\n'.repeat(100) + 'a\\n').repeat(n / 100), ('x\\n'.repeat(100) + 'b\\n').repeat(n / 100)],
        ['a\\nb\\n'.repeat(n / 2), 'b\\na\\nc\\n'.repeat(n / 2)],
        ['x\\n'.repeat(n), 'x\\ny\\n'.repeat(n / 2)],
        // The same lines in reverse order: nothing to count up front, the longest edit there is.
        [seq('l'), seq('l').split(/(?<=\\n)/).reverse().join('')],
      ];
      const results = pairs.map(([before, after]) => {
        const d = unifiedDiff(before, after, 'x');
        return {
          hunks: d.split('\\n').filter((l) => l.startsWith('@@')).length,
          appliesBack: applyPatch(before, d, { fuzzFactor: 0, autoConvertLineEndings: false }) === after,
        };
      });
      process.stdout.write(JSON.stringify(results));
      `,
      60_000,
    );
    expect(out.timedOut, 'unifiedDiff did not finish within 60 s').toBe(false);
    expect(out.code, out.stderr).toBe(0);
    expect(JSON.parse(out.stdout)).toEqual(Array(5).fill({ hunks: 1, appliesBack: true }));
  }, 90_000);

  it('CRLF lines keep their \\r, so the patch applies back byte for byte', () => {
    const before = 'a\r\nb\r\nc\r\n';
    const after = 'a\r\nB\r\nc\r\n';
    const d = unifiedDiff(before, after, 'x');
    expect(d).toBe('--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\r\n-b\r\n+B\r\n c\r\n');
    expect(applyExactly(before, d)).toBe(after);
    // A line-ending-only change is a change of every line, and says so.
    const lf = unifiedDiff(before, 'a\nb\nc\n', 'x');
    expect(hunkHeaders(lf)).toEqual(['@@ -1,3 +1,3 @@']);
    expect(applyExactly(before, lf)).toBe('a\nb\nc\n');
  });

  it('rejects arguments of the wrong type with AutoFixOptionsError naming them', () => {
    const call = (...args: unknown[]) => () => (unifiedDiff as (...a: unknown[]) => string)(...args);
    for (const args of [[1, 'a', 'x'], ['a', null, 'x'], ['a', 'b', undefined]]) {
      expect(call(...args)).toThrow(AutoFixOptionsError);
      expect(call(...args)).toThrow(/before, after and name must be strings/);
    }
    for (const context of [-1, 1.5, Number.NaN, Infinity, '3']) {
      expect(call('a\n', 'b\n', 'x', context)).toThrow(/context must be a whole number >= 0/);
    }
    try {
      call(1, 2, 3)();
    } catch (err) {
      expect((err as { code?: string }).code).toBe('ERR_ISOLET_AUTOFIX_OPTIONS');
    }
    expect(unifiedDiff('a\nb\nc\n', 'a\nB\nc\n', 'x', 0)).toBe('--- a/x\n+++ b/x\n@@ -2 +2 @@\n-b\n+B\n');
  });
});

describe('autoFix shows the jsdiff diff', () => {
  let server: ChatServer;
  let root: string;

  beforeAll(async () => {
    server = await startChatServer();
  });
  afterAll(async () => {
    await server.close();
  });
  beforeEach(async () => {
    server.reset();
    root = await fsp.mkdtemp(path.join(os.tmpdir(), 'isolet-autofix-diff-'));
    return () => fsp.rm(root, { recursive: true, force: true });
  });

  const fenced = (code: string) => `Here is the file:\n\n\`\`\`js\n${code}\`\`\`\n`;

  it('a 5,000-line file with 3 fixed lines: result.diff is those 3 hunks and applies back to the file as written', async () => {
    const lines = numberedLines(5000);
    const fixed = lines.slice();
    fixed[100] = 'var v100 = -100;\n';
    fixed[2000] = 'var v2000 = -2000;\n';
    fixed[3999] = 'var v3999 = -3999;\n';
    const original = lines.join('');
    await fsp.writeFile(path.join(root, 'big.js'), original);
    server.enqueue({ answer: fenced(fixed.join('')) });

    const r = await autoFix({
      filePath: 'big.js',
      root,
      instruction: 'three values have the wrong sign',
      test: 'if (v100 !== -100 || v2000 !== -2000 || v3999 !== -3999) throw new Error("signs")',
      apiKey: API_KEY,
      baseURL: server.baseURL,
      model: 'stub-model',
      autoApprove: true,
    });

    expect(r.status, r.message).toBe('applied');
    if (r.status !== 'applied') throw new Error('unreachable');
    expect(hunkHeaders(r.diff)).toEqual(['@@ -98,7 +98,7 @@', '@@ -1998,7 +1998,7 @@', '@@ -3997,7 +3997,7 @@']);
    const written = await fsp.readFile(path.join(root, 'big.js'), 'utf8');
    expect(written).toBe(fixed.join(''));
    expect(applyExactly(original, r.diff)).toBe(written);
  });

  it('a suggestion that rewrites every line of a 40,000-line file: needs-approval promptly, one block hunk, file untouched', async () => {
    const original = numberedLines(40_000, 'var a').join('');
    const rewrite = numberedLines(40_000, 'var b').join('');
    await fsp.writeFile(path.join(root, 'wide.js'), original);
    server.enqueue({ answer: fenced(rewrite) });

    // In a child process, judged from outside: an unbounded diff of this pair would block for many minutes.
    const options = {
      filePath: 'wide.js',
      root,
      instruction: 'rename everything',
      apiKey: API_KEY,
      baseURL: server.baseURL,
      model: 'stub-model',
    };
    const out = await runChild(
      `require(${JSON.stringify(AUTOFIX)}).autoFix(${JSON.stringify(options)})
        .then((r) => process.stdout.write(JSON.stringify(r)), (e) => { console.error(e); process.exit(1); });`,
      60_000,
    );
    expect(out.timedOut, 'autoFix did not finish within 60 s').toBe(false);
    expect(out.code, out.stderr).toBe(0);
    const r = JSON.parse(out.stdout) as AutoFixResult;
    expect(r.status, r.message).toBe('needs-approval');
    if (r.status !== 'needs-approval') throw new Error('unreachable');
    expect(hunkHeaders(r.diff)).toEqual(['@@ -1,40000 +1,40000 @@']);
    expect(applyExactly(original, r.diff)).toBe(r.suggestion);
    expect(r.suggestion).toBe(rewrite);
    expect(await fsp.readFile(path.join(root, 'wide.js'), 'utf8')).toBe(original);
  }, 90_000);
});
