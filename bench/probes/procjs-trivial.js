// Process isolation's per-run cost in the parent, for one checkout:
// `node bench/probes/procjs-trivial.js [root]` prints one JSON line: p50 of 400 runSandbox('1+1')
// 3 ms apart and 400 back to back (default isolation, i.e. process), the parent's CPU per
// spaced run (whole process and its main thread alone, from /proc/self/task/<pid>/schedstat), the host-call
// round trip (1,000 awaited in turn, median of 5), and thread mode's spaced p50 for reference;
// sleep*: the parent's CPU per turn of the same loop without runs (the probe's own timers).
// `ab.js <A> <B> [rounds] --probe=procjs-trivial.js` alternates it between checkouts.
const fs = require('node:fs');
const path = require('node:path');
const root = path.resolve(process.argv[2] || path.join(__dirname, '..', '..'));
const { runSandbox } = require(path.join(root, 'index.js'));

const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const nowUs = () => Number(process.hrtime.bigint()) / 1e3;
/** CPU µs of this process's main thread (schedstat: nanoseconds on a CPU). */
function mainThreadUs() {
  return Number(fs.readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[0]) / 1e3;
}
async function ok(code, options) {
  const r = await runSandbox(code, options);
  if (!r.success) throw new Error(`${r.error.name}: ${r.error.message}`);
  return r.output;
}

(async () => {
  const out = {};
  await ok('1', { isolation: 'thread' });
  await ok('1');
  await sleep(300);
  const N = 400;
  const spaced = [];
  const c0 = process.cpuUsage();
  const m0 = mainThreadUs();
  for (let i = 0; i < N; i++) {
    await sleep(3);
    const t = nowUs();
    await ok('1+1');
    spaced.push(nowUs() - t);
  }
  const c = process.cpuUsage(c0);
  out.pTrivialSpacedP50Us = median(spaced);
  // Includes the 3 ms sleeps' timer wake-ups (alike in A and B).
  out.parentCpuPerRunUs = (c.user + c.system) / N;
  out.parentMainCpuPerRunUs = (mainThreadUs() - m0) / N;
  // The same loop without the runs: what the probe's own sleeps cost (subtract it for
  // the runs' share alone).
  const s0 = process.cpuUsage();
  const sm0 = mainThreadUs();
  for (let i = 0; i < N; i++) await sleep(3);
  const sc = process.cpuUsage(s0);
  out.sleepCpuPerLoopUs = (sc.user + sc.system) / N;
  out.sleepMainCpuPerLoopUs = (mainThreadUs() - sm0) / N;
  const b2b = [];
  for (let i = 0; i < N; i++) {
    const t = nowUs();
    await ok('1+1');
    b2b.push(nowUs() - t);
  }
  out.pTrivialB2bP50Us = median(b2b);
  const CALLS = 1000;
  const seq = `let s = 0; for (let i = 0; i < ${CALLS}; i++) s += await f(i); return s;`;
  const calls = [];
  for (let i = 0; i < 5; i++) {
    const t = nowUs();
    await ok(seq, { capabilities: { f: (x) => x }, maxHostCalls: CALLS });
    calls.push((nowUs() - t) / CALLS);
  }
  out.pCallUs = median(calls);
  const tspaced = [];
  for (let i = 0; i < 200; i++) {
    await sleep(3);
    const t = nowUs();
    await ok('1+1', { isolation: 'thread' });
    tspaced.push(nowUs() - t);
  }
  out.tTrivialSpacedP50Us = median(tspaced);
  console.log(JSON.stringify(out));
  process.exit(0);
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
