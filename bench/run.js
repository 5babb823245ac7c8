#!/usr/bin/env node
// `npm run bench`: isolet (thread and process isolation) side by side with its peers in
// one process: isolated-vm (7 on Node 24/26, 6 on 22, 5 on 20), quickjs-emscripten and
// node:vm as the no-isolation floor. Contestants alternate round by round so machine
// noise hits all alike; every figure is a median. Then one verdict line per goal of
// issue 12. `--quick` for a short run, `--no-install` to use only peers already there.
// Machines here are shared and noisy: compare ratios within one run, not absolute times.
'use strict';
const path = require('node:path');
const os = require('node:os');
const v8 = require('node:v8');
const vm = require('node:vm');
const { spawnSync } = require('node:child_process');
const peers = require('./peers');

const ARGS = new Set(process.argv.slice(2));
const QUICK = ARGS.has('--quick');
/** `--only=trivial,throughput,calls,copies,compute,memory,sandboxes,extras,codecache,preludes,web,webspeed,typescript,values` runs just those scenarios. */
const ONLY = process.argv.find((a) => a.startsWith('--only='))?.slice(7).split(',') ?? null;
const wanted = (scenario) => ONLY === null || ONLY.includes(scenario);

// isolated-vm wants --no-node-snapshot on Node >= 20; V8 flags are per process, so the
// whole bench runs with it (isolet neither needs nor minds it). Re-exec once.
if (!process.execArgv.includes('--no-node-snapshot') && !process.env.ISOLET_BENCH_CHILD) {
  const installNote = ARGS.has('--no-install') ? null : peers.ensureIsolatedVm();
  const r = spawnSync(process.execPath, ['--no-node-snapshot', __filename, ...process.argv.slice(2)], {
    stdio: 'inherit',
    env: { ...process.env, ISOLET_BENCH_CHILD: '1', ISOLET_BENCH_INSTALL_NOTE: installNote ?? '' },
  });
  process.exit(r.status ?? 1);
}

const { runSandbox } = require('..');

const ivm = peers.load('isolated-vm');
const quickjsModule = peers.load('quickjs-emscripten');
const IVM = ivm ? `isolated-vm ${peers.installedVersion('isolated-vm')}` : null;

/** How many rounds (each contestant once per round) and samples per turn. */
const ROUNDS = QUICK ? 5 : 15;
const PER_TURN = QUICK ? 10 : 20;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const now = () => process.hrtime.bigint();
const msSince = (t) => Number(now() - t) / 1e6;

function quantile(samples, q) {
  const s = [...samples].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(s.length * q))];
}
const median = (a) => quantile(a, 0.5);

function check(cond, what) {
  if (!cond) throw new Error(`benchmark sanity check failed: ${what}`);
}

/**
 * Times each contestant's `once()` in alternating turns. `gapMs` is the pause before
 * each sample (a run that arrives on a quiet engine, as in a service). Returns
 * name -> samples (ms).
 */
