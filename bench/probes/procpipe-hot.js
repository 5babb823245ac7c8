// Process isolation's hot paths for one checkout, next to thread mode in the same
// process: `node bench/probes/procpipe-hot.js [root]` prints one JSON line of medians
// (trivial run spaced 3 ms and back to back, host-call round trip in turn and 100 at once, and 32 MB
// Uint8Array / string copies each way, copy time = run with the copy minus the same run
// without it). `ab.js <A> <B> [rounds] --probe=procpipe-hot.js` alternates it between two checkouts.
const path = require('node:path');
const root = path.resolve(process.argv[2] || path.join(__dirname, '..', '..'));
const { runSandbox } = require(path.join(root, 'index.js'));

const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const nowUs = () => Number(process.hrtime.bigint()) / 1e3;

async function ok(code, options) {
  const r = await runSandbox(code, options);
  if (!r.success) throw new Error(`${r.error.name}: ${r.error.message}`);
  return r.output;
}

const BIG = 32 * 1024 * 1024;
const BIG_LIMITS = { memoryLimitMb: 1024, maxOutputBytes: 64 << 20, maxMessageBytes: 64 << 20, timeoutMs: 20000 };

(async () => {
  const out = {};
  for (const isolation of ['thread', 'process']) {
    const p = isolation[0];
    await ok('1+1', { isolation });
    await sleep(300);
    const spaced = [];
    for (let i = 0; i < 200; i++) {
      await sleep(3);
      const t = nowUs();
      await ok('1+1', { isolation });
      spaced.push(nowUs() - t);
    }
    out[`${p}TrivialSpacedP50Us`] = median(spaced);
    const b2b = [];
    for (let i = 0; i < 200; i++) {
      const t = nowUs();
      await ok('1+1', { isolation });
      b2b.push(nowUs() - t);
    }
    out[`${p}TrivialB2bP50Us`] = median(b2b);

    // 1,000 host calls awaited in turn; µs per call, median of 7 runs.
    const CALLS = 1000;
    const seq = `let s = 0; for (let i = 0; i < ${CALLS}; i++) s += await f(i); return s;`;
    const calls = [];
    for (let i = 0; i < 7; i++) {
      const t = nowUs();
      await ok(seq, { isolation, capabilities: { f: (x) => x }, maxHostCalls: CALLS });
      calls.push((nowUs() - t) / CALLS);
    }
    out[`${p}CallUs`] = median(calls);
    // The same 1,000 calls, 100 in flight at once (Promise.all); µs per call.
    const par = `let s = 0; for (let r = 0; r < 10; r++) { const v = await Promise.all(Array.from({ length: 100 }, (_, i) => f(r * 100 + i))); for (const x of v) s += x; } return s;`;
    const batch = [];
    for (let i = 0; i < 7; i++) {
      const t = nowUs();
      await ok(par, { isolation, capabilities: { f: (x) => x }, maxHostCalls: CALLS });
      batch.push((nowUs() - t) / CALLS);
    }
    out[`${p}CallBatchUs`] = median(batch);

    const u8 = new Uint8Array(BIG).fill(7);
    const str = 'abcdefgh'.repeat(BIG / 8);
    const rows = {
      U8OutMs: [`const u = new Uint8Array(${BIG}).fill(7); u`, `const u = new Uint8Array(${BIG}).fill(7); u.length`, {}],
      StrOutMs: [`const s = 'abcdefgh'.repeat(${BIG / 8}); s.indexOf('z'); s`, `const s = 'abcdefgh'.repeat(${BIG / 8}); s.indexOf('z'); s.length`, {}],
      U8InMs: ['return (await get()).length', 'return await get()', { get: () => u8 }],
      StrInMs: ['return (await get()).length', 'return await get()', { get: () => str }],
    };
    for (const [key, [copy, base, caps]] of Object.entries(rows)) {
      const tc = [], tb = [];
      for (let i = 0; i < 5; i++) {
        let t = nowUs();
        await ok(copy, { ...BIG_LIMITS, isolation, capabilities: key.endsWith('InMs') ? caps : undefined });
        tc.push(nowUs() - t);
        t = nowUs();
        await ok(base, { ...BIG_LIMITS, isolation, capabilities: key.endsWith('InMs') ? { get: () => BIG } : undefined });
        tb.push(nowUs() - t);
      }
      out[`${p}${key}`] = Math.max(0.001, (median(tc) - median(tb)) / 1000);
    }
  }
  console.log(JSON.stringify(out));
  process.exit(0);
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
