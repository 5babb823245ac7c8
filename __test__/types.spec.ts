// The public declarations: their surface is snapshotted (a change to the types is a visible
// diff in review), they hold no `any`, and what they promise is what the runtime does: the
// error names and codes are isolet-core's error kinds, and every option they list is read
// by the runtime under that name. Compile-time checks of the same types: __test__/types/.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import ts from 'typescript';
import { afterAll, describe, expect, it } from 'vitest';
import {
  SandboxEngine,
  SandboxError,
  SandboxTimeoutError,
  SandboxOOMError,
  SandboxRuntimeError,
  SandboxValidationError,
  SandboxAbortedError,
  createFetchCapability,
  createSandbox,
  createFileReadCapability,
  runSandbox,
  type SandboxEvent,
} from '..';
import { IsoletExecutor } from '../lib/codemode';

const root = path.resolve(__dirname, '..');
/** The package's declaration files: its two entry points and what `index.d.ts` re-exports. */
const ENTRY = path.join(root, 'index.d.ts');
const CODEMODE = path.join(root, 'lib', 'codemode.d.ts');
const AUTOFIX = path.join(root, 'lib', 'autofix.d.ts');

/** A declaration file as the TypeScript printer writes it without comments: its surface. */
function surface(file: string): string {
  const source = ts.createSourceFile(file, fs.readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022, true, ts.ScriptKind.TS);
  const printed = ts.createPrinter({ removeComments: true, newLine: ts.NewLineKind.LineFeed }).printFile(source);
  return `// ${path.relative(root, file)}\n${printed}`;
}

const program = ts.createProgram([ENTRY, CODEMODE], {
  strict: true,
  noEmit: true,
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  types: ['node'],
  typeRoots: [path.join(root, 'node_modules', '@types')],
});
const checker = program.getTypeChecker();

function exportsOf(file: string): Map<string, ts.Symbol> {
  const moduleSymbol = checker.getSymbolAtLocation(program.getSourceFile(file)!)!;
  return new Map(checker.getExportsOfModule(moduleSymbol).map((s) => [s.name, s]));
}
const publicTypes = exportsOf(ENTRY);
const codemodeTypes = exportsOf(CODEMODE);

function declaredType(name: string, from = publicTypes): ts.Type {
  const symbol = from.get(name);
  if (!symbol) throw new Error(`index.d.ts exports no ${name}`);
  return checker.getDeclaredTypeOfSymbol(symbol);
}

/** The string literals of a union type (or of one literal type), sorted. */
function literals(type: ts.Type): string[] {
  const members = type.isUnion() ? type.types : [type];
  return members
    .map((t) => {
      if (!t.isStringLiteral()) throw new Error(`${checker.typeToString(type)} is not a union of string literals`);
      return t.value;
    })
    .sort();
}

function propertyType(type: ts.Type, name: string): ts.Type {
  const property = checker.getPropertyOfType(type, name);
  if (!property) throw new Error(`${checker.typeToString(type)} has no property ${name}`);
  return checker.getNonNullableType(checker.getTypeOfSymbol(property));
}

function propertyNames(type: ts.Type): string[] {
  return checker.getPropertiesOfType(type).map((p) => p.name);
}

/** A value the runtime must refuse for an option of this type: not whole, or not even a number. */
function badValueFor(type: ts.Type): unknown {
  return type.flags & ts.TypeFlags.Number ? 1.5 : 12345;
}

/** What isolet-core says: each error kind's class and code (crates/isolet-core/src/error.rs). */
function errorKinds(): Array<{ kind: string; className: string; code: string }> {
  const rust = fs.readFileSync(path.join(root, 'crates', 'isolet-core', 'src', 'error.rs'), 'utf8');
  const arms = (fn: string) => {
    const start = rust.indexOf(`pub fn ${fn}(self)`);
    const body = rust.slice(start, rust.indexOf('\n    }\n', start));
    const byKind = new Map<string, string>();
    for (const [, kinds, value] of body.matchAll(/((?:ErrorKind::\w+\s*\|\s*)*ErrorKind::\w+)\s*=>\s*"(\w+)"/g)) {
      for (const kind of kinds.split('|')) byKind.set(kind.trim().replace('ErrorKind::', ''), value);
    }
    return byKind;
  };
  const classes = arms('class_name');
  const codes = arms('code');
  const count = Number(/pub const ALL: \[ErrorKind; (\d+)\]/.exec(rust)![1]);
  expect(classes.size).toBe(count);
  expect([...codes.keys()].sort()).toEqual([...classes.keys()].sort());
  return [...classes].map(([kind, className]) => ({ kind, className, code: codes.get(kind)! }));
}