async function alternate(contestants, { rounds = ROUNDS, perTurn = PER_TURN, gapMs = 0, warmup = 3 } = {}) {
  const out = new Map(contestants.map((c) => [c.name, []]));
  for (const c of contestants) for (let i = 0; i < warmup; i++) await c.once();
  for (let r = 0; r < rounds; r++) {
    for (const c of contestants) {
      const samples = out.get(c.name);
      for (let i = 0; i < perTurn; i++) {
        if (gapMs) await sleep(gapMs);
        const t = now();
        // A contestant may time itself (to leave its setup out) and return the ms.
        const own = await c.once();
        samples.push(typeof own === 'number' ? own : msSince(t));
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------- contestants

const ISOLET_MODES = ['thread', 'process'];
const isoletName = (mode) => `isolet, ${mode}`;

async function isoletRun(code, options, mode) {
  const r = await runSandbox(code, { ...options, isolation: mode });
  if (!r.success) throw new Error(`isolet run failed: ${r.error.name}: ${r.error.message}`);
  return r.output;
}

let QuickJS = null;

function ivmEval(code, { copy = false, memoryLimit = 128, before } = {}) {
  return (async () => {
    const isolate = new ivm.Isolate({ memoryLimit });
    try {
      const context = await isolate.createContext();
      if (before) await before(context);
      return await context.eval(code, { timeout: 10000, copy });
    } finally {
      // isolated-vm disposes an isolate that ran out of memory itself.
      if (!isolate.isDisposed) isolate.dispose();
    }
  })();
}

function quickjsEval(code, { dump = false, before } = {}) {
  const runtime = QuickJS.newRuntime();
  runtime.setMemoryLimit(256 * 1024 * 1024);
  const ctx = runtime.newContext();
  try {
    if (before) before(ctx);
    const h = ctx.unwrapResult(ctx.evalCode(code));
    const v = dump ? ctx.dump(h) : ctx.getNumber(h);
    h.dispose();
    return v;
  } finally {
    ctx.dispose();
    runtime.dispose();
  }
}

/** Contestants running `code` (a script; its completion value is checked) fresh each time. */
function trivialContestants(code, expected) {
  const list = ISOLET_MODES.map((mode) => ({ name: isoletName(mode), once: async () => check((await isoletRun(code, {}, mode)) === expected, mode) }));
  if (ivm) list.push({ name: IVM, once: async () => check((await ivmEval(code)) === expected, 'ivm') });
  if (QuickJS) list.push({ name: 'quickjs-emscripten', once: async () => check(quickjsEval(code) === expected, 'quickjs') });
  list.push({ name: 'node:vm (no isolation)', once: async () => check(vm.runInNewContext(code) === expected, 'vm') });
  return list;
}

// ---------------------------------------------------------------- results

/** Rows of the table: { metric, name, value, unit, p95?, better: 'lower'|'higher' }. */
const rows = [];
/** metric -> name -> value, for the verdicts. */
const values = new Map();
function record(metric, name, value, unit, better, extra = {}) {
  rows.push({ metric, name, value, unit, better, ...extra });
  if (!values.has(metric)) values.set(metric, new Map());
  values.get(metric).set(name, value);
}
const get = (metric, name) => values.get(metric)?.get(name);

function recordLatency(metric, samplesByName, scale = 1, unit = 'ms') {
  for (const [name, s] of samplesByName) record(metric, name, median(s) * scale, unit, 'lower', { p95: quantile(s, 0.95) * scale });
}

// ---------------------------------------------------------------- scenarios

const M_WARM = 'trivial run, warm pool, runs 3 ms apart, p50';
const M_B2B = 'trivial run back to back, p50';
const M_TPUT = 'fresh-isolate runs/s, 8 in flight';
const M_CALL = 'host-call round trip p50 (1,000 awaited in turn)';
const M_CALL_BATCH = 'host calls, 100 in flight at once (Promise.all), per call';
const M_GRAPH_OUT = '6 MB object graph out of the sandbox';
const M_GRAPH_IN = '6 MB object graph into the sandbox';
const M_U8_OUT = '32 MB Uint8Array out of the sandbox';
const M_U8_IN = '32 MB Uint8Array into the sandbox';
const M_STR_OUT = '32 MB string out of the sandbox';
const M_STR_IN = '32 MB string into the sandbox';
const M_CPU = 'compute: fib(30), setup excluded';
const M_RSS_ISO = 'RSS per warm idle isolate';
const M_RSS_PROC = 'RSS per idle sandbox host process';

async function trivial() {
  const contestants = trivialContestants('1+1', 2);
  recordLatency(M_WARM, await alternate(contestants, { gapMs: 3 }));
  recordLatency(M_B2B, await alternate(contestants));
}

async function throughput() {
  const RUNS = QUICK ? 200 : 400;
  const IN_FLIGHT = 8;
  const contestants = trivialContestants('1+1', 2);
  // One sample = RUNS runs with IN_FLIGHT of them in flight; per-run ms.
  const batch = (c) => ({
    name: c.name,
    once: async () => {
      let next = 0;
      await Promise.all(Array.from({ length: IN_FLIGHT }, async () => {
        while (next++ < RUNS) await c.once();
      }));
    },
  });
  const samples = await alternate(contestants.map(batch), { rounds: QUICK ? 3 : 7, perTurn: 1, warmup: 1 });
  for (const [name, s] of samples) {
    const runsPerS = (1000 * RUNS) / median(s);
    record(M_TPUT, name, runsPerS, 'runs/s', 'higher', { perCore: runsPerS / os.cpus().length });
  }
}

async function hostCalls() {
  const CALLS = 1000;
  const sum = (CALLS * (CALLS - 1)) / 2;
  const seq = `let s = 0; for (let i = 0; i < ${CALLS}; i++) s += await f(i); return s;`;
  const syncSrc = `let s = 0; for (let i = 0; i < ${CALLS}; i++) s += f(i); s`;
  const contestants = ISOLET_MODES.map((mode) => ({
    name: isoletName(mode),
    once: async () => check((await isoletRun(seq, { capabilities: { f: (i) => i }, maxHostCalls: CALLS }, mode)) === sum, 'isolet calls'),
  }));
  if (ivm) {
    contestants.push({
      name: `${IVM} (sync Callback)`,
      once: async () => check((await ivmEval(syncSrc, { before: (c) => c.global.set('f', new ivm.Callback((i) => i)) })) === sum, 'ivm calls'),
    });
  }
  if (QuickJS) {
    contestants.push({
      name: 'quickjs-emscripten (sync function, same thread)',
      once: async () => check(quickjsEval(syncSrc, {
        before: (ctx) => {
          const f = ctx.newFunction('f', (h) => ctx.newNumber(ctx.getNumber(h)));
          ctx.setProp(ctx.global, 'f', f);
          f.dispose();
        },
      }) === sum, 'quickjs calls'),
    });
  }
  contestants.push({ name: 'node:vm (no isolation, direct call)', once: async () => check(vm.runInNewContext(syncSrc, { f: (i) => i }) === sum, 'vm calls') });
  const samples = await alternate(contestants, { rounds: QUICK ? 3 : 7, perTurn: 3, warmup: 2 });
  recordLatency(M_CALL, samples, 1000 / CALLS, 'µs');

  // Many calls of one run in flight at once: how well the bridge batches per wake-up.
  const par = `let s = 0; for (let r = 0; r < 10; r++) { const v = await Promise.all(Array.from({ length: 100 }, (_, i) => f(r * 100 + i))); for (const x of v) s += x; } return s;`;
  const batched = ISOLET_MODES.map((mode) => ({
    name: isoletName(mode),
    once: async () => check((await isoletRun(par, { capabilities: { f: (i) => i }, maxHostCalls: CALLS }, mode)) === sum, 'isolet batched calls'),
  }));
  recordLatency(M_CALL_BATCH, await alternate(batched, { rounds: QUICK ? 3 : 7, perTurn: 3, warmup: 2 }), 1000 / CALLS, 'µs');
}

// An object graph built the same way on both sides of the boundary.
const GRAPH_N = 60000;
const BUILD_GRAPH = `function buildGraph(n) {
  const a = [];
  for (let i = 0; i < n; i++) a.push({ id: i, name: 'item-' + i, tags: ['alpha', 'beta', 'gamma'], pos: { x: i * 0.5, y: -i, z: i % 7 }, ok: i % 2 === 0 });
  return a;
}`;
// eslint-disable-next-line no-new-func
const buildGraph = new Function(`${BUILD_GRAPH}; return buildGraph;`)();
const BIG = 32 * 1024 * 1024;
// The 32 MB rows need the bytes raised (and the memory to make them); the graph's 1.4 M
// values fit the default value limits (issue 23), so none of those is raised.
const BIG_LIMITS = {
  memoryLimitMb: 1024,
  maxOutputBytes: 64 << 20,
  maxMessageBytes: 64 << 20,
  timeoutMs: 20000,
};

/**
 * Copy throughput of one direction: each contestant has `copy()` (the run that moves
 * the value) and `base()` (the same run without the move); the copy costs the
 * difference of their medians, both measured in alternation.
 */
async function copyRows(metric, bytes, contestants, unit) {
  const timed = [];
  for (const c of contestants) timed.push({ name: `${c.name}#copy`, once: c.copy }, { name: `${c.name}#base`, once: c.base ?? (() => {}) });
  const samples = await alternate(timed, { rounds: QUICK ? 3 : 7, perTurn: QUICK ? 2 : 3, warmup: 1 });
  for (const c of contestants) {
    const ms = Math.max(1e-3, median(samples.get(`${c.name}#copy`)) - median(samples.get(`${c.name}#base`)));
    const perS = bytes / (ms / 1000);
    record(metric, c.name, unit === 'GB/s' ? perS / 1e9 : perS / 1e6, unit, 'higher', { copyMs: ms });
  }
}

async function copies() {
  const graph = buildGraph(GRAPH_N);
  const graphBytes = v8.serialize(graph).length;
  const GRAPH_OUT = `${BUILD_GRAPH}; buildGraph(${GRAPH_N})`;
  const GRAPH_OUT_BASE = `${BUILD_GRAPH}; buildGraph(${GRAPH_N}).length`;
  const out = [];
  const into = [];
  for (const mode of ISOLET_MODES) {
    out.push({
      name: isoletName(mode),
      copy: async () => check((await isoletRun(GRAPH_OUT, BIG_LIMITS, mode)).length === GRAPH_N, 'graph out'),
      base: async () => check((await isoletRun(GRAPH_OUT_BASE, BIG_LIMITS, mode)) === GRAPH_N, 'graph out base'),
    });
    into.push({
      name: isoletName(mode),
      copy: async () => check((await isoletRun('const g = await get(); return g.length', { ...BIG_LIMITS, capabilities: { get: () => graph } }, mode)) === GRAPH_N, 'graph in'),
      base: async () => check((await isoletRun('const g = await get(); return g', { ...BIG_LIMITS, capabilities: { get: () => GRAPH_N } }, mode)) === GRAPH_N, 'graph in base'),
    });
  }
  if (ivm) {
    out.push({
      name: `${IVM} (copy: true, ExternalCopy)`,
      copy: async () => check((await ivmEval(GRAPH_OUT, { copy: true, memoryLimit: 1024 })).length === GRAPH_N, 'ivm graph out'),
      base: async () => check((await ivmEval(GRAPH_OUT_BASE, { memoryLimit: 1024 })) === GRAPH_N, 'ivm graph out base'),
    });
    into.push({
      name: `${IVM} (global.set copy: true, ExternalCopy)`,
      copy: async () => check((await ivmEval('g.length', { memoryLimit: 1024, before: (c) => c.global.set('g', graph, { copy: true }) })) === GRAPH_N, 'ivm graph in'),
      base: async () => check((await ivmEval('g', { memoryLimit: 1024, before: (c) => c.global.set('g', GRAPH_N) })) === GRAPH_N, 'ivm graph in base'),
    });
  }
  if (QuickJS) {
    out.push({
      name: 'quickjs-emscripten (dump: JSON)',
      copy: async () => check(quickjsEval(GRAPH_OUT, { dump: true }).length === GRAPH_N, 'quickjs graph out'),
      base: async () => check(quickjsEval(GRAPH_OUT_BASE) === GRAPH_N, 'quickjs graph out base'),
    });
    into.push({
      name: 'quickjs-emscripten (JSON string, parsed inside)',
      copy: async () => check(quickjsEval('JSON.parse(s).length', { before: (ctx) => { const s = ctx.newString(JSON.stringify(graph)); ctx.setProp(ctx.global, 's', s); s.dispose(); } }) === GRAPH_N, 'quickjs graph in'),
      base: async () => check(quickjsEval(`${GRAPH_N}`) === GRAPH_N, 'quickjs graph in base'),
    });
  }
  const floor = { name: 'node:vm floor (structuredClone, same heap)', copy: async () => check(structuredClone(graph).length === GRAPH_N, 'clone') };
  out.push(floor);
  into.push(floor);
  await copyRows(M_GRAPH_OUT, graphBytes, out, 'MB/s');
  await copyRows(M_GRAPH_IN, graphBytes, into, 'MB/s');

  // Flat data: a typed array and a one-byte string of BIG bytes each way.
  const u8 = new Uint8Array(BIG).fill(7);
  const str = 'abcdefgh'.repeat(BIG / 8);
  const U8_OUT = `const u = new Uint8Array(${BIG}).fill(7); u`;
  const U8_OUT_BASE = `const u = new Uint8Array(${BIG}).fill(7); u.length`;
  // indexOf flattens the repeated string, so both runs pay for that alike.
  const STR_OUT = `const s = 'abcdefgh'.repeat(${BIG / 8}); s.indexOf('z'); s`;
  const STR_OUT_BASE = `const s = 'abcdefgh'.repeat(${BIG / 8}); s.indexOf('z'); s.length`;
  const flat = { u8Out: [], u8In: [], strOut: [], strIn: [] };
  for (const mode of ISOLET_MODES) {
    const name = isoletName(mode);
    flat.u8Out.push({ name, copy: async () => check((await isoletRun(U8_OUT, BIG_LIMITS, mode)).length === BIG, 'u8 out'), base: async () => check((await isoletRun(U8_OUT_BASE, BIG_LIMITS, mode)) === BIG, 'u8 out base') });
    flat.strOut.push({ name, copy: async () => check((await isoletRun(STR_OUT, BIG_LIMITS, mode)).length === BIG, 'str out'), base: async () => check((await isoletRun(STR_OUT_BASE, BIG_LIMITS, mode)) === BIG, 'str out base') });
    flat.u8In.push({ name, copy: async () => check((await isoletRun('return (await get()).length', { ...BIG_LIMITS, capabilities: { get: () => u8 } }, mode)) === BIG, 'u8 in'), base: async () => check((await isoletRun('return await get()', { ...BIG_LIMITS, capabilities: { get: () => BIG } }, mode)) === BIG, 'u8 in base') });
    flat.strIn.push({ name, copy: async () => check((await isoletRun('return (await get()).length', { ...BIG_LIMITS, capabilities: { get: () => str } }, mode)) === BIG, 'str in'), base: async () => check((await isoletRun('return await get()', { ...BIG_LIMITS, capabilities: { get: () => BIG } }, mode)) === BIG, 'str in base') });
  }
  if (ivm) {
    flat.u8Out.push({ name: `${IVM} (ExternalCopy)`, copy: async () => check((await ivmEval(U8_OUT, { copy: true, memoryLimit: 1024 })).length === BIG, 'ivm u8 out'), base: async () => check((await ivmEval(U8_OUT_BASE, { memoryLimit: 1024 })) === BIG, 'ivm u8 out base') });
    flat.strOut.push({ name: `${IVM} (ExternalCopy)`, copy: async () => check((await ivmEval(STR_OUT, { copy: true, memoryLimit: 1024 })).length === BIG, 'ivm str out'), base: async () => check((await ivmEval(STR_OUT_BASE, { memoryLimit: 1024 })) === BIG, 'ivm str out base') });
    flat.u8In.push({ name: `${IVM} (ExternalCopy)`, copy: async () => check((await ivmEval('g.length', { memoryLimit: 1024, before: (c) => c.global.set('g', u8, { copy: true }) })) === BIG, 'ivm u8 in'), base: async () => check((await ivmEval('g', { memoryLimit: 1024, before: (c) => c.global.set('g', BIG) })) === BIG, 'ivm u8 in base') });
    flat.strIn.push({ name: `${IVM} (ExternalCopy)`, copy: async () => check((await ivmEval('g.length', { memoryLimit: 1024, before: (c) => c.global.set('g', str, { copy: true }) })) === BIG, 'ivm str in'), base: async () => check((await ivmEval('g', { memoryLimit: 1024, before: (c) => c.global.set('g', BIG) })) === BIG, 'ivm str in base') });
  }
  const u8Floor = { name: 'node:vm floor (structuredClone)', copy: async () => check(structuredClone(u8).length === BIG, 'u8 clone') };
  const strFloor = { name: 'node:vm floor (v8.serialize + deserialize)', copy: async () => check(v8.deserialize(v8.serialize(str)).length === BIG, 'str clone') };
  flat.u8Out.push(u8Floor);
  flat.u8In.push(u8Floor);
  flat.strOut.push(strFloor);
  flat.strIn.push(strFloor);
  await copyRows(M_U8_OUT, BIG, flat.u8Out, 'GB/s');
  await copyRows(M_U8_IN, BIG, flat.u8In, 'GB/s');
  await copyRows(M_STR_OUT, BIG, flat.strOut, 'GB/s');
  await copyRows(M_STR_IN, BIG, flat.strIn, 'GB/s');
  return graphBytes;
}

// Inside a function: a script-level `fib` would be looked up through node:vm's global
// interceptor on every call (20x slower there), which is not what compute parity means.
const FIB = `(() => { function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); } return fib(30); })()`;
const FIB_VALUE = 832040;
/** The same script, setup left out: peers time the eval in a context made beforehand;
 *  an isolet run is one piece, so its trivial back-to-back run time is subtracted. */
async function compute() {
  const contestants = ISOLET_MODES.map((mode) => ({ name: isoletName(mode), once: async () => check((await isoletRun(FIB, {}, mode)) === FIB_VALUE, 'isolet fib') }));
  if (ivm) {
    contestants.push({
      name: IVM,
      once: async () => {
        const isolate = new ivm.Isolate({ memoryLimit: 128 });
        const context = await isolate.createContext();
        const t = now();
        check((await context.eval(FIB, { timeout: 20000 })) === FIB_VALUE, 'ivm fib');
        const ms = msSince(t);
        isolate.dispose();
        return ms;
      },
    });
  }
  if (QuickJS) {
    contestants.push({
      name: 'quickjs-emscripten (interpreter)',
      once: async () => {
        const runtime = QuickJS.newRuntime();
        const ctx = runtime.newContext();
        const t = now();
        const h = ctx.unwrapResult(ctx.evalCode(FIB));
        const ms = msSince(t);
        check(ctx.getNumber(h) === FIB_VALUE, 'quickjs fib');
        h.dispose();
        ctx.dispose();
        runtime.dispose();
        return ms;
      },
    });
  }
  contestants.push({
    name: 'node:vm (no isolation)',
    once: async () => {
      const context = vm.createContext({});
      const t = now();
      check(vm.runInContext(FIB, context) === FIB_VALUE, 'vm fib');
      return msSince(t);
    },
  });
  const samples = await alternate(contestants, { rounds: QUICK ? 3 : 7, perTurn: 2, warmup: 1 });
  for (const [name, s] of samples) {
    const setup = get(M_B2B, name) !== undefined && name.startsWith('isolet') ? get(M_B2B, name) : 0;
    record(M_CPU, name, median(s) - setup, 'ms', 'lower', { p95: quantile(s, 0.95) - setup });
  }
}

/** RSS (MB) measured in a fresh child node: before and after making `count` idle sandboxes. */
const RSS_CHILD = String.raw`
  const kind = process.argv[1], count = Number(process.argv[2]);
  const rss = () => { const m = /VmRSS:\s+(\d+) kB/.exec(require('fs').readFileSync('/proc/self/status', 'latin1')); return Number(m[1]) / 1024; };
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  (async () => {
    const keep = [];
    let before;
    if (kind === 'isolet') {
      const native = require(process.env.ISOLET_DIR + '/lib/native');
      const e = new native.NativeEngine(new native.EngineSettings({ isolation: 'thread', memoryMb: 64, maxConcurrentIsolates: count, warmPoolSize: count }));
      await sleep(300); global.gc && gc(); before = rss();
      e.warmUp();
      while (e.stats().warm < count) await sleep(10);
      keep.push(e);
    } else if (kind === 'ivm') {
      const ivm = require(process.env.IVM_PATH);
      const i0 = new ivm.Isolate({ memoryLimit: 64 }); await i0.createContext(); // load what every isolate shares
      await sleep(300); before = rss();
      for (let i = 0; i < count; i++) { const iso = new ivm.Isolate({ memoryLimit: 64 }); const c = await iso.createContext(); await c.eval('1'); keep.push(iso, c); }
    } else if (kind === 'quickjs') {
      const q = await require(process.env.QUICKJS_PATH).getQuickJS();
      await sleep(300); before = rss();
      for (let i = 0; i < count; i++) { const rt = q.newRuntime(); const c = rt.newContext(); keep.push(rt, c); }
    } else {
      const vm = require('vm');
      vm.createContext({});
      await sleep(300); before = rss();
      for (let i = 0; i < count; i++) keep.push(vm.createContext({}));
    }
    await sleep(500);
    console.log(JSON.stringify({ perSandbox: (rss() - before) / count }));
    process.exit(0);
  })();`;

function rssOfPid(pid) {
  const m = /VmRSS:\s+(\d+) kB/.exec(require('node:fs').readFileSync(`/proc/${pid}/status`, 'latin1'));
  return Number(m[1]) / 1024;
}

async function memory() {
  const COUNT = 16;
  const kinds = [['isolet', isoletName('thread')]];
  if (ivm) kinds.push(['ivm', IVM]);
  if (QuickJS) kinds.push(['quickjs', 'quickjs-emscripten (runtime + context)']);
  kinds.push(['vm', 'node:vm (context, no isolation)']);
  const env = {
    ...process.env,
    ISOLET_DIR: path.join(__dirname, '..'),
    IVM_PATH: ivm ? path.join(peers.PEERS_DIR, 'node_modules', 'isolated-vm') : '',
    QUICKJS_PATH: path.join(__dirname, 'node_modules', 'quickjs-emscripten'),
  };
  const per = new Map(kinds.map(([, name]) => [name, []]));
  for (let round = 0; round < (QUICK ? 2 : 5); round++) {
    for (const [kind, name] of kinds) {
      const r = spawnSync(process.execPath, ['--no-node-snapshot', '-e', RSS_CHILD, kind, String(COUNT)], { encoding: 'utf8', env });
      check(r.status === 0, `rss child ${kind}: ${r.stderr}`);
      per.get(name).push(JSON.parse(r.stdout).perSandbox);
    }
  }
  for (const [name, s] of per) record(M_RSS_ISO, name, median(s), 'MB', 'lower');

  // Process mode: an idle host with no warm isolates, and the same with 8 warm.
  const native = require('../lib/native');
  const idle = [];
  const warm8 = [];
  for (let i = 0; i < (QUICK ? 2 : 5); i++) {
    for (const [warm, into] of [[0, idle], [8, warm8]]) {
      const engine = new native.NativeEngine(new native.EngineSettings({ isolation: 'process', memoryMb: 64, maxConcurrentIsolates: 8, warmPoolSize: warm, maxQueueSize: 10, processes: 1 }));
      engine.warmUp();
      await engine.ready();
      const t = now();
      while (engine.stats().warm < warm && msSince(t) < 3000) await sleep(10);
      await sleep(300);
      into.push(rssOfPid(engine.stats().processes.pids[0]));
      engine.shutdown();
      await engine.waitIdle(5000);
    }
  }
  record(M_RSS_PROC, 'isolet, process: idle host, no warm isolates', median(idle), 'MB', 'lower');
  record(M_RSS_ISO, 'isolet, process (per warm isolate in a host)', (median(warm8) - median(idle)) / 8, 'MB', 'lower');
}

const M_SB_OPEN = '100 persistent sandboxes opened in turn: open, p50';
const M_SB_FIRST = '100 persistent sandboxes: the first run in each, p50';
const M_SB_MEM = '100 persistent sandboxes: machine memory (MemAvailable) per open sandbox';
const M_SB_PSS = '100 persistent sandboxes: memory of the processes holding them (PSS) per open sandbox';
const SANDBOX_COUNT = 100;

/**
 * An agent server's sessions (issue 35): in a fresh child node per contestant, open 100
 * persistent sandboxes one after another (each awaited until it can run), run one program
 * in each (it leaves state: `globalThis.x = i`), and read the drop in the machine's
 * MemAvailable (shared pages counted once, unlike RSS; other work on the machine moves
 * it by a few MB) and the growth of the PSS of this process and of the sandbox hosts it
 * started (each shared page counted in proportion). isolated-vm's and QuickJS's
 * "sandbox" is an isolate (runtime) with one context.
 */
const SANDBOXES_CHILD = String.raw`
  const [kind, count] = [process.argv[1], Number(process.argv[2])];
  const fs = require('fs');
  const available = () => Number(/MemAvailable:\s+(\d+) kB/.exec(fs.readFileSync('/proc/meminfo', 'latin1'))[1]) / 1024;
  const pss = (pid) => { try { return Number(/^Pss:\s+(\d+) kB/m.exec(fs.readFileSync('/proc/' + pid + '/smaps_rollup', 'latin1'))[1]) / 1024; } catch { return 0; } };
  let hostPids = () => [];
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  const t = () => Number(process.hrtime.bigint()) / 1e6;
  (async () => {
    let open, first, done;
    if (kind.startsWith('isolet')) {
      const { SandboxEngine } = require(process.env.ISOLET_DIR);
      const isolation = kind.includes('thread') ? 'thread' : 'process';
      const engine = new SandboxEngine({ isolation, memoryMb: 64, ...(kind.endsWith('one') ? { sandboxesPerHost: 1 } : {}) });
      await engine.init();
      open = () => engine.openSandbox();
      hostPids = () => engine.stats().processes?.pids ?? [];
      first = async (sb, i) => { const r = await sb.run('globalThis.x = ' + i); if (!r.success) throw r.error; };
      done = async (boxes) => { for (const sb of boxes) sb.close(); await engine.shutdown(); };
    } else if (kind === 'ivm') {
      const ivm = require(process.env.IVM_PATH);
      open = async () => { const isolate = new ivm.Isolate({ memoryLimit: 64 }); return { isolate, context: await isolate.createContext() }; };
      first = (sb, i) => sb.context.eval('globalThis.x = ' + i);
      done = async (boxes) => { for (const sb of boxes) sb.isolate.dispose(); };
    } else {
      const q = await require(process.env.QUICKJS_PATH).getQuickJS();
      open = async () => { const rt = q.newRuntime(); rt.setMemoryLimit(64 * 2 ** 20); return { rt, ctx: rt.newContext() }; };
      first = async (sb, i) => sb.ctx.unwrapResult(sb.ctx.evalCode('globalThis.x = ' + i)).dispose();
      done = async (boxes) => { for (const sb of boxes) { sb.ctx.dispose(); sb.rt.dispose(); } };
    }
    // What every sandbox shares (the engine's hosts for one-shot runs, the library) is up first.
    const warm = await open();
    await first(warm, -1);
    await sleep(1000);
    const before = available();
    const pssOf = () => pss('self') + hostPids().reduce((sum, p) => sum + pss(p), 0);
    const pssBefore = pssOf();
    const boxes = [], opens = [], firsts = [];
    for (let i = 0; i < count; i++) { const t0 = t(); boxes.push(await open()); opens.push(t() - t0); }
    for (let i = 0; i < count; i++) { const t0 = t(); await first(boxes[i], i); firsts.push(t() - t0); }
    await sleep(1000);
    const perSandbox = (before - available()) / count;
    const pssPerSandbox = (pssOf() - pssBefore) / count;
    await done([warm, ...boxes]);
    console.log(JSON.stringify({ opens, firsts, perSandbox, pssPerSandbox }));
    process.exit(0);
  })().catch((e) => { console.error(e); process.exit(1); });`;

async function sandboxes() {
  const kinds = [
    ['isolet thread', isoletName('thread')],
    ['isolet process', isoletName('process')],
    ['isolet process one', `${isoletName('process')}, sandboxesPerHost: 1`],
  ];
  if (ivm) kinds.push(['ivm', IVM]);
  if (QuickJS) kinds.push(['quickjs', 'quickjs-emscripten (runtime + context)']);
  const env = {
    ...process.env,
    ISOLET_DIR: path.join(__dirname, '..'),
    IVM_PATH: ivm ? path.join(peers.PEERS_DIR, 'node_modules', 'isolated-vm') : '',
    QUICKJS_PATH: path.join(__dirname, 'node_modules', 'quickjs-emscripten'),
  };
  const per = new Map(kinds.map(([, name]) => [name, { opens: [], firsts: [], mem: [], pss: [] }]));
  for (let round = 0; round < (QUICK ? 1 : 3); round++) {
    for (const [kind, name] of kinds) {
      const r = spawnSync(process.execPath, ['--no-node-snapshot', '-e', SANDBOXES_CHILD, kind, String(SANDBOX_COUNT)], { encoding: 'utf8', env });
      check(r.status === 0, `sandboxes child ${kind}: ${r.stderr}`);
      const out = JSON.parse(r.stdout);
      const into = per.get(name);
      into.opens.push(...out.opens);
      into.firsts.push(...out.firsts);
      into.mem.push(out.perSandbox);
      into.pss.push(out.pssPerSandbox);
    }
  }
  for (const [name, s] of per) {
    record(M_SB_OPEN, name, median(s.opens), 'ms', 'lower', { p95: quantile(s.opens, 0.95) });
    record(M_SB_FIRST, name, median(s.firsts), 'ms', 'lower', { p95: quantile(s.firsts, 0.95) });
    record(M_SB_MEM, name, median(s.mem), 'MB', 'lower');
    record(M_SB_PSS, name, median(s.pss), 'MB', 'lower');
  }
}

/** Issue 35's goals for process mode's persistent sandboxes, from `sandboxes()`. */
function sandboxLines() {
  const p = isoletName('process');
  if (get(M_SB_OPEN, p) === undefined) return [];
  const say = (goal, ok, detail) => `- ${ok ? 'met' : 'NOT met'}: ${goal}: ${detail}`;
  const one = `${p}, sandboxesPerHost: 1`;
  return [
    say('open <= 15 ms at the median (process)', get(M_SB_OPEN, p) <= 15, `${fmt(get(M_SB_OPEN, p), 'ms')} (one host per sandbox: ${fmt(get(M_SB_OPEN, one), 'ms')})`),
    say(
      '<= 4 MB of the machine per open sandbox (process)',
      get(M_SB_MEM, p) <= 4,
      `${fmt(get(M_SB_MEM, p), 'MB')} of MemAvailable, ${fmt(get(M_SB_PSS, p), 'MB')} of PSS (one host per sandbox: ${fmt(get(M_SB_MEM, one), 'MB')}, ${fmt(get(M_SB_PSS, one), 'MB')})`,
    ),
    say("each sandbox's first run <= 2 ms at the median (process)", get(M_SB_FIRST, p) <= 2, `${fmt(get(M_SB_FIRST, p), 'ms')}`),
  ];
}

const M_WEB = 'trivial run with web: true, p50';
const M_WEB_RUN = 'trivial run, time inside the isolate thread (stats.wallTimeMs), p50';
const M_WEB_CPU = 'trivial run, CPU time of the isolate thread (stats.cpuTimeMs), p50';
const M_WEB_FIRST = 'first use in a run, CPU time of the isolate thread over a trivial web run, p50';
const M_WEB_HEAP = 'V8 heap used after a trivial run';
/** web: true against without, per isolation mode: name -> { extraMs, extraRunMs, extraCpuMs, extraHeapKb }. */
const webDelta = new Map();

/**
 * The cost of `web: true` (issue 22): a trivial run with and without it, alternating, end
 * to end and inside the isolate thread (install included), and the heap it leaves.
 */
async function web() {
  const heaps = new Map();
  const inside = new Map();
  const cpu = new Map();
  const contestants = [];
  for (const mode of ISOLET_MODES) {
    for (const on of [false, true]) {
      const name = `${isoletName(mode)}${on ? ', web: true' : ''}`;
      heaps.set(name, []);
      inside.set(name, []);
      cpu.set(name, []);
      contestants.push({
        name,
        once: async () => {
          const r = await runSandbox('1+1', { isolation: mode, web: on });
          check(r.success && r.output === 2, name);
          heaps.get(name).push(r.stats.heapUsedBytes);
          inside.get(name).push(r.stats.wallTimeMs);
          cpu.get(name).push(r.stats.cpuTimeMs);
        },
      });
    }
  }
  // One sample per turn: with and without follow each other closely, so machine noise
  // (other processes on a shared machine) hits both alike.
  const samples = await alternate(contestants, { rounds: QUICK ? 150 : 600, perTurn: 1 });
  recordLatency(M_WEB, samples);
  recordLatency(M_WEB_RUN, inside);
  recordLatency(M_WEB_CPU, cpu);
  for (const [name, h] of heaps) record(M_WEB_HEAP, name, median(h) / 1024, 'KB', 'lower');
  for (const mode of ISOLET_MODES) {
    const off = isoletName(mode);
    const on = `${off}, web: true`;
    webDelta.set(mode, {
      extraMs: median(samples.get(on)) - median(samples.get(off)),
      extraRunMs: median(inside.get(on)) - median(inside.get(off)),
      extraCpuMs: median(cpu.get(on)) - median(cpu.get(off)),
      extraHeapKb: (median(heaps.get(on)) - median(heaps.get(off))) / 1024,
    });
  }
  // What a run pays the first time it reads a family's global (its script runs, from the
  // code cache), over a trivial web run, thread isolation.
  const uses = {
    'TextEncoder': 'new TextEncoder().encode("x").length',
    'URL': 'new URL("https://a.example/b?c=1").searchParams.get("c")',
    'crypto.randomUUID': 'crypto.randomUUID().length',
    'setTimeout': 'typeof setTimeout(() => {}, 0)',
    'Response': 'new Response("x").status',
    // The console is in every sandbox, web or not: its script, then util.inspect's.
    'console.log of a string': 'console.log("x"); 1',
    'console.log of an object': 'console.log({ a: [1] }); 1',
  };
  const base = [];
  const firsts = new Map(Object.keys(uses).map((k) => [k, []]));
  for (let i = 0; i < (QUICK ? 50 : 200); i++) {
    base.push((await runSandbox('1+1', { isolation: 'thread', web: true })).stats.cpuTimeMs);
    for (const [name, code] of Object.entries(uses)) {
      const r = await runSandbox(code, { isolation: 'thread', web: true });
      check(r.success, name);
      firsts.get(name).push(r.stats.cpuTimeMs);
    }
  }
  for (const [name, s] of firsts) record(M_WEB_FIRST, name, median(s) - median(base), 'ms', 'lower');
}

function webLines() {
  const lines = [];
  for (const [mode, d] of webDelta) {
    const ok = d.extraMs <= 0.1 && d.extraHeapKb <= 200;
    lines.push(`${ok ? 'MET ' : 'MISS'} ${mode}: web: true adds ${d.extraMs.toFixed(3)} ms end to end (${d.extraRunMs.toFixed(3)} ms inside the isolate thread, ${d.extraCpuMs.toFixed(3)} ms of its CPU time) and ${d.extraHeapKb.toFixed(1)} KB of heap to a trivial run (goals: <= 0.1 ms, <= 200 KB)`);
  }
  return lines;
}

/**
 * The web APIs' speed against the same code in plain Node (issue 22: within 2x of Node for
 * each): each workload runs `n` times inside one run (timed there with performance.now(),
 * so run setup is left out) and in this process (a function compiled afresh per sample),
 * alternating, medians per operation.
 */
const WEB_SPEED = [
  {
    metric: 'new URL x 100,000',
    n: 1,
    setup: '',
    work: "for (let i = 0; i < 100000; i++) { const u = new URL('https://api.example.com/v1/items/' + i + '?page=' + (i % 7) + '#top'); if (u.pathname.length === 0) throw 0; }",
  },
  {
    metric: 'TextEncoder.encode of 1 MB of text',
    n: 20,
    setup: "const text = 'héllo wörld, ünïcode ✓ and ascii text. '.repeat(26000).slice(0, 1 << 20); const enc = new TextEncoder();",
    work: 'if (enc.encode(text).length < (1 << 20)) throw 0;',
  },
  {
    metric: 'crypto.subtle.digest SHA-256 of 1 MB',
    n: 20,
    setup: 'const data = new Uint8Array(1 << 20).map((_, i) => i & 255);',
    work: "if ((await crypto.subtle.digest('SHA-256', data)).byteLength !== 32) throw 0;",
  },
  {
    metric: 'structuredClone of a 1 MB object graph',
    n: 10,
    setup: "const graph = Array.from({ length: 6000 }, (_, i) => ({ id: i, name: 'item ' + i, tags: ['a', 'b', 'c'], price: i * 1.5, nested: { ok: i % 2 === 0, at: new Date(i) } }));",
    work: 'if (structuredClone(graph).length !== 6000) throw 0;',
  },
];
const webSpeedRatios = new Map();

async function webSpeed() {
  const AsyncFunction = Object.getPrototypeOf(async () => {}).constructor;
  for (const w of WEB_SPEED) {
    const body = `${w.setup}\nconst t = performance.now();\nfor (let k = 0; k < ${w.n}; k++) { ${w.work} }\nreturn (performance.now() - t) / ${w.n};`;
    const contestants = [
      // Compiled afresh for each sample, as each sandbox run compiles its program.
      { name: 'node (the same code in this process)', once: () => new AsyncFunction(body)() },
      ...ISOLET_MODES.map((mode) => ({ name: `${isoletName(mode)}, web: true`, once: () => isoletRun(body, { web: true, memoryLimitMb: 256, timeoutMs: 60000, capabilities: {} }, mode) })),
    ];
    const samples = await alternate(contestants, { rounds: QUICK ? 3 : 7, perTurn: QUICK ? 2 : 3, warmup: 1 });
    for (const [name, s] of samples) record(w.metric, name, median(s), 'ms', 'lower');
    const node = median(samples.get('node (the same code in this process)'));
    webSpeedRatios.set(w.metric, ISOLET_MODES.map((mode) => [mode, median(samples.get(`${isoletName(mode)}, web: true`)) / node]));
  }
}

function webSpeedLines() {
  const lines = [];
  for (const [metric, ratios] of webSpeedRatios) {
    for (const [mode, ratio] of ratios) lines.push(`${ratio <= 2 ? 'MET ' : 'MISS'} ${metric}, ${mode}: ${ratio.toFixed(2)}x Node's time (goal: <= 2x)`);
  }
  return lines;
}

const M_TS_PREPARE = 'a 200-line TypeScript program made JavaScript (on this thread), p50';
const M_TS_RUN = 'a 200-line TypeScript program run end to end, p50';

/**
 * TypeScript's two paths: a program whose types are only erased (amaro's strip-only mode,
 * positions kept) and the same program with an enum and parameter properties (strip-only
 * refuses it; transform mode compiles it with a source map). Preparation alone, inline,
 * and end to end through runSandbox (which prepares a program this size on its worker).
 */
async function typescript() {
  const { typescriptProgram } = require('./typescript-program');
  const { prepareSource } = require('../lib/source');
  const programs = [
    ['strip (types erased)', typescriptProgram()],
    ['transform (enum, parameter properties)', typescriptProgram({ transform: true })],
  ];
  const prepare = [];
  const run = [];
  for (const [path, code] of programs) {
    prepare.push({
      name: `isolet: ${path}`,
      once: async () => {
        const out = await prepareSource(code, { language: 'typescript' }, { inlineMax: Infinity });
        check(out.code.length > 0, path);
      },
    });
    run.push({
      name: `isolet, thread: ${path}`,
      once: async () => {
        const r = await runSandbox(code, { language: 'typescript', isolation: 'thread' });
        check(r.success && r.output[0] === 20, path);
      },
    });
  }
  recordLatency(M_TS_PREPARE, await alternate(prepare, { rounds: QUICK ? 5 : 15 }));
  recordLatency(M_TS_RUN, await alternate(run, { rounds: QUICK ? 5 : 15 }));
}

const M_BIG_LAG = 'event-loop delay while a big value crosses, max';
const M_BIG_P99 = 'event-loop delay while a big value crosses, p99';
const M_BIG_RSS = 'RSS growth once the big value is dropped';
/** Issue 23's rows (bench/big-values.js): one per mode and value. */
const bigValueRows = [];

/** The parent's event loop and memory while big values cross (see bench/big-values.js). */
function bigValues() {
  for (const row of require('./big-values').measure(ISOLET_MODES, QUICK ? 1 : 3)) {
    bigValueRows.push(row);
    const name = `${isoletName(row.mode)}: ${row.scenario}`;
    record(M_BIG_LAG, name, row.lagMaxMs, 'ms', 'lower');
    record(M_BIG_P99, name, row.lagP99Ms, 'ms', 'lower');
    record(M_BIG_RSS, name, row.rssAfterDropMb, 'MB', 'lower');
  }
}

function bigValueLines() {
  const { GOALS } = require('./big-values');
  return bigValueRows.map((r) => {
    const met = r.lagMaxMs < GOALS.lagMaxMs && r.lagP99Ms < GOALS.lagP99Ms && r.rssAfterDropMb < GOALS.rssAfterDropMb;
    return `- ${met ? 'MET    ' : 'NOT MET'} ${r.mode}, ${r.scenario}: delay max ${r.lagMaxMs.toFixed(1)} ms (< ${GOALS.lagMaxMs}), p99 ${r.lagP99Ms.toFixed(1)} ms (< ${GOALS.lagP99Ms}), RSS after drop +${r.rssAfterDropMb.toFixed(1)} MB (< ${GOALS.rssAfterDropMb}); ${Math.round(r.wallMs)} ms end to end`;
  });
}

const M_HOST_START = 'sandbox host process: start (spawn to ready)';
const M_RECYCLE = 'sandbox host process: stuck run answered (limit + 400 ms grace) -> replacement serving, minus the 50 ms limit';
const M_BOMB = 'heap bomb under a 64 MB limit';
const M_JIT = 'host-side JIT: loop kernel in the host, isolet loaded (child node)';

/** Process supervision, the heap bomb and the host-side cost of isolet's V8 flags. */
async function extras() {
  const native = require('../lib/native');
  const { SandboxEngine } = require('..');
  const starts = [];
  for (let i = 0; i < (QUICK ? 3 : 7); i++) {
    const t = now();
    const engine = new native.NativeEngine(new native.EngineSettings({ isolation: 'process', memoryMb: 64, maxConcurrentIsolates: 8, warmPoolSize: 0, maxQueueSize: 10, processes: 1 }));
    engine.warmUp();
    await engine.ready();
    starts.push(msSince(t));
    engine.shutdown();
    await engine.waitIdle(5000);
  }
  record(M_HOST_START, isoletName('process'), median(starts), 'ms', 'lower', { p95: quantile(starts, 0.95) });
  // Recycle: an unstoppable run is answered, its host drained and replaced.
  const engine = new SandboxEngine({ memoryMb: 64, maxConcurrentIsolates: 2, warmPoolSize: 1, processes: 1 });
  await engine.init();
  const recycles = [];
  for (let i = 0; i < (QUICK ? 3 : 7); i++) {
    const t = now();
    await engine.submit({ requestId: 'r', code: 'return Array.prototype.indexOf.call({ length: 2 ** 53 - 1 }, 1)', isolateLimits: { wallTimeMs: 50 } }).done;
    while (engine.stats().processes.starting > 0 || engine.stats().processes.live < 1) await sleep(1);
    const end = await engine.submit({ requestId: 'n', code: 'return 1' }).done;
    check(end.type === 'result', 'recycle');
    recycles.push(msSince(t) - 50);
  }
  await engine.shutdown();
  record(M_RECYCLE, isoletName('process'), median(recycles), 'ms', 'lower', { p95: quantile(recycles, 0.95) });

  const bomb = 'const a = []; while (true) a.push({ x: a.length })';
  for (const mode of ISOLET_MODES) {
    const r = await runSandbox(bomb, { isolation: mode });
    record(M_BOMB, isoletName(mode), r.success ? 'no error (bug)' : `${r.error.name}, host fine`, 'text');
  }
  if (ivm) {
    let text;
    try {
      await ivmEval(bomb, { memoryLimit: 64 });
      text = 'no error';
    } catch (e) {
      text = `${String(e.message).slice(0, 60)}, host fine`;
    }
    record(M_BOMB, IVM, text, 'text');
  }

  // isolet turns V8's Turboshaft loop unrolling off at load (V8 >= 12.4) so sandbox
  // loops stay interruptible; V8 flags are process-wide, so the host's own code compiles
  // without it too. Each side runs in a child node that loads isolet, the env differing.
  const sides = [
    ['loop unrolling off (isolet default, V8 >= 12.4)', {}],
    ['loop unrolling on (ISOLET_V8_LOOP_UNROLLING=1)', { ISOLET_V8_LOOP_UNROLLING: '1' }],
  ];
  const runs = sides.map(() => []);
  for (let round = 0; round < (QUICK ? 3 : 5); round++) {
    sides.forEach(([, env], i) => {
      const r = spawnSync(process.execPath, ['-e', HOST_KERNEL], { encoding: 'utf8', env: { ...process.env, ...env } });
      check(r.status === 0, `host kernel child: ${r.stderr}`);
      runs[i].push(JSON.parse(r.stdout));
    });
  }
  sides.forEach(([name], i) => record(M_JIT, name, median(runs[i].map((x) => x.median)), 'ms', 'lower', { p95: median(runs[i].map((x) => x.p95)) }));
}

const HOST_KERNEL = `
  require(${JSON.stringify(path.join(__dirname, '..'))});
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
  console.log(JSON.stringify({ median: samples[20], p95: samples[38] }));`;

// ---------------------------------------------------------------- code cache (issue 20)

const M_LIB = 'run using a 1 MB library (fresh isolate each run), p50';
const M_LIB_START = 'sandbox host process: start (spawn to ready) with a 1 MB prelude';
const M_MOD = 'run importing a 1 MB ES module (fresh isolate each run), p50';

/** A ~1 MB library of plain functions (what an agent's helpers look like), and a call into it. */
function libraryOf(bytes) {
  const parts = ['var lib = {};'];
  let size = parts[0].length;
  for (let i = 0; size < bytes; i++) {
    const fn = `lib.f${i} = function (rows, k) { var out = []; for (var j = 0; j < rows.length; j++) { var r = rows[j]; if (r && r.k === k) out.push({ k: r.k, v: String(r.v).trim() + '${i}' }); } return out.length ? out : null; };`;
    parts.push(fn);
    size += fn.length + 1;
  }
  return parts.join('\n');
}
const LIBRARY = libraryOf(1024 * 1024);
const LIBRARY_CALL = 'lib.f7([{ k: 1, v: " a " }], 1).length';
/** The same library as an ES module, and a run (a module) that imports it. */
const MODULE = `${LIBRARY}\nexport { lib };`;
const MODULE_RUN = `import { lib } from 'lib.js';\nexport default ${LIBRARY_CALL};`;

async function codeCache() {
  const { SandboxEngine } = require('..');
  const engines = [];
  const engineFor = async (mode, config) => {
    const engine = new SandboxEngine({ isolation: mode, processes: 1, maxConcurrentIsolates: 2, ...config });
    await engine.init();
    engines.push(engine);
    return engine;
  };
  const contestants = [];
  for (const mode of ISOLET_MODES) {
    const make = (config) => engineFor(mode, config);
    const once = (engine, code) => async () => {
      const end = await engine.submit({ requestId: 'r', code }).done;
      check(end.type === 'result' && end.data === 1, `${mode} library run: ${end.message ?? ''}`);
    };
    const withLibrary = `${LIBRARY}\nreturn ${LIBRARY_CALL};`;
    const compiled = await make({ codeCacheMb: 0 });
    const cached = await make({});
    const prelude = await make({ prelude: LIBRARY });
    contestants.push({ name: `${isoletName(mode)}: compiled every run`, once: once(compiled, withLibrary) });
    contestants.push({ name: `${isoletName(mode)}: code cache`, once: once(cached, withLibrary) });
    contestants.push({ name: `${isoletName(mode)}: as the engine's prelude`, once: once(prelude, `return ${LIBRARY_CALL};`) });
    contestants.push({ name: `${isoletName(mode)}: no library (floor)`, once: once(cached, 'return 1;') });
  }
  // node:vm in this process: the same library compiled each time, and from V8's cache.
  const vmCache = new vm.Script(LIBRARY).createCachedData();
  // A new comment each run: V8's per-isolate compilation cache would serve the same text.
  let vmRun = 0;
  contestants.push({
    name: 'node:vm (no isolation): compiled every run',
    once: async () => check(vm.runInNewContext(`${LIBRARY}\n// ${++vmRun}\n${LIBRARY_CALL}`) === 1, 'vm'),
  });
  contestants.push({
    name: 'node:vm (no isolation): cachedData',
    once: async () => {
      const script = new vm.Script(LIBRARY, { cachedData: vmCache });
      check(!script.cachedDataRejected, 'vm cache');
      const ctx = vm.createContext();
      script.runInContext(ctx);
      check(vm.runInContext(LIBRARY_CALL, ctx) === 1, 'vm');
    },
  });
  recordLatency(M_LIB, await alternate(contestants, { rounds: QUICK ? 3 : 7, perTurn: QUICK ? 5 : 10 }));
  // The library as an ES module each run imports: given with the run and compiled every
  // run, given with the run and served from the code cache, or a prelude module.
  const moduleContestants = [];
  for (const mode of ISOLET_MODES) {
    const make = (config) => engineFor(mode, config);
    const once = (engine, modules) => async () => {
      const end = await engine.submit({ requestId: 'm', code: MODULE_RUN, type: 'module', modules }).done;
      check(end.type === 'result' && end.data === 1, `${mode} module run: ${end.message ?? ''}`);
    };
    const compiled = await make({ codeCacheMb: 0 });
    const cached = await make({});
    const prelude = await make({ prelude: { modules: { 'lib.js': MODULE } } });
    moduleContestants.push({ name: `${isoletName(mode)}: module compiled every run`, once: once(compiled, { 'lib.js': MODULE }) });
    moduleContestants.push({ name: `${isoletName(mode)}: module from the code cache`, once: once(cached, { 'lib.js': MODULE }) });
    moduleContestants.push({ name: `${isoletName(mode)}: a prelude module`, once: once(prelude, undefined) });
  }
  recordLatency(M_MOD, await alternate(moduleContestants, { rounds: QUICK ? 3 : 7, perTurn: QUICK ? 5 : 10 }));
  for (const engine of engines) {
    const c = engine.stats().codeCache;
    check(c.rejected === 0, 'no cached data rejected');
    await engine.shutdown();
  }
  // What each sandbox host pays at start to check and compile the prelude it then keeps.
  for (const [name, config] of [['no prelude', {}], ['1 MB prelude', { prelude: LIBRARY }]]) {
    const starts = [];
    for (let i = 0; i < (QUICK ? 3 : 7); i++) {
      const t = now();
      const engine = new SandboxEngine({ isolation: 'process', processes: 1, maxConcurrentIsolates: 2, ...config });
      await engine.init();
      starts.push(msSince(t));
      await engine.shutdown();
    }
    record(M_LIB_START, `${isoletName('process')}, ${name}`, median(starts), 'ms', 'lower', { p95: quantile(starts, 0.95) });
  }
}

// ---------------------------------------------------------------- preludes (issue 35)

const M_PRELUDE = 'trivial run with a prelude, warm pool, runs 50 ms apart, p50';
/** A prelude of agent helpers, the size a hand-written one has. */
const HELPERS = libraryOf(64 * 1024);
const PRELUDES = [
  ['no prelude', null],
  ['64 KB prelude', HELPERS],
  ['1 MB prelude', LIBRARY],
];

/**
 * A fresh run on an engine with a prelude against one without: warm isolates evaluate it
 * while they wait. Runs 50 ms apart, so the warm isolate replacing the last one used is
 * ready (with a 1 MB prelude that takes ~15 ms here; runs closer together share the CPU
 * with it). Peers: each run a new isolate (isolated-vm, from a snapshot of the prelude, or
 * evaluating it) or a new QuickJS context evaluating it.
 */
async function preludes() {
  const { SandboxEngine } = require('..');
  const engines = [];
  const contestants = [];
  for (const mode of ISOLET_MODES) {
    for (const [label, prelude] of PRELUDES) {
      const engine = new SandboxEngine({ isolation: mode, processes: 1, maxConcurrentIsolates: 2, warmPoolSize: 2, ...(prelude ? { prelude } : {}) });
      await engine.init();
      engines.push(engine);
      // The same work in every run: whether the prelude's library is there.
      const code = `return typeof lib === 'object' ? ${prelude ? 1 : 0} : ${prelude ? 0 : 1};`;
      contestants.push({
        name: `${isoletName(mode)}: ${label}`,
        once: async () => {
          const end = await engine.submit({ requestId: 'p', code }).done;
          check(end.type === 'result' && end.data === 1, `${mode} prelude run: ${end.message ?? ''}`);
        },
      });
    }
  }
  for (const [label, prelude] of PRELUDES) {
    const call = prelude ? "typeof lib === 'object' ? 1 : 0" : '1';
    if (ivm) {
      contestants.push({
        name: `${IVM}: ${label}${prelude ? ', evaluated in each new isolate' : ''}`,
        once: async () => check((await ivmEval(call, { before: prelude ? (ctx) => ctx.eval(prelude) : undefined })) === 1, 'ivm'),
      });
      if (prelude) {
        let snapshot = null;
        try {
          snapshot = ivm.Isolate.createSnapshot([{ code: prelude }]);
        } catch {
          // Not every isolated-vm build can make snapshots; the row is then left out.
        }
        if (snapshot) {
          contestants.push({
            name: `${IVM}: ${label}, each new isolate from its snapshot`,
            once: async () => {
              const isolate = new ivm.Isolate({ memoryLimit: 128, snapshot });
              try {
                const context = await isolate.createContext();
                check((await context.eval(call)) === 1, 'ivm snapshot');
              } finally {
                isolate.dispose();
              }
            },
          });
        }
      }
    }
    if (QuickJS) {
      contestants.push({ name: `quickjs-emscripten: ${label}`, once: async () => check(quickjsEval(prelude ? `${prelude}\n${call}` : call) === 1, 'quickjs') });
    }
  }
  recordLatency(M_PRELUDE, await alternate(contestants, { gapMs: 50, rounds: QUICK ? 3 : 5, perTurn: QUICK ? 5 : 10 }));
  for (const engine of engines) await engine.shutdown();
}

/** What a prelude adds to a fresh run, per mode (goal: <= 0.2 ms). */
function preludeLines() {
  const lines = [];
  for (const mode of ISOLET_MODES) {
    const none = get(M_PRELUDE, `${isoletName(mode)}: no prelude`);
    if (none === undefined) continue;
    for (const [label, prelude] of PRELUDES) {
      if (!prelude) continue;
      const extra = get(M_PRELUDE, `${isoletName(mode)}: ${label}`) - none;
      lines.push(`- ${mode}: a fresh run with a ${label} ${extra >= 0 ? '+' : ''}${fmt(extra, 'ms')} over none (${fmt(none, 'ms')}); goal <= +0.2 ms: ${extra <= 0.2 ? 'met' : 'NOT met'}`);
    }
  }
  if (IVM) {
    const none = get(M_PRELUDE, `${IVM}: no prelude`);
    for (const [label, prelude] of PRELUDES) {
      const snap = prelude && get(M_PRELUDE, `${IVM}: ${label}, each new isolate from its snapshot`);
      if (snap !== undefined && snap !== null && none !== undefined) lines.push(`- ${IVM}: from a snapshot of the ${label} +${fmt(snap - none, 'ms')} over none (${fmt(none, 'ms')})`);
    }
  }
  return lines;
}

/** The code cache's saving, as ratios within this run. */
function codeCacheLines() {
  const lines = [];
  for (const mode of ISOLET_MODES) {
    const base = get(M_LIB, `${isoletName(mode)}: compiled every run`);
    const cached = get(M_LIB, `${isoletName(mode)}: code cache`);
    const prelude = get(M_LIB, `${isoletName(mode)}: as the engine's prelude`);
    const floor = get(M_LIB, `${isoletName(mode)}: no library (floor)`);
    if (base === undefined) continue;
    lines.push(
      `- ${mode}: 1 MB library compiled ${fmt(base, 'ms')} -> from the code cache ${fmt(cached, 'ms')} (${(base / cached).toFixed(2)}× faster), ` +
        `as prelude ${fmt(prelude, 'ms')} (${(base / prelude).toFixed(2)}×); a run with no library ${fmt(floor, 'ms')}`,
    );
  }
  for (const mode of ISOLET_MODES) {
    const base = get(M_MOD, `${isoletName(mode)}: module compiled every run`);
    const cached = get(M_MOD, `${isoletName(mode)}: module from the code cache`);
    const prelude = get(M_MOD, `${isoletName(mode)}: a prelude module`);
    if (base === undefined) continue;
    lines.push(
      `- ${mode}: 1 MB ES module imported by each run, compiled ${fmt(base, 'ms')} -> from the code cache ${fmt(cached, 'ms')} (${(base / cached).toFixed(2)}× faster), ` +
        `as a prelude module ${fmt(prelude, 'ms')} (${(base / prelude).toFixed(2)}×)`,
    );
  }
  const vmBase = get(M_LIB, 'node:vm (no isolation): compiled every run');
  const vmCached = get(M_LIB, 'node:vm (no isolation): cachedData');
  if (vmBase !== undefined) lines.push(`- node:vm: ${fmt(vmBase, 'ms')} -> ${fmt(vmCached, 'ms')} (${(vmBase / vmCached).toFixed(2)}×)`);
  const s0 = get(M_LIB_START, `${isoletName('process')}, no prelude`);
  const s1 = get(M_LIB_START, `${isoletName('process')}, 1 MB prelude`);
  if (s0 !== undefined) lines.push(`- sandbox host start: ${fmt(s0, 'ms')} -> ${fmt(s1, 'ms')} with a 1 MB prelude (+${fmt(s1 - s0, 'ms')}, paid once per host)`);
  return lines;
}

// ---------------------------------------------------------------- report

function fmt(value, unit) {
  if (unit === 'ms') return value < 0.1 ? `${(value * 1000).toFixed(1)} µs` : `${value.toFixed(2)} ms`;
  if (unit === 'µs') return `${value.toFixed(1)} µs`;
  if (unit === 'runs/s') return `${Math.round(value).toLocaleString('en-US')} runs/s`;
  if (unit === 'MB/s') return `${Math.round(value)} MB/s`;
  if (unit === 'GB/s') return `${value.toFixed(2)} GB/s`;
  if (unit === 'MB') return `${value.toFixed(2)} MB`;
  if (unit === 'text') return String(value);
  return `${value} ${unit}`;
}

function printTable() {
  console.log('| metric | sandbox | median | p95 | isolet thread advantage |');
  console.log('|---|---|---:|---:|---:|');
  for (const row of rows) {
    // The reference is isolet's thread mode, or the metric's first row where it has none.
    const first = rows.find((r) => r.metric === row.metric);
    const ref = get(row.metric, isoletName('thread')) ?? first.value;
    let ratio = '';
    if (row.unit !== 'text' && row !== first && row.name !== isoletName('thread') && row.value > 0) {
      // > 1: isolet thread mode is better by that factor (less time, more throughput).
      ratio = `${(row.better === 'lower' ? row.value / ref : ref / row.value).toFixed(2)}×`;
    }
    const p95 = row.p95 !== undefined ? fmt(row.p95, row.unit) : '';
    console.log(`| ${row.metric} | ${row.name} | ${fmt(row.value, row.unit)} | ${p95} | ${ratio} |`);
  }
}

/** isolet's figures in issue 12 ("isolet now"), the baseline of the throughput goal. */
function throughputBaseline() {
  const major = Number(process.versions.node.split('.')[0]);
  return major >= 24 ? 1685 : major === 22 ? 1450 : 1215;
}

function verdicts() {
  const lines = [];
  const say = (goal, met, detail) => lines.push(`- ${met ? 'MET    ' : 'NOT MET'} ${goal}: ${detail}`);
  const t = isoletName('thread');
  const p = isoletName('process');

  const warmT = get(M_WARM, t);
  const warmP = get(M_WARM, p);
  say('trivial run p50, thread, warm pool <= 0.10 ms', warmT <= 0.1, `${fmt(warmT, 'ms')} (${warmT <= 0.1 ? `${fmt(0.1 - warmT, 'ms')} under` : `${(warmT / 0.1).toFixed(1)}x the goal`}; quickjs ${QuickJS ? fmt(get(M_WARM, 'quickjs-emscripten'), 'ms') : 'n/a'})`);
  say('trivial run p50, process within 0.10 ms of thread', warmP - warmT <= 0.1, `process ${fmt(warmP, 'ms')} = thread + ${fmt(warmP - warmT, 'ms')}`);

  const tp = get(M_TPUT, t);
  const base = throughputBaseline();
  const ivmTp = ivm ? get(M_TPUT, IVM) : undefined;
  say(`fresh-isolate runs/s, 8 in flight >= 2x today (${base} on this Node line in issue 12)`, tp >= 2 * base, `${Math.round(tp)} runs/s = ${(tp / base).toFixed(2)}x (process ${Math.round(get(M_TPUT, p))})`);
  if (ivmTp) say('fresh-isolate runs/s >= 2x isolated-vm', tp >= 2 * ivmTp, `${(tp / ivmTp).toFixed(2)}x ${IVM} (${Math.round(ivmTp)} runs/s)`);

  const callT = get(M_CALL, t);
  const callP = get(M_CALL, p);
  say('host-call round trip p50, thread <= 10 µs', callT <= 10, `${fmt(callT, 'µs')}${ivm ? `; ${IVM} sync Callback ${fmt(get(M_CALL, `${IVM} (sync Callback)`), 'µs')}` : ''}`);
  say('host-call round trip p50, process <= 25 µs', callP <= 25, `${fmt(callP, 'µs')}`);
  const bt = get(M_CALL_BATCH, t);
  const bp = get(M_CALL_BATCH, p);
  say('concurrent calls of one run batched per wake-up (100 in flight cheaper per call than 1 in flight)', bt < callT && bp < callP, `thread ${fmt(bt, 'µs')} vs ${fmt(callT, 'µs')}, process ${fmt(bp, 'µs')} vs ${fmt(callP, 'µs')} per call`);

  if (ivm) {
    for (const [metric, ivmName] of [[M_GRAPH_OUT, `${IVM} (copy: true, ExternalCopy)`], [M_GRAPH_IN, `${IVM} (global.set copy: true, ExternalCopy)`]]) {
      const r = get(metric, t) / get(metric, ivmName);
      const rp = get(metric, p) / get(metric, ivmName);
      say(`${metric} >= 2x isolated-vm ExternalCopy`, r >= 2, `thread ${r.toFixed(2)}x, process ${rp.toFixed(2)}x (${Math.round(get(metric, t))} vs ${Math.round(get(metric, ivmName))} MB/s)`);
    }
  }
  const flat = [M_U8_OUT, M_U8_IN, M_STR_OUT, M_STR_IN].map((m) => [m, get(m, t), get(m, p)]);
  const worst = Math.min(...flat.map(([, v]) => v));
  say('typed arrays / strings >= 1 GB/s, thread', worst >= 1, flat.map(([m, v]) => `${m.replace(/ of the sandbox| the sandbox|32 MB /g, '')} ${v.toFixed(2)}`).join(', ') + ' GB/s');
  const worstP = Math.min(...flat.map(([, , v]) => v));
  say('typed arrays / strings >= 1 GB/s, process', worstP >= 1, flat.map(([m, , v]) => `${m.replace(/ of the sandbox| the sandbox|32 MB /g, '')} ${v.toFixed(2)}`).join(', ') + ' GB/s');

  const vmCpu = get(M_CPU, 'node:vm (no isolation)');
  const parity = vmCpu / get(M_CPU, t);
  say('compute at parity with node:vm (>= 0.95x)', parity >= 0.95, `thread ${parity.toFixed(2)}x, process ${(vmCpu / get(M_CPU, p)).toFixed(2)}x of node:vm speed`);

  const rssT = get(M_RSS_ISO, t);
  say('RSS per warm idle isolate <= 1 MB', rssT <= 1, `thread ${fmt(rssT, 'MB')}, in a host process ${fmt(get(M_RSS_ISO, 'isolet, process (per warm isolate in a host)'), 'MB')}`);
  say('RSS per idle sandbox host process stated', true, `${fmt(get(M_RSS_PROC, 'isolet, process: idle host, no warm isolates'), 'MB')} (no warm isolates)`);
  return lines;
}

/** The default engine's hosts (isolet-core's `processes` default). */
const DEFAULT_PROCESSES = 2;

/** Issue 19's goals: each a ratio against the peer measured in the same run. */
function ratioVerdicts() {
  const lines = [];
  const say = (goal, met, detail) => lines.push(`- ${met === null ? 'N/A    ' : met ? 'MET    ' : 'NOT MET'} ${goal}: ${detail}`);
  const t = isoletName('thread');
  const p = isoletName('process');
  const x = (v) => `${v.toFixed(2)}x`;
  const ratioOf = (metric, a, b) => {
    const va = get(metric, a);
    const vb = get(metric, b);
    return va === undefined || vb === undefined ? undefined : va / vb;
  };
  const quick = 'quickjs-emscripten';
  const warmP = ratioOf(M_WARM, p, quick);
  const warmT = ratioOf(M_WARM, t, quick);
  if (warmP === undefined) say('trivial run p50, warm pool: process <= 0.5x, thread <= 0.4x QuickJS', null, 'quickjs-emscripten not measured');
  else {
    say('trivial run p50, warm pool: process <= 0.5x QuickJS', warmP <= 0.5, `${x(warmP)} (${fmt(get(M_WARM, p), 'ms')} vs ${fmt(get(M_WARM, quick), 'ms')})`);
    say('trivial run p50, warm pool: thread <= 0.4x QuickJS', warmT <= 0.4, `${x(warmT)} (${fmt(get(M_WARM, t), 'ms')})`);
  }
  if (!ivm) {
    say('the goals against isolated-vm', null, 'isolated-vm not measured');
  } else {
    const tp = ratioOf(M_TPUT, p, IVM);
    say('fresh-isolate runs/s, 8 in flight: process >= 2x isolated-vm', tp >= 2, `${x(tp)} (${Math.round(get(M_TPUT, p))} vs ${Math.round(get(M_TPUT, IVM))} runs/s)`);
    const cb = `${IVM} (sync Callback)`;
    const callP = ratioOf(M_CALL, p, cb);
    const callT = ratioOf(M_CALL, t, cb);
    say('host-call round trip p50: process <= 1.0x isolated-vm sync Callback', callP <= 1, `${x(callP)} (${fmt(get(M_CALL, p), 'µs')} vs ${fmt(get(M_CALL, cb), 'µs')})`);
    say('host-call round trip p50: thread <= 0.5x isolated-vm sync Callback', callT <= 0.5, `${x(callT)} (${fmt(get(M_CALL, t), 'µs')})`);
    for (const [metric, ivmName] of [[M_GRAPH_OUT, `${IVM} (copy: true, ExternalCopy)`], [M_GRAPH_IN, `${IVM} (global.set copy: true, ExternalCopy)`]]) {
      const r = ratioOf(metric, p, ivmName);
      say(`${metric}: process >= 2x isolated-vm ExternalCopy`, r >= 2, `${x(r)} (${Math.round(get(metric, p))} vs ${Math.round(get(metric, ivmName))} MB/s)`);
    }
    const rssT = ratioOf(M_RSS_ISO, t, IVM);
    say('RSS per warm idle isolate, thread <= isolated-vm', rssT <= 1, `${x(rssT)} (${fmt(get(M_RSS_ISO, t), 'MB')} vs ${fmt(get(M_RSS_ISO, IVM), 'MB')})`);
  }
  const bt = get(M_CALL_BATCH, t);
  const bp = get(M_CALL_BATCH, p);
  say('many calls in flight batched per wake-up (cheaper per call than one in flight)', bt < get(M_CALL, t) && bp < get(M_CALL, p), `thread ${fmt(bt, 'µs')}, process ${fmt(bp, 'µs')} per call`);
  const floorOf = (m) => get(m, m === M_STR_OUT || m === M_STR_IN ? 'node:vm floor (v8.serialize + deserialize)' : 'node:vm floor (structuredClone)');
  const flat = [M_U8_OUT, M_U8_IN, M_STR_OUT, M_STR_IN].map((m) => [m.replace(/ of the sandbox| the sandbox|32 MB /g, ''), get(m, t) / floorOf(m), get(m, p) / floorOf(m)]);
  say('typed arrays and strings >= 1x the structuredClone floor, both modes', flat.every(([, a, b]) => a >= 1 && b >= 1), flat.map(([m, a, b]) => `${m} thread ${x(a)} process ${x(b)}`).join(', '));
  const parity = get(M_CPU, 'node:vm (no isolation)') / get(M_CPU, t);
  say('compute at parity with node:vm (>= 0.95x)', parity >= 0.95, `thread ${x(parity)}`);
  const perIso = get(M_RSS_ISO, 'isolet, process (per warm isolate in a host)');
  const idleHost = get(M_RSS_PROC, 'isolet, process: idle host, no warm isolates');
  const share = perIso + (DEFAULT_PROCESSES * idleHost) / 40;
  say('RSS per warm idle isolate, process, its share of the hosts counted (pool of 40) <= 1.5 MB', share <= 1.5, `${fmt(share, 'MB')} (${fmt(perIso, 'MB')} + ${DEFAULT_PROCESSES} hosts x ${fmt(idleHost, 'MB')} / 40)`);
  return lines;
}

(async () => {
  if (quickjsModule) QuickJS = await quickjsModule.getQuickJS();
  const started = now();
  let graphBytes = 0;
  if (wanted('trivial') || wanted('compute')) await trivial();
  if (wanted('throughput')) await throughput();
  if (wanted('calls')) await hostCalls();
  if (wanted('copies')) graphBytes = await copies();
  if (wanted('compute')) await compute();
  if (wanted('memory')) await memory();
  if (wanted('sandboxes')) await sandboxes();
  if (wanted('extras')) await extras();
  if (wanted('codecache')) await codeCache();
  if (wanted('preludes')) await preludes();
  if (wanted('web')) await web();
  if (wanted('web') || wanted('webspeed')) await webSpeed();
  if (wanted('typescript')) await typescript();
  if (wanted('values')) bigValues();
  const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
  console.log(`\nisolet benchmark — Node ${process.version} (V8 ${process.versions.v8}), ${os.cpus().length} CPUs (${cpu}), ${QUICK ? 'quick' : 'full'} run, ${Math.round(msSince(started) / 1000)} s`);
  console.log(`Alternating rounds, medians. Object graph ${(graphBytes / 1e6).toFixed(1)} MB serialized (${GRAPH_N} objects). "isolet thread advantage" > 1: isolet thread mode is that much better (rows with no thread row: vs the first row).\n`);
  printTable();
  const missing = [['isolated-vm', ivm], ['quickjs-emscripten', quickjsModule]].filter(([, m]) => !m).map(([n]) => n);
  if (missing.length) console.log(`\n(peers not installed: ${missing.join(', ')}${process.env.ISOLET_BENCH_INSTALL_NOTE ? `: ${process.env.ISOLET_BENCH_INSTALL_NOTE}` : ''})`);
  const sandboxGoals = sandboxLines();
  if (sandboxGoals.length) {
    console.log('\nPersistent sandboxes, process isolation (issue 35):');
    for (const line of sandboxGoals) console.log(line);
  }
  const preludeGoals = preludeLines();
  if (preludeGoals.length) {
    console.log('\nA prelude on a fresh run (issue 35):');
    for (const line of preludeGoals) console.log(line);
  }
  const cacheLines = codeCacheLines();
  if (cacheLines.length) {
    console.log('\nCompiled-code cache and prelude (issue 20; ratios within this run):');
    for (const line of cacheLines) console.log(line);
  }
  if (bigValueRows.length) {
    console.log('\nBig values with the default options, built a slice at a time (issue 23; `node bench/big-values.js` for these alone):');
    for (const line of bigValueLines()) console.log(line);
  }
  const webGoals = webLines();
  if (webGoals.length) {
    console.log('\nThe web platform APIs (`web: true`), against the same run without:');
    for (const line of webGoals) console.log(line);
  }
  const speedGoals = webSpeedLines();
  if (speedGoals.length) {
    console.log("\nThe web APIs' speed, against the same code in plain Node (time inside the run):");
    for (const line of speedGoals) console.log(line);
  }
  if (ONLY === null) {
    console.log('\nGoals of issue 12:');
    for (const line of verdicts()) console.log(line);
    console.log('\nGoals of issue 19 (ratios to the peer in this run):');
    for (const line of ratioVerdicts()) console.log(line);
  }
  process.exit(0);
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
