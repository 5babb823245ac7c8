// The package's declarations compile in the projects users have: a consumer that imports
// every runtime export of every entry point ('isolet', 'isolet/codemode', 'isolet/mcp',
// 'isolet/codemode/register') is compiled, strict with `exactOptionalPropertyTypes`,
// `noUncheckedIndexedAccess` and `skipLibCheck: false`, against a matrix: targets ES2020 /
// ES2022 / ESNext, module resolution node16 (CommonJS) / nodenext (ESM) / bundler / node10
// (CommonJS), with and without @types/node: every combination with the newest TypeScript (7),
// and with the oldest isolet supports (5.0) a set that has each target, each resolution and
// both kinds of globals (that compiler takes seconds per project). The project's own
// TypeScript compiles __test__/types/ in `npm test`.
// The consumer names each export, so a runtime export the declarations miss fails here too.
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const root = path.resolve(__dirname, '..');
const run = promisify(execFile);

type Resolution = 'node16' | 'nodenext' | 'bundler' | 'node10';
const TARGETS = ['ES2020', 'ES2022', 'ESNext'] as const;
const RESOLUTIONS: Resolution[] = ['node16', 'nodenext', 'bundler', 'node10'];
/** TypeScript versions by package folder: the oldest supported and the newest. */
const COMPILERS = [
  { name: 'typescript-oldest', major: 5, full: false },
  { name: 'typescript-newest', major: 7, full: true },
];
type Job = { target: string; resolution: Resolution; nodeTypes: boolean };

/** Every combination, or (`full` false) one per resolution, targets and globals rotating
 *  (four projects: each target, each resolution, with and without @types/node). */
function jobsFor(compiler: (typeof COMPILERS)[number]): Job[] {
  // TypeScript 7 removed node10 resolution.
  const resolutions = RESOLUTIONS.filter((r) => !(r === 'node10' && compiler.major >= 7));
  if (compiler.full) {
    return TARGETS.flatMap((target) => resolutions.flatMap((resolution) => [true, false].map((nodeTypes) => ({ target, resolution, nodeTypes }))));
  }
  return resolutions.map((resolution, i) => ({ target: TARGETS[i % TARGETS.length]!, resolution, nodeTypes: i % 2 === 0 }));
}

/** Every runtime export of each entry point (what `require` gives), named in one import. */
function consumerSource(esm: boolean): string {
  const entries: [string, string][] = [
    ['isolet', '.'],
    ['isolet/codemode', './lib/codemode'],
    ['isolet/mcp', './lib/mcp'],
  ];
  const lines: string[] = [];
  const names: string[] = [];
  entries.forEach(([specifier, file], i) => {
    const exported = Object.keys(require(path.join(root, file))).sort();
    expect(exported.length).toBeGreaterThan(3);
    lines.push(`import { ${exported.map((n) => `${n} as e${i}_${n}`).join(', ')} } from '${specifier}';`);
    names.push(...exported.map((n) => `e${i}_${n}`));
  });
  lines.push(
    // The hook is an ES module (for `node --import`): CommonJS code loads it with import().
    esm ? `import 'isolet/codemode/register';` : `export const register = import('isolet/codemode/register');`,
    `import type { SandboxResult, SandboxEngineConfig, SandboxOptions } from 'isolet';`,
    `import type { ExecuteResult, IsoletExecutorOptions } from 'isolet/codemode';`,
    `import type { McpConfig } from 'isolet/mcp';`,
    `export const all: unknown[] = [${names.join(', ')}];`,
    // A few uses the way the README writes them: options objects, results, disposal.
    `export async function use(signal: AbortSignal): Promise<unknown> {`,
    `  const options: SandboxOptions = { timeoutMs: 100, memoryLimitMb: 32, signal };`,
    `  const r: SandboxResult<number> = await e0_runSandbox('1 + 1', options);`,
    `  const sandbox = await e0_createSandbox();`,
    `  await sandbox[Symbol.asyncDispose]();`,
    `  const config: Partial<SandboxEngineConfig> = { maxConcurrentIsolates: 2 };`,
    `  const executor = new e1_IsoletExecutor({ timeout: 1000 } satisfies IsoletExecutorOptions);`,
    `  const x: ExecuteResult = await executor.execute('async () => 1', {});`,
    `  await executor[Symbol.asyncDispose]();`,
    `  const mcp: McpConfig = { timeoutMs: 1000 };`,
    `  return r.success ? [r.output, config, x.result, mcp] : r.error.name;`,
    `}`,
  );
  return lines.join('\n') + '\n';
}

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'isolet-consumers-'));
afterAll(() => fs.rmSync(work, { recursive: true, force: true }));

