// `isolet run <file|->`, run as a real child process: result JSON on stdout, console on
// stderr, exit code by error class, limits from flags and --config.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { RUN_SANDBOX_DEFAULTS } from '..';
import { createRequire } from 'node:module';
import { runToEnd, type Ran } from './support/spawn';

interface CliSettings {
  limits: { memoryMb: number; wallTimeMs: number; cpuTimeMs: number };
  engineConfig: { maxConcurrentIsolates: number; warmPoolSize: number };
  language?: string;
}
// The CLI's own module (no public types): the settings it hands to the engine.
const { settingsFrom } = createRequire(__filename)('../lib/cli/options') as {
  settingsFrom(values: Record<string, unknown>, sourceFile?: string): CliSettings;
};

const BIN = path.resolve(__dirname, '..', 'bin', 'isolet.js');

function isolet(args: string[], stdin?: string, cwd?: string): Promise<Ran> {
  return runToEnd(process.execPath, [BIN, ...args], { cwd, stdin });
}

let dir: string;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'isolet-cli-'));
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function write(name: string, text: string): string {
  const file = path.join(dir, name);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, text);
  return file;
}

describe('isolet run', () => {
  it('runs a TypeScript file (.ts implies TypeScript): result JSON on stdout, logs on stderr, exit 0', async () => {
    const file = write('ok.ts', 'interface R { sum: number }\nconsole.log("adding");\nconsole.warn("careful");\nconst r: R = { sum: [1, 2, 3].reduce((a, b) => a + b) };\nreturn { ...r, big: 2n ** 70n, when: new Date(0), tags: new Set(["a"]) };\n');
    const r = await isolet(['run', file]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ sum: 6, big: '1180591620717411303424', when: '1970-01-01T00:00:00.000Z', tags: ['a'] });
    expect(r.stderr).toBe('adding\n[warn] careful\n');
  });

  it('reads standard input with "-" and takes --language', async () => {
    const js = await isolet(['run', '-'], 'return await Promise.resolve(41) + 1');
    expect([js.code, js.stdout]).toEqual([0, '42\n']);
    const ts = await isolet(['run', '-', '--language', 'typescript'], 'const n: number = 2;\nreturn n');
    expect([ts.code, ts.stdout]).toEqual([0, '2\n']);
    const notTs = await isolet(['run', '-'], 'const n: number = 2;\nreturn n');
    expect(notTs.code).toBe(3);
  });

  it('exit code by error class: runtime 1, validation 3, timeout 4, memory 5', async () => {
    const thrown = await isolet(['run', '-'], 'function f() { throw new RangeError("too far") }\nf()');
    expect(thrown.code).toBe(1);
    expect(thrown.stdout).toBe('');
    expect(thrown.stderr).toMatch(/SandboxRuntimeError \[ERR_ISOLET_RUNTIME\]\nRangeError: too far\n\s+at f \(<stdin>:1:22\)/);

    const invalid = await isolet(['run', write('bad.ts', 'const a = 1;\nimport fs = require("fs");\n')]);
    expect(invalid.code).toBe(3);
    expect(invalid.stderr).toMatch(/SandboxValidationError \[ERR_ISOLET_VALIDATION\] \(line 2, column 1\)/);

    const slow = await isolet(['run', '-', '--timeout-ms', '300'], 'while (true) {}');
    expect(slow.code).toBe(4);
    expect(slow.stderr).toMatch(/SandboxTimeoutError: .*300 ms/);

    const bomb = await isolet(['run', '-', '--memory-limit-mb', '32', '--timeout-ms', '30000'], 'const a = []; while (true) a.push(new Array(2 ** 16).fill(a.length + 0.5));');
    expect(bomb.code).toBe(5);
    expect(bomb.stderr).toMatch(/SandboxOOMError: .*32 MB/);
  });

  it('the memory limit set is the limit enforced: 48 MB kept alive fails at 32 MB and passes at 128 MB', async () => {
    // 48 arrays of 2**17 doubles (8 bytes each): 48 MiB of heap that stays reachable.
    const code = 'const a = []; for (let i = 0; i < 48; i++) a.push(new Array(2 ** 17).fill(i + 0.5)); return a.length * a[0].length;';
    expect((await isolet(['run', '-', '--memory-limit-mb', '32', '--timeout-ms', '30000'], code)).code).toBe(5);
    const big = await isolet(['run', '-', '--memory-limit-mb', '128', '--timeout-ms', '30000'], code);
    expect([big.code, big.stdout]).toEqual([0, `${48 * 2 ** 17}\n`]);
  });

  it('runs in either isolation mode (--isolation flows to the engine), limits enforced in both', async () => {
    const pid = 'return typeof process'; // no Node API in either mode
    for (const mode of ['process', 'thread']) {
      const r = await isolet(['run', '-', '--isolation', mode], pid);
      expect([r.code, r.stdout], mode).toEqual([0, '"undefined"\n']);
      const slow = await isolet(['run', '-', '--isolation', mode, '--timeout-ms', '300'], 'while (true) {}');
      expect(slow.code, mode).toBe(4);
    }
    const bad = await isolet(['run', '-', '--isolation', 'vm']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--isolation must be 'process' or 'thread', got 'vm'/);
  });

  it('takes limits and capabilities from --config, flags winning', async () => {
    write('data/note.txt', 'hello from a file');
    const config = write('config.json', JSON.stringify({ timeoutMs: 200, readDir: path.join(dir, 'data'), engine: { maxConcurrentIsolates: 1 } }));
    const slow = await isolet(['run', '-', '--config', config], 'while (true) {}');
    expect(slow.code).toBe(4);
    expect(slow.stderr).toMatch(/200 ms/);
    const read = await isolet(['run', '-', '--config', config, '--timeout-ms', '3000'], 'return (await readFile({ path: "note.txt" })).content');
    expect([read.code, read.stdout]).toEqual([0, '"hello from a file"\n']);
    const escapeAttempt = await isolet(['run', '-', '--config', config], 'try { await readFile({ path: "../config.json" }); return "read" } catch (e) { return e.name }');
    expect(escapeAttempt.stdout).not.toBe('"read"\n');
  });

  it('a bad value in --config is blamed on its key there, not on the flag', async () => {
    const config = write('fast.json', '{"timeoutMs": "fast"}');
    const r = await isolet(['run', '-', '--config', config], 'return 1');
    expect(r.code).toBe(2);
    expect(r.stderr.split('\n')[0]).toBe(`isolet run: --config ${config}: timeoutMs must be a whole number from 1 to 2147483647, got 'fast'`);
    expect(r.stderr).not.toContain('--timeout-ms must');
  });

  it("settings without flags or file are isolet-core's defaults", () => {
    const s = settingsFrom({}, undefined);
    expect(s.limits).toEqual({ memoryMb: RUN_SANDBOX_DEFAULTS.memoryLimitMb, wallTimeMs: RUN_SANDBOX_DEFAULTS.timeoutMs, cpuTimeMs: RUN_SANDBOX_DEFAULTS.timeoutMs });
    expect([s.engineConfig.maxConcurrentIsolates, s.engineConfig.warmPoolSize, s.language]).toEqual([2, 1, undefined]);
    expect(settingsFrom({}, 'src/job.mts').language).toBe('typescript');
    expect(settingsFrom({ language: 'javascript' }, 'src/job.ts').language).toBe('javascript');
  });

  it("the help shows isolet-core's defaults, which are runSandbox's", async () => {
    const help = (await isolet(['run', '--help'])).stdout;
    expect(help).toContain(`wall-clock limit of one run (default ${RUN_SANDBOX_DEFAULTS.timeoutMs})`);
    expect(help).toContain(`heap limit of one run (default ${RUN_SANDBOX_DEFAULTS.memoryLimitMb})`);
  });

  it('gives fetch only to --allowed-origins origins', async () => {
    const server = http.createServer((req, res) => res.end(`you asked for ${req.url}`));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      // With the web APIs (the default) fetch is WHATWG fetch over the capability.
      const ok = await isolet(['run', '-', '--allowed-origins', origin], `const r = await fetch("${origin}/x"); return [r.status, r.url, await r.text()]`);
      expect([ok.code, JSON.parse(ok.stdout)]).toEqual([0, [200, `${origin}/x`, 'you asked for /x']]);
      const other = await isolet(['run', '-', '--allowed-origins', origin], 'try { await fetch("http://127.0.0.1:1/"); return "fetched" } catch (e) { return [e.name, e.message] }');
      expect(JSON.parse(other.stdout)).toEqual(['TypeError', 'fetch: origin http://127.0.0.1:1 is not in the allow-list']);
      // --no-web: the capability itself, a plain request object in, a plain object out.
      const plain = await isolet(['run', '-', '--no-web', '--allowed-origins', origin], `return (await fetch({ url: "${origin}/x" })).body`);
      expect([plain.code, plain.stdout]).toEqual([0, '"you asked for /x"\n']);
      for (const flags of [[], ['--no-web']]) {
        const none = await isolet(['run', '-', ...flags], 'return typeof fetch');
        expect(none.stdout).toBe('"undefined"\n');
      }
    } finally {
      server.close();
    }
  });

  it('answers with the last top-level expression statement when no return runs', async () => {
    const cases: Array<[string, string, string]> = [
      ['expr.js', 'const x = 20; x + 22', '42'],
      ['return-wins.js', 'if (true) return "early"\n"late"', '"early"'],
      ['later-declarations.js', 'const r = await Promise.resolve(41)\nr + 1\nfunction unused() {}\nconst after = 0', '42'],
      ['typed.ts', 'const xs: number[] = [1, 2]\nxs.map((x: number): number => x * 2)', '[2,4]'],
      ['no-expression.js', 'const a = 1', 'null'],
    ];
    const runs = await Promise.all(cases.map(([name, code]) => isolet(['run', write(`last/${name}`, code)])));
    expect(runs.map((r) => r.stdout.trim())).toEqual(cases.map(([, , out]) => out));
    // A failure in the rewritten statement is reported where the user wrote it.
    const failed = await isolet(['run', '-'], 'const o = {};\n  o.a.b');
    expect(failed.code).toBe(1);
    expect(failed.stderr).toMatch(/TypeError: Cannot read properties of undefined \(reading 'b'\)\n\s+at <stdin>:2:7/);
  });

  it('usage errors exit 2 and name the flag', async () => {
    const cases: Array<[string[], RegExp]> = [
      [['run'], /run takes exactly one file/],
      [['run', '-', '--timeout-ms', 'soon'], /--timeout-ms must be a whole number from 1 to 2147483647, got 'soon'/],
      [['run', '-', '--memory-limit-mb', '0'], /--memory-limit-mb must be a whole number from 8 to 8192, got 0/],
      [['run', '-', '--language', 'python'], /--language must be 'javascript' or 'typescript', got 'python'/],
      [['run', '-', '--bogus'], /--bogus is not a known option of isolet run\n/],
      [['run', '-', '--timeout-ms'], /--timeout-ms needs a value\n/],
      [['run', '-', '--timeout-ms', '-5'], /--timeout-ms needs a value; for one starting with a dash, write --timeout-ms=-5\n/],
      [['run', '-', '--help=yes'], /--help takes no value\n/],
      [['run', '-', '--timeout', '300'], /--timeout is not a known option of isolet run; did you mean --timeout-ms\?/],
      [['mcp', '--memory', '32'], /--memory is not a known option of isolet mcp; did you mean --memory-limit-mb\?/],
      [['run', path.join(dir, 'missing.js')], /cannot read .*missing\.js: ENOENT/],
      [['run', '-', '--config', path.join(dir, 'nope.json')], /cannot read --config/],
      [['run', '-', '--config', write('bad-config.json', '{"timeoutMs": 1, "colour": "red"}')], /bad-config\.json: colour is not a known option of the config file; known options: timeoutMs, /],
      [['run', '-', '--config', write('typo-config.json', '{"timeOutMs": 1}')], /typo-config\.json: timeOutMs is not a known option of the config file; did you mean timeoutMs\?/],
      [['run', '-', '--config', write('array-config.json', '[]')], /array-config\.json: must hold a JSON object, got an array/],
      [['run', '-', '--config', write('engine-config.json', '{"engine": {"processes": 0}}')], /engine-config\.json: engine\.processes must be a whole number from 1 to 64, got 0/],
      [['run', '-', '--allowed-origins', 'ftp://x'], /--allowed-origins: .*http: or https:/],
      [['run', '-', '--config', write('ftp-config.json', '{"allowedOrigins": ["ftp://x"]}')], /ftp-config\.json: allowedOrigins: .*http: or https:/],
      [['run', '-', '--config', write('dir-config.json', `{"readDir": ${JSON.stringify(path.join(dir, 'no-such-dir'))}}`)], /dir-config\.json: readDir .*no-such-dir: /],
      [['frobnicate'], /"frobnicate" is not a command of isolet; its commands: run, mcp, autofix, help/],
      [['rn', 'x.js'], /"rn" is not a command of isolet; did you mean run\?/],
      [[], /a command is needed: run, mcp, autofix, help/],
    ];
    for (const [args, message] of cases) {
      const r = await isolet(args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toMatch(message);
      // One line naming the problem, then where the help is: never the whole usage, and
      // never Node's argument parser's own text.
      const command = args[0] === 'run' || args[0] === 'mcp' ? `isolet ${args[0]}` : 'isolet';
      const lines = r.stderr.split('\n');
      expect(lines, args.join(' ')).toHaveLength(3);
      expect(lines[0].startsWith(`${command}: `), r.stderr).toBe(true);
      expect(lines.slice(1)).toEqual([`see ${command} --help`, '']);
      expect(r.stderr).not.toMatch(/usage:|ERR_PARSE_ARGS|To specify an option argument/);
    }
  });

  it('TypeScript piped without --language: the syntax error comes with a hint, plain JavaScript errors without', async () => {
    const ts = await isolet(['run', '-'], 'const n: number = 6 * 7;\nreturn n');
    expect(ts.code).toBe(3);
    expect(ts.stderr).toMatch(/SyntaxError: .*\(line 1, column 7\)\nisolet run: this looks like TypeScript; pass --language typescript\n$/);
    const js = await isolet(['run', '-'], 'const n = 6 * ;\nreturn n');
    expect(js.code).toBe(3);
    expect(js.stderr).not.toContain('--language');
    const given = await isolet(['run', '-', '--language', 'javascript'], 'const n: number = 6 * 7;\nreturn n');
    expect(given.stderr).not.toContain('pass --language');
  });

  it('--help lists every command; each command has its own help', async () => {
    const top = await isolet(['--help']);
    expect(top.code).toBe(0);
    for (const command of ['run <file|->', 'mcp', 'autofix <file>', 'help']) expect(top.stdout).toContain(`  ${command}`);
    const run = await isolet(['run', '--help']);
    expect(run.code).toBe(0);
    for (const flag of ['--timeout-ms', '--memory-limit-mb', '--language', '--isolation', '--config', '--read-dir', '--allowed-origins']) expect(run.stdout).toContain(flag);
    expect(run.stdout).toMatch(/exit codes: 0 success, 1 the code threw/);
    expect(run.stdout).toMatch(/\(default: typescript for \.ts\/\.mts\/\.cts\s+files, else javascript\)/);
    const mcp = await isolet(['mcp', '--help']);
    expect(mcp.code).toBe(0);
    expect(mcp.stdout).toContain('run_code');
    // No file there: the flag is the language of calls that name none.
    expect(mcp.stdout).toContain('the language of run_code calls that name none');
    expect(mcp.stdout).not.toMatch(/\.ts\/|extension/);
  });
});
