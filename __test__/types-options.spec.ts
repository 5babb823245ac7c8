// The option types list exactly isolet-core's option tables, so a typed option cannot
// drift from the one Rust validates (and the other way round).
import * as fs from 'node:fs';
import * as path from 'node:path';
import ts from 'typescript';
import { expect, it } from 'vitest';

const root = path.resolve(__dirname, '..');
const program = ts.createProgram([path.join(root, 'index.d.ts')], { strict: true, noEmit: true, types: ['node'], typeRoots: [path.join(root, 'node_modules', '@types')] });
const checker = program.getTypeChecker();
const exported = new Map(checker.getExportsOfModule(checker.getSymbolAtLocation(program.getSourceFile(path.join(root, 'index.d.ts'))!)!).map((s) => [s.name, s]));
const props = (name: string) => checker.getPropertiesOfType(checker.getDeclaredTypeOfSymbol(exported.get(name)!)).map((p) => p.name).sort();
// isolet-core's option tables, across the modules of crates/isolet-core/src/options/.
const optionsDir = path.join(root, 'crates', 'isolet-core', 'src', 'options');
const rustOptions = () =>
  fs.readdirSync(optionsDir).filter((f) => f.endsWith('.rs')).sort().map((f) => fs.readFileSync(path.join(optionsDir, f), 'utf8')).join('\n');

function table(name: string): string[] {
  const rust = rustOptions();
  const start = rust.indexOf(`pub const ${name}: &[Opt] = &[`);
  expect(start, name).toBeGreaterThan(-1);
  // Options shared by several tables are constants of their own (`const X: Opt = ...`).
  const shared = new Map([...rust.matchAll(/const (\w+): Opt =\s*(?:whole|opt)\("(\w+)"|const (\w+): Opt =\s*Opt \{\s*name: "(\w+)"/g)].map((m) => [m[1] ?? m[3], m[2] ?? m[4]]));
  // To the `]` that closes the table's `&[` (strings hold no brackets here).
  const open = rust.indexOf('= &[', start) + 3;
  let end = open;
  for (let depth = 0; ; end++) {
    if (rust[end] === '[') depth++;
    else if (rust[end] === ']' && --depth === 0) break;
  }
  const body = rust.slice(open, end);
  const names = [...body.matchAll(/(?:whole|opt)\("(\w+)"|name: "(\w+)"|^\s+([A-Z_]+),$/gm)].map((m) => m[1] ?? m[2] ?? shared.get(m[3]));
  expect(names, name).not.toContain(undefined);
  // The seeds' own spellings of an option are typed beside its name (SandboxEngineConfig.memoryMb).
  for (const m of body.matchAll(/\.seed_names\(&\[([^\]]*)\]\)/g)) names.push(...[...m[1].matchAll(/"(\w+)"/g)].map((n) => n[1]));
  return names.sort();
}

it("the option types list exactly isolet-core's option tables", () => {
  for (const [type, rust] of [
    ['SandboxOptions', 'RUN_SANDBOX'],
    ['SandboxEngineConfig', 'ENGINE_CONFIG'],
    ['ExecuteMessage', 'SUBMIT_REQUEST'],
    ['ToolPolicy', 'TOOL_POLICY'],
    ['IsolateLimits', 'ISOLATE_LIMITS'],
    ['BridgeLimits', 'BRIDGE_LIMITS'],
    ['SandboxRunOptions', 'SANDBOX_RUN'],
  ]) {
    expect(props(type), `${type} vs ${rust}`).toEqual(table(rust));
  }
  // createSandbox: runSandbox's options but those NOT_SANDBOX_OPTIONS names, and the
  // sandbox-wide limits.
  const rust = rustOptions();
  const list = /const NOT_SANDBOX_OPTIONS: &\[&str\] = &\[([^\]]*)\]/.exec(rust);
  expect(list).not.toBeNull();
  const not = [...list![1].matchAll(/"(\w+)"/g)].map((m) => m[1]);
  expect(not).toContain('signal');
  const persistent = [...table('RUN_SANDBOX').filter((n) => !not.includes(n)), ...table('SANDBOX_LIMITS')].sort();
  expect(props('PersistentSandboxOptions')).toEqual(persistent);
});