/** A consumer project: its package.json, tsconfig, source, and node_modules links. */
function project(compiler: (typeof COMPILERS)[number], { target, resolution, nodeTypes }: Job, tag = ''): string {
  const dir = path.join(work, `${compiler.name}-${target}-${resolution}-${nodeTypes ? 'node' : 'bare'}${tag}`);
  fs.mkdirSync(path.join(dir, 'node_modules', '@types'), { recursive: true });
  fs.symlinkSync(root, path.join(dir, 'node_modules', 'isolet'));
  if (nodeTypes) fs.symlinkSync(path.join(root, 'node_modules', '@types', 'node'), path.join(dir, 'node_modules', '@types', 'node'));
  const esm = resolution === 'nodenext' || resolution === 'bundler';
  const module = { node16: 'node16', nodenext: 'nodenext', bundler: 'esnext', node10: 'commonjs' }[resolution];
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: esm ? 'module' : 'commonjs' }));
  const compilerOptions: Record<string, unknown> = {
    strict: true,
    exactOptionalPropertyTypes: true,
    noUncheckedIndexedAccess: true,
    skipLibCheck: false,
    noEmit: true,
    target,
    module,
    moduleResolution: resolution,
    types: nodeTypes ? ['node'] : [],
  };
  // TypeScript 6 deprecates node10 resolution (7 removes it: not in its matrix).
  if (resolution === 'node10' && compiler.major === 6) compilerOptions.ignoreDeprecations = '6.0';
  fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions, files: ['consumer.ts'] }, null, 2));
  fs.writeFileSync(path.join(dir, 'consumer.ts'), consumerSource(esm));
  return dir;
}

async function compile(compiler: (typeof COMPILERS)[number], dir: string): Promise<string> {
  const tsc = path.join(root, 'node_modules', compiler.name, 'bin', 'tsc');
  try {
    await run(process.execPath, [tsc, '-p', dir], { cwd: dir, maxBuffer: 16 * 1024 * 1024 });
    return '';
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    return `${e.stdout ?? ''}${e.stderr ?? ''}` || e.message;
  }
}

describe('the declarations compile in consumer projects', () => {
  for (const compiler of COMPILERS) {
    const version = JSON.parse(fs.readFileSync(path.join(root, 'node_modules', compiler.name, 'package.json'), 'utf8')).version;
    const jobs = jobsFor(compiler);
    it(`TypeScript ${version}: ${jobs.length} projects (${compiler.full ? 'every combination' : 'each target, resolution and globals'})`, async () => {
      const failures: string[] = [];
      // Two compilers at a time: each is a process of its own.
      for (let i = 0; i < jobs.length; i += 2) {
        await Promise.all(
          jobs.slice(i, i + 2).map(async (job) => {
            const out = await compile(compiler, project(compiler, job));
            if (out !== '') failures.push(`${job.target} ${job.resolution} ${job.nodeTypes ? '@types/node' : 'no @types/node'}:\n${out}`);
          }),
        );
      }
      expect(failures).toEqual([]);
    }, 180_000);
  }

  it('a consumer that misuses the API fails to compile (the matrix can fail)', async () => {
    const dir = project(COMPILERS[1]!, { target: 'ES2022', resolution: 'nodenext', nodeTypes: false }, '-misuse');
    fs.appendFileSync(path.join(dir, 'consumer.ts'), `export const wrong: import('isolet').SandboxOptions = { timeoutMs: 'soon' };\n`);
    expect(await compile(COMPILERS[1]!, dir)).toMatch(/consumer\.ts\(\d+,\d+\): error TS2322/);
  }, 60_000);
});
