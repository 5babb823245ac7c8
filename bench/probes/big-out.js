// A 32 MB Uint8Array and a 32 MB string out of a process-mode run, for one checkout:
// `node bench/probes/big-out.js [root]` prints one JSON line, the p50 ms of 12 of each
// (after a warm-up). `ab.js <A> <B> [rounds] --probe=big-out.js` alternates checkouts.
const path = require('node:path');
const root = path.resolve(process.argv[2] || path.join(__dirname, '..', '..'));
const { runSandbox } = require(path.join(root, 'index.js'));
const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
(async () => {
  const out = {};
  const cases = { u8OutMs: 'new Uint8Array(32 << 20).fill(7)', strOutMs: "'x'.repeat(32 << 20)" };
  for (const [name, code] of Object.entries(cases)) {
    const times = [];
    for (let i = 0; i < 13; i++) {
      const t = process.hrtime.bigint();
      const r = await runSandbox(code, { memoryLimitMb: 256, maxOutputBytes: 64 << 20 });
      if (!r.success) throw new Error(r.error.message);
      if (i > 0) times.push(Number(process.hrtime.bigint() - t) / 1e6);
    }
    out[name] = median(times);
  }
  console.log(JSON.stringify(out));
  process.exit(0);
})().catch((e) => { console.error(e); process.exit(1); });
