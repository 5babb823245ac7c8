// One name per concept (issue 34): every old spelling still works this release, with the
// same effect as the new one, one DeprecationWarning per process naming the new spelling,
// and a SandboxValidationError naming both when both are given. Through the public API, the
// CLI binary and child processes (a warning is once per process).

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { SandboxEngine, SandboxValidationError } from '..';
import { IsoletExecutor, type IsoletExecutorOptions } from '../lib/codemode';
import { runToEnd, type Ran } from './support/spawn';
import { startChatServer, type ChatServer } from './support/chat-server';

const ROOT = path.resolve(__dirname, '..');
const BIN = path.join(ROOT, 'bin', 'isolet.js');
const CODE = 'ISOLET_DEP_OPTION_NAME';
/** Keeps about 48 MB of heap alive: over a 16 MB limit. */
const GROW = 'const a = []; for (let i = 0; i < 48; i++) a.push(new Array(2 ** 17).fill(i + 0.5)); return a.length;';

const deprecations = (stderr: string) => stderr.split('\n').filter((line) => line.includes(`[${CODE}] DeprecationWarning`));

function isolet(args: string[], stdin = '', env: NodeJS.ProcessEnv = process.env): Promise<Ran> {
  return runToEnd(process.execPath, [BIN, ...args], { stdin, env });
}

let dir: string;
let origin: string;
let api: http.Server;
beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'isolet-names-'));
  api = http.createServer((_req, res) => res.end('pong'));
  await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
});
afterAll(async () => {
  fs.rmSync(dir, { recursive: true, force: true });
  await new Promise((resolve) => api.close(resolve));
});

describe('Code Mode: timeout and idleTimeout are timeoutMs and idleTimeoutMs', () => {
  const endless = async (options: IsoletExecutorOptions) => {
    const executor = new IsoletExecutor({ isolation: 'thread', maxConcurrentIsolates: 1, ...options });
    try {
      const started = Date.now();
      const r = await executor.execute('async () => { while (true) {} }', {});
      return { error: r.error, ms: Date.now() - started, timeoutMs: executor.timeoutMs, timeout: executor.timeout };
    } finally {
      await executor.dispose();
    }
  };

  it('a timeout of 50 ends a while(true) run by its time limit, as timeoutMs does', async () => {
    for (const options of [{ timeout: 50 }, { timeoutMs: 50 }]) {
      const r = await endless(options);
      expect(r.error).toMatch(/timed out/i);
      expect(r.ms).toBeLessThan(5000);
      expect([r.timeoutMs, r.timeout]).toEqual([50, 50]);
    }
  });

  it('idleTimeout closes a stateful sandbox when idle, as idleTimeoutMs does', async () => {
    // 1 s idle, 3 s asleep: on a loaded machine a gap between two executions can pass 200 ms.
    for (const idle of [{ idleTimeout: 1000 }, { idleTimeoutMs: 1000 }]) {
      const executor = new IsoletExecutor({ isolation: 'thread', stateful: true, timeoutMs: 5000, maxConcurrentIsolates: 1, ...idle });
      try {
        expect((await executor.execute('async () => { globalThis.kept = 1; return 1 }', {})).result).toBe(1);
        expect((await executor.execute('async () => globalThis.kept', {})).result).toBe(1);
        await new Promise((resolve) => setTimeout(resolve, 3000));
        expect((await executor.execute('async () => typeof globalThis.kept', {})).result).toBe('undefined');
      } finally {
        await executor.dispose();
      }
    }
  });

  it('both spellings together are a SandboxValidationError naming both', () => {
    expect(() => new IsoletExecutor({ timeout: 50, timeoutMs: 50 })).toThrow(SandboxValidationError);
    expect(() => new IsoletExecutor({ timeout: 50, timeoutMs: 50 })).toThrow('timeout and timeoutMs are the same option of IsoletExecutor options: give only timeoutMs');
    expect(() => new IsoletExecutor({ stateful: true, idleTimeoutMs: 5, idleTimeout: 5 })).toThrow(/idleTimeoutMs and idleTimeout are the same option .*give only idleTimeoutMs/);
  });
});

