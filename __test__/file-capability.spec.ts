import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { execFileSync } from 'node:child_process';
import { runSandbox, createFileReadCapability } from '..';

type CodedError = Error & { code?: string };
type ReadRequest = { path: unknown; encoding?: unknown };
type ReadFileHandler = (request: ReadRequest) => Promise<{ path: string; content: string }>;

// A real directory tree with every kind of trap in it:
//   <base>/outside.txt                 secret next to the allowed dir
//   <base>/allowed-evil/secret.txt     sibling sharing the allowed dir's name prefix
//   <base>/allowed/                    the capability's directory
//     notes.txt, sub/nested.txt, binary.bin, latin1.txt, empty.txt, exact.txt
//     link-in.txt  -> notes.txt            (symlink inside: allowed)
//     sub-link     -> sub                  (dir symlink inside: allowed, also with ..)
//     link-out.txt -> ../outside.txt       (relative symlink out)
//     link-out-abs -> <base>/outside.txt   (absolute symlink out)
//     link-in-abs  -> <base>/allowed/notes.txt (absolute symlink, even to inside)
//     escape       -> <base>/allowed-evil  (dir symlink out; also escape/../outside.txt)
//     zero         -> /dev/zero            (device through a symlink)
//     fifo                                 (FIFO: must not hang)
//     subdir/                              (directory)
//     huge.bin                             (sparse 1 GiB)
//     %2e%2e%2f                            (nothing: literal name must not decode)
let base: string;
let dir: string;
let readFile: ReadFileHandler;
const messages: string[] = [];

const NOTES = 'hello from notes\n';
const BINARY = Buffer.from(Array.from({ length: 256 }, (_, i) => i));

async function rejectionOf(promise: Promise<unknown>): Promise<CodedError> {
  try {
    await promise;
  } catch (err) {
    const e = err as CodedError;
    messages.push(String(e.message));
    return e;
  }
  throw new Error('expected the promise to reject');
}

async function expectRefused(request: ReadRequest, code: string): Promise<CodedError> {
  const err = await rejectionOf(readFile(request));
  expect(err).toBeInstanceOf(Error);
  expect(err.code).toBe(code);
  expect(err.message).toMatch(/^readFile: /);
  return err;
}

function creationError(fn: () => unknown): Error {
  try {
    fn();
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected createFileReadCapability to throw');
}

beforeAll(() => {
  base = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'isolet-fr-')));
  dir = path.join(base, 'allowed');
  fs.mkdirSync(path.join(dir, 'sub'), { recursive: true });
  fs.mkdirSync(path.join(dir, 'subdir'));
  fs.mkdirSync(path.join(base, 'allowed-evil'));
  fs.writeFileSync(path.join(base, 'outside.txt'), 'OUTSIDE SECRET');
  fs.writeFileSync(path.join(base, 'allowed-evil', 'secret.txt'), 'EVIL SECRET');
  fs.writeFileSync(path.join(dir, 'notes.txt'), NOTES);
  fs.writeFileSync(path.join(dir, 'sub', 'nested.txt'), 'nested');
  fs.writeFileSync(path.join(dir, 'binary.bin'), BINARY);
  fs.writeFileSync(path.join(dir, 'latin1.txt'), Buffer.from([0x63, 0x61, 0x66, 0xe9])); // "caf\xe9"
  fs.writeFileSync(path.join(dir, 'empty.txt'), '');
  fs.writeFileSync(path.join(dir, 'exact.txt'), '12345');
  fs.symlinkSync('notes.txt', path.join(dir, 'link-in.txt'));
  fs.symlinkSync('sub', path.join(dir, 'sub-link'));
  fs.symlinkSync('../outside.txt', path.join(dir, 'link-out.txt'));
  fs.symlinkSync(path.join(base, 'outside.txt'), path.join(dir, 'link-out-abs'));
  fs.symlinkSync(path.join(dir, 'notes.txt'), path.join(dir, 'link-in-abs'));
  fs.symlinkSync(path.join(base, 'allowed-evil'), path.join(dir, 'escape'));
  fs.symlinkSync('/dev/zero', path.join(dir, 'zero'));
  execFileSync('mkfifo', [path.join(dir, 'fifo')]);
  const huge = path.join(dir, 'huge.bin');
  fs.writeFileSync(huge, '');
  fs.truncateSync(huge, 1024 * 1024 * 1024); // sparse: no disk used, never read
  readFile = createFileReadCapability(dir) as unknown as ReadFileHandler;
});

