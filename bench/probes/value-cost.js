// What values from a run cost the parent once built, and its event loop while they arrive:
// `node bench/probes/value-cost.js [thread|process]` prints one JSON line per case: the
// parent's JS heap held by the built value (after a full GC, value alive, against after
// it is dropped), bytes per value, and the loop's delay (monitorEventLoopDelay, 1 ms
// resolution) from submit to answer. Run with --expose-gc.
'use strict';
const { monitorEventLoopDelay } = require('node:perf_hooks');
const { runSandbox } = require('../..');

const isolation = process.argv[2] || 'process';
const heap = () => {
  global.gc();
  global.gc();
  return process.memoryUsage().heapUsed;
};

async function measure(name, values, run) {
  const before = heap();
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  const t = performance.now();
  // The value lives only in this function: dropped once it returns.
  const { ok, held, wallMs } = await (async () => {
    const kept = await run();
    const wallMs = performance.now() - t;
    h.disable();
    return { ok: kept !== undefined, held: heap() - before, wallMs };
  })();
  await new Promise((resolve) => setImmediate(resolve));
  const after = heap() - before;
  console.log(JSON.stringify({ isolation, case: name, ok, values, heldMb: +(held / 2 ** 20).toFixed(1), bytesPerValue: +(held / values).toFixed(1), afterDropMb: +(after / 2 ** 20).toFixed(1), lagMaxMs: +(h.max / 1e6).toFixed(1), lagP99Ms: +(h.percentile(99) / 1e6).toFixed(1), wallMs: Math.round(wallMs) }));
}

(async () => {
  await runSandbox('1', { isolation });
  // A result of 2,000,000 short strings (distinct, so none is shared).
  await measure('result: 2e6 short strings', 2e6, async () => {
    const r = await runSandbox("const a = []; for (let i = 0; i < 2e6; i++) a.push('s' + (i % 1000000)); a", { isolation, timeoutMs: 60000, memoryLimitMb: 256, maxOutputBytes: 64 << 20 });
    if (!r.success) throw r.error;
    return r.output;
  });
  // Four pending host calls, 100,000 short strings each, to a capability that holds them
  // until all four arrived: what the parent holds while they wait.
  await measure('pending call arguments: 4 x 1e5 strings', 4e5, async () => {
    const held = [];
    let release;
    const all = new Promise((resolve) => (release = resolve));
    const hold = (arr) => {
      held.push(arr);
      if (held.length === 4) release();
      return all.then(() => arr.length);
    };
    const run = runSandbox("const big = Array.from({ length: 1e5 }, (_, i) => 'v' + i); const p = []; for (let i = 0; i < 4; i++) p.push(hold(big)); return (await Promise.all(p)).length", { isolation, timeoutMs: 60000, capabilities: { hold } });
    await all;
    const kept = held.slice();
    const r = await run;
    if (!r.success) throw r.error;
    return kept;
  });
})();