describe('SandboxEngine: memoryLimitMb, and memoryMb (the seed\'s name) for good', () => {
  it('both names set the memory of each isolate; both together are refused', async () => {
    for (const memory of [{ memoryLimitMb: 16 }, { memoryMb: 16 }]) {
      const engine = new SandboxEngine({ isolation: 'thread', maxConcurrentIsolates: 1, ...memory });
      try {
        await engine.init();
        const end = await engine.submit({ code: GROW }).done;
        expect(end.type).toBe('error');
        expect(end.type === 'error' && end.error.name).toBe('SandboxOOMError');
      } finally {
        await engine.shutdown();
      }
    }
    expect(() => new SandboxEngine({ memoryMb: 16, memoryLimitMb: 16 })).toThrow(
      'memoryMb and memoryLimitMb are the same option of SandboxEngine config: give only memoryLimitMb',
    );
  });
});

describe('one DeprecationWarning per process and old spelling, naming the new one', () => {
  it('Code Mode, mcpSettings and SandboxEngine, each used three times in a child process', async () => {
    const script = `
      const { IsoletExecutor } = require(${JSON.stringify(path.join(ROOT, 'lib', 'codemode.js'))});
      const { mcpSettings } = require(${JSON.stringify(path.join(ROOT, 'lib', 'mcp.js'))});
      const { SandboxEngine } = require(${JSON.stringify(ROOT)});
      const warnings = [];
      process.on('warning', (w) => warnings.push({ name: w.name, code: w.code, message: w.message }));
      (async () => {
        for (let i = 0; i < 3; i++) {
          await new IsoletExecutor({ isolation: 'thread', timeout: 1000, stateful: true, idleTimeout: 1000 }).dispose();
          mcpSettings({ isolation: 'thread', memoryMb: 32, allowOrigins: ['http://127.0.0.1:9'], stateful: true, statefulIdleMs: 1000 });
          await new SandboxEngine({ isolation: 'thread', memoryMb: 32 }).shutdown();
        }
        const both = [];
        for (const given of [() => new IsoletExecutor({ idleTimeout: 1, idleTimeoutMs: 1, stateful: true }), () => mcpSettings({ memoryMb: 32, memoryLimitMb: 32 })]) {
          try { given(); } catch (err) { both.push([err.name, err.message]); }
        }
        await new Promise((resolve) => setTimeout(resolve, 10));
        console.log(JSON.stringify({ warnings, both }));
      })();
    `;
    const r = await runToEnd(process.execPath, ['-e', script]);
    expect(r.code, r.stderr).toBe(0);
    const { warnings, both } = JSON.parse(r.stdout);
    const said = (old: string, of: string, now: string) => ({ name: 'DeprecationWarning', code: CODE, message: `isolet: \`${old}\` of ${of} is deprecated; use \`${now}\`` });
    expect(warnings).toEqual([
      said('timeout', 'IsoletExecutor options', 'timeoutMs'),
      said('idleTimeout', 'IsoletExecutor options', 'idleTimeoutMs'),
      said('memoryMb', 'the config file', 'memoryLimitMb'),
      said('allowOrigins', 'the config file', 'allowedOrigins'),
      said('statefulIdleMs', 'the config file', 'idleTimeoutMs'),
    ]);
    // Node prints each one (once) on stderr too.
    expect(deprecations(r.stderr)).toHaveLength(5);
    expect(both).toEqual([
      ['SandboxValidationError', 'idleTimeout and idleTimeoutMs are the same option of IsoletExecutor options: give only idleTimeoutMs'],
      ['SandboxValidationError', '--config file: memoryMb and memoryLimitMb are the same option of the config file: give only memoryLimitMb'],
    ]);
  });

  it('--no-deprecation silences them, --throw-deprecation makes one an error', async () => {
    const script = `require(${JSON.stringify(path.join(ROOT, 'lib', 'codemode.js'))}).createExecutor({ timeout: 5 }).dispose().then(() => console.log('ok'));`;
    const quiet = await runToEnd(process.execPath, ['--no-deprecation', '-e', script]);
    expect([quiet.code, quiet.stdout, deprecations(quiet.stderr)]).toEqual([0, 'ok\n', []]);
    const loud = await runToEnd(process.execPath, ['--throw-deprecation', '-e', script]);
    expect(loud.code).not.toBe(0);
    expect(loud.stderr).toContain('use `timeoutMs`');
  });
});

