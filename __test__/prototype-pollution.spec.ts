// Issue 18: options are read as own properties only. Another library of the application
// polluting Object.prototype (or Array.prototype), say through a merge of untrusted
// JSON, must not grant a run a host function, a data value, a tool, a wider limit, an
// unreviewed write or a file. Each attack pollutes one key, runs through the public API,
// and restores the prototype before the next.

import { afterEach, beforeAll, afterAll, describe, expect, it } from 'vitest';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as http from 'node:http';
import * as v8 from 'node:v8';
import { spawn } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import {
  runSandbox,
  SandboxEngine,
  SandboxOOMError,
  SandboxValidationError,
  createFetchCapability,
  createFileReadCapability,
  autoFix,
  DEFAULT_BRIDGE_LIMITS,
  type SandboxResult,
} from '..';
import { IsoletExecutor } from '../lib/codemode';

const BIN = path.resolve(__dirname, '..', 'bin', 'isolet.js');
// 96 MB kept alive: over every default limit below.
const ALLOC_96MB = 'const a = []; for (let i = 0; i < 96; i++) a.push(new Array(128 * 1024).fill(i + 0.5)); a.length';
const ALLOC_96MB_BODY = ALLOC_96MB.replace(/a\.length$/, 'return a.length;');

type Proto = Record<string, unknown>;
const OBJECT_PROTO = Object.prototype as unknown as Proto;
const ARRAY_PROTO = Array.prototype as unknown as Proto;

/** Runs `fn` with `proto[key] = value` as an attacker would set it, then removes it. */
async function polluted<T>(proto: Proto, key: string, value: unknown, fn: () => Promise<T>): Promise<T> {
  proto[key] = value;
  try {
    return await fn();
  } finally {
    delete proto[key];
  }
}

afterEach(() => {
  // Every test restored what it polluted.
  expect(Object.keys(Object.prototype)).toEqual([]);
  expect(Object.keys(Array.prototype)).toEqual([]);
});

function output(r: SandboxResult): unknown {
  if (!r.success) throw new Error(`run failed: ${r.error.name}: ${r.error.message}`);
  return r.output;
}

describe.each(['thread', 'process'] as const)('runSandbox (%s isolation)', (isolation) => {
  it('Object.prototype.capabilities gives the code no function and keeps script mode', async () => {
    let called = false;
    const evil = () => {
      called = true;
      return 'pwned';
    };
    const r = await polluted(OBJECT_PROTO, 'capabilities', { evil }, () =>
      runSandbox('typeof evil === "function" ? evil() : "no evil"', { isolation }),
    );
    // Script mode: the completion value is the output (an async body would give undefined).
    expect(output(r)).toBe('no evil');
    expect(called).toBe(false);
  });

  it('Object.prototype.capabilities reaches no run without an options object either', async () => {
    const r = await polluted(OBJECT_PROTO, 'capabilities', { evil: () => 'pwned' }, () => runSandbox('typeof evil'));
    expect(output(r)).toBe('undefined');
  });

  it('an aborted Object.prototype.signal aborts nothing', async () => {
    const aborted = AbortSignal.abort();
    const r = await polluted(OBJECT_PROTO, 'signal', aborted, () => runSandbox('6 * 7', { isolation }));
    expect(output(r)).toBe(42);
  });

  it('Object.prototype.memoryLimitMb and timeoutMs widen no limit', async () => {
    const r = await polluted(OBJECT_PROTO, 'memoryLimitMb', 1024, () => runSandbox(ALLOC_96MB, { isolation }));
    expect(r.success).toBe(false);
    expect(!r.success && r.error).toBeInstanceOf(SandboxOOMError);
  });

  it('Object.prototype.language turns no run into TypeScript', async () => {
    const r = await polluted(OBJECT_PROTO, 'language', 'typescript', () => runSandbox('const x: number = 1; x', { isolation }));
    expect(r.success).toBe(false);
    expect(!r.success && r.error).toBeInstanceOf(SandboxValidationError);
  });

  it('Object.prototype.isolation moves no run to another mode', async () => {
    // An unknown mode would be refused if it were read; read as own, the run just runs.
    const r = await polluted(OBJECT_PROTO, 'isolation', 'vm', () => runSandbox('1 + 1', { isolation }));
    expect(output(r)).toBe(2);
  });

  it('Object.prototype.thrownName, stack and line forge no detail of an error', async () => {
    const tooBig = await polluted(OBJECT_PROTO, 'thrownName', 'Forged', () =>
      polluted(OBJECT_PROTO, 'stack', 'forged stack', () => runSandbox("'x'.repeat(2000)", { isolation, maxOutputBytes: 1024 } as never)),
    );
    expect(tooBig.success).toBe(false);
    expect(!tooBig.success && tooBig.error.name).toBe('SandboxRuntimeError');
    expect(!tooBig.success && (tooBig.error as { thrown?: unknown }).thrown).toBeUndefined();
    expect(!tooBig.success && tooBig.error.stack).not.toContain('forged');
    const invalid = await polluted(OBJECT_PROTO, 'line', 7, () => runSandbox(42 as unknown as string, { isolation }));
    expect(!invalid.success && invalid.error).toBeInstanceOf(SandboxValidationError);
    expect(!invalid.success && (invalid.error as { line?: number }).line).toBeUndefined();
  });

  it('Object.prototype.execute and description make no namespace a tool', async () => {
    let hijacked = false;
    const r = await polluted(OBJECT_PROTO, 'execute', () => ((hijacked = true), 'pwned'), () =>
      polluted(OBJECT_PROTO, 'description', 'a tool', () =>
        runSandbox('return [typeof ns, typeof ns.member, await ns.member()]', { isolation, capabilities: { ns: { member: () => 'mine' } } }),
      ),
    );
    expect(output(r)).toEqual(['object', 'function', 'mine']);
    expect(hijacked).toBe(false);
  });
});

