// CPU profile target: 3,000 trivial thread-mode runs 1 ms apart.
const { runSandbox } = require('../..');
(async () => {
  for (let i = 0; i < 3000; i++) { await runSandbox('1+1', { isolation: 'thread' }); await new Promise((r) => setTimeout(r, 1)); }
  process.exit(0);
})();
