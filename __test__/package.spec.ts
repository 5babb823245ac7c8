// The package as a user's project sees it: a copy of the package files installed at
// <project>/node_modules/isolet (with or without a binary), used from a child `node` by
// name. Covers the loader's message when no binary matches, the install script's choice,
// the `exports` map for require and import, and autoFix without the optional `openai`.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runChild } from './support/spawn';

const root = path.resolve(__dirname, '..');
const abi = process.versions.modules;
const { binaryCandidates, SUPPORTED_NODE_ABIS } = require('../lib/binary-name') as {
  binaryCandidates: (root: string) => string[];
  SUPPORTED_NODE_ABIS: Record<string, number>;
};
const temps: string[] = [];
// Platform, architecture and C library, as every loader message names them: `linux-x64 (glibc)`.
const target = `${process.platform}-${process.arch}${process.platform === 'linux' ? ` (${require('../lib/binary-name').libc()})` : ''}`;

afterAll(() => {
  for (const dir of temps) fs.rmSync(dir, { recursive: true, force: true });
});

/** A project with the package's files at node_modules/isolet; `prebuilds` are file names to create. */
function project(opts: { binary: boolean; fakePrebuilds?: string[] }): { dir: string; pkg: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'isolet-package-'));
  temps.push(dir);
  const pkg = path.join(dir, 'node_modules', 'isolet');
  for (const rel of ['index.js', 'index.d.ts', 'package.json', 'lib', 'scripts/build.js', 'scripts/source-stamp.js']) {
    fs.cpSync(path.join(root, rel), path.join(pkg, rel), { recursive: true });
  }
  const prebuilds = path.join(pkg, 'prebuilds', `${process.platform}-${process.arch}`);
  if (opts.binary) {
    const binary = binaryCandidates(root).find((p) => fs.existsSync(p));
    if (!binary) throw new Error('no isolet binary for this Node: run `node scripts/build.js` first');
    fs.mkdirSync(prebuilds, { recursive: true });
    fs.copyFileSync(binary, path.join(prebuilds, `isolet.abi${abi}.node`));
  }
  for (const name of opts.fakePrebuilds ?? []) {
    fs.mkdirSync(prebuilds, { recursive: true });
    fs.writeFileSync(path.join(prebuilds, name), 'not a binary');
  }
  fs.writeFileSync(path.join(dir, 'package.json'), '{ "name": "user-project", "private": true }\n');
  return { dir, pkg };
}