describe.each(['thread', 'process'] as const)('SandboxEngine (%s isolation)', (isolation) => {
  let engine: SandboxEngine;
  const secret = () => 'the secret tool ran';

  beforeAll(async () => {
    engine = new SandboxEngine({ isolation, memoryMb: 64, maxConcurrentIsolates: 2, warmPoolSize: 1, tools: { secret } });
    await engine.init();
  });

  afterAll(async () => {
    await engine.shutdown();
  });

  /** Runs a request; data requests are refused, so an answer can only come from `data` given up front. */
  async function run(request: Record<string, unknown>) {
    const session = engine.submit({ code: 'return 1', ...request } as never);
    const keys: string[] = [];
    for await (const event of session as AsyncIterable<Record<string, any>>) {
      if (event.type === 'dataRequest') {
        keys.push(event.key);
        session.reject(event.id, 'no such data');
      }
      if (event.type === 'result') return { ok: true as const, data: event.data, keys, requestId: event.requestId };
      if (event.type === 'error') return { ok: false as const, error: event.error, keys, requestId: event.requestId };
    }
    throw new Error('session ended without a result');
  }

  const READ_API_KEY = 'try { return await data.apiKey; } catch (e) { return "refused: " + e.message; }';

  it('Object.prototype.data answers no data request', async () => {
    const r = await polluted(OBJECT_PROTO, 'data', { apiKey: 'X' }, () => run({ code: READ_API_KEY }));
    expect(r).toMatchObject({ ok: true, keys: ['apiKey'] });
    expect(r.ok && r.data).toMatch(/^refused: .*no such data/);
  });

  it('Object.prototype.dataValues (the run plan field) answers no data request', async () => {
    const r = await polluted(OBJECT_PROTO, 'dataValues', { apiKey: v8.serialize('X') }, () => run({ code: READ_API_KEY }));
    expect(r).toMatchObject({ ok: true, keys: ['apiKey'] });
    expect(r.ok && r.data).toMatch(/^refused: .*no such data/);
  });

  it('Object.prototype.tools gives a request no tool', async () => {
    let called = false;
    const evil = () => {
      called = true;
      return 'pwned';
    };
    const r = await polluted(OBJECT_PROTO, 'tools', { evil }, () => run({ code: 'return typeof evil' }));
    expect(r).toMatchObject({ ok: true, data: 'undefined' });
    expect(called).toBe(false);
  });

  it('Object.prototype.tools gives a new engine no tool', async () => {
    const fresh = await polluted(OBJECT_PROTO, 'tools', { evil: () => 'pwned' }, async () => {
      const e = new SandboxEngine({ isolation, memoryMb: 64, maxConcurrentIsolates: 1, warmPoolSize: 0 });
      await e.init();
      return e;
    });
    try {
      const end = await fresh.submit({ code: 'return typeof evil', toolPolicy: { allowedTools: [] } } as never).done;
      expect(end).toMatchObject({ type: 'result', data: 'undefined' });
    } finally {
      await fresh.shutdown();
    }
  });

  it('Object.prototype.toolPolicy and allowedTools allow no engine tool', async () => {
    const policy = await polluted(OBJECT_PROTO, 'toolPolicy', { allowedTools: ['secret'] }, () => run({ code: 'return typeof secret' }));
    expect(policy).toMatchObject({ ok: true, data: 'undefined' });
    const allowed = await polluted(OBJECT_PROTO, 'allowedTools', ['secret'], () =>
      run({ code: 'return typeof secret', toolPolicy: {} }),
    );
    expect(allowed).toMatchObject({ ok: true, data: 'undefined' });
  });

  it('Array.prototype[0] fills no hole of allowedTools', async () => {
    const r = await polluted(ARRAY_PROTO, '0', 'secret', () =>
      run({ code: 'return typeof secret', toolPolicy: { allowedTools: new Array(1) } }),
    );
    // A hole is no tool name: the request is refused or runs without the tool.
    if (r.ok) expect(r.data).toBe('undefined');
    else expect(r.error).toBeInstanceOf(SandboxValidationError);
  });

  it('Object.prototype.isolateLimits and memoryMb widen no limit', async () => {
    const limits = await polluted(OBJECT_PROTO, 'isolateLimits', { memoryMb: 1024 }, () => run({ code: ALLOC_96MB_BODY }));
    expect(limits.ok).toBe(false);
    expect(!limits.ok && limits.error).toBeInstanceOf(SandboxOOMError);
    const memory = await polluted(OBJECT_PROTO, 'memoryMb', 1024, () => run({ code: ALLOC_96MB_BODY, isolateLimits: {} }));
    expect(memory.ok).toBe(false);
    expect(!memory.ok && memory.error).toBeInstanceOf(SandboxOOMError);
  });

  it('Object.prototype.bridgeLimits and maxMessages widen no bridge limit', async () => {
    const { maxMessages } = DEFAULT_BRIDGE_LIMITS;
    const code = `for (let i = 0; i < ${maxMessages}; i++) await secret();
      try { await secret(); return 'one call too many went through'; } catch (e) { return e.message; }`;
    const toolPolicy = { allowedTools: ['secret'] };
    const bridge = await polluted(OBJECT_PROTO, 'bridgeLimits', { maxMessages: 10 * maxMessages }, () => run({ code, toolPolicy }));
    expect(bridge).toMatchObject({ ok: true, data: `Bridge message limit of ${maxMessages} per execution exceeded` });
    const messages = await polluted(OBJECT_PROTO, 'maxMessages', 10 * maxMessages, () => run({ code, toolPolicy, bridgeLimits: {} }));
    expect(messages).toMatchObject({ ok: true, data: `Bridge message limit of ${maxMessages} per execution exceeded` });
  });

  it('Object.prototype.requestId names no session', async () => {
    const r = await polluted(OBJECT_PROTO, 'requestId', 'forged', () => run({}));
    expect(r.ok).toBe(true);
    expect(r.requestId).not.toBe('forged');
  });

  it('Object.prototype.language turns no request into TypeScript', async () => {
    const r = await polluted(OBJECT_PROTO, 'language', 'typescript', () => run({ code: 'const x: number = 1; return x' }));
    expect(r.ok).toBe(false);
    expect(!r.ok && r.error).toBeInstanceOf(SandboxValidationError);
  });
});

