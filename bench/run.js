#!/usr/bin/env node
// `npm run bench`: isolet side by side with its peers in one process, printing medians
// and ratios. Peers come from bench/package.json (installed by the npm script).
// Machines here are shared and noisy: compare ratios within one run, not absolute times.
'use strict';
const path = require('node:path');
const vm = require('node:vm');
const { runSandbox, SandboxEngine } = require('..');

const N = Number(process.env.BENCH_N || 200);

function peer(name) {
  try {
    return require(path.join(__dirname, 'node_modules', name));
  } catch {
    return null;
  }
}
const ivm = peer('isolated-vm');
const quickjs = peer('quickjs-emscripten');
const vm2 = peer('vm2');

function stats(samples) {
  const s = [...samples].sort((a, b) => a - b);
  return { median: s[Math.floor(s.length / 2)], p95: s[Math.floor(s.length * 0.95)] };
}

async function measure(fn, n = N) {
  for (let i = 0; i < Math.min(10, n); i++) await fn(); // warm-up
  const samples = [];
  for (let i = 0; i < n; i++) {
    const t = process.hrtime.bigint();
    await fn();
    samples.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  return stats(samples);
}

const rows = [];
function report(scenario, name, s, unit = 'ms') {
  rows.push({ scenario, name, ...s, unit });
}

function assert(cond, what) {
  if (!cond) throw new Error(`benchmark sanity check failed: ${what}`);
}

async function freshRun() {
  const scenario = "fresh isolate, run '1+1'";
  for (const isolation of ['process', 'thread']) {
    report(scenario, `isolet runSandbox, ${isolation} (warm pool)`, await measure(async () => assert((await runSandbox('1+1', { isolation })).output === 2, 'isolet')));
  }
  report(scenario, 'isolet runSandbox, thread (cold isolate)', await measure(async () => assert((await runSandbox('1+1', { memoryLimitMb: 65, isolation: 'thread' })).output === 2, 'isolet cold')));
  if (ivm) {
    report(scenario, 'isolated-vm 5', await measure(async () => {
      const isolate = new ivm.Isolate({ memoryLimit: 64 });
      const context = await isolate.createContext();
      assert((await context.eval('1+1', { timeout: 5000 })) === 2, 'ivm');
      isolate.dispose();
    }));
  }
  if (quickjs) {
    const QuickJS = await quickjs.getQuickJS();
    report(scenario, 'quickjs-emscripten', await measure(async () => {
      const runtime = QuickJS.newRuntime();
      runtime.setMemoryLimit(64 * 1024 * 1024);
      const ctx = runtime.newContext();
      const r = ctx.unwrapResult(ctx.evalCode('1+1'));
      assert(ctx.getNumber(r) === 2, 'quickjs');
      r.dispose();
      ctx.dispose();
      runtime.dispose();
    }));
  }
  if (vm2) report(scenario, 'vm2 (same heap, deprecated)', await measure(async () => assert(new vm2.VM({ timeout: 5000 }).run('1+1') === 2, 'vm2')));
  report(scenario, 'node:vm (not a sandbox)', await measure(async () => assert(vm.runInNewContext('1+1') === 2, 'vm')));
}

async function hostCalls() {
  const scenario = 'host call round trip (sync handler), per call';
  const CALLS = 1000;
  const perCall = async (fn) => {
    const s = await measure(fn, 21);
    return { median: s.median / CALLS, p95: s.p95 / CALLS };
  };
  const code = `let s = 0; for (let i = 0; i < ${CALLS}; i++) s += await f(i); return s;`;
  for (const isolation of ['process', 'thread']) {
    report(scenario, `isolet, ${isolation} (async bridge, awaits Promises)`, await perCall(async () => {
      const r = await runSandbox(code, { capabilities: { f: (i) => i }, maxHostCalls: CALLS, isolation });
      assert(r.success && r.output === (CALLS * (CALLS - 1)) / 2, 'isolet host calls');
    }));
  }
  if (ivm) {
    report(scenario, 'isolated-vm 5 (sync Callback)', await perCall(async () => {
      const isolate = new ivm.Isolate({ memoryLimit: 64 });
      const context = await isolate.createContext();
      await context.global.set('f', new ivm.Callback((i) => i));
      const out = await context.eval(`let s = 0; for (let i = 0; i < ${CALLS}; i++) s += f(i); s`);
      assert(out === (CALLS * (CALLS - 1)) / 2, 'ivm host calls');
      isolate.dispose();
    }));
  }
  if (quickjs) {
    const QuickJS = await quickjs.getQuickJS();
    report(scenario, 'quickjs-emscripten (sync function)', await perCall(async () => {
      const ctx = QuickJS.newContext();
      const f = ctx.newFunction('f', (h) => ctx.newNumber(ctx.getNumber(h)));
      ctx.setProp(ctx.global, 'f', f);
      f.dispose();
      const r = ctx.unwrapResult(ctx.evalCode(`let s = 0; for (let i = 0; i < ${CALLS}; i++) s += f(i); s`));
      assert(ctx.getNumber(r) === (CALLS * (CALLS - 1)) / 2, 'quickjs host calls');
      r.dispose();
      ctx.dispose();
    }));
  }
}

const CPU_CODE = `function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); } fib(25)`;
async function cpuBound() {
  const scenario = 'CPU-bound script: fib(25), fresh sandbox each';
  const n = 31;
  for (const isolation of ['process', 'thread']) {
    report(scenario, `isolet runSandbox, ${isolation}`, await measure(async () => assert((await runSandbox(CPU_CODE, { isolation })).output === 75025, 'isolet fib'), n));
  }
  if (ivm) {
    report(scenario, 'isolated-vm 5', await measure(async () => {
      const isolate = new ivm.Isolate({ memoryLimit: 64 });
      const context = await isolate.createContext();
      assert((await context.eval(CPU_CODE)) === 75025, 'ivm fib');
      isolate.dispose();
    }, n));
  }
  if (quickjs) {
    const QuickJS = await quickjs.getQuickJS();
    report(scenario, 'quickjs-emscripten (interpreter)', await measure(async () => {
      const ctx = QuickJS.newContext();
      const r = ctx.unwrapResult(ctx.evalCode(CPU_CODE));
      assert(ctx.getNumber(r) === 75025, 'quickjs fib');
      r.dispose();
      ctx.dispose();
    }, n));
  }
  if (vm2) report(scenario, 'vm2 (same heap, deprecated)', await measure(async () => assert(new vm2.VM().run(CPU_CODE) === 75025, 'vm2 fib'), n));
}

async function enginePool() {
  const scenario = 'SandboxEngine session, submit to result';
  for (const warm of [2, 0]) {
    const engine = new SandboxEngine({ memoryMb: 128, maxConcurrentIsolates: 4, warmPoolSize: warm, wasmModules: [], defaultIsolateLimits: {}, defaultBridgeLimits: {} });
    await engine.init();
    await new Promise((r) => setTimeout(r, 50));
    // Between requests the pool refills in the background, as it would in a service
    // that is not saturated; only submit-to-result is timed.
    const samples = [];
    for (let i = 0; i < N + 10; i++) {
      const t = process.hrtime.bigint();
      const end = await engine.submit({ requestId: 'b', code: 'return 1 + 1;' }).done;
      if (i >= 10) samples.push(Number(process.hrtime.bigint() - t) / 1e6);
      assert(end.type === 'result' && end.data === 2, 'engine');
      await new Promise((r) => setTimeout(r, 5));
    }
    report(scenario, warm ? `isolet, process, warm pool (${warm})` : 'isolet, process, cold isolate', stats(samples));
    await engine.shutdown();
  }
}

async function throughput() {
  const scenario = "runs of '1+1' with 8 in flight, per run";
  const RUNS = 400;
  for (const isolation of ['process', 'thread']) {
    const samples = [];
    for (let rep = 0; rep < 5; rep++) {
      let next = 0;
      const t = process.hrtime.bigint();
      await Promise.all(Array.from({ length: 8 }, async () => {
        while (next++ < RUNS) assert((await runSandbox('1+1', { isolation })).output === 2, 'throughput');
      }));
      samples.push(Number(process.hrtime.bigint() - t) / 1e6 / RUNS);
    }
    const s = stats(samples);
    report(scenario, `isolet, ${isolation} (${Math.round(1000 / s.median)} runs/s)`, s);
  }
}

/** VmRSS of a process in MB. */
function rssOf(pid) {
  const m = /VmRSS:\s+(\d+) kB/.exec(require('node:fs').readFileSync(`/proc/${pid}/status`, 'latin1'));
  return Number(m[1]) / 1024;
}

async function supervision() {
  const { ProcessEngine } = require('../lib/supervisor/process-engine');
  const scenario = 'sandbox host process';
  const make = (warmPoolSize) => new ProcessEngine({ memoryMb: 64, maxConcurrentIsolates: 8, warmPoolSize, maxQueueSize: 10, processes: 1, defaultWallTimeMs: 5000 });
  const starts = [];
  const idle = [];
  const warm8 = [];
  for (let i = 0; i < 7; i++) {
    for (const [warm, into] of [[0, idle], [8, warm8]]) {
      const t = process.hrtime.bigint();
      const engine = make(warm);
      engine.warmUp();
      await engine.ready();
      if (warm === 0) starts.push(Number(process.hrtime.bigint() - t) / 1e6);
      await new Promise((r) => setTimeout(r, 300)); // warm isolates come up
      into.push(rssOf(engine.stats().processes.pids[0]));
      engine.shutdown();
      await engine.waitIdle(5000);
    }
  }
  report(scenario, 'start (spawn to ready)', stats(starts));
  // Recycle: an unstoppable run is answered, its host drained and replaced.
  const engine = new SandboxEngine({ memoryMb: 64, maxConcurrentIsolates: 2, warmPoolSize: 1, processes: 1 });
  await engine.init();
  const recycles = [];
  for (let i = 0; i < 7; i++) {
    const t = process.hrtime.bigint();
    await engine.submit({ requestId: 'r', code: 'return Array.prototype.indexOf.call({ length: 2 ** 53 - 1 }, 1)', isolateLimits: { wallTimeMs: 50 } }).done;
    while (engine.stats().processes.starting > 0 || engine.stats().processes.live < 1) await new Promise((r) => setTimeout(r, 1));
    const end = await engine.submit({ requestId: 'n', code: 'return 1' }).done;
    assert(end.type === 'result', 'recycle');
    recycles.push(Number(process.hrtime.bigint() - t) / 1e6 - 50);
  }
  await engine.shutdown();
  report(scenario, 'recycle: stuck run answered (limit + 400 ms grace) -> replacement serving, minus the 50 ms limit', stats(recycles));
  const med = (a) => stats(a).median;
  rows.push({ scenario, name: 'RSS of an idle host (no warm isolates)', text: `${med(idle).toFixed(1)} MB` });
  rows.push({ scenario, name: 'RSS per warm isolate (8 warm vs none)', text: `${((med(warm8) - med(idle)) / 8).toFixed(2)} MB` });
}

async function heapBomb() {
  const scenario = 'heap bomb under a 64 MB limit';
  const bomb = 'const a = []; while (true) a.push({ x: a.length })';
  const r = await runSandbox(bomb);
  rows.push({ scenario, name: 'isolet', text: r.success ? 'no error (bug)' : `${r.error.name}, host fine` });
  if (ivm) {
    const isolate = new ivm.Isolate({ memoryLimit: 64 });
    const context = await isolate.createContext();
    let text;
    try {
      await context.eval(bomb, { timeout: 10000 });
      text = 'no error';
    } catch (e) {
      text = `${e.message.slice(0, 60)}, host fine`;
    }
    rows.push({ scenario, name: 'isolated-vm 5', text });
  }
  if (vm2) rows.push({ scenario, name: 'vm2', text: 'not run: same heap, would take the host down' });
}

// isolet turns V8's Turboshaft loop unrolling off at load (V8 >= 12.4) so sandbox loops
// stay interruptible; V8 flags are process-wide, so the host's own code compiles without
// it too. Each side runs in a child node that loads isolet, the opt-out env differing.
const HOST_KERNEL = `
  const isolet = require(${JSON.stringify(path.join(__dirname, '..'))});
  function kernel() {
    const a = new Float64Array(4096);
    let s = 0;
    for (let r = 0; r < 100; r++) {
      for (let i = 0; i < a.length; i++) a[i] = a[i] * 0.5 + (i & 7);
      for (let i = 0; i < a.length; i++) s += a[i];
      const words = [];
      for (let i = 0; i < 64; i++) words.push('w' + ((i * 7919) % 101));
      s += words.sort().join(',').length + new Array(256).fill(r).indexOf(r);
    }
    return s;
  }
  const samples = [];
  for (let i = 0; i < 20; i++) kernel();
  for (let i = 0; i < 41; i++) { const t = process.hrtime.bigint(); kernel(); samples.push(Number(process.hrtime.bigint() - t) / 1e6); }
  samples.sort((a, b) => a - b);
  console.log(JSON.stringify({ median: samples[20], p95: samples[38], v8: isolet.runtime.v8Version }));`;

function hostJitCost() {
  const { spawnSync } = require('node:child_process');
  const scenario = 'host-side JIT: loop kernel in the host, isolet loaded (child node)';
  const sides = [
    ['loop unrolling off (isolet default, V8 >= 12.4)', {}],
    ['loop unrolling on (ISOLET_V8_LOOP_UNROLLING=1)', { ISOLET_V8_LOOP_UNROLLING: '1' }],
  ];
  const runs = sides.map(() => []);
  // Alternate the two sides so machine noise hits both alike.
  for (let round = 0; round < 5; round++) {
    sides.forEach(([, env], i) => {
      const r = spawnSync(process.execPath, ['-e', HOST_KERNEL], { encoding: 'utf8', env: { ...process.env, ...env } });
      assert(r.status === 0, `host kernel child: ${r.stderr}`);
      runs[i].push(JSON.parse(r.stdout));
    });
  }
  sides.forEach(([name], i) => {
    const medians = stats(runs[i].map((x) => x.median));
    const p95s = stats(runs[i].map((x) => x.p95));
    report(scenario, name, { median: medians.median, p95: p95s.median });
  });
}

function print() {
  const base = new Map();
  for (const row of rows) if (!base.has(row.scenario) && row.median !== undefined) base.set(row.scenario, row.median);
  console.log(`\nisolet benchmark — Node ${process.version}, ${require('node:os').cpus().length} CPUs, N=${N}; ratio = median / isolet's first row\n`);
  console.log('| scenario | sandbox | median | p95 | ratio |');
  console.log('|---|---|---:|---:|---:|');
  for (const row of rows) {
    if (row.text) {
      console.log(`| ${row.scenario} | ${row.name} | ${row.text} | | |`);
      continue;
    }
    const fmt = (v) => (v < 0.1 ? `${(v * 1000).toFixed(1)} µs` : `${v.toFixed(2)} ms`);
    const ratio = row.median / base.get(row.scenario);
    console.log(`| ${row.scenario} | ${row.name} | ${fmt(row.median)} | ${fmt(row.p95)} | ${ratio.toFixed(2)}× |`);
  }
  const missing = ['isolated-vm', 'quickjs-emscripten', 'vm2'].filter((p) => !peer(p));
  if (missing.length) console.log(`\n(peers not installed: ${missing.join(', ')}; run \`npm run bench\` to install them)`);
}

(async () => {
  await freshRun();
  await hostCalls();
  await cpuBound();
  await enginePool();
  await throughput();
  await supervision();
  await heapBomb();
  hostJitCost();
  print();
})().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
