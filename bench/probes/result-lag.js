// The cost to Node's thread of the slowest results at the default value limit: `node
// bench/probes/result-lag.js [process|thread]` prints, per kind, the event-loop lag around
// each of 15 runs (monitorEventLoopDelay's max, p50/p90/max over the runs) and the main
// thread's CPU per run (/proc/self/task/<pid>/schedstat). `baseline` is a trivial run:
// its lag is the machine's noise.
const path = require('node:path');
const { runSandbox } = require(path.join(__dirname, '..', '..'));
const { monitorEventLoopDelay } = require('node:perf_hooks');
const fs = require('node:fs');
const mainMs = () => Number(fs.readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[0]) / 1e6;
const kinds = {
  baseline: '1',
  distinct: "const a=[]; for (let i=0;i<10922;i++) a.push({['k'+i]: i}); a",
  distinct3: "const a=[]; for (let i=0;i<6553;i++) a.push({['k'+i]: i, ['j'+i]: i}); a",
  bigobj: "const o={}; for (let i=0;i<16000;i++) o['k'+i]=i; o",
  strings: "const a=[]; for (let i=0;i<32000;i++) a.push('s'+i); a",
};
(async () => {
  const isolation = process.argv[2] || 'process';
  for (const [name, code] of Object.entries(kinds)) {
    const lags = [], cpu = [];
    for (let i = 0; i < 15; i++) {
      const h = monitorEventLoopDelay({ resolution: 1 }); h.enable();
      const c0 = mainMs();
      const r = await runSandbox(code, { isolation, timeoutMs: 10000 });
      cpu.push(mainMs() - c0);
      h.disable();
      if (!r.success) { console.log(name, r.error.message); break; }
      lags.push(h.max / 1e6);
    }
    lags.sort((a, b) => a - b); cpu.sort((a, b) => a - b);
    console.log(isolation, name.padEnd(10), 'lag per run p50', lags[7].toFixed(1), 'p90', lags[13].toFixed(1), 'max', lags[14].toFixed(1), '| main-thread CPU per run ms p50', cpu[7].toFixed(1), 'max', cpu[14].toFixed(1));
  }
})();