describe('SandboxEngine config and deps', () => {
  it('Object.prototype.defaultIsolateLimits widens no engine limit, and deps.clock is own only', async () => {
    const engine = await polluted(OBJECT_PROTO, 'defaultIsolateLimits', { memoryMb: 1024 }, async () =>
      polluted(OBJECT_PROTO, 'clock', () => 0, async () => {
        const e = new SandboxEngine({ isolation: 'thread', memoryMb: 64, maxConcurrentIsolates: 1, warmPoolSize: 0 }, {});
        await e.init();
        return e;
      }),
    );
    try {
      const end = await engine.submit({ code: ALLOC_96MB_BODY } as never).done;
      expect(end.type).toBe('error');
      expect(end.type === 'error' && end.error).toBeInstanceOf(SandboxOOMError);
      // Event times come from Date.now, not from the polluted clock.
      expect(end.at).toBeGreaterThan(0);
    } finally {
      await engine.shutdown();
    }
  });
});

describe('codemode executor', () => {
  it('Object.prototype.fns, prelude and defaultIsolateLimits reach no provider or limit', async () => {
    let called = false;
    const executor = await polluted(OBJECT_PROTO, 'defaultIsolateLimits', { memoryMb: 1024 }, async () => new IsoletExecutor({ timeoutMs: 5000, memoryMb: 64 }));
    try {
      const r = await polluted(OBJECT_PROTO, 'fns', { evil: () => ((called = true), 'pwned') }, () =>
        polluted(OBJECT_PROTO, 'prelude', 'globalThis.injected = true;', () =>
          executor.execute('async () => [typeof codemode.evil, typeof globalThis.injected]', [{ name: 'codemode' } as never]),
        ),
      );
      expect(r).toMatchObject({ result: ['undefined', 'undefined'] });
      expect(called).toBe(false);
      const big = await executor.execute(`async () => { ${ALLOC_96MB_BODY} }`, {});
      expect(big.result).toBeUndefined();
      expect(big.error).toMatch(/SandboxOOMError/);
    } finally {
      await executor.dispose();
    }
  });
});

