// Release smoke test: run inside a fresh project that installed the packed tarball
// (`npm install --ignore-scripts`, no Rust or C compiler on PATH). Imports isolet by
// name as ESM, runs the two seed snippets and one SandboxEngine session; exits non-zero
// on any difference.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import {
  runSandbox,
  createFileReadCapability,
  SandboxEngine,
  DEFAULT_ISOLATE_LIMITS,
  DEFAULT_BRIDGE_LIMITS,
  runtime,
} from 'isolet';

const require = createRequire(path.join(process.cwd(), 'smoke.cjs'));
const pkgDir = path.dirname(require.resolve('isolet/package.json'));
// The binary must come from the package's prebuilds, not a source build.
assert.equal(fs.existsSync(path.join(pkgDir, 'build')), false, 'installed package has a build/ directory');
assert.equal(fs.existsSync(path.join(pkgDir, 'target')), false, 'installed package has a target/ directory');
assert.equal(require('isolet').runSandbox, runSandbox, 'require and import give different modules');

const first = await runSandbox(`
  const nums = [1, 2, 3, 4, 5];
  nums.reduce((a, b) => a + b, 0);
`);
assert.deepEqual([first.success, first.output], [true, 15], JSON.stringify(first));

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'isolet-smoke-'));
fs.writeFileSync(path.join(dir, 'notes.txt'), 'hello from notes');
const second = await runSandbox(`const file = await readFile({ path: "notes.txt" }); return file.content;`, {
  capabilities: { readFile: createFileReadCapability(dir) },
});
assert.deepEqual([second.success, second.output], [true, 'hello from notes'], JSON.stringify(second));
fs.rmSync(dir, { recursive: true });

const engine = new SandboxEngine({
  memoryMb: 128,
  maxConcurrentIsolates: 2,
  warmPoolSize: 1,
  wasmModules: [],
  defaultIsolateLimits: DEFAULT_ISOLATE_LIMITS,
  defaultBridgeLimits: DEFAULT_BRIDGE_LIMITS,
});
await engine.init();
const session = engine.submit({ requestId: 'smoke', code: 'return data.accounts.length;' });
let data;
for await (const event of session) {
  if (event.type === 'dataRequest') session.respond(event.id, [{ id: 'a' }, { id: 'b' }]);
  if (event.type === 'result') data = event.data;
  if (event.type === 'error') throw new Error(`session error: ${event.message}`);
}
await engine.shutdown();
assert.equal(data, 2);

console.log(`smoke ok: Node ${process.version}, V8 ${runtime.v8Version ?? process.versions.v8}`);
