#!/usr/bin/env node
// Soak test: many mixed runs (normal, timeout, heap bomb, huge single allocation,
// unstoppable builtin, abort, host-call storm) through runSandbox with 8 in flight.
// The host must stay alive, its RSS growth after warm-up stay under 50 MB, every run
// settle within its limit + 1 s, and no sandbox host process be left at exit.
//
//   npm run soak                 10,000 runs, process isolation
//   npm run soak -- --runs 1000  a shorter form (CI)
//   npm run soak -- --isolation thread
'use strict';
const fs = require('node:fs');
const { runSandbox, processStats } = require('..');
const { getDefaultEngine } = require('../lib/run-sandbox');

function arg(name, def) {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? def : process.argv[i + 1];
}
const RUNS = Number(arg('runs', 10000));
const ISOLATION = arg('isolation', 'process');
const IN_FLIGHT = 8;
const SLACK_MS = 1000;
const MAX_RSS_GROWTH_MB = 50;
/** Runs after which the host's heap and malloc arenas have reached their working size
 *  (measured: RSS flat from about 2,000 runs on to 10,000). */
const WARM_UP = Math.max(200, Math.floor(RUNS / 5));

const ENDED_WITH_HOST = /sandbox host process (passed its memory budget|ran out of memory|crashed)|Another run in the same sandbox host process/;

const slowEcho = (x) => new Promise((resolve) => setTimeout(() => resolve(x), 5));

/** The mix, as [weight, name, make()] where make gives runSandbox's arguments and the limit. */
const KINDS = [
  [10, 'normal', () => ({ code: 'let s = 0; for (let i = 0; i < 1e4; i++) s += i; s', options: { timeoutMs: 2000 } })],
  [2, 'timeout', () => ({ code: 'while (true) {}', options: { timeoutMs: 100 } })],
  [2, 'heap bomb', () => ({ code: 'const a = []; while (true) a.push({ n: a.length })', options: { memoryLimitMb: 16, timeoutMs: 3000 } })],
  [1, 'huge allocation', () => ({ code: "const s = 'x'.repeat(2 ** 28); s.indexOf('y')", options: { memoryLimitMb: 16, timeoutMs: 3000 } })],
  [1, 'unstoppable builtin', () => ({ code: 'Array.prototype.indexOf.call({ length: 2 ** 53 - 1 }, 1)', options: { timeoutMs: 100 } })],
  [1, 'abort', () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 20);
    return { code: 'while (true) {}', options: { timeoutMs: 2000, signal: controller.signal } };
  }],
  [1, 'host-call storm', () => ({
    // 300 un-awaited calls: past maxPendingHostCalls (128) the rest are refused in the
    // sandbox with a RangeError; the run reports how many went through.
    code: 'const all = []; for (let i = 0; i < 300; i++) all.push(echo(i)); return (await Promise.allSettled(all)).filter((r) => r.status === "fulfilled").length',
    options: { timeoutMs: 3000, capabilities: { echo: slowEcho } },
  })],
];
const WHEEL = KINDS.flatMap(([w, name, make]) => Array(w).fill({ name, make }));

function rssMb() {
  return process.memoryUsage().rss / 1048576;
}
function alive(pid) {
  try {
    process.kill(pid, 0);
    return !/^\d+ \(.*\) Z/.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

async function main() {
  const started = Date.now();
  const byKind = {};
  const late = [];
  let next = 0;
  let done = 0;
  let warmRss = null;
  const seenPids = new Set();

  async function worker() {
    while (next < RUNS) {
      const i = next++;
      const { name, make } = WHEEL[i % WHEEL.length];
      const { code, options } = make();
      const t0 = Date.now();
      const r = await runSandbox(code, { ...options, isolation: ISOLATION });
      const took = Date.now() - t0;
      const k = (byKind[name] ??= { runs: 0, ok: 0, errors: {}, maxMs: 0 });
      k.runs += 1;
      if (r.success) k.ok += 1;
      else {
        k.errors[r.error.name] = (k.errors[r.error.name] ?? 0) + 1;
        // A run that shared a host with one that got it ended (memory, crash) ends too,
        // with a typed error that says so: expected, and counted apart.
        if (ENDED_WITH_HOST.test(r.error.message)) k.withHost = (k.withHost ?? 0) + 1;
      }
      k.maxMs = Math.max(k.maxMs, took);
      if (took > options.timeoutMs + SLACK_MS) late.push({ name, took, limit: options.timeoutMs, error: r.success ? null : r.error.name, ranMs: Math.round(r.stats.wallTimeMs) });
      done += 1;
      if (done === WARM_UP) warmRss = rssMb();
      if (ISOLATION === 'process') for (const pid of getDefaultEngine('process').stats().processes.pids) seenPids.add(pid);
      if (done % 1000 === 0) {
        const m = process.memoryUsage();
        const mb = (v) => (v / 1048576).toFixed(0);
        console.log(`soak: ${done}/${RUNS} runs, host RSS ${mb(m.rss)} MB (JS heap ${mb(m.heapUsed)}/${mb(m.heapTotal)} MB, external ${mb(m.external)} MB)`);
      }
    }
  }
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
  const endRss = rssMb();
  const engine = getDefaultEngine(ISOLATION);
  const stats = engine.stats();
  engine.shutdown();
  await engine.waitIdle(5000);
  const leftovers = [...seenPids].filter(alive);

  const growth = endRss - (warmRss ?? endRss);
  console.log(`soak: ${RUNS} runs (${ISOLATION} isolation, ${IN_FLIGHT} in flight) in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  for (const [name, k] of Object.entries(byKind)) {
    console.log(`  ${name.padEnd(20)} ${String(k.runs).padStart(6)} runs  ok ${String(k.ok).padStart(6)}  errors ${JSON.stringify(k.errors)}${k.withHost ? ` (${k.withHost} ended with their host)` : ''}  slowest ${k.maxMs} ms`);
  }
  console.log(`  host RSS after warm-up (${WARM_UP} runs) ${warmRss?.toFixed(1)} MB, at end ${endRss.toFixed(1)} MB, growth ${growth.toFixed(1)} MB (limit ${MAX_RSS_GROWTH_MB} MB)`);
  if (stats.processes) console.log(`  sandbox host processes: ${JSON.stringify({ started: stats.processes.started, crashed: stats.processes.crashed, recycled: stats.processes.recycled })}`);
  console.log(`  host threads parked/stuck: ${processStats().quarantinedThreads}; host processes left after shutdown: ${leftovers.length}`);
  console.log(`  runs settled later than limit + ${SLACK_MS} ms: ${late.length}${late.length ? ` (e.g. ${JSON.stringify(late.slice(0, 3))})` : ''}`);

  const problems = [];
  if (growth > MAX_RSS_GROWTH_MB) problems.push(`host RSS grew ${growth.toFixed(1)} MB`);
  if (late.length > 0) problems.push(`${late.length} runs settled late`);
  if (leftovers.length > 0) problems.push(`${leftovers.length} sandbox host processes left behind`);
  const normal = byKind.normal ?? { runs: 0, ok: 0 };
  if (normal.ok + (normal.withHost ?? 0) !== normal.runs) problems.push('a normal run failed on its own');
  console.log(problems.length ? `soak: FAILED: ${problems.join('; ')}` : 'soak: passed');
  process.exit(problems.length ? 1 : 0);
}

main().catch((err) => {
  console.error('soak: crashed:', err);
  process.exit(2);
});