describe('capabilities', () => {
  let dir: string;
  let server: http.Server;
  let origin: string;
  const seen: Array<{ method?: string; auth?: string }> = [];

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'isolet-pollution-'));
    fs.writeFileSync(path.join(dir, 'secret.txt'), 'host secret');
    server = http.createServer((req, res) => {
      seen.push({ method: req.method, auth: req.headers.authorization });
      res.end('0123456789');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await new Promise((r) => server.close(r));
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('readFile: Object.prototype.path and maxBytes choose no file and lift no cap', async () => {
    const readFile = await polluted(OBJECT_PROTO, 'maxBytes', 1, async () => createFileReadCapability(dir));
    const r = await polluted(OBJECT_PROTO, 'path', 'secret.txt', () =>
      runSandbox('try { return (await readFile({})).content } catch (e) { return "refused: " + e.message }', {
        isolation: 'thread',
        capabilities: { readFile },
      }),
    );
    expect(output(r)).toMatch(/^refused: readFile: path must be a string/);
    // maxBytes was not set to 1: the whole file is read.
    const whole = await runSandbox('return (await readFile({ path: "secret.txt" })).content', { isolation: 'thread', capabilities: { readFile } });
    expect(output(whole)).toBe('host secret');
  });

  it('fetch: Object.prototype.method, headers and maxResponseBytes shape no request', async () => {
    const fetch = await polluted(OBJECT_PROTO, 'maxResponseBytes', 4, async () => createFetchCapability({ allowedOrigins: [origin] }));
    seen.length = 0;
    const r = await polluted(OBJECT_PROTO, 'method', 'DELETE', () =>
      polluted(OBJECT_PROTO, 'headers', { authorization: 'Bearer host-secret' }, () =>
        runSandbox(`return (await fetch({ url: ${JSON.stringify(origin + '/x')} })).body`, { isolation: 'thread', capabilities: { fetch } }),
      ),
    );
    expect(output(r)).toBe('0123456789');
    expect(seen).toEqual([{ method: 'GET', auth: undefined }]);
  });
});

describe('autoFix', () => {
  it('Object.prototype.autoApprove writes nothing unreviewed', async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'isolet-pollution-fix-'));
    const file = path.join(root, 'a.js');
    fs.writeFileSync(file, 'const x = 1 +;\n');
    try {
      const provider = { name: 'stub', complete: async () => '```js\nconst x = 1 + 1;\n```' };
      const r = await polluted(OBJECT_PROTO, 'autoApprove', true, () =>
        autoFix({ filePath: 'a.js', root, instruction: 'fix the syntax error', provider }),
      );
      expect(r.status).toBe('needs-approval');
      expect(fs.readFileSync(file, 'utf8')).toBe('const x = 1 +;\n');
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('isolet run (CLI)', () => {
  it('Object.prototype.readDir and allowedOrigins (or its old spelling) give the code no readFile or fetch', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'isolet-pollution-cli-'));
    try {
      const preload = path.join(dir, 'pollute.js');
      fs.writeFileSync(preload, `Object.prototype.readDir = ${JSON.stringify(dir)}; Object.prototype.allowedOrigins = Object.prototype.allowOrigins = ['http://127.0.0.1:9'];\n`);
      const code = path.join(dir, 'code.js');
      fs.writeFileSync(code, 'return [typeof readFile, typeof fetch];\n');
      const ran = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
        const child = spawn(process.execPath, ['-r', preload, BIN, 'run', code, '--isolation', 'thread'], { stdio: ['ignore', 'pipe', 'pipe'] });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (c) => (stdout += c));
        child.stderr.on('data', (c) => (stderr += c));
        child.on('close', (exit) => resolve({ code: exit, stdout, stderr }));
      });
      expect(ran.stderr).toBe('');
      expect(ran.code).toBe(0);
      expect(JSON.parse(ran.stdout)).toEqual(['undefined', 'undefined']);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