describe('the declaration surface', () => {
  // After a deliberate change to the types: `npx vitest run __test__/types.spec.ts -u`, and commit the .snap.
  it('matches the committed snapshots in __test__/__snapshots__', async () => {
    await expect(`${surface(ENTRY)}\n${surface(AUTOFIX)}`).toMatchFileSnapshot('./__snapshots__/index.d.ts.snap');
    await expect(surface(CODEMODE)).toMatchFileSnapshot('./__snapshots__/codemode.d.ts.snap');
  });

  it('compiles on its own under strict settings', () => {
    const problems = [ENTRY, CODEMODE, AUTOFIX].flatMap((file) => {
      const source = program.getSourceFile(file)!;
      return [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)];
    });
    expect(problems.map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'))).toEqual([]);
  });

  it('uses no `any`: what crosses from the sandbox is `unknown`', () => {
    const found: string[] = [];
    for (const file of [ENTRY, CODEMODE, AUTOFIX]) {
      const source = program.getSourceFile(file)!;
      const visit = (node: ts.Node): void => {
        if (node.kind === ts.SyntaxKind.AnyKeyword) {
          const { line } = source.getLineAndCharacterOfPosition(node.getStart());
          found.push(`${path.relative(root, file)}:${line + 1}: ${node.parent.getText()}`);
        }
        ts.forEachChild(node, visit);
      };
      visit(source);
    }
    expect(found).toEqual([]);
  });
});

describe('error names and codes', () => {
  const kinds = errorKinds();
  const classes = { SandboxError, SandboxTimeoutError, SandboxOOMError, SandboxRuntimeError, SandboxValidationError, SandboxAbortedError };

  it("are isolet-core's error kinds: six class names, one code per kind", () => {
    expect(literals(declaredType('SandboxErrorName'))).toEqual([...new Set(kinds.map((k) => k.className))].sort());
    expect(literals(declaredType('SandboxErrorCode'))).toEqual(kinds.map((k) => k.code).sort());
    const baseCodes = kinds.filter((k) => k.className === 'SandboxError').map((k) => k.code).sort();
    expect(literals(declaredType('SandboxBaseErrorCode'))).toEqual(baseCodes);
    expect(literals(propertyType(declaredType('SandboxBaseError'), 'code'))).toEqual(baseCodes);
    for (const name of Object.keys(classes)) {
      const classType = declaredType(name);
      const own = kinds.filter((k) => k.className === name).map((k) => k.code).sort();
      expect(literals(propertyType(classType, 'code')), `${name}.code`).toEqual(name === 'SandboxError' ? kinds.map((k) => k.code).sort() : own);
      if (name !== 'SandboxError') expect(literals(propertyType(classType, 'name')), `${name}.name`).toEqual([name]);
    }
  });

  it('each class has at run time the name and code its type says', () => {
    for (const [name, Class] of Object.entries(classes)) {
      const err = new Class('m');
      const typedNames = literals(propertyType(declaredType(name), 'name'));
      const typedCodes = literals(propertyType(declaredType(name), 'code'));
      expect(err.name).toBe(name);
      expect(typedNames).toContain(err.name);
      expect(typedCodes).toContain(err.code);
      expect(err).toBeInstanceOf(SandboxError);
    }
    // The base class's default code is one of a plain SandboxError's.
    expect(literals(declaredType('SandboxBaseErrorCode'))).toContain(new SandboxError('m').code);
  });

  it('real failures carry a name and code of their class as typed', async () => {
    const names = literals(declaredType('SandboxErrorName'));
    const failures = await Promise.all([
      runSandbox('for (;;) {}', { isolation: 'thread', timeoutMs: 50 }),
      runSandbox('throw new TypeError("no")', { isolation: 'thread' }),
      runSandbox('let = ;', { isolation: 'thread' }),
      runSandbox('1', { isolation: 'thread', signal: AbortSignal.abort() }),
      runSandbox('1', { isolation: 'thread', timeoutMs: -1 }),
    ]);
    const notReady = await new SandboxEngine({ isolation: 'thread' }).submit({ code: 'return 1' }).done;
    const errors = [...failures.map((r) => (r.success ? undefined : r.error)), notReady.type === 'error' ? notReady.error : undefined];
    expect(errors.map((e) => e?.name)).toEqual(['SandboxTimeoutError', 'SandboxRuntimeError', 'SandboxValidationError', 'SandboxAbortedError', 'SandboxValidationError', 'SandboxError']);
    for (const error of errors) {
      expect(names).toContain(error!.name);
      expect(literals(propertyType(declaredType(error!.name), 'code'))).toContain(error!.code);
    }
    expect(errors[5]!.code).toBe('ERR_ISOLET_NOT_READY');
  });
});