describe('isolet run and isolet mcp: old flags and config keys', () => {
  it('--memory-mb is --memory-limit-mb: the same limit enforced, one warning for the old flag', async () => {
    const old = await isolet(['run', '-', '--isolation', 'thread', '--memory-mb', '16'], GROW);
    const now = await isolet(['run', '-', '--isolation', 'thread', '--memory-limit-mb', '16'], GROW);
    for (const r of [old, now]) {
      expect(r.code, r.stderr).toBe(5);
      expect(r.stderr).toMatch(/SandboxOOMError: .*16 MB/);
    }
    expect(deprecations(old.stderr)).toEqual([expect.stringContaining('isolet: the flag `--memory-mb` is deprecated; use `--memory-limit-mb`')]);
    expect(deprecations(now.stderr)).toEqual([]);
    const big = await isolet(['run', '-', '--isolation', 'thread', '--memory-mb', '128'], GROW);
    expect([big.code, big.stdout]).toEqual([0, '48\n']);
  });

  it('--allow-origin is --allowed-origins (repeatable), with one warning', async () => {
    const code = `const r = await fetch("${origin}/"); return await r.text()`;
    const old = await isolet(['run', '-', '--isolation', 'thread', '--allow-origin', 'http://127.0.0.1:9', '--allow-origin', origin], code);
    const now = await isolet(['run', '-', '--isolation', 'thread', '--allowed-origins', 'http://127.0.0.1:9', '--allowed-origins', origin], code);
    for (const r of [old, now]) expect([r.code, r.stdout], r.stderr).toEqual([0, '"pong"\n']);
    expect(deprecations(old.stderr)).toHaveLength(1);
    expect(deprecations(now.stderr)).toHaveLength(0);
    const refused = await isolet(['run', '-', '--isolation', 'thread', '--allowed-origins', 'http://127.0.0.1:9'], code);
    expect(refused.code).toBe(1);
  });

  it('the config file\'s memoryMb, allowOrigins: the same effect as the new keys, one warning each', async () => {
    const config = (name: string, keys: object) => {
      const file = path.join(dir, name);
      fs.writeFileSync(file, JSON.stringify({ isolation: 'thread', ...keys }));
      return file;
    };
    const code = `const r = await fetch("${origin}/"); const text = await r.text(); ${GROW}`;
    const old = await isolet(['run', '-', '--config', config('old.json', { memoryMb: 16, allowOrigins: [origin] })], code);
    const now = await isolet(['run', '-', '--config', config('new.json', { memoryLimitMb: 16, allowedOrigins: [origin] })], code);
    for (const r of [old, now]) expect(r.code, r.stderr).toBe(5);
    expect(deprecations(old.stderr).map((line) => line.replace(/^.*DeprecationWarning: /, ''))).toEqual([
      'isolet: `memoryMb` of the config file is deprecated; use `memoryLimitMb`',
      'isolet: `allowOrigins` of the config file is deprecated; use `allowedOrigins`',
    ]);
    expect(deprecations(now.stderr)).toEqual([]);
    // The file's engine memory, under either name, is replaced by the CLI's (no clash).
    const engine = await isolet(['run', '-', '--memory-limit-mb', '16', '--config', config('engine.json', { engine: { memoryMb: 256 } })], GROW);
    expect(engine.code).toBe(5);
  });

  it('both spellings of a flag, or of a key, are a usage error naming both, with no warning', async () => {
    const flags = await isolet(['run', '-', '--memory-mb', '16', '--memory-limit-mb', '16'], '1');
    expect([flags.code, flags.stderr.split('\n')[0]]).toEqual([2, 'isolet run: --memory-mb and --memory-limit-mb are the same option: give only --memory-limit-mb']);
    const file = path.join(dir, 'both.json');
    fs.writeFileSync(file, JSON.stringify({ allowOrigins: [origin], allowedOrigins: [origin] }));
    const keys = await isolet(['run', '-', '--config', file], '1');
    expect([keys.code, keys.stderr.split('\n')[0]]).toEqual([
      2,
      `isolet run: --config ${file}: allowOrigins and allowedOrigins are the same option of the config file: give only allowedOrigins`,
    ]);
    for (const r of [flags, keys]) expect(deprecations(r.stderr)).toEqual([]);
  });

  it('isolet mcp: --idle-timeout-ms needs --stateful; an old HTTP flag is still known, and named as given', async () => {
    const idle = await isolet(['mcp', '--idle-timeout-ms', '5']);
    expect([idle.code, idle.stderr.split('\n')[0]]).toEqual([2, 'isolet mcp: --idle-timeout-ms applies to a stateful server only; add --stateful']);
    const host = await isolet(['mcp', '--http-allow-host', 'mcp.example']);
    expect([host.code, host.stderr.split('\n').find((l) => l.startsWith('isolet mcp:'))]).toEqual([
      2,
      'isolet mcp: --http-allow-host needs --http [host:]port (isolet mcp speaks stdio without it)',
    ]);
    expect(deprecations(host.stderr)).toEqual([expect.stringContaining('use `--http-allowed-hosts`')]);
    const help = await isolet(['mcp', '--help']);
    for (const flag of ['--memory-limit-mb', '--allowed-origins', '--stateful', '--idle-timeout-ms', '--http-allowed-hosts', '--http-allowed-origins']) expect(help.stdout).toContain(flag);
  });
});

