// Thread-mode host calls only (the wake-up path between Node's thread and an isolate
// thread): `node bench/probes/wake-calls.js [root]` prints one JSON line of medians over
// 15 runs each (after 5 of each to warm up): 1,000 awaited calls to a synchronous handler (wall and process CPU per
// call), the same 100 in flight at once, and 20 runs of 8 concurrent runs making 100
// calls each (events of many runs per wake-up). `ab.js <A> <B> [rounds] --probe=wake-calls.js` alternates it between checkouts.
const path = require('node:path');
const root = path.resolve(process.argv[2] || path.join(__dirname, '..', '..'));
const { runSandbox } = require(path.join(root, 'index.js'));

const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
const nowUs = () => Number(process.hrtime.bigint()) / 1e3;
const cpuUs = () => { const c = process.cpuUsage(); return c.user + c.system; };

async function ok(code, options) {
  const r = await runSandbox(code, { isolation: 'thread', ...options });
  if (!r.success) throw new Error(`${r.error.name}: ${r.error.message}`);
  return r.output;
}

(async () => {
  const out = {};
  const CALLS = 1000;
  const capabilities = { f: (x) => x };
  const seq = `let s = 0; for (let i = 0; i < ${CALLS}; i++) s += await f(i); return s;`;
  const par = `let s = 0; for (let r = 0; r < 10; r++) { const v = await Promise.all(Array.from({ length: 100 }, (_, i) => f(r * 100 + i))); for (const x of v) s += x; } return s;`;
  // Warm the JIT on both shapes first: a fresh process is slower for its first runs.
  for (let i = 0; i < 5; i++) {
    await ok(seq, { capabilities, maxHostCalls: CALLS });
    await ok(par, { capabilities, maxHostCalls: CALLS });
  }
  for (const [key, code] of [['call', seq], ['callBatch', par]]) {
    const wall = [], cpus = [];
    for (let i = 0; i < 15; i++) {
      const t = nowUs(), c = cpuUs();
      const v = await ok(code, { capabilities, maxHostCalls: CALLS });
      if (v !== (CALLS * (CALLS - 1)) / 2) throw new Error('wrong sum');
      wall.push((nowUs() - t) / CALLS);
      cpus.push((cpuUs() - c) / CALLS);
    }
    out[`${key}WallUs`] = median(wall);
    out[`${key}CpuUs`] = median(cpus);
  }
  // 8 runs at once, 100 awaited calls each: per call over all runs.
  {
    const code = `let s = 0; for (let i = 0; i < 100; i++) s += await f(i); return s;`;
    const wall = [], cpus = [];
    for (let i = 0; i < 20; i++) {
      const t = nowUs(), c = cpuUs();
      await Promise.all(Array.from({ length: 8 }, () => ok(code, { capabilities })));
      wall.push((nowUs() - t) / 800);
      cpus.push((cpuUs() - c) / 800);
    }
    out.call8RunsWallUs = median(wall);
    out.call8RunsCpuUs = median(cpus);
  }
  console.log(JSON.stringify(out));
  process.exit(0);
})().catch((e) => { console.error(e); process.exit(1); });
