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
// isolet-core's option tables, as docs/options.md renders them (`cargo test -p isolet-core
// options_page` fails when the page is not the render of the tables): per section, each
// option's name and its seed's own names ("Also accepted"), which are typed beside it
// (SandboxEngineConfig.memoryMb).
const page = fs.readFileSync(path.join(root, 'docs', 'options.md'), 'utf8');

function table(section: string): string[] {
  const start = page.indexOf(`\n## ${section}\n`);
  expect(start, section).toBeGreaterThan(-1);
  const end = page.indexOf('\n## ', start + 1);
  const lines = page.slice(start, end === -1 ? undefined : end).split('\n').filter((l) => l.startsWith('| '));
  const heads = lines[0].split('|').map((c) => c.trim());
  const also = heads.indexOf('Also accepted');
  const names: string[] = [];
  for (const line of lines.slice(2)) {
    const cells = line.split('|').map((c) => c.trim());
    names.push(...[cells[1], also === -1 ? '' : cells[also]].flatMap((c) => [...c.matchAll(/`(\w+)`/g)].map((m) => m[1])));
  }
  expect(names.length, section).toBeGreaterThan(0);
  return names.sort();
}

it("the option types list exactly isolet-core's option tables", () => {
  for (const [type, section] of [
    ['SandboxOptions', 'runSandbox'],
    ['SandboxEngineConfig', 'SandboxEngine'],
    ['ExecuteMessage', 'engine.submit'],
    ['ToolPolicy', 'toolPolicy'],
    ['IsolateLimits', 'IsolateLimits'],
    ['BridgeLimits', 'BridgeLimits'],
    ['SandboxRunOptions', 'sandbox.run'],
    ['PersistentSandboxOptions', 'createSandbox'],
  ]) {
    expect(props(type), `${type} vs ${section}`).toEqual(table(section));
  }
});