describe('help texts', () => {
  it("each command's --help names every flag of its table, and every old spelling as renamed", async () => {
    const native = createRequire(__filename)('../lib/native') as { commandFlags(command: string): Array<{ name: string; deprecated: boolean }> };
    for (const command of ['run', 'mcp', 'autofix']) {
      const help = (await isolet([command, '--help'])).stdout.replace(/\s+/g, ' ');
      for (const flag of native.commandFlags(command)) {
        const named = `--${flag.name}[,;. ]`;
        expect(help, `${command}: --${flag.name}`).toMatch(new RegExp(flag.deprecated ? `Renamed [^]*${named}` : named));
      }
    }
  });
});

describe('isolet autofix: --timeout, --memory and --provider-timeout', () => {
  let chat: ChatServer;
  let root: string;
  let file: string;
  beforeAll(async () => {
    chat = await startChatServer();
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'isolet-names-autofix-'));
    file = path.join(root, 'sum.js');
    fs.writeFileSync(file, 'function sum(a, b) { return a - b }\n');
  });
  afterAll(async () => {
    await chat.close();
    fs.rmSync(root, { recursive: true, force: true });
  });
  const autofix = (flags: string[]) =>
    isolet(['autofix', file, '--root', root, '--model', 'stub', ...flags], '', { ...process.env, OPENAI_API_KEY: 'sk-stub', OPENAI_BASE_URL: chat.baseURL, NO_COLOR: '1' });

  it('each old flag sets the same limit as the new one, with one warning naming it', async () => {
    const cases: Array<[string, string, string, { answer: string } | { hang: true }, RegExp]> = [
      ['--timeout', '--timeout-ms', '300', { answer: '```js\nwhile (true) {}\n```' }, /300 ms/],
      ['--memory', '--memory-limit-mb', '16', { answer: '```js\nconst a = []; for (;;) a.push(new Array(2 ** 17).fill(0.5));\n```' }, /16 MB/],
      ['--provider-timeout', '--provider-timeout-ms', '300', { hang: true }, /provider-error/],
    ];
    for (const [old, now, value, answer, says] of cases) {
      const ran: Ran[] = [];
      for (const flag of [old, now]) {
        chat.enqueue(answer);
        ran.push(await autofix([flag, value]));
      }
      for (const r of ran) {
        expect(r.code, r.stderr).toBe(1);
        expect(r.stderr).toMatch(says);
      }
      expect(deprecations(ran[0].stderr)).toEqual([expect.stringContaining(`isolet: the flag \`${old}\` is deprecated; use \`${now}\``)]);
      expect(deprecations(ran[1].stderr)).toEqual([]);
    }
    const both = await autofix(['--timeout', '300', '--timeout-ms', '300']);
    expect([both.code, both.stderr.split('\n')[0]]).toEqual([2, 'isolet autofix: --timeout and --timeout-ms are the same option: give only --timeout-ms']);
  });
});