async function node(cwd: string, args: string[], env: NodeJS.ProcessEnv = {}) {
  const { NODE_PATH: _ignored, ...rest } = process.env;
  const r = await runChild(process.execPath, args, { cwd, timeout: 30_000, env: { ...rest, ...env } });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

const otherAbis = Object.keys(SUPPORTED_NODE_ABIS).filter((a) => a !== abi);

describe('loader: no binary for this Node', () => {
  it('names the Node version and ABI, lists the shipped ABIs, and says `npm rebuild isolet`', async () => {
    const { dir } = project({ binary: false, fakePrebuilds: otherAbis.map((a) => `isolet.abi${a}.node`) });
    const r = await node(dir, [
      '-e',
      "try { require('isolet'); } catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })); }",
    ]);
    expect(r.status).toBe(0);
    const err = JSON.parse(r.stdout) as { code: string; message: string };
    expect(err.code).toBe('ERR_ISOLET_NO_BINARY');
    expect(err.message).toContain(`Node ${process.version} (ABI ${abi})`);
    const listed = otherAbis.map((a) => `${a} (Node ${SUPPORTED_NODE_ABIS[a]})`).join(', ');
    expect(err.message).toContain(`ships prebuilt binaries for ${target} Node ABIs ${listed};`);
    expect(err.message).toContain('`npm rebuild isolet`');
    expect(err.message).not.toContain('npm run build');
  });

  it('says when the package ships no prebuilt binary at all', async () => {
    const { dir } = project({ binary: false });
    const r = await node(dir, ['-e', "require('isolet')"]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain(`ships no prebuilt binary for ${target};`);
    expect(r.stderr).toContain('`npm rebuild isolet`');
  });
});

describe('loader: a prebuilt binary that does not load', () => {
  it('names the file and the Node, and gives the command for a source build', async () => {
    // A file that is not a loadable ELF object fails the same way a too-old glibc does: in dlopen.
    const { dir } = project({ binary: false, fakePrebuilds: [`isolet.abi${abi}.node`] });
    const r = await node(dir, [
      '-e',
      "try { require('isolet'); } catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })); }",
    ]);
    const err = JSON.parse(r.stdout) as { code: string; message: string };
    expect(err.code).toBe('ERR_ISOLET_BINARY_LOAD');
    expect(err.message).toContain(`isolet.abi${abi}.node in Node ${process.version} (ABI ${abi}) on ${target}:`);
    expect(err.message).toContain('`ISOLET_BUILD_FROM_SOURCE=1 npm rebuild isolet`');
  });
});

describe('install script inside an installed package', () => {
  it('uses the matching prebuilt binary without cargo', async () => {
    const { pkg } = project({ binary: true });
    const r = await node(pkg, ['scripts/build.js', '--if-missing'], { CARGO: '/nonexistent/cargo' });
    expect(r.status).toBe(0);
    expect(r.stdout).toContain(`isolet: using ${path.join('prebuilds', `${process.platform}-${process.arch}`, `isolet.abi${abi}.node`)}`);
    expect(fs.existsSync(path.join(pkg, 'build'))).toBe(false);
  });

  it('ignores the prebuilt binary under ISOLET_BUILD_FROM_SOURCE=1 (then needs cargo)', async () => {
    const { pkg } = project({ binary: true });
    const r = await node(pkg, ['scripts/build.js', '--if-missing'], {
      CARGO: '/nonexistent/cargo',
      ISOLET_BUILD_FROM_SOURCE: '1',
    });
    expect(r.status).toBe(1);
    expect(r.stdout).not.toContain('isolet: using');
    expect(r.stderr).toContain("Rust's cargo was not found");
  });

  it('without a match and without Rust: says so, names the ABIs, and fails', async () => {
    const { pkg } = project({ binary: false, fakePrebuilds: otherAbis.map((a) => `isolet.abi${a}.node`) });
    const r = await node(pkg, ['scripts/build.js', '--if-missing'], { CARGO: '/nonexistent/cargo' });
    expect(r.status).toBe(1);
    expect(r.stdout).toContain(`no binary for ${target}, Node ${process.version} (ABI ${abi})`);
    expect(r.stdout).toContain('Building it from source');
    expect(r.stderr).toContain("Rust's cargo was not found");
    expect(r.stderr).toContain('`npm rebuild isolet`');
    expect(fs.readdirSync(pkg)).not.toContain('target');
  });
});

describe('exports', () => {
  it('resolves "." for require and import to the same module, and "./package.json"', async () => {
    const { dir, pkg } = project({ binary: true });
    const script = `
      import { createRequire } from 'node:module';
      import { runSandbox, SandboxEngine, SandboxTimeoutError } from 'isolet';
      import * as ns from 'isolet';
      const require = createRequire(process.cwd() + '/x.js');
      const cjs = require('isolet');
      const r = await runSandbox('[1, 2, 3].map((x) => x * 2)');
      let deep;
      try { require('isolet/lib/errors'); deep = 'resolved'; } catch (e) { deep = e.code; }
      console.log(JSON.stringify({
        output: r.output,
        same: cjs.runSandbox === runSandbox && cjs.SandboxEngine === SandboxEngine && ns.default === cjs,
        timeoutName: new SandboxTimeoutError('x').name,
        pkg: require.resolve('isolet/package.json'),
        deep,
      }));
    `;
    const r = await node(dir, ['--input-type=module', '-e', script]);
    expect(r.stderr).toBe('');
    expect(JSON.parse(r.stdout)).toEqual({
      output: [2, 4, 6],
      same: true,
      timeoutName: 'SandboxTimeoutError',
      pkg: fs.realpathSync(path.join(pkg, 'package.json')),
      deep: 'ERR_PACKAGE_PATH_NOT_EXPORTED',
    });
  });

  it('gives types for both import and require', () => {
    const exp = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')).exports;
    for (const entry of ['.', './codemode', './mcp']) {
      for (const condition of ['import', 'require']) {
        const target = exp[entry][condition];
        expect(Object.keys(target)[0]).toBe('types');
        expect(target.types).toMatch(/\.d\.ts$/);
      }
    }
    expect(fs.existsSync(path.join(root, exp['.'].import.types))).toBe(true);
    expect(fs.existsSync(path.join(root, exp['.'].require.default))).toBe(true);
  });
});

describe('autoFix without the optional openai package', () => {
  it('fails with provider-error naming the package to install', async () => {
    const { dir } = project({ binary: true });
    const work = path.join(dir, 'work');
    fs.mkdirSync(work);
    fs.writeFileSync(path.join(work, 'a.js'), 'module.exports = 1;\n');
    const script = `
      const { autoFix } = require('isolet');
      let openai = 'missing';
      try { require.resolve('openai'); openai = 'present'; } catch {}
      autoFix({ filePath: 'a.js', root: ${JSON.stringify(work)}, instruction: 'fix it', apiKey: 'k-test',
        baseURL: 'http://127.0.0.1:9/v1' })
        .then((r) => console.log(JSON.stringify({ openai, status: r.status, reason: r.reason, message: r.message })));
    `;
    const r = await node(dir, ['-e', script]);
    expect(r.stderr).toBe('');
    const out = JSON.parse(r.stdout);
    expect(out).toMatchObject({ openai: 'missing', status: 'failed', reason: 'provider-error' });
    expect(out.message).toContain('`npm install openai`');
    expect(fs.readFileSync(path.join(work, 'a.js'), 'utf8')).toBe('module.exports = 1;\n');
  });
});
