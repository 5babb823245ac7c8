// Process isolation's trivial run only, for one checkout: `node bench/probes/procpipe-trivial.js [root]`
// prints one JSON line: p50 of 300 runSandbox('1+1') runs 3 ms apart and 300 back to back,
// in thread and process mode. `ab.js <A> <B> [rounds] --probe=procpipe-trivial.js` alternates it.
const path = require('node:path');
const root = path.resolve(process.argv[2] || path.join(__dirname, '..', '..'));
const { runSandbox } = require(path.join(root, 'index.js'));

const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const nowUs = () => Number(process.hrtime.bigint()) / 1e3;

(async () => {
  const out = {};
  for (const isolation of ['thread', 'process']) {
    const p = isolation[0];
    await runSandbox('1', { isolation });
    await sleep(300);
    const spaced = [], b2b = [];
    for (let i = 0; i < 300; i++) {
      await sleep(3);
      const t = nowUs();
      await runSandbox('1+1', { isolation });
      spaced.push(nowUs() - t);
    }
    for (let i = 0; i < 300; i++) {
      const t = nowUs();
      await runSandbox('1+1', { isolation });
      b2b.push(nowUs() - t);
    }
    out[`${p}TrivialSpacedP50Us`] = median(spaced);
    out[`${p}TrivialB2bP50Us`] = median(b2b);
  }
  console.log(JSON.stringify(out));
  process.exit(0);
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