describe('every option the types list is read by the runtime under that name', () => {
  const engines: SandboxEngine[] = [];
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'isolet-types-'));
  afterAll(async () => {
    await Promise.all(engines.map((e) => e.shutdown()));
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** Each property of `typeName` with a value the runtime must refuse, naming the option. */
  function badOptions(typeName: string, from = publicTypes): Array<[string, unknown]> {
    const type = declaredType(typeName, from);
    return propertyNames(type).map((name) => [name, badValueFor(propertyType(type, name))]);
  }

  function refusal(fn: () => unknown): string {
    try {
      fn();
    } catch (err) {
      expect(err).toBeInstanceOf(SandboxValidationError);
      return (err as Error).message;
    }
    throw new Error('no error');
  }

  it('createSandbox(options) and sandbox.run(code, options)', async () => {
    const options = badOptions('PersistentSandboxOptions');
    expect(options.length).toBeGreaterThanOrEqual(17);
    for (const [name, value] of options) {
      await expect(createSandbox({ isolation: 'thread', [name]: value }), name).rejects.toThrow(name);
    }
    const sandbox = await createSandbox({ isolation: 'thread' });
    for (const [name, value] of badOptions('SandboxRunOptions')) {
      const r = await sandbox.run('1', { [name]: value });
      expect(r.success, name).toBe(false);
      if (!r.success) expect(r.error.message, name).toContain(name);
    }
    sandbox.close();
  });

  it('runSandbox(code, options)', async () => {
    const options = badOptions('SandboxOptions');
    expect(options.length).toBeGreaterThanOrEqual(14);
    for (const [name, value] of options) {
      const r = await runSandbox('1', { isolation: 'thread', [name]: value });
      expect(r.success, name).toBe(false);
      if (r.success) continue;
      expect(r.error, name).toBeInstanceOf(SandboxValidationError);
      expect(r.error.message, name).toContain(name);
    }
  });

  it('new SandboxEngine(config), its default limits included', () => {
    const config = badOptions('SandboxEngineConfig');
    expect(config.map(([name]) => name)).toEqual(expect.arrayContaining(['memoryMb', 'maxConcurrentIsolates', 'warmPoolSize', 'wasmModules', 'defaultIsolateLimits', 'defaultBridgeLimits']));
    for (const [name, value] of config) {
      expect(refusal(() => new SandboxEngine({ isolation: 'thread', [name]: value })), name).toContain(name);
    }
    for (const [where, typeName] of [['defaultIsolateLimits', 'IsolateLimits'], ['defaultBridgeLimits', 'BridgeLimits']]) {
      for (const [name, value] of badOptions(typeName)) {
        expect(refusal(() => new SandboxEngine({ isolation: 'thread', [where]: { [name]: value } })), name).toContain(`${where}.${name}`);
      }
    }
  });

  it('engine.submit(request), its limits and tool policy included', async () => {
    const engine = new SandboxEngine({ isolation: 'thread', tools: { add: (a: number, b: number) => a + b } });
    engines.push(engine);
    await engine.init();
    const refused = async (request: Record<string, unknown>) => {
      const end = await engine.submit({ code: 'return 1', ...request }).done;
      expect(end.type).toBe('error');
      if (end.type !== 'error') return '';
      expect(end.error).toBeInstanceOf(SandboxValidationError);
      return end.message;
    };
    for (const [name, value] of badOptions('ExecuteMessage')) {
      if (name === 'requestId') {
        // Any string is a valid id: the option is read when the session carries it.
        const session = engine.submit({ requestId: 'given-id', code: 'return 1' });
        expect(session.requestId).toBe('given-id');
        expect(((await session.done) as SandboxEvent).requestId).toBe('given-id');
        continue;
      }
      expect(await refused({ [name]: value }), name).toContain(name);
    }
    for (const [where, typeName] of [['isolateLimits', 'IsolateLimits'], ['bridgeLimits', 'BridgeLimits'], ['toolPolicy', 'ToolPolicy']]) {
      for (const [name, value] of badOptions(typeName)) {
        expect(await refused({ [where]: { [name]: value } }), `${where}.${name}`).toContain(`${where}.${name}`);
      }
    }
  });

  it('the capabilities and the codemode executor', () => {
    for (const [name, value] of badOptions('FileReadOptions')) {
      expect(refusal(() => createFileReadCapability(dir, { [name]: value })), name).toContain(name);
    }
    for (const [name, value] of badOptions('FetchCapabilityOptions')) {
      expect(refusal(() => createFetchCapability({ allowedOrigins: ['http://127.0.0.1'], [name]: value })), name).toContain(name);
    }
    const own = badOptions('IsoletExecutorOptions', codemodeTypes).filter(([name]) => !propertyNames(declaredType('SandboxEngineConfig')).includes(name));
    expect(own.map(([name]) => name).sort()).toEqual(['fetch', 'idleTimeout', 'idleTimeoutMs', 'language', 'stateful', 'timeout', 'timeoutMs']);
    for (const [name, value] of own) {
      expect(refusal(() => new IsoletExecutor({ isolation: 'thread', [name]: value })), name).toContain(name);
    }
  });
});
