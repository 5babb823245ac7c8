// CPU profile target: 60 thread-mode runs of 1,000 awaited host calls.
const { runSandbox } = require('../..');
(async () => {
  const code = `let s = 0; for (let i = 0; i < 1000; i++) s += await f(i); return s;`;
  for (let i = 0; i < 60; i++) await runSandbox(code, { isolation: 'thread', capabilities: { f: (i) => i }, maxHostCalls: 1000 });
  process.exit(0);
})();
