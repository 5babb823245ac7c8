// The engine's hot paths in thread mode, for one checkout: `node bench/probes/hot-paths.js [root]`
// (root: a checkout with a built addon; default this one). Prints one JSON line of
// medians; `ab.js` alternates it between two checkouts. Wall times and Node's-thread CPU.
const path = require('node:path');
const root = path.resolve(process.argv[2] || path.join(__dirname, '..', '..'));
const { runSandbox } = require(path.join(root, 'index.js'));
const { getDefaultEngine } = require(path.join(root, 'lib', 'run-sandbox.js'));
// A checked run plan of '1+1' (what runSandbox submits), made once.
const PLAN_1_PLUS_1 = require(path.join(root, 'lib', 'native.js')).planRun('1+1', { isolation: 'thread' });

const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
const pct = (a, p) => { const s = [...a].sort((x, y) => x - y); return s[Math.min(s.length - 1, Math.floor(s.length * p))]; };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const nowUs = () => Number(process.hrtime.bigint()) / 1e3;
const cpuUs = () => { const c = process.cpuUsage(); return c.user + c.system; };

async function ok(code, options) {
  const r = await runSandbox(code, { isolation: 'thread', ...options });
  if (!r.success) throw new Error(`${r.error.name}: ${r.error.message}`);
  return r.output;
}

(async () => {
  const out = {};
  await ok('1+1');
  await sleep(200);

  // Trivial runs 3 ms apart (the pool refills between them): wall p50 and CPU per run.
  const spaced = [];
  let cpu = 0;
  for (let i = 0; i < 150; i++) {
    await sleep(3);
    const t = nowUs(), c = cpuUs();
    await ok('1+1');
    spaced.push(nowUs() - t);
    cpu += cpuUs() - c;
  }
  out.trivialSpacedP50Us = median(spaced);
  out.trivialSpacedCpuUs = cpu / spaced.length;

  // engine.submit() alone, runs 2 ms apart: p50 and p99 (waits for the engine lock show at p99).
  const eng = getDefaultEngine('thread');
  const submit = [];
  for (let i = 0; i < 300; i++) {
    await sleep(2);
    await new Promise((resolve) => {
      const t = nowUs();
      eng.submit(PLAN_1_PLUS_1, (ev) => { if (ev === 'done') resolve(); }, false);
      submit.push(nowUs() - t);
    });
  }
  out.submitP50Us = median(submit);
  out.submitP99Us = pct(submit, 0.99);

  // Back to back.
  const b2b = [];
  for (let i = 0; i < 150; i++) {
    const t = nowUs();
    await ok('1+1');
    b2b.push(nowUs() - t);
  }
  out.trivialB2bP50Us = median(b2b);

  // Fresh-isolate throughput: 200 runs, 8 in flight.
  {
    const t = nowUs();
    let next = 0;
    await Promise.all(Array.from({ length: 8 }, async () => { while (next++ < 200) await ok('1+1'); }));
    out.runsPerS = 200 / ((nowUs() - t) / 1e6);
  }

  // Host calls: 1,000 awaited in turn, and 100 in flight at once; µs per call (wall, Node CPU).
  const CALLS = 1000;
  const seq = `let s = 0; for (let i = 0; i < ${CALLS}; i++) s += await f(i); return s;`;
  const par = `let s = 0; for (let r = 0; r < 10; r++) { const v = await Promise.all(Array.from({ length: 100 }, (_, i) => f(r * 100 + i))); for (const x of v) s += x; } return s;`;
  for (const [key, code] of [['call', seq], ['callBatch', par]]) {
    const wall = [], cpus = [];
    for (let i = 0; i < 7; i++) {
      const t = nowUs(), c = cpuUs();
      const v = await ok(code, { capabilities: { f: (x) => x }, maxHostCalls: CALLS });
      if (v !== (CALLS * (CALLS - 1)) / 2) throw new Error('wrong sum');
      wall.push((nowUs() - t) / CALLS);
      cpus.push((cpuUs() - c) / CALLS);
    }
    out[`${key}WallUs`] = median(wall);
    out[`${key}CpuUs`] = median(cpus);
  }
  console.log(JSON.stringify(out));
  process.exit(0);
})().catch((e) => { console.error(e); process.exit(1); });
