#!/usr/bin/env node
// `npm run demo`: the seed examples, run for real.
'use strict';
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { runSandbox, createFileReadCapability, SandboxEngine, DEFAULT_ISOLATE_LIMITS, DEFAULT_BRIDGE_LIMITS } = require('..');

async function main() {
  // 1. @azmr/ai: the usage example.
  const result = await runSandbox(`
  const nums = [1, 2, 3, 4, 5];
  nums.reduce((a, b) => a + b, 0);
`);
  if (result.success) {
    console.log(result.output); // 15
  }

  // 2. @azmr/ai: a file reader scoped to one directory.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'isolet-demo-'));
  fs.writeFileSync(path.join(dir, 'notes.txt'), 'hello from notes.txt');
  const withFile = await runSandbox(
    `const file = await readFile({ path: "notes.txt" }); return file.content;`,
    { capabilities: { readFile: createFileReadCapability(dir) } },
  );
  console.log('readFile:', withFile.success ? withFile.output : withFile.error.message);
  const escapeAttempt = await runSandbox(`return await readFile({ path: "../../etc/passwd" });`, {
    capabilities: { readFile: createFileReadCapability(dir) },
  });
  console.log('escape attempt:', escapeAttempt.success ? 'READ (bug!)' : `${escapeAttempt.error.name}: ${escapeAttempt.error.message}`);
  fs.rmSync(dir, { recursive: true, force: true });

  // 3. A runaway script and a heap bomb: typed errors, host unharmed.
  const loop = await runSandbox('while (true) {}', { timeoutMs: 200 });
  console.log('infinite loop:', loop.error.name);
  const bomb = await runSandbox('const a = []; while (true) a.push({ a })');
  console.log('heap bomb:', bomb.error.name);

  // 4. @coda/sandbox: the engine with a data request.
  const engine = new SandboxEngine({
    memoryMb: 128, // the seed's name for memoryLimitMb
    maxConcurrentIsolates: 4,
    warmPoolSize: 2,
    wasmModules: [],
    defaultIsolateLimits: DEFAULT_ISOLATE_LIMITS,
    defaultBridgeLimits: DEFAULT_BRIDGE_LIMITS,
  });
  await engine.init();
  const session = engine.submit({ requestId: 'req_123', code: 'return data.accounts.length;' });
  for await (const event of session) {
    switch (event.type) {
      case 'status':
        console.log('Status:', event.message);
        break;
      case 'dataRequest':
        session.respond(event.id, [{ id: 'acc_1' }, { id: 'acc_2' }]);
        break;
      case 'result':
        console.log('Result:', event.data);
        break;
      case 'error':
        console.error('Error:', event.message);
        break;
    }
  }
  await engine.shutdown();

  // 5. TypeScript, as a model writes it: types are erased, positions kept.
  const ts = await runSandbox(
    `interface Issue { id: number; title: string }
     const issues: Issue[] = await github.listIssues({ repo: 'acme/app' });
     return issues.map((i: Issue): string => \`#\${i.id} \${i.title}\`);`,
    {
      language: 'typescript',
      capabilities: { github: { listIssues: async () => [{ id: 7, title: 'Crash on start' }] } },
    },
  );
  console.log('TypeScript:', ts.success ? ts.output : ts.error.message);
  const tsEnum = await runSandbox('enum Color { Red, Green }\nColor.Green', { language: 'typescript' });
  console.log('TypeScript enum:', tsEnum.output);
  const badTs = await runSandbox('const ok: number = 1;\nconst broken = ;', { language: 'typescript' });
  console.log('TypeScript syntax error:', `${badTs.error.name} at line ${badTs.error.line}, column ${badTs.error.column}`);

  // 6. Code Mode: the model's one program calls typed tools (@cloudflare/codemode's Executor contract).
  const { IsoletExecutor } = require('isolet/codemode'); // the package's own export, by self-reference
  const executor = new IsoletExecutor({ timeoutMs: 2000, memoryLimitMb: 64 });
  const weather = [{ name: 'weather', fns: { get: async ({ city }) => ({ city, tempC: city === 'Oslo' ? 4 : 21 }) } }];
  const program = `async () => {
    const cities = ['Oslo', 'Lisbon'];
    const all = await Promise.all(cities.map((city) => weather.get({ city })));
    console.log('asked', all.length, 'cities');
    return all.sort((a, b) => b.tempC - a.tempC)[0].city;
  }`;
  console.log('Code Mode:', await executor.execute(program, weather));
  console.log('Code Mode timeout:', await executor.execute('async () => { for (;;) {} }', weather));
  await executor.dispose();
}

main().then(
  () => {
    // 7. autoFix against a local chat-completions stub.
    require('./autofix-demo');
  },
  (err) => {
    console.error(err);
    process.exitCode = 1;
  },
);
