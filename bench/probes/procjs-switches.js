// Voluntary context switches of Node's main thread (from /proc/self/task/<pid>/status) per host
// call (3 runs of 1,000 awaited calls) and per back-to-back trivial run (1,000), process isolation,
// with their mean wall times: `node bench/probes/procjs-switches.js [root]`, one JSON line. A
// switch more per call or run is Node's thread blocking (a lock another thread holds) and woken.
const fs = require('node:fs'); const path = require('node:path');
const root = path.resolve(process.argv[2] || path.join(__dirname, '..', '..'));
const { runSandbox } = require(path.join(root, 'index.js'));
const vcs = () => Number(/voluntary_ctxt_switches:\s+(\d+)/.exec(fs.readFileSync(`/proc/self/task/${process.pid}/status`, 'utf8'))[1]);
(async () => {
  await runSandbox('1');
  const CALLS = 1000;
  const seq = `let s = 0; for (let i = 0; i < ${CALLS}; i++) s += await f(i); return s;`;
  await runSandbox(seq, { capabilities: { f: (x) => x }, maxHostCalls: CALLS });
  let v0 = vcs(); let t0 = process.hrtime.bigint();
  for (let i = 0; i < 3; i++) { const r = await runSandbox(seq, { capabilities: { f: (x) => x }, maxHostCalls: CALLS }); if (!r.success) throw new Error(r.error.message); }
  const callVcs = (vcs() - v0) / (3 * CALLS); const callUs = Number(process.hrtime.bigint() - t0) / 1e3 / (3 * CALLS);
  v0 = vcs(); t0 = process.hrtime.bigint();
  for (let i = 0; i < 1000; i++) { const r = await runSandbox('1+1'); if (!r.success) throw new Error(r.error.message); }
  const runVcs = (vcs() - v0) / 1000; const runUs = Number(process.hrtime.bigint() - t0) / 1e3 / 1000;
  console.log(JSON.stringify({ callVcs: +callVcs.toFixed(3), callUs: +callUs.toFixed(1), b2bVcs: +runVcs.toFixed(3), b2bUs: +runUs.toFixed(1) }));
  process.exit(0);
})();