afterAll(() => {
  if (base) fs.rmSync(base, { recursive: true, force: true });
  // Every refusal seen in this file, host side: none may name a host path.
  for (const message of messages) {
    expect(message).not.toContain(base);
    expect(message).not.toContain(os.tmpdir());
  }
});

describe('createFileReadCapability: creation', () => {
  it('returns a handler function', () => {
    expect(typeof readFile).toBe('function');
  });

  it.each([
    ['a missing directory', () => path.join(base, 'does-not-exist')],
    ['a regular file', () => path.join(base, 'outside.txt')],
    ['an empty string', () => ''],
    ['a number', () => 42],
    ['undefined', () => undefined],
    ['a string with a NUL byte', () => `${base}\0x`],
  ])('rejects %s as dir with SandboxValidationError', (_label, make) => {
    const err = creationError(() => (createFileReadCapability as (d: unknown) => unknown)(make()));
    expect(err.name).toBe('SandboxValidationError');
  });

  it.each([
    ['a negative maxBytes', { maxBytes: -1 }],
    ['a fractional maxBytes', { maxBytes: 1.5 }],
    ['a string maxBytes', { maxBytes: '10' }],
    ['an absurd maxBytes', { maxBytes: 2 ** 40 }],
    ['an unknown option', { maxbytes: 10 }],
    ['options that are not an object', 'big'],
  ])('rejects %s with SandboxValidationError', (_label, options) => {
    const err = creationError(() =>
      (createFileReadCapability as (d: string, o: unknown) => unknown)(dir, options),
    );
    expect(err.name).toBe('SandboxValidationError');
  });

  it('names the option given, and the nearest known one for a typo', () => {
    const make = (options: unknown) => creationError(() => (createFileReadCapability as (d: string, o: unknown) => unknown)(dir, options));
    expect(make({ maxbytes: 10 }).message).toBe('createFileReadCapability: maxbytes is not a known option of createFileReadCapability; did you mean maxBytes?');
    expect(make({ maxReadsInFlight: 0 }).message).toBe('createFileReadCapability: maxReadsInFlight must be a whole number from 1 to 1024, got 0');
  });

  it('accepts a relative dir and keeps the directory it named at creation', async () => {
    const cwd = process.cwd();
    process.chdir(base);
    let relative: ReadFileHandler;
    try {
      relative = createFileReadCapability('allowed') as unknown as ReadFileHandler;
    } finally {
      process.chdir(cwd);
    }
    expect(await relative({ path: 'notes.txt' })).toEqual({ path: 'notes.txt', content: NOTES });
  });
});

