// Warm trivial runs in both isolation modes, as the bench's "runs 3 ms apart" row times them:
// `node --no-node-snapshot bench/probes/trivial-modes.js [root]` prints, for thread then
// process mode, the p50 of 300 runSandbox('1+1') 3 ms apart (µs) and how many of them
// found a warm isolate (engine stats). Run it for several checkouts in turn to compare
// the process - thread gap (issue 17's goal: at most 0.10 ms).
const path = require('node:path');
const root = path.resolve(process.argv[2] || path.join(__dirname, '..', '..'));
const { runSandbox } = require(path.join(root, 'index.js'));
const { getDefaultEngine } = require(path.join(root, 'lib/run-sandbox.js'));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
(async () => {
  const out = {};
  for (const isolation of ['thread', 'process']) {
    await runSandbox('1', { isolation });
    await sleep(300);
    const engine = getDefaultEngine(isolation);
    const before = engine.stats();
    const walls = [];
    for (let i = 0; i < 300; i++) {
      await sleep(3);
      const t = process.hrtime.bigint();
      const r = await runSandbox('1+1', { isolation });
      if (!r.success) throw new Error(r.error.message);
      walls.push(Number(process.hrtime.bigint() - t) / 1e3);
    }
    await sleep(100);
    const after = engine.stats();
    walls.sort((a, b) => a - b);
    out[`${isolation}P50Us`] = Math.round(walls[150]);
    out[`${isolation}WarmStarts`] = after.warmStarts - before.warmStarts;
  }
  out.gapUs = out.processP50Us - out.threadP50Us;
  console.log(JSON.stringify(out));
  process.exit(0);
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
