// engine.submit() alone: p50/p90/p99 with runs 1, 3 and 10 ms apart.
const { getDefaultEngine } = require('../../lib/run-sandbox');
// A checked run plan of '1+1' (what runSandbox submits), made once.
const PLAN_1_PLUS_1 = require('../../lib/native').planRun('1+1', { isolation: 'thread' });
const q = (a, p) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length * p)].toFixed(1); };
(async () => {
  const eng = getDefaultEngine('thread');
  await new Promise((r) => setTimeout(r, 300));
  for (const gap of [1, 3, 10]) {
    const S = [];
    for (let i = 0; i < 400; i++) {
      await new Promise((r) => setTimeout(r, gap));
      let t;
      await new Promise((resolve) => { t = process.hrtime.bigint(); eng.submit(PLAN_1_PLUS_1, (ev) => { if (ev === 'done') resolve(); }, false); S.push(Number(process.hrtime.bigint() - t) / 1e3); });
    }
    const st = eng.stats();
    console.log(`gap ${gap} ms: submit() p50 ${q(S, 0.5)} us, p90 ${q(S, 0.9)} us, p99 ${q(S, 0.99)} us; warm starts ${st.warmStarts}, cold ${st.coldStarts}`);
  }
  process.exit(0);
})();