describe('readFile called from the host', () => {
  it('reads a text file as utf-8 and echoes the path as given', async () => {
    expect(await readFile({ path: 'notes.txt' })).toEqual({ path: 'notes.txt', content: NOTES });
    expect(await readFile({ path: './notes.txt', encoding: 'utf8' })).toEqual({
      path: './notes.txt',
      content: NOTES,
    });
    expect((await readFile({ path: 'sub/nested.txt' })).content).toBe('nested');
    expect((await readFile({ path: 'empty.txt' })).content).toBe('');
  });

  it('returns base64 for binary content, byte for byte', async () => {
    const file = await readFile({ path: 'binary.bin', encoding: 'base64' });
    expect(file.content).toBe(BINARY.toString('base64'));
    expect(Buffer.from(file.content, 'base64').equals(BINARY)).toBe(true);
    // every padding length
    for (const name of ['notes.txt', 'exact.txt', 'latin1.txt', 'empty.txt']) {
      const raw = fs.readFileSync(path.join(dir, name));
      expect((await readFile({ path: name, encoding: 'base64' })).content).toBe(raw.toString('base64'));
    }
  });

  it('decodes invalid utf-8 like Buffer#toString (U+FFFD)', async () => {
    const file = await readFile({ path: 'latin1.txt' });
    expect(file.content).toBe(fs.readFileSync(path.join(dir, 'latin1.txt')).toString('utf8'));
    expect(file.content).toBe('caf\uFFFD');
  });

  it('follows symlinks that stay inside the directory', async () => {
    expect((await readFile({ path: 'link-in.txt' })).content).toBe(NOTES);
    expect((await readFile({ path: 'sub-link/nested.txt' })).content).toBe('nested');
    expect((await readFile({ path: 'sub-link/../notes.txt' })).content).toBe(NOTES);
    expect((await readFile({ path: 'sub/../notes.txt' })).content).toBe(NOTES);
  });

  it.each([
    '../outside.txt',
    '../../../../../../../../etc/passwd',
    'sub/../../outside.txt',
    './../outside.txt',
    '../allowed-evil/secret.txt',
    '../allowed/notes.txt', // leaves, then comes back: still refused
    '..',
  ])('refuses %s (.. leaving the directory)', async (p) => {
    await expectRefused({ path: p }, 'ERR_ISOLET_PATH_OUTSIDE');
  });

  it('refuses absolute paths, even ones that point inside', async () => {
    await expectRefused({ path: path.join(base, 'outside.txt') }, 'ERR_ISOLET_PATH_OUTSIDE');
    await expectRefused({ path: path.join(dir, 'notes.txt') }, 'ERR_ISOLET_PATH_OUTSIDE');
    await expectRefused({ path: '/etc/passwd' }, 'ERR_ISOLET_PATH_OUTSIDE');
    await expectRefused({ path: '//etc/passwd' }, 'ERR_ISOLET_PATH_OUTSIDE');
  });

  it('refuses symlinks that lead out, and .. after a symlink that led out', async () => {
    await expectRefused({ path: 'link-out.txt' }, 'ERR_ISOLET_PATH_OUTSIDE');
    await expectRefused({ path: 'link-out-abs' }, 'ERR_ISOLET_PATH_OUTSIDE');
    await expectRefused({ path: 'escape/secret.txt' }, 'ERR_ISOLET_PATH_OUTSIDE');
    await expectRefused({ path: 'escape/../outside.txt' }, 'ERR_ISOLET_PATH_OUTSIDE');
    await expectRefused({ path: 'escape/../allowed/notes.txt' }, 'ERR_ISOLET_PATH_OUTSIDE');
  });

  it('refuses absolute symlinks even when they point inside', async () => {
    await expectRefused({ path: 'link-in-abs' }, 'ERR_ISOLET_PATH_OUTSIDE');
  });

  it('refuses a device reached through a symlink (/dev/zero)', async () => {
    await expectRefused({ path: 'zero' }, 'ERR_ISOLET_PATH_OUTSIDE');
  });

  it('refuses a device node inside the directory without opening it', async (ctx) => {
    const node = path.join(dir, 'null-device');
    try {
      execFileSync('mknod', [node, 'c', '1', '3'], { stdio: 'ignore' });
    } catch {
      ctx.skip(); // needs root (CAP_MKNOD)
      return;
    }
    try {
      await expectRefused({ path: 'null-device' }, 'ERR_ISOLET_NOT_A_FILE');
    } finally {
      fs.rmSync(node, { force: true });
    }
  });

  it('refuses a FIFO quickly instead of hanging', async () => {
    const started = Date.now();
    const err = await expectRefused({ path: 'fifo' }, 'ERR_ISOLET_NOT_A_FILE');
    expect(err.message).toContain('FIFO');
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('refuses a unix socket', async () => {
    const socketPath = path.join(dir, 'sock');
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(socketPath, resolve));
    try {
      await expectRefused({ path: 'sock' }, 'ERR_ISOLET_NOT_A_FILE');
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it.each(['subdir', 'sub/', '.', './', 'sub/..', 'sub-link'])('refuses the directory %s', async (p) => {
    await expectRefused({ path: p }, 'ERR_ISOLET_NOT_A_FILE');
  });

  it('refuses a sparse 1 GiB file quickly, without reading it', async () => {
    const before = process.memoryUsage().rss;
    const started = Date.now();
    const err = await expectRefused({ path: 'huge.bin' }, 'ERR_ISOLET_TOO_LARGE');
    expect(err.message).toContain(String(10 * 1024 * 1024));
    expect(Date.now() - started).toBeLessThan(2000);
    expect(process.memoryUsage().rss - before).toBeLessThan(200 * 1024 * 1024);
  });

  it('honours maxBytes exactly', async () => {
    const small = createFileReadCapability(dir, { maxBytes: 5 }) as unknown as ReadFileHandler;
    expect((await small({ path: 'exact.txt' })).content).toBe('12345');
    const err = await rejectionOf(small({ path: 'notes.txt' }));
    expect(err.code).toBe('ERR_ISOLET_TOO_LARGE');
    const none = createFileReadCapability(dir, { maxBytes: 0 }) as unknown as ReadFileHandler;
    expect((await none({ path: 'empty.txt' })).content).toBe('');
    expect((await rejectionOf(none({ path: 'exact.txt' }))).code).toBe('ERR_ISOLET_TOO_LARGE');
  });

  it.each([
    'missing.txt',
    'sub/missing.txt',
    'notes.txt/child', // a file used as a directory
    '%2e%2e%2foutside.txt', // URL encoding is not decoded
    '%2e%2e%2f%2e%2e%2fetc%2fpasswd',
    '..%2foutside.txt',
    '..\\outside.txt', // backslash is an ordinary character on POSIX
    'notes.txt ',
  ])('reports %s as not found', async (p) => {
    await expectRefused({ path: p }, 'ERR_ISOLET_NOT_FOUND');
  });

  it('refuses NUL bytes, empty and malformed paths', async () => {
    await expectRefused({ path: 'notes.txt\0' }, 'ERR_ISOLET_INVALID_PATH');
    await expectRefused({ path: 'notes.txt\0../../outside.txt' }, 'ERR_ISOLET_INVALID_PATH');
    await expectRefused({ path: '\0' }, 'ERR_ISOLET_INVALID_PATH');
    await expectRefused({ path: '' }, 'ERR_ISOLET_INVALID_PATH');
    await expectRefused({ path: 'a\uD800' }, 'ERR_ISOLET_INVALID_PATH');
    await expectRefused({ path: 'a/'.repeat(3000) + 'x' }, 'ERR_ISOLET_INVALID_PATH');
  });

  it.each([
    ['a number', 42],
    ['null', null],
    ['undefined', undefined],
    ['an object', { toString: () => 'notes.txt' }],
    ['an array', ['notes.txt']],
    ['a String object', new String('notes.txt')],
  ])('throws TypeError for a path that is %s', async (_label, p) => {
    const err = await rejectionOf(readFile({ path: p }));
    expect(err).toBeInstanceOf(TypeError);
    expect(err.message).toMatch(/^readFile: path must be a string/);
  });

  it.each([
    ['a bare string', 'notes.txt'],
    ['null', null],
    ['a number', 7],
    ['an array', [{ path: 'notes.txt' }]],
  ])('throws TypeError when the argument is %s', async (_label, arg) => {
    const err = await rejectionOf((readFile as (a: unknown) => Promise<unknown>)(arg));
    expect(err).toBeInstanceOf(TypeError);
    expect(err.message).toMatch(/^readFile: expected an object/);
  });

  it('throws TypeError for unknown properties and unknown encodings', async () => {
    const extra = await rejectionOf(
      (readFile as (a: unknown) => Promise<unknown>)({ path: 'notes.txt', flag: 'w' }),
    );
    expect(extra).toBeInstanceOf(TypeError);
    expect(extra.message).toContain('unknown property "flag"');
    for (const encoding of ['hex', 'binary', 5, null]) {
      const err = await rejectionOf(readFile({ path: 'notes.txt', encoding }));
      expect(err).toBeInstanceOf(TypeError);
      expect(err.message).toContain('encoding');
    }
  });

  it('serves many concurrent reads', async () => {
    const results = await Promise.all(
      Array.from({ length: 64 }, (_, i) =>
        readFile({ path: i % 2 ? 'notes.txt' : 'sub/nested.txt' }),
      ),
    );
    results.forEach((r, i) => expect(r.content).toBe(i % 2 ? NOTES : 'nested'));
  });

  it('keeps reading the directory opened at creation after its path is renamed', async () => {
    const movable = path.join(base, 'movable');
    fs.mkdirSync(movable);
    fs.writeFileSync(path.join(movable, 'a.txt'), 'original');
    const cap = createFileReadCapability(movable) as unknown as ReadFileHandler;
    fs.renameSync(movable, path.join(base, 'moved'));
    fs.mkdirSync(movable);
    fs.writeFileSync(path.join(movable, 'a.txt'), 'impostor');
    expect((await cap({ path: 'a.txt' })).content).toBe('original');
  });

  it('never names a host path in any refusal', async () => {
    const attempts = [
      '../outside.txt',
      path.join(base, 'outside.txt'),
      'link-out.txt',
      'escape/../outside.txt',
      'fifo',
      'huge.bin',
      'subdir',
      'missing.txt',
      'zero',
    ];
    for (const p of attempts) {
      const err = await rejectionOf(readFile({ path: p }));
      expect(err.message).not.toContain(base);
      expect(err.message).not.toContain(p.startsWith('/') ? p : base);
      expect(JSON.stringify({ ...err, message: err.message })).not.toContain(base);
    }
  });
});

describe('readFile inside runSandbox', () => {
  it('runs the seed example verbatim', async () => {
    const result = await runSandbox(
      `const file = await readFile({ path: "notes.txt" }); return file.content;`,
      { capabilities: { readFile: createFileReadCapability(dir) } },
    );
    expect(result.success).toBe(true);
    expect((result as { output: unknown }).output).toBe(NOTES);
  });

  it('returns { path, content } into the isolate, and base64 works there too', async () => {
    const result = await runSandbox(
      `const a = await readFile({ path: "sub/../notes.txt" });
       const b = await readFile({ path: "binary.bin", encoding: "base64" });
       return { path: a.path, content: a.content, b64: b.content, keys: Object.keys(a).sort() };`,
      { capabilities: { readFile } },
    );
    expect(result.success).toBe(true);
    expect((result as { output: unknown }).output).toEqual({
      path: 'sub/../notes.txt',
      content: NOTES,
      b64: BINARY.toString('base64'),
      keys: ['content', 'path'],
    });
  });

  it('turns refusals into catchable Errors with the same name and message', async () => {
    const result = await runSandbox(
      `const attempts = ["../outside.txt", "link-out.txt", "escape/../outside.txt", "/etc/passwd",
                         "fifo", "zero", "subdir", "huge.bin", "nope.txt", "%2e%2e%2foutside.txt",
                         "notes.txt\\u0000"];
       const out = [];
       for (const p of attempts) {
         try { await readFile({ path: p }); out.push({ p, ok: true }); }
         catch (e) { out.push({ p, ok: false, isError: e instanceof Error, name: e.name, message: e.message }); }
       }
       try { await readFile({ path: 42 }); } catch (e) { out.push({ p: 42, name: e.name, message: e.message, isError: e instanceof Error }); }
       return out;`,
      { capabilities: { readFile } },
    );
    expect(result.success).toBe(true);
    const out = (result as { output: Array<Record<string, unknown>> }).output;
    expect(out).toHaveLength(12);
    for (const entry of out.slice(0, 11)) {
      expect(entry.ok).toBe(false);
      expect(entry.isError).toBe(true);
      expect(entry.name).toBe('Error');
      expect(String(entry.message)).toMatch(/^readFile: /);
      expect(String(entry.message)).not.toContain(base);
    }
    expect(out[0].message).toBe('readFile: path leads outside the allowed directory');
    expect(out[4].message).toBe('readFile: not a regular file (FIFO)');
    expect(out[8].message).toBe('readFile: no such file in the allowed directory');
    expect(out[11]).toMatchObject({ name: 'TypeError', isError: true });
    expect(String(out[11].message)).toMatch(/^readFile: path must be a string/);
  });

  it('fails the run with the refusal when the sandbox does not catch it', async () => {
    const result = await runSandbox(
      `const file = await readFile({ path: "../outside.txt" }); return file.content;`,
      { capabilities: { readFile } },
    );
    expect(result.success).toBe(false);
    const error = (result as { error: { name: string; message: string; stack?: string } }).error;
    expect(error.message).toContain('readFile: path leads outside the allowed directory');
    expect(error.message).not.toContain('OUTSIDE SECRET');
    expect(JSON.stringify(result)).not.toContain(base);
    expect(JSON.stringify(result)).not.toContain('OUTSIDE SECRET');
  });

  it('does not hang the run on a FIFO', async () => {
    const started = Date.now();
    const result = await runSandbox(
      `try { await readFile({ path: "fifo" }); return "read"; } catch (e) { return e.message; }`,
      { capabilities: { readFile }, timeoutMs: 3000 },
    );
    expect(result.success).toBe(true);
    expect((result as { output: unknown }).output).toBe('readFile: not a regular file (FIFO)');
    expect(Date.now() - started).toBeLessThan(2500);
  });
});
