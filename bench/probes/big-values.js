// Big values crossing with the defaults: `node --expose-gc bench/probes/big-values.js
// [process|thread] [scenario,...] [--raise]` prints one JSON line per scenario, each in a
// fresh child node: whether the run succeeded with the default options (or, with
// `--raise`, with every value limit raised and 1 GB of memory, as the code before issue
// 23 needed), the parent's event-loop delay while the run was in flight and its result
// built (monitorEventLoopDelay, 1 ms resolution: max and p99), the main thread's CPU in
// that time (/proc/self/task/<pid>/schedstat), the peak RSS growth, and the RSS growth
// once the result was dropped and collected.
const { spawnSync } = require('node:child_process');
const path = require('node:path');
const root = path.join(__dirname, '..', '..');

// Results (out) and inputs (in) the issue names.
const ROWS5 = "Array.from({ length: 100000 }, (_, i) => ({ id: i, name: 'name-' + i, email: 'u' + i + '@example.com', balance: i * 1.25, active: i % 2 === 0 }))";
const WIDE = "Array.from({ length: N }, (_, i) => { const o = {}; for (let k = 0; k < 32; k++) o['field' + k] = k % 3 ? i + k : 'v' + k; return o; })";
const scenarios = {
  numbers: { code: 'Array.from({ length: 1.5e6 }, (_, i) => i + 0.5)', check: 'r.length === 1.5e6' },
  strings: { code: "Array.from({ length: 1e6 }, (_, i) => 's' + i)", check: 'r.length === 1e6' },
  // ~16 MiB serialized: 900,000 small objects.
  smallObjects: { code: 'Array.from({ length: 900000 }, (_, i) => ({ id: i, v: i & 1 }))', check: 'r.length === 900000', memoryLimitMb: 256 },
  // ~16 MiB serialized: 40,000 objects of 32 fields.
  wideObjects: { code: WIDE.replace('N', '40000'), check: 'r.length === 40000', memoryLimitMb: 256 },
  rows5: { code: ROWS5, check: 'r.length === 100000' },
  rows32: { code: WIDE.replace('N', '5000'), check: 'r.length === 5000' },
  map200k: { code: 'new Map(Array.from({ length: 200000 }, (_, i) => [i, "v" + i]))', check: 'r.size === 200000' },
  string4MB: { code: "const s = 'abcd'.repeat(1 << 20); s.indexOf('z'); s", check: 'r.length === 4 << 20' },
  bytes8MB: { code: 'new Uint8Array(8 << 20).fill(7)', check: 'r.length === 8 << 20' },
  // Inputs: a capability's answer of 100,000 rows, and of 1.5e6 numbers.
  rowsIn: { input: ROWS5, code: 'const d = await get(); return d.length', check: 'r === 100000' },
  numbersIn: { input: 'Array.from({ length: 1.5e6 }, (_, i) => i + 0.5)', code: 'const d = await get(); return d.length', check: 'r === 1.5e6' },
};

const RAISED = { memoryLimitMb: 1024, maxOutputValues: 1 << 26, maxMessageValues: 1 << 26, maxPendingHostCallValues: 1 << 26, maxMessageBytes: 64 << 20, maxOutputBytes: 64 << 20, maxPendingHostCallBytes: 256 << 20 };

const child = (mode, s, raise) => `
const { runSandbox } = require(${JSON.stringify(root)});
const { monitorEventLoopDelay } = require('node:perf_hooks');
const fs = require('node:fs');
const mainMs = () => Number(fs.readFileSync('/proc/self/task/' + process.pid + '/schedstat', 'utf8').split(' ')[0]) / 1e6;
const rss = () => process.memoryUsage().rss;
const opts = { isolation: ${JSON.stringify(mode)}, timeoutMs: 30000, ${s.memoryLimitMb ? `memoryLimitMb: ${s.memoryLimitMb},` : ''} ...${raise ? JSON.stringify(RAISED) : '{}'} };
${s.input ? `const input = ${s.input};` : ''}
(async () => {
  // Warm: the engine, a small result and a small input each way.
  await runSandbox('[1, {a: "b"}]', opts);
  await runSandbox('return (await get()).length', { ...opts, capabilities: { get: () => [{ a: 1 }] } });
  await new Promise((r) => setTimeout(r, 200));
  global.gc();
  const rss0 = rss();
  let peak = rss0;
  const sampler = setInterval(() => { peak = Math.max(peak, rss()); }, 5);
  const lag = monitorEventLoopDelay({ resolution: 1 });
  const c0 = mainMs();
  const t0 = Date.now();
  lag.enable();
  let res = await runSandbox(${JSON.stringify(s.code)}, ${s.input ? '{ ...opts, capabilities: { get: () => input } }' : 'opts'});
  const wallMs = Date.now() - t0;
  // The histogram sees a stall only when its timer fires after it: give it that turn.
  await new Promise((r) => setTimeout(r, 20));
  lag.disable();
  const cpuMs = mainMs() - c0;
  clearInterval(sampler);
  peak = Math.max(peak, rss());
  let ok = res.success;
  let why = ok ? undefined : res.error.name + (res.error.limit ? ' (' + res.error.limit + ')' : '') + ': ' + res.error.message.slice(0, 160);
  if (ok) { const r = res.output; ok = ${s.check}; }
  res = null;
  await new Promise((r) => setTimeout(r, 100));
  global.gc(); global.gc();
  await new Promise((r) => setTimeout(r, 300));
  const mb = (n) => Math.round((n / 1048576) * 10) / 10;
  console.log(JSON.stringify({ ok, why, wallMs, mainCpuMs: Math.round(cpuMs), lagMaxMs: Math.round(lag.max / 1e5) / 10, lagP99Ms: Math.round(lag.percentile(99) / 1e5) / 10, rssPeakMb: mb(peak - rss0), rssAfterDropMb: mb(rss() - rss0) }));
  process.exit(0);
})().catch((e) => { console.error(e); process.exit(1); });`;

const args = process.argv.slice(2);
const raise = args.includes('--raise');
const positional = args.filter((a) => !a.startsWith('--'));
const mode = positional[0] || 'process';
const only = positional[1] ? positional[1].split(',') : Object.keys(scenarios);
for (const name of only) {
  const r = spawnSync(process.execPath, ['--expose-gc', '-e', child(mode, scenarios[name], raise)], { encoding: 'utf8', timeout: 180000 });
  if (r.status !== 0) {
    console.log(JSON.stringify({ node: process.version, mode, scenario: name, failed: (r.stderr || '').slice(-400) }));
    continue;
  }
  console.log(JSON.stringify({ node: process.version, mode, scenario: name, raise, ...JSON.parse(r.stdout.trim().split('\n').pop()) }));
}
