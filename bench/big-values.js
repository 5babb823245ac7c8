'use strict';
// Big values crossing with the default options (issue 23), for `npm run bench`
// (`--only=values`): while one run returns 16 MiB of small objects, a million short strings
// or 1.5 million numbers, or takes 100,000 rows or 1.5 million numbers from a capability,
// the parent's event-loop delay (monitorEventLoopDelay, 1 ms resolution: its max and p99,
// from the call until the value is built) and its resident memory once the value is
// dropped and collected, against where it started. Each measurement is a fresh child node
// (one value's memory is not the next one's baseline); the figure is the median of the
// children. Goals: delay max < 50 ms, p99 < 20 ms, memory back within 64 MB.
const { spawnSync } = require('node:child_process');
const path = require('node:path');

const ROOT = path.join(__dirname, '..');
const ROWS5 = "Array.from({ length: 100000 }, (_, i) => ({ id: i, name: 'name-' + i, email: 'u' + i + '@example.com', balance: i * 1.25, active: i % 2 === 0 }))";
const NUMBERS = 'Array.from({ length: 1.5e6 }, (_, i) => i + 0.5)';

/** name -> what the run does; `memoryLimitMb` where the sandbox itself needs more to make it. */
const SCENARIOS = {
  // ~16 MiB serialized (900,000 objects of two fields, ~72 MB once built).
  'result: 16 MiB of small objects': { code: 'Array.from({ length: 900000 }, (_, i) => ({ id: i, v: i & 1 }))', memoryLimitMb: 256 },
  'result: 1e6 short strings': { code: "Array.from({ length: 1e6 }, (_, i) => 's' + i)" },
  'result: 1.5e6 numbers': { code: NUMBERS },
  'input: 100,000 rows from a capability': { input: ROWS5, code: 'const d = await get(); return d.length' },
  'input: 1.5e6 numbers from a capability': { input: NUMBERS, code: 'const d = await get(); return d.length' },
};

// ISOLET_BENCH_ROOT: another checkout to measure (the code before issue 23, which needs
// ISOLET_BENCH_RAISE=1: every value limit raised, as it refused these values by default).
const TARGET = process.env.ISOLET_BENCH_ROOT || ROOT;
const RAISE = process.env.ISOLET_BENCH_RAISE === '1' ? ', maxOutputValues: 2 ** 26, maxMessageValues: 2 ** 26, maxPendingHostCallValues: 2 ** 26' : '';

const child = (mode, s) => `
const { runSandbox } = require(${JSON.stringify(TARGET)});
const { monitorEventLoopDelay } = require('node:perf_hooks');
const rss = () => process.memoryUsage().rss;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const opts = { isolation: ${JSON.stringify(mode)}, timeoutMs: 60000${s.memoryLimitMb ? `, memoryLimitMb: ${s.memoryLimitMb}` : ''}${RAISE} };
${s.input ? `let input = ${s.input};` : ''}
(async () => {
  await runSandbox('[1, { a: "b" }]', opts);
  await runSandbox('return (await get()).length', { ...opts, capabilities: { get: () => [{ a: 1 }] } });
  await sleep(200);
  global.gc();
  const rss0 = rss();
  const lag = monitorEventLoopDelay({ resolution: 1 });
  const t0 = performance.now();
  lag.enable();
  let res = await runSandbox(${JSON.stringify(s.code)}, ${s.input ? '{ ...opts, capabilities: { get: () => input } }' : 'opts'});
  const wallMs = performance.now() - t0;
  // The histogram sees a stall when its timer fires after it: one more turn.
  await sleep(20);
  lag.disable();
  const ok = res.success;
  const why = ok ? undefined : res.error.message;
  res = null;
  ${s.input ? 'input = null;' : ''}
  for (let i = 0; i < 3; i++) {
    await sleep(300);
    global.gc();
  }
  await sleep(300);
  console.log(JSON.stringify({ ok, why, wallMs, lagMaxMs: lag.max / 1e6, lagP99Ms: lag.percentile(99) / 1e6, rssAfterDropMb: (rss() - rss0) / 1048576 }));
  process.exit(0);
})().catch((e) => { console.error(e); process.exit(1); });`;

const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];

/**
 * Measures every scenario in each mode `children` times; returns rows
 * `{ mode, scenario, lagMaxMs, lagP99Ms, rssAfterDropMb, wallMs }` (medians).
 */
function measure(modes, children) {
  const out = [];
  for (const mode of modes) {
    for (const [scenario, s] of Object.entries(SCENARIOS)) {
      const runs = [];
      for (let i = 0; i < children; i++) {
        const r = spawnSync(process.execPath, ['--expose-gc', '-e', child(mode, s)], { encoding: 'utf8', timeout: 180000 });
        if (r.status !== 0) throw new Error(`big value child (${mode}, ${scenario}) failed: ${(r.stderr || '').slice(-400)}`);
        const m = JSON.parse(r.stdout.trim().split('\n').pop());
        if (!m.ok) throw new Error(`big value run (${mode}, ${scenario}) failed: ${m.why}`);
        runs.push(m);
      }
      const of = (k) => median(runs.map((m) => m[k]));
      out.push({ mode, scenario, lagMaxMs: of('lagMaxMs'), lagP99Ms: of('lagP99Ms'), rssAfterDropMb: of('rssAfterDropMb'), wallMs: of('wallMs') });
    }
  }
  return out;
}

const GOALS = { lagMaxMs: 50, lagP99Ms: 20, rssAfterDropMb: 64 };

module.exports = { measure, GOALS, SCENARIOS };

// `node bench/big-values.js [children]`: these rows alone, as JSON lines (see TARGET).
if (require.main === module) {
  const n = Number(process.argv[2] || 3);
  for (const row of measure(['thread', 'process'], n)) console.log(JSON.stringify({ node: process.version, ...row }));
}
