// One warm thread-mode run at a time, 3 ms apart: when submit returns, when started and done arrive.
const { runSandbox } = require('../..');
const { getDefaultEngine } = require('../../lib/run-sandbox');
// A checked run plan of '1+1' (what runSandbox submits), made once.
const PLAN_1_PLUS_1 = require('../../lib/native').planRun('1+1', { isolation: 'thread' });
const med = (a) => { a.sort((x, y) => x - y); return a[a.length >> 1]; };
(async () => {
  const eng = getDefaultEngine('thread');
  await new Promise((r) => setTimeout(r, 200));
  const T = { submit: [], started: [], done: [], total: [], wall: [], resolved: [] };
  for (let i = 0; i < 400; i++) {
    await new Promise((r) => setTimeout(r, 3));
    const t0 = process.hrtime.bigint();
    let ts, td;
    const p = new Promise((resolve) => {
      // A run's `done` comes as arguments: ('done', ok, value, payload, error, wallTimeMs, ...).
      eng.submit(PLAN_1_PLUS_1, (ev, _ok, _value, _payload, _error, wallTimeMs) => {
        if (ev.type === 'started') ts = process.hrtime.bigint();
        if (ev === 'done') { td = process.hrtime.bigint(); resolve({ wallTimeMs }); }
      }, true);
      T.submit.push(Number(process.hrtime.bigint() - t0) / 1e3);
    });
    const ev = await p;
    const t1 = process.hrtime.bigint();
    if (i < 20) continue;
    T.started.push(Number(ts - t0) / 1e3); T.done.push(Number(td - t0) / 1e3); T.total.push(Number(t1 - t0) / 1e3); T.wall.push(ev.wallTimeMs * 1000);
  }
  for (const k of ['submit', 'started', 'done', 'total', 'wall']) if (T[k].length) console.log(k, med(T[k]).toFixed(1), 'us');
  const R = [];
  for (let i = 0; i < 300; i++) { await new Promise((r) => setTimeout(r, 3)); const t = process.hrtime.bigint(); await runSandbox('1+1', { isolation: 'thread' }); R.push(Number(process.hrtime.bigint() - t) / 1e3); }
  console.log('runSandbox', med(R.slice(20)).toFixed(1));
  process.exit(0);
})();
