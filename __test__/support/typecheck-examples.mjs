// Type-checks documentation examples in a process of its own, so the test's event loop
// stays free to run the examples meanwhile: `node typecheck-examples.mjs <typeRoots> <file>...`.
// Prints the diagnostics of those files as JSON: [{ file, line (0-based), message }].
import ts from 'typescript';

const [typeRoots, ...files] = process.argv.slice(2);
const program = ts.createProgram(files, {
  strict: true,
  noEmit: true,
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  // Third-party declarations (codemode's need the Workers globals) are not ours to check.
  skipLibCheck: true,
  types: ['node'],
  typeRoots: [typeRoots],
});
const wanted = new Set(files);
const problems = ts
  .getPreEmitDiagnostics(program)
  .filter((d) => d.file && wanted.has(d.file.fileName))
  .map((d) => ({
    file: d.file.fileName,
    line: d.file.getLineAndCharacterOfPosition(d.start ?? 0).line,
    message: ts.flattenDiagnosticMessageText(d.messageText, '\n'),
  }));
process.stdout.write(JSON.stringify(problems));
