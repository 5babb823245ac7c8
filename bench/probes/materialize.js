// What values crossing the boundary cost the parent once materialized, and its event-loop
// lag while they arrive: `node --expose-gc bench/probes/materialize.js [process|thread]`
// prints one JSON line per scenario (a fresh child per scenario, so one's memory is not
// the next one's baseline):
// - refused: two results of 4 M short strings at once (refused by maxOutputValues);
// - atLimit: 15 results of 32,767 short strings each (the most the default allows: 32,768
//   values with the array), all kept: values and heap they cost the parent;
// - pending: a run calling a never-settling capability 100,000 times with a 100 kB string
//   each (the host sees only maxPendingHostCalls of them).
// Figures: rssGrowthMb (peak while it ran), heapHeldMb (after gc, what is still held),
// lagMaxMs / lagP99Ms (monitorEventLoopDelay, 1 ms resolution).
const { spawnSync } = require('node:child_process');
const path = require('node:path');
const root = path.join(__dirname, '..', '..');

const scenarios = {
  refused: `const code = "const a=[];for(let i=0;i<4e6;i++)a.push('ab');a";
    const rs = await Promise.all([runSandbox(code, opts), runSandbox(code, opts)]);
    return rs.map((r) => (r.success ? 'ok' : r.error.limit));`,
  atLimit: `const code = "const a=[];for(let i=0;i<32767;i++)a.push('s'+i);a";
    for (let i = 0; i < 15; i++) {
      const r = await runSandbox(code, opts);
      if (!r.success) return r.error.message;
      keep.push(r.output);
    }
    return { results: keep.length, valuesEach: keep[0].length + 1 };`,
  pending: `let calls = 0;
    const never = () => { calls++; return new Promise(() => {}); };
    const r = await runSandbox("const s = 'x'.repeat(1e5); let refused = 0; for (let i = 0; i < 1e5; i++) { never(s).catch(() => {}); } return 1",
      { ...opts, capabilities: { never }, timeoutMs: 20000, memoryLimitMb: 128 });
    return { calls, result: r.success ? r.output : r.error.message };`,
};

const child = (mode, body) => `
const { runSandbox } = require(${JSON.stringify(root)});
const { monitorEventLoopDelay } = require('node:perf_hooks');
const opts = { isolation: ${JSON.stringify(mode)} };
const keep = [];
(async () => {
  await runSandbox('1', opts);
  await new Promise((r) => setTimeout(r, 300));
  global.gc();
  const rss0 = process.memoryUsage().rss;
  const heap0 = process.memoryUsage().heapUsed;
  let peak = rss0;
  const sampler = setInterval(() => { peak = Math.max(peak, process.memoryUsage().rss); }, 5);
  const lag = monitorEventLoopDelay({ resolution: 1 });
  lag.enable();
  const out = await (async () => { ${body} })();
  await new Promise((r) => setTimeout(r, 300));
  lag.disable();
  clearInterval(sampler);
  global.gc();
  const mb = (n) => Math.round((n / 1048576) * 10) / 10;
  console.log(JSON.stringify({ out, rssGrowthMb: mb(peak - rss0), heapHeldMb: mb(process.memoryUsage().heapUsed - heap0), lagMaxMs: Math.round(lag.max / 1e5) / 10, lagP99Ms: Math.round(lag.percentile(99) / 1e5) / 10 }));
  process.exit(0);
})().catch((e) => { console.error(e); process.exit(1); });`;

const mode = process.argv[2] || 'process';
for (const [name, body] of Object.entries(scenarios)) {
  const r = spawnSync(process.execPath, ['--expose-gc', '-e', child(mode, body)], { encoding: 'utf8', timeout: 120000 });
  if (r.status !== 0) {
    console.log(JSON.stringify({ node: process.version, mode, scenario: name, failed: r.stderr.slice(-400) }));
    continue;
  }
  console.log(JSON.stringify({ node: process.version, mode, scenario: name, ...JSON.parse(r.stdout.trim().split('\n').pop()) }));
}
